//===- SparseAttention.cpp - Attention over voxels on the GPU -------------===//
//
// The commands of trellis.sparse.attention (inside each segment or window of
// a sparse stage) and trellis.sparse.cross_attention (each sample's rows to
// its context tokens): the attention kernels in variable-length mode, with
// the head norm of k and the window-order gathers and scatter around them.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/GpuExecutorImpl.h"
#include "runtime/cuda/SparseSupport.h"

#include "runtime/kernels/attention.h"

#include <functional>
#include <string>
#include <vector>

namespace trellis {

/// trellis.sparse.attention and trellis.sparse.cross_attention: the
/// attention kernels in variable-length mode.
Result<bool> GpuExecutor::Impl::buildSparseAttentionCommand(Prepared &p,
                                                            Node &node) {
  const Instr &instr = *node.instr;
  const std::string &op = instr.op;
  const ValueType &x = slotType(p, node.in[0]);
  auto scale = instr.floatAttr("scale");
  if (!scale)
    return opError(instr, scale.message());
  const ValueType &k = slotType(p, node.in[1]), &v = slotType(p, node.in[2]);
  if (x.dtype != DType::F16 || x.shape.size() != 3)
    return opError(instr, "the GPU attention takes fp16 q [N, H, d]");
  int64_t heads = x.shape[1], d = x.shape[2];
  TrellisAttnParams params{};
  params.heads = int32_t(heads);
  params.head_dim = int32_t(d);
  params.softmax_scale = float(*scale);
  params.q_row_stride = params.o_row_stride = heads * d;
  params.q_head_stride = params.o_head_stride = d;
  params.k_head_stride = k.shape.back();
  params.v_head_stride = v.shape.back();
  std::vector<std::function<Status()>> before, after;
  // Self-attention with a normalized k: the fixed softmax reference
  // (attentionLaunch), its redo flags at the end of the scratch.
  bool kNormalized = false;
  CUdeviceptr redoFlags = 0;

  if (op == "trellis.sparse.attention" && fp8Precision(instr))
    return buildSparseFp8AttentionCommand(p, node, params);
  if (op == "trellis.sparse.cross_attention") {
    TRELLIS_RETURN_IF_ERROR(sparseCrossAttentionParams(p, node, params));
  } else {
    TRELLIS_RETURN_IF_ERROR(sparseSelfAttentionParams(
        p, node, params, before, after, kNormalized, redoFlags));
  }
  if (params.num_seqs == 0 || params.seqlen_q == 0) {
    node.command = [] { return Status::ok(); };
    return true;
  }
  if ((params.o_quantize = fp8OutputQuantize(p, node.out[0])) != 0.0f &&
      params.o != reinterpret_cast<void *>(address(p, node.out[0])))
    return opError(instr, "an E4M3 result for an FP8 linear must be written "
                          "in place, not through a window scatter");
  auto attend = attentionLaunch(params, kNormalized, redoFlags, instr);
  if (!attend)
    return attend.takeError();
  before.push_back(*attend);
  node.command = [before, after]() mutable -> Status {
    for (auto *steps : {&before, &after})
      for (auto &step : *steps)
        TRELLIS_RETURN_IF_ERROR(step());
    return Status::ok();
  };
  return true;
}

/// An FP8 self-attention inside each segment (Fp8Attention.cpp): segments of
/// consecutive rows, read in place (the flow transformers' full attention
/// per sample; windows are not supported).
Result<bool>
GpuExecutor::Impl::buildSparseFp8AttentionCommand(Prepared &p, Node &node,
                                                  TrellisAttnParams params) {
  const Instr &instr = *node.instr;
  auto *segments = std::get_if<SegmentsPtr>(&boundValue(p, node.in[3]));
  if (p.windows.count(root(p, node.in[3])) || !segments || !*segments ||
      !isIdentity(**segments))
    return opError(instr, "FP8 attention runs over segments of consecutive "
                          "rows only (not windows)");
  auto rowStride = [&](int slot) {
    int64_t s = tokenStride(p, slot);
    return s ? s : rowElems(slotType(p, slot));
  };
  params.q = reinterpret_cast<const void *>(address(p, node.in[0]));
  params.k = reinterpret_cast<const void *>(address(p, node.in[1]));
  params.v = reinterpret_cast<const void *>(address(p, node.in[2]));
  params.o = reinterpret_cast<void *>(address(p, node.out[0]));
  params.q_row_stride = rowStride(node.in[0]);
  params.k_row_stride = rowStride(node.in[1]);
  params.v_row_stride = rowStride(node.in[2]);
  params.cu_seqlens_q = params.cu_seqlens_k =
      reinterpret_cast<const int32_t *>(p.slots[root(p, node.in[3])].aux);
  params.num_seqs = int32_t((*segments)->numSegments());
  params.seqlen_q = params.seqlen_k = longestSegment((*segments)->offsets);
  params.o_quantize = fp8OutputQuantize(p, node.out[0]);
  auto [qGamma, kGamma] = sparseAttentionGammas(instr);
  Fp8AttentionCall call;
  call.views = params;
  call.qGamma =
      qGamma >= 0 ? reinterpret_cast<const float *>(address(p, node.in[qGamma]))
                  : nullptr;
  call.kGamma =
      kGamma >= 0 ? reinterpret_cast<const float *>(address(p, node.in[kGamma]))
                  : nullptr;
  call.headDim = params.head_dim;
  call.tokens = slotType(p, node.out[0]).shape.at(0);
  call.paddedTokens = fp8PaddedTokens(segmentLengths((*segments)->offsets));
  call.scratch = node.scratch >= 0 ? address(p, node.scratch) : 0;
  auto command = fp8AttentionCommand(p, call, instr);
  if (!command)
    return command.takeError();
  node.command = *command;
  return true;
}

/// The parameters of a cross-attention: queries each sample's rows, keys
/// that sample's dense context tokens.
Status
GpuExecutor::Impl::sparseCrossAttentionParams(Prepared &p, Node &node,
                                              TrellisAttnParams &params) {
  const Instr &instr = *node.instr;
  const ValueType &k = slotType(p, node.in[1]), &v = slotType(p, node.in[2]);
  // Queries: each sample's rows; keys: that sample's Lc tokens (dense).
  auto *coords = std::get_if<CoordsPtr>(&boundValue(p, node.in[3]));
  if (!coords || !*coords || k.shape.size() != 4)
    return opError(instr, "needs bound coordinates and k [B, Lc, H, d]");
  HostTensor offsets = offsetsOf(**coords);
  params.q = reinterpret_cast<const void *>(address(p, node.in[0]));
  params.o = reinterpret_cast<void *>(address(p, node.out[0]));
  params.k = reinterpret_cast<const void *>(address(p, node.in[1]));
  params.v = reinterpret_cast<const void *>(address(p, node.in[2]));
  params.cu_seqlens_q =
      reinterpret_cast<const int32_t *>(p.slots[root(p, node.in[3])].aux);
  params.k_row_stride = k.shape[2] * k.shape[3];
  params.v_row_stride = v.shape[2] * v.shape[3];
  params.k_batch_stride = k.shape[1] * params.k_row_stride;
  params.v_batch_stride = v.shape[1] * params.v_row_stride;
  if (k.shape[0] == 1)
    params.k_batch_stride = params.v_batch_stride = 0;
  params.num_seqs = int32_t((*coords)->batchSize());
  params.seqlen_q = longestSegment(offsets);
  params.seqlen_k = int32_t(k.shape[1]);
  return Status::ok();
}

/// The parameters of a self-attention inside each segment, and the commands
/// around it: k's head norm, the gathers into window order and the output's
/// scatter back (`before`, `after`).
Status GpuExecutor::Impl::sparseSelfAttentionParams(
    Prepared &p, Node &node, TrellisAttnParams &params,
    std::vector<std::function<Status()>> &before,
    std::vector<std::function<Status()>> &after, bool &kNormalized,
    CUdeviceptr &redoFlags) {
  const Instr &instr = *node.instr;
  const ValueType &x = slotType(p, node.in[0]);
  const ValueType &k = slotType(p, node.in[1]), &v = slotType(p, node.in[2]);
  const int64_t rows = slotType(p, node.out[0]).shape.at(0);
  int64_t heads = x.shape[1];
  // Self-attention inside each segment. Segments of consecutive rows
  // (one per sample) are read in place; windows are gathered into segment
  // order first and the output scattered back.
  // Segments bound on the host (rows, offsets in the binding pool) or a
  // window partition computed on the device (rows then offsets in one
  // arena tensor; empty windows are empty segments).
  auto *segments = std::get_if<SegmentsPtr>(&boundValue(p, node.in[3]));
  auto window = p.windows.find(root(p, node.in[3]));
  const bool onDevice = window != p.windows.end();
  if (!onDevice && (!segments || !*segments))
    return opError(instr, "its segments were not bound");
  CUdeviceptr q = address(p, node.in[0]), kp = address(p, node.in[1]),
              vp = address(p, node.in[2]), o = address(p, node.out[0]);
  // q, k, v may be strided views of a packed qkv [N, 3, H, d].
  auto rowStride = [&](int slot) {
    int64_t s = tokenStride(p, slot);
    return s ? s : rowElems(slotType(p, slot));
  };
  int64_t qStride = rowStride(node.in[0]), kStride = rowStride(node.in[1]),
          vStride = rowStride(node.in[2]);
  auto [qGamma, kGamma] = sparseAttentionGammas(instr);
  CUdeviceptr at = node.scratch >= 0 ? address(p, node.scratch) : 0;
  if (kGamma >= 0) {
    // k is normalized once into a dense scratch copy; q in the kernel's
    // prologue (as the dense stage's attention, bench/attention/README.md).
    auto norm =
        headNormCommand(kp, kStride, k.shape.back(), at, rows, heads,
                        k.shape.back(), address(p, node.in[kGamma]), instr);
    if (!norm)
      return norm.takeError();
    before.push_back(*norm);
    kp = at;
    kStride = rowElems(k);
    at += alignUp(bytesOf(k));
    kNormalized = true;
    params.k_norm_gamma =
        reinterpret_cast<const float *>(address(p, node.in[kGamma]));
  }
  if (qGamma >= 0)
    params.q_gamma =
        reinterpret_cast<const float *>(address(p, node.in[qGamma]));
  if (onDevice || !isIdentity(**segments)) {
    // Into window order and back: the generated kernels of the op's
    // trellis.window_rows (q, k, v gathers, the output's scatter).
    auto kernels = instr.attrs.find("trellis.window_rows");
    if (kernels == instr.attrs.end() || !kernels->is_array() ||
        kernels->size() != 4)
      return opError(instr, "its window rows have no generated kernels "
                            "(trellis.window_rows from the compiler)");
    CUdeviceptr rowsPtr =
        onDevice ? address(p, node.in[3]) : p.slots[root(p, node.in[3])].ptr;
    CUdeviceptr *dst[4] = {&q, &kp, &vp, &o};
    int64_t strides[4] = {qStride, kStride, vStride, 0};
    int widthSlots[4] = {node.in[0], node.in[1], node.in[2], node.out[0]};
    for (int i = 0; i < 4; ++i) {
      auto l = rowsLaunch((*kernels)[size_t(i)], rows);
      if (!l)
        return opError(instr, l.message());
      CUdeviceptr src = *dst[i];
      *dst[i] = at;
      at += alignUp(bytesOf(slotType(p, widthSlots[i])));
      CUdeviceptr window = *dst[i];
      // The kernel moves width / threads_per_row elements per thread as
      // one vector: a strided source must keep them aligned.
      int64_t vec = rowElems(slotType(p, widthSlots[i])) / l->threadsPerRow,
              bytes = vec * int64_t(dtypeSize(x.dtype));
      if (i < 3 && (strides[i] % vec != 0 || src % CUdeviceptr(bytes) != 0))
        return opError(instr, "the window gather of operand " +
                                  std::to_string(i) +
                                  " needs rows aligned to " +
                                  std::to_string(bytes) + " bytes");
      int64_t stride = strides[i], n = rows;
      const bool scatter = i == 3;
      (scatter ? after : before)
          .push_back([this, l = *l, src, rowsPtr, window, stride, n, scatter,
                      &instr]() mutable -> Status {
            if (scatter) { // out[rows[r]] = the window-order output[r]
              void *params[] = {&window, &rowsPtr, &src, &n};
              return launch(l, params, instr, "the window scatter");
            }
            void *params[] = {&src, &rowsPtr, &window, &stride, &n};
            return launch(l, params, instr, "the window gather");
          });
    }
    qStride = rowElems(x);
    kStride = rowElems(k);
    vStride = rowElems(v);
  }
  if (kNormalized)
    redoFlags = at;
  params.q_row_stride = qStride;
  params.k_row_stride = kStride;
  params.v_row_stride = vStride;
  params.q = reinterpret_cast<const void *>(q);
  params.k = reinterpret_cast<const void *>(kp);
  params.v = reinterpret_cast<const void *>(vp);
  params.o = reinterpret_cast<void *>(o);
  if (onDevice) {
    const Prepared::WindowPartition &w = window->second;
    params.cu_seqlens_q = params.cu_seqlens_k =
        reinterpret_cast<const int32_t *>(address(p, node.in[3]) +
                                          CUdeviceptr(w.rows * 4));
    params.num_seqs = int32_t(w.segments);
    params.seqlen_q = int32_t(longestWindow(w));
  } else {
    params.cu_seqlens_q = params.cu_seqlens_k =
        reinterpret_cast<const int32_t *>(p.slots[root(p, node.in[3])].aux);
    params.num_seqs = int32_t((*segments)->numSegments());
    params.seqlen_q = longestSegment((*segments)->offsets);
  }
  params.seqlen_k = params.seqlen_q;
  return Status::ok();
}

} // namespace trellis
