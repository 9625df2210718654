// A C ABI over runtime/kernels/attention_launch.hpp, for the Python benchmark
// (ctypes). Every launch goes through the same driver-API path the trellisc
// runtime uses: cuModuleLoadData + cuModuleGetFunction + cuLaunchKernel, in the
// primary context that PyTorch uses.
#include <cuda.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "runtime/kernels/attention_launch.hpp"

namespace {
trellis::AttentionKernels *g_kernels = nullptr;
std::string g_err;

int set_err(CUresult r, const std::string &what) {
  const char *s = nullptr;
  cuGetErrorString(r, &s);
  g_err = what + ": " + (s ? s : "?");
  return static_cast<int>(r);
}
} // namespace

extern "C" {

const char *tattn_last_error() { return g_err.c_str(); }
int tattn_params_size() { return static_cast<int>(sizeof(TrellisAttnParams)); }
int tattn_params_offset_of_scale() {
  return static_cast<int>(offsetof(TrellisAttnParams, softmax_scale));
}
int tattn_num_configs() { return trellis_attn_num_configs; }

// name; info = family, head_dim, block_m, block_n, stages, threads, smem,
// min_blocks, variant
const char *tattn_config(int i, int *info) {
  if (i < 0 || i >= trellis_attn_num_configs)
    return nullptr;
  const TrellisAttnConfig &c = trellis_attn_configs[i];
  const int v[9] = {c.family,  c.head_dim,   c.block_m,    c.block_n, c.stages,
                    c.threads, c.smem_bytes, c.min_blocks, c.variant};
  for (int k = 0; k < 9; ++k)
    info[k] = v[k];
  return c.name;
}

// Makes device `dev`'s primary context current (the one the CUDA runtime, hence
// PyTorch, uses).
int tattn_init(int dev) {
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS)
    return set_err(r, "cuInit");
  CUdevice d;
  if ((r = cuDeviceGet(&d, dev)) != CUDA_SUCCESS)
    return set_err(r, "cuDeviceGet");
  CUcontext ctx;
  if ((r = cuDevicePrimaryCtxRetain(&ctx, d)) != CUDA_SUCCESS)
    return set_err(r, "cuDevicePrimaryCtxRetain");
  if ((r = cuCtxSetCurrent(ctx)) != CUDA_SUCCESS)
    return set_err(r, "cuCtxSetCurrent");
  if (!g_kernels)
    g_kernels = new trellis::AttentionKernels();
  return 0;
}

// Loads a cubin or PTX file for a family (TRELLIS_ATTN_SM90A / SM80 / SM75).
int tattn_load(const char *path, int family) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    g_err = std::string("cannot open ") + path;
    return -1;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  std::string image = ss.str();
  image.push_back('\0'); // PTX must be NUL-terminated; harmless for a cubin
  std::string err;
  CUresult r = g_kernels->load(image.data(), family, &err);
  if (r != CUDA_SUCCESS) {
    g_err = err;
    return static_cast<int>(r);
  }
  return 0;
}

int tattn_loaded(int i) {
  return (g_kernels && i >= 0 && i < trellis_attn_num_configs)
             ? g_kernels->loaded(&trellis_attn_configs[i])
             : 0;
}

int tattn_launch(int i, const TrellisAttnParams *p, void *stream) {
  if (i < 0 || i >= trellis_attn_num_configs) {
    g_err = "bad config index";
    return -1;
  }
  std::string err;
  CUresult r = g_kernels->launch(&trellis_attn_configs[i], *p,
                                 static_cast<CUstream>(stream), &err);
  if (r != CUDA_SUCCESS) {
    g_err = err;
    return static_cast<int>(r);
  }
  return 0;
}

int tattn_norm_params_size() {
  return static_cast<int>(sizeof(TrellisHeadRmsNormParams));
}

int tattn_head_rmsnorm(const TrellisHeadRmsNormParams *p, void *stream) {
  std::string err;
  CUresult r =
      g_kernels->launch_head_rmsnorm(*p, static_cast<CUstream>(stream), &err);
  if (r != CUDA_SUCCESS) {
    g_err = err;
    return static_cast<int>(r);
  }
  return 0;
}

} // extern "C"
