// Host side of the attention kernels: load a module image with the CUDA driver
// API and launch a configuration (header-only, C++17, needs <cuda.h> and
// -lcuda; no CUDA runtime).
//
//   trellis::AttentionKernels k;
//   k.load(cubin_bytes, TRELLIS_ATTN_SM90A);           // cuModuleLoadData
//   (cubin or NUL-terminated PTX) k.load(ptx_sm80_text, TRELLIS_ATTN_SM80);
//   const TrellisAttnConfig* c = k.pick(/*head_dim=*/64, /*sm=*/90);   // or
//   k.find(name) k.launch(c, params, stream, &message);              //
//   cuLaunchKernel
#pragma once

#include <cuda.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "runtime/kernels/attention.h"

namespace trellis {

class AttentionKernels {
public:
  AttentionKernels() {
    for (int i = 0; i < trellis_attn_num_configs; ++i)
      fn_[i] = nullptr;
  }
  ~AttentionKernels() {
    for (CUmodule m : mod_)
      if (m)
        cuModuleUnload(m);
  }
  AttentionKernels(const AttentionKernels &) = delete;
  AttentionKernels &operator=(const AttentionKernels &) = delete;

  // Loads a module image holding the kernels of `family` (a current context is
  // required) and resolves every configuration of that family. Raises the
  // dynamic shared-memory limit where a configuration needs more than 48 KiB.
  CUresult load(const void *image, int family, std::string *err = nullptr) {
    const int slot = slot_of(family);
    if (slot < 0)
      return fail(CUDA_ERROR_INVALID_VALUE, "unknown kernel family", err);
    CUmodule m = nullptr;
    CUresult r = cuModuleLoadData(&m, image);
    if (r != CUDA_SUCCESS)
      return fail(r, "cuModuleLoadData", err);
    if (mod_[slot])
      cuModuleUnload(mod_[slot]);
    mod_[slot] = m;
    for (int i = 0; i < trellis_attn_num_configs; ++i) {
      const TrellisAttnConfig &c = trellis_attn_configs[i];
      if (c.family != family)
        continue;
      CUfunction f = nullptr;
      r = cuModuleGetFunction(&f, m, c.name);
      if (r != CUDA_SUCCESS)
        return fail(r, std::string("cuModuleGetFunction ") + c.name, err);
      if (c.smem_bytes > 48 * 1024) {
        r = cuFuncSetAttribute(
            f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, c.smem_bytes);
        if (r != CUDA_SUCCESS)
          return fail(r, std::string("cuFuncSetAttribute ") + c.name, err);
      }
      fn_[i] = f;
    }
    for (int d = 0; d < 3; ++d) {
      static const char *const names[3] = {"trellis_head_rmsnorm_d64",
                                           "trellis_head_rmsnorm_d80",
                                           "trellis_head_rmsnorm_d128"};
      CUfunction f = nullptr;
      if (cuModuleGetFunction(&f, m, names[d]) == CUDA_SUCCESS)
        norm_[slot][d] = f;
    }
    return CUDA_SUCCESS;
  }

  // Standalone head RMS norm (pre-pass); uses the first loaded module that has
  // the kernel (load the module that suits the GPU first: sm90a on Hopper).
  CUresult launch_head_rmsnorm(const TrellisHeadRmsNormParams &p,
                               CUstream stream,
                               std::string *err = nullptr) const {
    const int d = p.head_dim == 64    ? 0
                  : p.head_dim == 80  ? 1
                  : p.head_dim == 128 ? 2
                                      : -1;
    if (d < 0)
      return fail(CUDA_ERROR_INVALID_VALUE,
                  "head_rmsnorm: head_dim must be 64, 80 or 128", err);
    if (((uintptr_t)p.x | (uintptr_t)p.y) & 15u || p.x_row_stride % 8 ||
        p.x_head_stride % 8 || p.y_row_stride % 8 || p.y_head_stride % 8)
      return fail(CUDA_ERROR_INVALID_VALUE,
                  "head_rmsnorm: 16-byte alignment / strides of 8 elements",
                  err);
    CUfunction f = nullptr;
    for (int s = 0; s < 3 && !f; ++s)
      f = norm_[s][d];
    if (!f)
      return fail(CUDA_ERROR_NOT_FOUND, "head_rmsnorm: no module loaded", err);
    const unsigned grid = trellis_head_rmsnorm_grid(&p);
    if (grid == 0)
      return CUDA_SUCCESS;
    TrellisHeadRmsNormParams copy = p;
    void *args[] = {&copy};
    CUresult r = cuLaunchKernel(f, grid, 1, 1, TRELLIS_HEAD_RMSNORM_THREADS, 1,
                                1, 0, stream, args, nullptr);
    if (r != CUDA_SUCCESS)
      return fail(r, "cuLaunchKernel trellis_head_rmsnorm", err);
    return CUDA_SUCCESS;
  }

  bool loaded(const TrellisAttnConfig *c) const {
    return c && fn_[c - trellis_attn_configs] != nullptr;
  }

  static const TrellisAttnConfig *find(const char *name) {
    for (int i = 0; i < trellis_attn_num_configs; ++i)
      if (std::strcmp(trellis_attn_configs[i].name, name) == 0)
        return &trellis_attn_configs[i];
    return nullptr;
  }

  // The default configuration for a head dim on a GPU of compute capability
  // `sm` (90 = Hopper), among the loaded ones: measured choices
  // (bench/attention/README.md), else the first that fits.
  const TrellisAttnConfig *pick(int head_dim, int sm) const {
    static const char *const preferred[] = {
        TRELLIS_ATTN_NAME_SM90(64, 128, 64, 4),
        TRELLIS_ATTN_NAME_SM90(80, 128, 64, 4),
        TRELLIS_ATTN_NAME_SM90(128, 128, 128, 3),
        TRELLIS_ATTN_NAME_SM80(64, 64, 64, 2),
        TRELLIS_ATTN_NAME_SM80(80, 64, 64, 2),
        TRELLIS_ATTN_NAME_SM80(128, 64, 64, 2),
        TRELLIS_ATTN_NAME_SM75(64, 64, 64, 1),
        TRELLIS_ATTN_NAME_SM75(80, 64, 64, 1),
        TRELLIS_ATTN_NAME_SM75(128, 64, 64, 1)};
    for (const char *n : preferred) {
      const TrellisAttnConfig *c = find(n);
      if (c && c->head_dim == head_dim && loaded(c) && usable(*c, sm))
        return c;
    }
    for (int i = 0; i < trellis_attn_num_configs; ++i) {
      const TrellisAttnConfig *c = &trellis_attn_configs[i];
      if (c->head_dim == head_dim && loaded(c) && usable(*c, sm))
        return c;
    }
    return nullptr;
  }

  // A FIXED_REF configuration launches twice: itself, then its online twin,
  // which recomputes the CTAs it flagged in p.redo_flags.
  CUresult launch(const TrellisAttnConfig *c, const TrellisAttnParams &p,
                  CUstream stream, std::string *err = nullptr) const {
    if (!c)
      return fail(CUDA_ERROR_INVALID_VALUE, "no configuration", err);
    if (c->variant & TRELLIS_ATTN_SM90_FIXED_REF) {
      const TrellisAttnConfig *online = trellis_attn_softmax_twin(c, 0);
      if (!online)
        return fail(CUDA_ERROR_NOT_FOUND,
                    std::string("no online twin of ") + c->name, err);
      CUresult r = launch_one(c, p, stream, err);
      return r != CUDA_SUCCESS ? r : launch_one(online, p, stream, err);
    }
    return launch_one(c, p, stream, err);
  }

private:
  CUresult launch_one(const TrellisAttnConfig *c, const TrellisAttnParams &p,
                      CUstream stream, std::string *err) const {
    CUfunction f = fn_[c - trellis_attn_configs];
    if (!f)
      return fail(CUDA_ERROR_NOT_FOUND,
                  std::string("module not loaded for ") + c->name, err);
    if (const char *msg = trellis_attn_check(c, &p))
      return fail(CUDA_ERROR_INVALID_VALUE, msg, err);
    unsigned grid[3], block[3];
    trellis_attn_grid(c, &p, grid, block);
    if (grid[0] == 0)
      return CUDA_SUCCESS; // no queries
    TrellisAttnParams copy = p;
    void *args[] = {&copy};
    CUresult r = cuLaunchKernel(
        f, grid[0], grid[1], grid[2], block[0], block[1], block[2],
        static_cast<unsigned>(c->smem_bytes), stream, args, nullptr);
    if (r != CUDA_SUCCESS)
      return fail(r, std::string("cuLaunchKernel ") + c->name, err);
    return CUDA_SUCCESS;
  }

  static int slot_of(int family) {
    return family == TRELLIS_ATTN_SM90A  ? 0
           : family == TRELLIS_ATTN_SM80 ? 1
           : family == TRELLIS_ATTN_SM75 ? 2
                                         : -1;
  }
  static bool usable(const TrellisAttnConfig &c, int sm) {
    if (c.family == TRELLIS_ATTN_SM90A)
      return sm == 90; // sm_90a code runs on 9.0 only
    return sm >= c.family;
  }
  static CUresult fail(CUresult r, const std::string &what, std::string *err) {
    if (err) {
      const char *s = nullptr;
      cuGetErrorString(r, &s);
      *err = what + ": " + (s ? s : "unknown CUDA error");
    }
    return r;
  }

  CUmodule mod_[3] = {nullptr, nullptr, nullptr};
  CUfunction norm_[3][3] = {{nullptr, nullptr, nullptr},
                            {nullptr, nullptr, nullptr},
                            {nullptr, nullptr, nullptr}};
  CUfunction
      fn_[sizeof(trellis_attn_configs) / sizeof(trellis_attn_configs[0])];
};

} // namespace trellis
