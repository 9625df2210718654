//===- Fp8Attention.cpp - FP8 self-attention commands ---------------------===//
//
// trellis.attention / trellis.sparse.attention {precision = "fp8_e4m3"}
// (trellisc --precision=fp8: the flow transformers' self-attention with head
// RMS norms, head dim 64): launches of runtime/kernels/attention_fp8_sm90.cuh
// — the per-head amax of v (not when the op has a static, calibrated
// v_amax), the E4M3 copies of k (normalized) and v (transposed) in the op's
// scratch, then the attention (q normalized and quantized in its prologue)
// and the fp16 redo of the CTAs it flags. The CPU reference's model of the
// same arithmetic is ref::attentionFp8.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/GpuExecutorImpl.h"

#include "runtime/kernels/attention.h"

#include <string>

namespace trellis {

namespace {

constexpr int64_t kFp8HeadDim = 64;

int64_t roundUpToPad(int64_t n) {
  return (n + TRELLIS_ATTN_FP8_PAD - 1) / TRELLIS_ATTN_FP8_PAD *
         TRELLIS_ATTN_FP8_PAD;
}

/// A kernel's tile shape: (query rows, keys per tile, stages), and the fp16
/// online kernel of the same shape that recomputes the CTAs it flags.
struct Fp8Tile {
  const char *name, *online;
  int bm, bn, stages;
};

/// Measured on the H100 (bench/attention/fp8_probe.cu): 256 x 64 where the
/// sequences fill whole 256-row tiles (the SS stage's 4096 tokens), else
/// 192 x 128 (the SLat stage's ~4.4k tokens: fewer idle rows).
Fp8Tile fp8TileFor(int64_t longest, bool varlen) {
  if (!varlen && longest % 256 == 0)
    return {"trellis_attn_fp8_sm90_d64_m256_n64_s4",
            "trellis_attn_sm90_d64_m256_n64_s4_mbrs", 256, 64, 4};
  return {"trellis_attn_fp8_sm90_d64_m192_n128_s3",
          "trellis_attn_sm90_d64_m192_n128_s3_mbrs", 192, 128, 3};
}

/// One int32 per CTA of any tile shape (>= 192 rows; 64 bounds them).
size_t fp8RedoFlagsBytes(int64_t seqs, int64_t longest, int64_t heads) {
  return size_t((longest + 63) / 64 * seqs * heads) * sizeof(int32_t);
}

int64_t fp8SmemBytes(const Fp8Tile &t) {
  return TRELLIS_ATTN_FP8_SMEM(int64_t(t.bm), int64_t(t.bn), int64_t(t.stages));
}

} // namespace

size_t GpuExecutor::Impl::fp8AttentionScratchBytes(int64_t tokens,
                                                   int64_t paddedTokens,
                                                   int64_t heads, int64_t seqs,
                                                   int64_t longest) {
  const size_t rows = size_t(tokens * heads * kFp8HeadDim);
  return alignUp(rows) + alignUp(size_t(paddedTokens * heads * kFp8HeadDim)) +
         alignUp(size_t(heads) * 4) + fp8RedoFlagsBytes(seqs, longest, heads);
}

int64_t
GpuExecutor::Impl::fp8PaddedTokens(const std::vector<int64_t> &lengths) {
  int64_t padded = 0;
  for (int64_t n : lengths)
    padded += roundUpToPad(n);
  return padded;
}

Result<std::function<Status()>> GpuExecutor::Impl::fp8AttentionCommand(
    Prepared &p, const Fp8AttentionCall &call, const Instr &instr) {
  if (attentionFamily != TRELLIS_ATTN_SM90A)
    return opError(instr, "FP8 attention (precision \"fp8_e4m3\") runs on "
                          "sm_90 only; this GPU is sm_" +
                              std::to_string(sm));
  if (!call.qGamma || !call.kGamma)
    return opError(instr, "FP8 attention needs the head RMS norms of q and k "
                          "fused into the op (q_gamma, k_gamma; "
                          "trellis-form-attention)");
  if (call.headDim != kFp8HeadDim)
    return opError(instr, "FP8 attention takes head dim 64, found " +
                              std::to_string(call.headDim));
  TrellisAttnFp8Params f{};
  const TrellisAttnParams &a = call.views;
  f.q = a.q, f.k = a.k, f.v = a.v, f.o = a.o;
  f.q_batch_stride = a.q_batch_stride, f.q_row_stride = a.q_row_stride;
  f.q_head_stride = a.q_head_stride;
  f.k_batch_stride = a.k_batch_stride, f.k_row_stride = a.k_row_stride;
  f.k_head_stride = a.k_head_stride;
  f.v_batch_stride = a.v_batch_stride, f.v_row_stride = a.v_row_stride;
  f.v_head_stride = a.v_head_stride;
  f.o_batch_stride = a.o_batch_stride, f.o_row_stride = a.o_row_stride;
  f.o_head_stride = a.o_head_stride;
  f.cu_seqlens = a.cu_seqlens_q;
  f.q_gamma = call.qGamma;
  f.k_gamma = call.kGamma;
  f.num_seqs = a.num_seqs;
  f.heads = a.heads;
  f.seqlen = a.seqlen_q;
  f.head_dim = int32_t(kFp8HeadDim);
  f.tokens = int32_t(call.tokens);
  f.padded_tokens = int32_t(call.paddedTokens);
  f.softmax_scale = a.softmax_scale;
  f.o_quantize = a.o_quantize;
  // The scratch: k8 [H, T, 64], vt8 [H, 64, Tpad], v_amax [H], the redo
  // flags.
  const size_t rows = size_t(call.tokens * a.heads * kFp8HeadDim);
  CUdeviceptr at = call.scratch;
  f.k8 = reinterpret_cast<uint8_t *>(at);
  f.vt8 = reinterpret_cast<uint8_t *>(at += alignUp(rows));
  f.v_amax = reinterpret_cast<float *>(
      at += alignUp(size_t(call.paddedTokens * a.heads * kFp8HeadDim)));
  f.redo_flags =
      reinterpret_cast<int32_t *>(at += alignUp(size_t(a.heads) * 4));
  for (const void *ptr : {f.q, f.k, f.v, static_cast<const void *>(f.o)})
    if (reinterpret_cast<uintptr_t>(ptr) % 16)
      return opError(instr, "FP8 attention needs 16-byte aligned operands");
  // v's scales: the op's static v_amax (a calibration's, trellisc
  // --fp8-scales), uploaded once, or the amax kernel's at every call.
  const bool staticV = instr.hasAttr("v_amax");
  if (staticV) {
    TRELLIS_ASSIGN_OR_RETURN(auto &values, instr.floatArrayAttr("v_amax"));
    if (int64_t(values.size()) != a.heads)
      return opError(instr, "v_amax has " + std::to_string(values.size()) +
                                " values for " + std::to_string(a.heads) +
                                " heads");
    TRELLIS_ASSIGN_OR_RETURN(
        CUdeviceptr scales,
        uploadFp8Constants(p, instr,
                           std::vector<float>(values.begin(), values.end()),
                           "the FP8 attention's v scales of '" + p.name + "'"));
    f.v_amax = reinterpret_cast<float *>(scales);
  } else if (fp8Observer) { // calibration: the op's largest v per head
    TRELLIS_ASSIGN_OR_RETURN(CUdeviceptr running,
                             fp8RunningAmax(p, instr, size_t(a.heads)));
    f.v_amax_running = reinterpret_cast<float *>(running);
  }

  const Fp8Tile tile = fp8TileFor(a.seqlen_q, a.cu_seqlens_q != nullptr);
  // The fp16 online kernel for the CTAs the FP8 one flags: the same grid, q
  // and k normalized in its prologue.
  const TrellisAttnConfig *online = trellis_attn_find(tile.online);
  if (!online)
    return opError(instr, std::string("no attention kernel ") + tile.online);
  TrellisAttnParams redo = a;
  redo.cu_seqlens_k = a.cu_seqlens_q;
  redo.seqlen_k = a.seqlen_q;
  redo.q_gamma = call.qGamma;
  redo.k_gamma = call.kGamma;
  redo.k_norm_gamma = nullptr;
  redo.head_dim = int32_t(kFp8HeadDim);
  redo.redo_flags = f.redo_flags;
  if (const char *why = trellis_attn_check(online, &redo))
    return opError(instr, std::string("attention parameters: ") + why);
  auto onlineFn = attentionFunction(*online);
  if (!onlineFn)
    return opError(instr, onlineFn.message());
  auto amax = runtimeKernel("trellis_attn_fp8_v_amax_d64");
  auto prepare = runtimeKernel("trellis_attn_fp8_prepare_d64");
  auto attend = runtimeKernel(tile.name);
  for (auto *k : {&amax, &prepare, &attend})
    if (!*k)
      return opError(instr, k->message());
  const int64_t smem = fp8SmemBytes(tile);
  api->cuFuncSetAttribute(
      *attend, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(smem));
  const unsigned heads = unsigned(a.heads);
  const unsigned amaxBlocks =
      unsigned((call.tokens + TRELLIS_ATTN_FP8_AMAX_TOKENS - 1) /
               TRELLIS_ATTN_FP8_AMAX_TOKENS);
  const unsigned prepareBlocks =
      unsigned(call.paddedTokens / TRELLIS_ATTN_FP8_PAD);
  const unsigned attendBlocks =
      unsigned((a.seqlen_q + tile.bm - 1) / tile.bm * a.num_seqs);
  return std::function<Status()>(
      [this, f, redo, amaxFn = *amax, prepareFn = *prepare, attendFn = *attend,
       onlineFn = *onlineFn, online, heads, amaxBlocks, prepareBlocks,
       attendBlocks, tile, smem, staticV, &instr]() mutable -> Status {
        if (f.tokens == 0 || attendBlocks == 0)
          return Status::ok();
        void *args[1] = {&f};
        auto launch = [&](CUfunction fn, unsigned blocksX, unsigned blocksY,
                          unsigned threads, unsigned bytes,
                          const char *what) -> Status {
          CUresult r = api->cuLaunchKernel(fn, blocksX, blocksY, 1, threads, 1,
                                           1, bytes, stream, args, nullptr);
          if (r != CUDA_SUCCESS)
            return opError(instr, std::string("launching ") + what + ": " +
                                      api->describe(r));
          return Status::ok();
        };
        if (!staticV) {
          CUresult r = api->cuMemsetD32Async(
              reinterpret_cast<CUdeviceptr>(f.v_amax), 0, heads, stream);
          if (r != CUDA_SUCCESS)
            return opError(instr, "clearing the FP8 attention's amax: " +
                                      api->describe(r));
          TRELLIS_RETURN_IF_ERROR(
              launch(amaxFn, amaxBlocks, 1, TRELLIS_ATTN_FP8_AMAX_THREADS,
                     heads * 4, "the FP8 attention's v amax"));
        }
        TRELLIS_RETURN_IF_ERROR(launch(prepareFn, prepareBlocks, heads,
                                       TRELLIS_ATTN_FP8_PREP_THREADS, 0,
                                       "the FP8 attention's operands"));
        TRELLIS_RETURN_IF_ERROR(launch(attendFn, attendBlocks, heads,
                                       unsigned(tile.bm * 2), unsigned(smem),
                                       tile.name));
        void *redoArgs[1] = {&redo};
        CUresult rr = api->cuLaunchKernel(
            onlineFn, attendBlocks, heads, 1, unsigned(online->threads), 1, 1,
            unsigned(online->smem_bytes), stream, redoArgs, nullptr);
        if (rr != CUDA_SUCCESS)
          return opError(instr, std::string("launching ") + online->name +
                                    ": " + api->describe(rr));
        return Status::ok();
      });
}

} // namespace trellis
