/*===- trellis_rt.h - The trellis runtime as a C library ----------*- C -*-===*
 *
 * libtrellis_rt.so runs what trellisc compiled (a bundle file, a trellis.exe
 * with its embedded bundle, or bundle bytes) inside the caller's program:
 *
 *   trellis_engine_*()       the TRELLIS pipeline set up once (weights
 *                            staged, GPU code loaded, memory planned) and
 *                            run for many generations
 *   trellis_run()            one generation through a fresh engine
 *                            (create + run + destroy)
 *   trellis_session_*()      entry functions of any compiled program, set
 *                            up once (GPU code loaded, weights staged) and
 *                            called many times (the Python package's
 *                            Executable)
 *   trellis_program_call()   one call through a fresh CPU-reference session
 *
 * Rules of the boundary:
 *  - plain C; nothing throws or aborts across it. Every call returns a
 *    trellis_status; on failure `err` (may be NULL) gets the code and a
 *    message naming the input, or the op and its source line;
 *  - tensors are dense row-major; the caller keeps ownership of what it
 *    passes in. An output tensor whose `data` is NULL is allocated by the
 *    runtime (free it with trellis_tensor_free); one with `data` set is a
 *    caller buffer of `capacity` bytes that must be large enough;
 *  - structs that may grow carry `struct_size` (set it to sizeof).
 *
 * See docs/guide/c-abi.md and examples/c/trellis_example.c.
 *===----------------------------------------------------------------------===*/
#ifndef TRELLIS_TRELLIS_RT_H
#define TRELLIS_TRELLIS_RT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TRELLIS_RT_API __attribute__((visibility("default")))
#else
#define TRELLIS_RT_API
#endif

#define TRELLIS_RT_ABI_VERSION 3

typedef enum trellis_status {
  TRELLIS_OK = 0,
  TRELLIS_ERR_INVALID_ARGUMENT = 1, /* a bad input: names it, expected/found */
  TRELLIS_ERR_BUNDLE = 2,           /* the bundle cannot be read or parsed */
  TRELLIS_ERR_WEIGHTS = 3,          /* a weight is missing or mistyped */
  TRELLIS_ERR_RUNTIME = 4,          /* an op failed (names op and source) */
  TRELLIS_ERR_IO = 5,               /* writing out_dir failed */
  TRELLIS_ERR_BUFFER_TOO_SMALL = 6, /* a caller output buffer is too small */
  TRELLIS_ERR_UNSUPPORTED = 7,      /* asked for what this build cannot do */
  TRELLIS_ERR_INTERNAL = 8,
  TRELLIS_ERR_BUSY = 9 /* the engine is running on another thread */
} trellis_status;

/* Error: code + message (malloc'ed; free with trellis_error_clear). */
typedef struct trellis_error {
  trellis_status code;
  char *message;
} trellis_error;

typedef enum trellis_dtype {
  TRELLIS_F32 = 0,
  TRELLIS_F16 = 1,
  TRELLIS_I32 = 2,
  TRELLIS_I64 = 3,
  TRELLIS_U8 = 4
} trellis_dtype;

#define TRELLIS_MAX_RANK 8

typedef struct trellis_tensor {
  trellis_dtype dtype;
  int32_t rank;
  int64_t shape[TRELLIS_MAX_RANK];
  void *data;      /* input: the elements; output: NULL or a caller buffer */
  size_t capacity; /* output caller buffers: their size in bytes */
  int32_t owned;   /* set by the runtime: 1 if trellis_tensor_free frees it */
  /* Sessions only (trellis_session_call): 1 = `data` is CUDA device memory
   * of the session's device. An input so is read on the device (after the
   * context's pending work); an output so asked for comes back in a device
   * buffer the session allocated (free it with trellis_session_tensor_free),
   * or, when the function ran on the CPU, on the host with on_device reset
   * to 0. Everywhere else 0 (host memory). */
  int32_t on_device;
} trellis_tensor;

/* One checkpoint tensor: model key (a pipeline.json "models" key, or
 * "params" for Python programs), tensor name, host memory (e.g. a mapped
 * safetensors file; it must stay valid during the call). */
typedef struct trellis_weight {
  const char *model;
  const char *name;
  trellis_tensor tensor;
} trellis_weight;

/* Weights: a table, else (or for what the table lacks) the checkpoints the
 * bundle names, relative to model_dir. */
typedef struct trellis_weights {
  const trellis_weight *entries;
  size_t count;
  const char *model_dir; /* may be NULL */
} trellis_weights;

/*--- Programs and single entry functions ---------------------------------*/

typedef struct trellis_program trellis_program;

/* A bundle file, or an executable with an embedded bundle (trellis.exe). */
TRELLIS_RT_API trellis_status trellis_program_open(const char *path,
                                                   trellis_program **out,
                                                   trellis_error *err);
/* Bundle bytes (copied). */
TRELLIS_RT_API trellis_status trellis_program_from_memory(const void *bytes,
                                                          size_t size,
                                                          trellis_program **out,
                                                          trellis_error *err);
TRELLIS_RT_API void trellis_program_close(trellis_program *program);
/* The bundle's meta section (JSON, owned by the program). */
TRELLIS_RT_API const char *trellis_program_meta(const trellis_program *p);

typedef struct trellis_call_options {
  uint32_t struct_size;
  int32_t check_finite; /* stop at the first op producing NaN/Inf */
  int32_t threads;      /* CPU threads; 0 = all */
} trellis_call_options;

/* Runs entry `function` on `inputs` on the CPU reference backend, through a
 * session made for the call; results go to `outputs` (exactly as many as the
 * function returns). `options` may be NULL. */
TRELLIS_RT_API trellis_status trellis_program_call(
    trellis_program *program, const char *function,
    const trellis_tensor *inputs, size_t num_inputs,
    const trellis_weights *weights, const trellis_call_options *options,
    trellis_tensor *outputs, size_t num_outputs, trellis_error *err);

/*--- The TRELLIS pipeline -------------------------------------------------*/

#define TRELLIS_TARGET_GS 1u
#define TRELLIS_TARGET_RF 2u
#define TRELLIS_TARGET_MESH 4u
#define TRELLIS_TARGET_ALL 7u

#define TRELLIS_FLAG_LOW_MEMORY 1u    /* GPU: stream weights (no-op on CPU) */
#define TRELLIS_FLAG_DETERMINISTIC 2u /* CPU: always deterministic */
#define TRELLIS_FLAG_GRAPHS 4u        /* GPU: CUDA graphs (no-op on CPU) */
#define TRELLIS_FLAG_CHECK_FINITE 8u  /* stop at the first NaN/Inf op */
/* Where the bundle's GPU stages run (default: the GPU when one is usable,
 * else the CPU reference, with a MESSAGE progress notice). */
#define TRELLIS_FLAG_CPU_ONLY 16u    /* always the CPU reference */
#define TRELLIS_FLAG_REQUIRE_GPU 32u /* the GPU or an error saying why not */
/* Runs will take images (trellis_run_spec.images): the image-conditioning
 * model's weights are checked at setup too (without it, at the first run
 * with images). trellis_run sets it when spec.images is set. */
#define TRELLIS_FLAG_IMAGES 64u
/* GPU: wait for every op (eager launches, no graphs), so that a GPU fault
 * is reported with the op and its source location (slow; for debugging). */
#define TRELLIS_FLAG_SYNC_OPS 128u
/* GPU: the code an sm_75 card runs, on any GPU (--gpu-arch portable). */
#define TRELLIS_FLAG_PORTABLE_GPU 256u

/* Sampler settings of one stage. 0 (steps) or NaN (others) keep what was
 * compiled. steps and cfg_strength change at run time (steps of a CUDA
 * program at most max(the compiled steps, 64): the rows of its time
 * tables); sigma_min,
 * cfg_interval and rescale_t are compiled in (trellisc / tc.trellis
 * options): a different value is TRELLIS_ERR_UNSUPPORTED. */
typedef struct trellis_sampler_spec {
  int32_t steps;
  double sigma_min;
  double cfg_strength;
  double cfg_interval[2];
  double rescale_t;
} trellis_sampler_spec;

typedef enum trellis_progress_kind {
  TRELLIS_PROGRESS_STAGE_BEGIN = 0,
  TRELLIS_PROGRESS_STAGE_END = 1,
  TRELLIS_PROGRESS_STEP = 2,
  TRELLIS_PROGRESS_COORDS = 3, /* stage 1's coordinates exist */
  TRELLIS_PROGRESS_MESSAGE = 4 /* a line trellis.exe would print */
} trellis_progress_kind;

typedef struct trellis_progress {
  trellis_progress_kind kind;
  const char *stage; /* "ss_stage", "slat_stage", "decode_gs", ... */
  int64_t step, steps;
  double seconds;               /* STAGE_END */
  const trellis_tensor *coords; /* COORDS: int32 [N, 4], valid in the call */
  const char *message;          /* MESSAGE */
} trellis_progress;

typedef void (*trellis_progress_fn)(const trellis_progress *progress,
                                    void *user_data);

typedef struct trellis_run_spec {
  uint32_t struct_size; /* sizeof(trellis_run_spec) */
  /* The compiled pipeline: an open program, else a bundle/trellis.exe path. */
  trellis_program *program;
  const char *bundle_path;
  uint64_t seed;
  trellis_sampler_spec ss, slat;
  uint32_t targets; /* TRELLIS_TARGET_*; 0 = all */
  uint32_t flags;   /* TRELLIS_FLAG_* */
  int32_t threads;  /* CPU threads; 0 = all */
  /* Optional inputs (NULL: seeded noise / run stage 1). */
  const trellis_tensor *ss_noise;   /* f32 [B, 8, R, R, R] */
  const trellis_tensor *slat_noise; /* f32 [N, 8] */
  const trellis_tensor *coords;     /* i32 [N, 4]: skip stage 1 */
  /* If set, the files trellis.exe writes go here too (created; as with
   * trellis.exe --out, output files of an earlier run there are removed
   * first, other files stay, and a run that fails removes the files it
   * wrote). */
  const char *out_dir;
  trellis_progress_fn progress;
  void *user_data;
  /* Images instead of tokens (then `embeddings` may be NULL): num_images u8
   * tensors [H, W, 4] (RGBA; alpha marks the object) or [H, W, 3] (RGB),
   * preprocessed as TRELLIS does and encoded by the program's
   * image-conditioning model (docs/guide/images.md); several make one
   * multi-image generation (a program compiled with --images N). An image
   * without a usable alpha channel is an error unless
   * no_background_removal is set (TRELLIS would cut its background out with
   * rembg, which is not shipped): then the whole image is the object. */
  const trellis_tensor *images;
  int32_t num_images;
  int32_t no_background_removal;
} trellis_run_spec;

/* Fills a spec with the defaults (seed 42, everything as compiled). */
TRELLIS_RT_API void trellis_run_spec_init(trellis_run_spec *spec);

typedef struct trellis_embeddings {
  trellis_tensor cond;            /* f32 (or f16) [images, Lc, Cc] */
  const trellis_tensor *neg_cond; /* text pipelines: CLIP(""); else NULL */
} trellis_embeddings;

/* Every tensor the pipeline produces (all samples; see docs/guide/c-abi.md
 * for the per-sample split). Tensors of stages not run stay rank 0 and
 * NULL. */
typedef struct trellis_outputs {
  trellis_tensor ss_latent; /* f32 [B, 8, R, R, R] */
  trellis_tensor coords;    /* i32 [N, 4] */
  trellis_tensor slat;      /* f32 [N, 8] */
  trellis_tensor gs_xyz, gs_features_dc, gs_scaling, gs_rotation, gs_opacity;
  trellis_tensor rf_trivec, rf_density, rf_features_dc;
  trellis_tensor mesh_cubes, mesh_fields;   /* decode_mesh */
  trellis_tensor mesh_vertices, mesh_faces; /* FlexiCubes (first sample) */
  trellis_tensor cond; /* f32 [images, Lc, Cc]: the tokens encoded from
                          spec.images (runs with images only) */
} trellis_outputs;

/* One inference: embeddings -> ss_stage -> slat_stage -> decoders, through
 * a fresh engine (trellis_engine_create + trellis_engine_run + destroy). */
TRELLIS_RT_API trellis_status trellis_run(const trellis_run_spec *spec,
                                          const trellis_weights *weights,
                                          const trellis_embeddings *embeddings,
                                          trellis_outputs *outputs,
                                          trellis_error *err);

/*--- Engines: set up once, run many generations ---------------------------
 *
 * An engine holds what does not change between generations: the backend
 * (CUDA context, kernel modules), the staged weights, the planned memory,
 * the built commands and captured graphs (for the sparse stages: per voxel
 * set, rebuilt when the set changes), and an output writer thread.
 *
 * Rules:
 *  - one generation at a time: a trellis_engine_run while another thread is
 *    inside trellis_engine_run of the same engine returns TRELLIS_ERR_BUSY
 *    (it does not wait). Different engines may run on different threads.
 *  - one device per engine (options.device); two GPUs are two engines.
 *  - the program must stay open, and the memory of the weight table's
 *    tensors valid, until trellis_engine_destroy (the table itself is
 *    copied). trellis_program_close of a program that engines still use
 *    is deferred until the last of them is destroyed.
 *  - a failed run (bad input, say) leaves the engine usable.
 */

typedef struct trellis_engine trellis_engine;

typedef struct trellis_engine_options {
  uint32_t struct_size; /* sizeof(trellis_engine_options) */
  /* TRELLIS_FLAG_LOW_MEMORY, _GRAPHS, _CHECK_FINITE, _CPU_ONLY,
   * _REQUIRE_GPU, _IMAGES, _SYNC_OPS, _PORTABLE_GPU (the other bits are per
   * run). */
  uint32_t flags;
  int32_t device;  /* CUDA device ordinal (default 0) */
  int32_t threads; /* CPU threads; 0 = all */
  trellis_progress_fn
      progress; /* MESSAGE notices while starting; may be NULL */
  void *user_data;
  /* The device memory the engine may allocate, in bytes; 0 = what the GPU
   * has free. Before any work the engine plans every GPU stage against it
   * and takes the fastest form that fits, else fails naming the stage and
   * the bytes (trellis.exe --memory-budget). Added after user_data: an
   * older caller's smaller struct_size gets the defaults. */
  uint64_t memory_budget;
  /* The voxel count that plan assumes for the sparse stages; 0 = 32768
   * (trellis.exe --max-voxels). */
  int64_t max_voxels;
} trellis_engine_options;

/* Fills options with the defaults (graphs on, device 0). */
TRELLIS_RT_API void trellis_engine_options_init(trellis_engine_options *o);

/* Checks every weight the program reads against `weights` (missing or
 * mistyped: TRELLIS_ERR_WEIGHTS, naming the tensor), starts the backend and
 * prepares what does not depend on the inputs (an FP8 program on a GPU other
 * than sm_90: TRELLIS_ERR_UNSUPPORTED). `options` may be NULL. */
TRELLIS_RT_API trellis_status
trellis_engine_create(trellis_program *program, const trellis_weights *weights,
                      const trellis_engine_options *options,
                      trellis_engine **out, trellis_error *err);

/* One generation. From `spec` it uses seed, ss, slat, targets, threads, the
 * optional noise / coords, out_dir and progress. spec->flags is not read
 * (the engine's options decide); spec->program must be NULL or the engine's
 * program and spec->bundle_path NULL (TRELLIS_ERR_INVALID_ARGUMENT
 * otherwise). Files in out_dir are complete when it returns. */
TRELLIS_RT_API trellis_status trellis_engine_run(
    trellis_engine *engine, const trellis_embeddings *embeddings,
    const trellis_run_spec *spec, trellis_outputs *outputs, trellis_error *err);

/* Frees the engine (NULL is a no-op). Not while a run is in progress. */
TRELLIS_RT_API void trellis_engine_destroy(trellis_engine *engine);

/*--- Sessions: entry functions called many times --------------------------
 *
 * A session keeps what trellis_program_call rebuilds at every call: the
 * backend (the GPU when the program was compiled for CUDA and one is usable,
 * as for an engine), the loaded GPU code, the staged weights, and per input
 * shape the memory plan, commands and captured graphs. Options are an
 * engine's (trellis_engine_options: flags CPU_ONLY, REQUIRE_GPU,
 * CHECK_FINITE, GRAPHS, LOW_MEMORY; device; threads; progress for notices).
 * One call at a time per session (another thread's call returns
 * TRELLIS_ERR_BUSY); the program and the weight tensors' memory must stay
 * valid until trellis_session_destroy (the table is copied). */

typedef struct trellis_session trellis_session;

TRELLIS_RT_API trellis_status
trellis_session_create(trellis_program *program, const trellis_weights *weights,
                       const trellis_engine_options *options,
                       trellis_session **out, trellis_error *err);
/* As trellis_program_call, through the session. */
TRELLIS_RT_API trellis_status trellis_session_call(
    trellis_session *session, const char *function,
    const trellis_tensor *inputs, size_t num_inputs, trellis_tensor *outputs,
    size_t num_outputs, trellis_error *err);
/* "cuda" or "cpu": where `function` runs in this session (NULL for an
 * unknown function). */
TRELLIS_RT_API const char *
trellis_session_backend(const trellis_session *session, const char *function);
/* The GPU time (CUDA events around the function's commands) of the last
 * successful trellis_session_call, in seconds; NaN when it ran on the CPU. */
TRELLIS_RT_API double
trellis_session_gpu_seconds(const trellis_session *session);
/* Frees an output of trellis_session_call: a device buffer (valid while the
 * session lives), or as trellis_tensor_free a host one. */
TRELLIS_RT_API void trellis_session_tensor_free(trellis_session *session,
                                                trellis_tensor *tensor);
/* Copies a device output to `host` (capacity bytes at least its size). */
TRELLIS_RT_API trellis_status trellis_session_copy_to_host(
    trellis_session *session, const trellis_tensor *device, void *host,
    size_t capacity, trellis_error *err);
/* Frees the session (NULL is a no-op). Not while a call is in progress. */
TRELLIS_RT_API void trellis_session_destroy(trellis_session *session);

/*--- Memory ---------------------------------------------------------------*/

/* Frees a runtime-allocated tensor's data (no-op for caller buffers and
 * device buffers: see trellis_session_tensor_free). */
TRELLIS_RT_API void trellis_tensor_free(trellis_tensor *t);
TRELLIS_RT_API void trellis_outputs_free(trellis_outputs *outputs);
TRELLIS_RT_API void trellis_error_clear(trellis_error *err);
/* Bytes of one element. */
TRELLIS_RT_API size_t trellis_dtype_size(trellis_dtype dtype);
TRELLIS_RT_API int trellis_rt_abi_version(void);

#ifdef __cplusplus
}
#endif

#endif /* TRELLIS_TRELLIS_RT_H */
