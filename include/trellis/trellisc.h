/*===- trellisc.h - The trellisc compiler as a C library ----------*- C -*-===*
 *
 * libtrellisc.so: compiles a JSON trace (what the Python package
 * python/trellisc sends) or a TRELLIS pipeline.json to a bundle, through the
 * same phases as the trellisc command line. Plain C, no exceptions and no
 * aborts across this boundary: every call returns a code and a result object
 * holding the bundle bytes and the diagnostics.
 *
 *   trellisc_result *r = NULL;
 *   int rc = trellisc_compile_trace(json, strlen(json), "{\"target\":\"cpu\"}",
 *&r); if (rc == TRELLISC_OK) { size_t n; const void *b =
 *trellisc_result_bundle(r, &n); ... } else for (size_t i = 0; i <
 *trellisc_result_num_diagnostics(r); ++i) ... trellisc_result_free(r);
 *
 * The trace format ("trellisc-trace", version 1) is described in
 * docs/guide/python.md ("The trace").
 *===----------------------------------------------------------------------===*/
#ifndef TRELLIS_TRELLISC_H
#define TRELLIS_TRELLISC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TRELLISC_API __attribute__((visibility("default")))
#else
#define TRELLISC_API
#endif

/* Return codes. */
#define TRELLISC_OK 0
#define TRELLISC_COMPILE_ERROR 1 /* the input is wrong: see the diagnostics */
#define TRELLISC_USAGE_ERROR 2   /* bad options or arguments */
#define TRELLISC_INTERNAL_ERROR 3

typedef struct trellisc_result trellisc_result;

/* One diagnostic. Strings are owned by the result ("" when absent). */
typedef struct trellisc_diagnostic {
  const char *severity; /* "error", "warning", "note" */
  const char *message;  /* the rule that was broken, in user terms */
  const char *file;     /* the user's (or builder's, or config) file */
  unsigned line, column;
  const char *kind;        /* "user", "builder", "config" or "" */
  const char *module;      /* module path ("mlp.fc1"), may be "" */
  const char *config;      /* "pipeline.json:12:7" that shaped it, or "" */
  const char *config_path; /* the JSON path of that config value, or "" */
} trellisc_diagnostic;

/* "trellisc 0.1.0". */
TRELLISC_API const char *trellisc_version(void);

/* Compiles a JSON trace. `options_json` (may be NULL) is an object:
 *   {"target": "cpu", "emit": "bundle" | "mlir", "compile_to": "trellis" |
 *    "graph" | "bundle", "infer_only": false}
 * infer_only: stop after replaying the trace and report the type of every
 * value (trellisc_result_info) — how the Python package learns shapes.
 * *out is always set (free it with trellisc_result_free). */
TRELLISC_API int trellisc_compile_trace(const char *trace_json, size_t size,
                                        const char *options_json,
                                        trellisc_result **out);

/* Compiles a TRELLIS pipeline.json. options: {"target": "cpu",
 *  "batch": 1, "cond_tokens": 0, "images": 1, "multi_image": "none",
 *  "precision": "trellis", "fp8_scales": "<file>" (with precision "fp8":
 *  static activation scales, trellis.exe --calibrate), "emit": "bundle" |
 *  "mlir", "compile_to": ...}. */
TRELLISC_API int trellisc_compile_pipeline(const char *pipeline_path,
                                           const char *options_json,
                                           trellisc_result **out);

/* The bundle bytes (NULL, *size = 0 when none). */
TRELLISC_API const void *trellisc_result_bundle(const trellisc_result *r,
                                                size_t *size);
/* The IR text for emit "mlir" ("" otherwise). */
TRELLISC_API const char *trellisc_result_ir(const trellisc_result *r);
/* JSON with what the compile learned: {"values": [T...], "inputs": [T...],
 * "outputs": [T...]} where T = {"dtype": "f32", "shape": [-1, 64],
 * "bounds": [128]} ("{}" when nothing). */
TRELLISC_API const char *trellisc_result_info(const trellisc_result *r);

TRELLISC_API size_t trellisc_result_num_diagnostics(const trellisc_result *r);
/* Fills *d with diagnostic i; returns 0, or -1 when out of range. */
TRELLISC_API int trellisc_result_diagnostic(const trellisc_result *r, size_t i,
                                            trellisc_diagnostic *d);
/* All diagnostics as a JSON array of objects with the fields above. */
TRELLISC_API const char *
trellisc_result_diagnostics_json(const trellisc_result *r);

TRELLISC_API void trellisc_result_free(trellisc_result *r);

#ifdef __cplusplus
}
#endif

#endif /* TRELLIS_TRELLISC_H */
