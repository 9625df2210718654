/* trellis_example.c - run a compiled TRELLIS pipeline through the C ABI.
 *
 *   trellis_example PROGRAM MODEL_DIR COND.npy OUT_DIR [--seed N]
 *                   [--steps-ss N] [--steps-slat N] [--formats gs,rf,mesh]
 *
 * PROGRAM is a trellis.exe (or a bundle file) from trellisc --target=cpu.
 * The checkpoints come from MODEL_DIR (the runtime maps them); the
 * conditioning is a float32 .npy. Every output tensor is written to
 * OUT_DIR/<name>.npy (names of trellis_outputs: coords.npy, slat.npy, ...);
 * stage 1's coordinates are reported as soon as they exist.
 *
 * Plain C99: <trellis/trellis_rt.h> + libtrellis_rt.so.
 */
#include "trellis/trellis_rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* --- a minimal .npy reader (float32 little-endian, C order) ------------ */
static int read_npy_f32(const char *path, trellis_tensor *t) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "trellis_example: cannot open %s\n", path);
    return 0;
  }
  unsigned char pre[10];
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
    fprintf(stderr, "trellis_example: %s is not a .npy file\n", path);
    fclose(f);
    return 0;
  }
  size_t hlen = pre[8] | (pre[9] << 8);
  if (pre[6] >= 2) { /* version 2: 4-byte header length */
    unsigned char more[2];
    if (fread(more, 1, 2, f) != 2) {
      fclose(f);
      return 0;
    }
    hlen |= ((size_t)more[0] << 16) | ((size_t)more[1] << 24);
  }
  char *header = calloc(hlen + 1, 1);
  if (!header || fread(header, 1, hlen, f) != hlen) {
    fclose(f);
    free(header);
    return 0;
  }
  if (!strstr(header, "'<f4'") || strstr(header, "'fortran_order': True")) {
    fprintf(stderr, "trellis_example: %s must be float32, C order\n", path);
    fclose(f);
    free(header);
    return 0;
  }
  const char *key = strstr(header, "'shape'");
  const char *s = key ? strchr(key, '(') : NULL;
  if (!s) {
    fprintf(stderr, "trellis_example: %s: no shape in the .npy header\n", path);
    fclose(f);
    free(header);
    return 0;
  }
  memset(t, 0, sizeof(*t));
  t->dtype = TRELLIS_F32;
  size_t n = 1;
  for (++s; *s && *s != ')' && t->rank < TRELLIS_MAX_RANK;) {
    char *end;
    long long d = strtoll(s, &end, 10);
    if (end == s) {
      ++s;
      continue;
    }
    t->shape[t->rank++] = d;
    n *= (size_t)d;
    s = end;
  }
  free(header);
  t->data = malloc(n * 4 + 1);
  t->capacity = n * 4;
  if (fread(t->data, 4, n, f) != n) {
    fprintf(stderr, "trellis_example: %s is truncated\n", path);
    fclose(f);
    return 0;
  }
  fclose(f);
  return 1;
}

/* --- a minimal .npy writer ---------------------------------------------- */
static int write_npy(const char *dir, const char *name,
                     const trellis_tensor *t) {
  static const char *const descr[] = {"<f4", "<f2", "<i4", "<i8", "|u1"};
  char path[4096], shape[512] = "", header[1024];
  snprintf(path, sizeof path, "%s/%s.npy", dir, name);
  size_t n = 1, off = 0;
  for (int i = 0; i < t->rank; ++i) {
    off += (size_t)snprintf(shape + off, sizeof shape - off, "%lld%s",
                            (long long)t->shape[i],
                            t->rank == 1 ? "," : (i + 1 < t->rank ? ", " : ""));
    n *= (size_t)t->shape[i];
  }
  int len = snprintf(header, sizeof header,
                     "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                     descr[t->dtype], shape);
  int total = 10 + len + 1;
  int pad = (64 - total % 64) % 64;
  FILE *f = fopen(path, "wb");
  if (!f)
    return 0;
  unsigned short hl = (unsigned short)(len + pad + 1);
  fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  fputc(hl & 0xff, f);
  fputc(hl >> 8, f);
  fwrite(header, 1, (size_t)len, f);
  for (int i = 0; i < pad; ++i)
    fputc(' ', f);
  fputc('\n', f);
  fwrite(t->data, trellis_dtype_size(t->dtype), n, f);
  return fclose(f) == 0;
}

static void on_progress(const trellis_progress *p, void *user) {
  (void)user;
  switch (p->kind) {
  case TRELLIS_PROGRESS_STAGE_BEGIN:
    fprintf(stderr, "[%s] started\n", p->stage);
    break;
  case TRELLIS_PROGRESS_STAGE_END:
    fprintf(stderr, "[%s] done in %.2f s\n", p->stage, p->seconds);
    break;
  case TRELLIS_PROGRESS_STEP:
    fprintf(stderr, "\r  %s: step %lld/%lld%s", p->stage, (long long)p->step,
            (long long)p->steps, p->step == p->steps ? "\n" : "");
    break;
  case TRELLIS_PROGRESS_COORDS:
    fprintf(stderr, "  stage 1 coordinates ready: %lld voxels\n",
            (long long)p->coords->shape[0]);
    break;
  default:
    break;
  }
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr,
            "usage: %s PROGRAM MODEL_DIR COND.npy OUT_DIR [--seed N] "
            "[--steps-ss N] [--steps-slat N] [--formats gs,rf,mesh]\n",
            argv[0]);
    return 2;
  }
  trellis_run_spec spec;
  trellis_run_spec_init(&spec);
  spec.bundle_path = argv[1];
  spec.progress = on_progress;
  for (int i = 5; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--seed"))
      spec.seed = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--steps-ss"))
      spec.ss.steps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--steps-slat"))
      spec.slat.steps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--formats")) {
      spec.targets = 0;
      if (strstr(argv[i + 1], "gs"))
        spec.targets |= TRELLIS_TARGET_GS;
      if (strstr(argv[i + 1], "rf"))
        spec.targets |= TRELLIS_TARGET_RF;
      if (strstr(argv[i + 1], "mesh"))
        spec.targets |= TRELLIS_TARGET_MESH;
    } else {
      fprintf(stderr, "trellis_example: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  trellis_embeddings emb;
  memset(&emb, 0, sizeof emb);
  if (!read_npy_f32(argv[3], &emb.cond))
    return 1;
  trellis_weights weights = {NULL, 0, argv[2]};
  trellis_outputs out;
  memset(&out, 0, sizeof out); /* NULL data: the runtime allocates */
  trellis_error err = {TRELLIS_OK, NULL};
  if (trellis_run(&spec, &weights, &emb, &out, &err) != TRELLIS_OK) {
    fprintf(stderr, "trellis_example: error %d: %s\n", (int)err.code,
            err.message ? err.message : "");
    trellis_error_clear(&err);
    free(emb.cond.data);
    return 1;
  }
  mkdir(argv[4], 0755);
  const struct {
    const char *name;
    const trellis_tensor *t;
  } all[] = {{"ss_latent", &out.ss_latent},
             {"coords", &out.coords},
             {"slat", &out.slat},
             {"gs_xyz", &out.gs_xyz},
             {"gs_features_dc", &out.gs_features_dc},
             {"gs_scaling", &out.gs_scaling},
             {"gs_rotation", &out.gs_rotation},
             {"gs_opacity", &out.gs_opacity},
             {"rf_trivec", &out.rf_trivec},
             {"rf_density", &out.rf_density},
             {"rf_features_dc", &out.rf_features_dc},
             {"mesh_cubes", &out.mesh_cubes},
             {"mesh_fields", &out.mesh_fields},
             {"mesh_vertices", &out.mesh_vertices},
             {"mesh_faces", &out.mesh_faces}};
  int ok = 1;
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
    if (all[i].t->data)
      ok &= write_npy(argv[4], all[i].name, all[i].t);
  trellis_outputs_free(&out);
  free(emb.cond.data);
  if (!ok) {
    fprintf(stderr, "trellis_example: cannot write to %s\n", argv[4]);
    return 1;
  }
  fprintf(stderr, "outputs written to %s\n", argv[4]);
  return 0;
}
