//===- AttentionCommands.cpp - Attention and head-norm commands -----------===//
//
// The launches of the attention kernels (runtime/kernels/attention.h): the
// configuration for a head dim and shape, the fixed softmax reference and its
// redo flags, the head RMS-norm pre-pass and the sizes of their scratch, and
// the command of the dense trellis.attention op.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/GpuExecutorImpl.h"

#include "runtime/kernels/attention.h"

#include <map>
#include <string>

namespace trellis {

Result<std::function<Status()>>
GpuExecutor::Impl::headNormCommand(CUdeviceptr x, int64_t rowStride,
                                   int64_t headStride, CUdeviceptr y,
                                   int64_t rows, int64_t heads, int64_t d,
                                   CUdeviceptr gamma, const Instr &instr) {
  static const std::map<int64_t, const char *> kernels = {
      {64, "trellis_head_rmsnorm_d64"},
      {80, "trellis_head_rmsnorm_d80"},
      {128, "trellis_head_rmsnorm_d128"}};
  auto name = kernels.find(d);
  if (name == kernels.end())
    return opError(instr,
                   "no head RMS-norm kernel for head dim " + std::to_string(d));
  auto f = runtimeKernel(name->second);
  if (!f)
    return opError(instr, f.message());
  TrellisHeadRmsNormParams np{};
  np.x = reinterpret_cast<const void *>(x);
  np.y = reinterpret_cast<void *>(y);
  np.x_row_stride = rowStride;
  np.x_head_stride = headStride;
  np.y_row_stride = heads * d; // the normalized copy is dense
  np.y_head_stride = d;
  np.gamma = reinterpret_cast<const float *>(gamma);
  np.rows = int32_t(rows);
  np.heads = int32_t(heads);
  np.head_dim = int32_t(d);
  unsigned blocks = trellis_head_rmsnorm_grid(&np);
  return std::function<Status()>([this, nf = *f, np, blocks,
                                  &instr]() mutable -> Status {
    if (np.rows == 0)
      return Status::ok();
    void *args[1] = {&np};
    CUresult r =
        api->cuLaunchKernel(nf, blocks, 1, 1, TRELLIS_HEAD_RMSNORM_THREADS, 1,
                            1, 0, stream, args, nullptr);
    if (r != CUDA_SUCCESS)
      return opError(instr, "launching the head RMS norm: " + api->describe(r));
    return Status::ok();
  });
}

Result<CUfunction>
GpuExecutor::Impl::attentionFunction(const TrellisAttnConfig &config) {
  std::lock_guard<std::mutex> lock(functionsMutex);
  CUfunction &f = functions[config.name];
  if (!f) {
    TRELLIS_RETURN_IF_ERROR(
        check(api->cuModuleGetFunction(&f, attention, config.name),
              "cuModuleGetFunction"));
    if (config.smem_bytes > 48 * 1024)
      api->cuFuncSetAttribute(f,
                              CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                              config.smem_bytes);
  }
  return f;
}

size_t GpuExecutor::Impl::attentionNormCopiesBytes(const Prepared &p,
                                                   const Node &node) const {
  if (options.attentionNorms == "fused")
    return 0;
  return alignUp(bytesOf(p.slots[node.in[1]].type)) +
         (options.attentionNorms == "prepass"
              ? alignUp(bytesOf(p.slots[node.in[0]].type))
              : 0);
}

size_t GpuExecutor::Impl::attentionRedoFlagsBytes(int64_t seqs, int64_t rows,
                                                  int64_t heads) const {
  if (options.attentionSoftmax != "fixed")
    return 0;
  // Every configuration has >= 64 rows per CTA.
  return alignUp(size_t((rows + 63) / 64 * seqs * heads) * sizeof(int32_t));
}

Result<const TrellisAttnConfig *>
GpuExecutor::Impl::attentionConfigFor(const TrellisAttnParams &params,
                                      const Instr &instr) const {
  if (!options.attentionConfig.empty()) { // a benchmark's override
    const TrellisAttnConfig *c =
        trellis_attn_find(options.attentionConfig.c_str());
    if (!c || c->family != attentionFamily || c->head_dim != params.head_dim)
      return opError(instr, "the attention configuration '" +
                                options.attentionConfig +
                                "' is not one of this device's kernels for "
                                "head dim " +
                                std::to_string(params.head_dim));
    return c;
  }
  // The tiling phase's list (trellis-tile-attention): this family's entries,
  // the short-sequence default first.
  auto tiles = instr.attrs.find("tiles");
  if (tiles == instr.attrs.end() || !tiles->is_array())
    return opError(instr, "the attention op has no `tiles` (the tiling "
                          "phase's trellis-tile-attention sets them)");
  std::vector<const TrellisAttnConfig *> candidates;
  for (const auto &name : *tiles) {
    const TrellisAttnConfig *c =
        name.is_string() ? trellis_attn_find(name.get<std::string>().c_str())
                         : nullptr;
    if (!c)
      return opError(instr, "`tiles` names an attention kernel this runtime "
                            "does not have: " +
                                name.dump());
    if (c->family == attentionFamily && c->head_dim == params.head_dim)
      candidates.push_back(c);
  }
  if (candidates.empty())
    return opError(instr, "`tiles` lists no attention kernel of sm_" +
                              std::to_string(attentionFamily) +
                              " for head dim " +
                              std::to_string(params.head_dim));
  return trellis_attn_choose(candidates.data(), int(candidates.size()),
                             params.seqlen_q, params.num_seqs, params.heads,
                             multiprocessors);
}

Result<std::function<Status()>>
GpuExecutor::Impl::attentionLaunch(TrellisAttnParams params, bool kNormalized,
                                   CUdeviceptr redoFlags, const Instr &instr) {
  if (!attention)
    return opError(instr, "the bundle has no attention kernels for sm_" +
                              std::to_string(sm));
  auto chosen = attentionConfigFor(params, instr);
  if (!chosen)
    return chosen.takeError();
  const TrellisAttnConfig *config = *chosen;
  // The fixed softmax reference (attention_sm90.cuh, FIXED_REF): its kernel,
  // then the online one (`config`) for the CTAs it flags.
  const TrellisAttnConfig *fixed = nullptr;
  if (kNormalized && options.attentionSoftmax == "fixed" && redoFlags &&
      !(config->variant & TRELLIS_ATTN_SM90_FIXED_REF))
    fixed = trellis_attn_softmax_twin(config, 1);
  if (config->variant & TRELLIS_ATTN_SM90_FIXED_REF) { // named by the option
    fixed = config;
    config = trellis_attn_softmax_twin(fixed, 0);
  }
  if (fixed) {
    if (!redoFlags || size_t(trellis_attn_redo_flags_count(fixed, &params)) *
                              sizeof(int32_t) >
                          attentionRedoFlagsBytes(
                              params.num_seqs, params.seqlen_q, params.heads))
      return opError(instr, std::string("no room for the redo flags of ") +
                                fixed->name);
    params.redo_flags = reinterpret_cast<int32_t *>(redoFlags);
  }
  struct Launch {
    CUfunction f = nullptr;
    unsigned grid0 = 0, grid1 = 0, block0 = 0, smem = 0;
  };
  Launch launches[2];
  int count = 0;
  for (const TrellisAttnConfig *c : {fixed, config}) {
    if (!c)
      continue;
    if (const char *why = trellis_attn_check(c, &params))
      return opError(instr, std::string("attention parameters: ") + why);
    auto f = attentionFunction(*c);
    if (!f)
      return opError(instr, f.message());
    unsigned grid[3], block[3];
    trellis_attn_grid(c, &params, grid, block);
    launches[count++] = {*f, grid[0], grid[1], block[0],
                         unsigned(c->smem_bytes)};
  }
  return std::function<Status()>(
      [this, params, launches, count, &instr]() mutable -> Status {
        for (int i = 0; i < count; ++i) {
          const Launch &l = launches[i];
          void *args[1] = {&params};
          CUresult r = api->cuLaunchKernel(l.f, l.grid0, l.grid1, 1, l.block0,
                                           1, 1, l.smem, stream, args, nullptr);
          if (r != CUDA_SUCCESS)
            return opError(instr, "launching attention: " + api->describe(r));
        }
        return Status::ok();
      });
}

/// trellis.attention: the attention kernels over [B, L, H, d] (strided views
/// of a packed qkv in place), after the head norms of q and k.
Status GpuExecutor::Impl::buildAttentionCommand(Prepared &p, Node &node) {
  const Instr &instr = *node.instr;
  const ValueType &q = slotType(p, node.in[0]), &k = slotType(p, node.in[1]);
  if (q.dtype != DType::F16 || q.shape.size() != 4)
    return opError(instr, "the attention kernel takes fp16 [B, L, H, d]");
  auto scale = instr.floatAttr("scale");
  if (!scale)
    return opError(instr, scale.message());
  // Optional head-norm gains (trellis-form-attention).
  auto [qIndex, kIndex] = attentionGammas(instr);
  int qGamma = qIndex >= 0 ? node.in.at(qIndex) : -1;
  int kGamma = kIndex >= 0 ? node.in.at(kIndex) : -1;
  int64_t heads = q.shape[2], d = q.shape[3];
  TrellisAttnParams params{};
  params.q = reinterpret_cast<const void *>(address(p, node.in[0]));
  params.k = reinterpret_cast<const void *>(address(p, node.in[1]));
  params.v = reinterpret_cast<const void *>(address(p, node.in[2]));
  params.o = reinterpret_cast<void *>(address(p, node.out[0]));
  // Dense [B, L, H, d], or strided views into a packed qkv.
  auto strides = [&](int slot, int64_t &b, int64_t &r, int64_t &h) {
    const ValueType &t = slotType(p, slot);
    h = t.shape[3];
    r = tokenStride(p, slot);
    if (r == 0)
      r = t.shape[2] * t.shape[3];
    b = t.shape[1] * r;
  };
  strides(node.in[0], params.q_batch_stride, params.q_row_stride,
          params.q_head_stride);
  strides(node.in[1], params.k_batch_stride, params.k_row_stride,
          params.k_head_stride);
  strides(node.in[2], params.v_batch_stride, params.v_row_stride,
          params.v_head_stride);
  strides(node.out[0], params.o_batch_stride, params.o_row_stride,
          params.o_head_stride);
  if (k.shape[0] == 1 && q.shape[0] > 1) // one context for the batch
    params.k_batch_stride = params.v_batch_stride = 0;
  if (fp8Precision(instr)) { // FP8: own pre-pass, kernel and scratch
    if (k.shape != q.shape)
      return opError(instr, "FP8 attention is self-attention: q and k must "
                            "have one shape");
    Fp8AttentionCall call;
    call.views = params;
    call.views.num_seqs = int32_t(q.shape[0]);
    call.views.heads = int32_t(heads);
    call.views.seqlen_q = call.views.seqlen_k = int32_t(q.shape[1]);
    call.views.softmax_scale = float(*scale);
    call.views.o_quantize = fp8OutputQuantize(p, node.out[0]);
    call.qGamma = qGamma >= 0
                      ? reinterpret_cast<const float *>(address(p, qGamma))
                      : nullptr;
    call.kGamma = kGamma >= 0
                      ? reinterpret_cast<const float *>(address(p, kGamma))
                      : nullptr;
    call.headDim = d;
    call.tokens = q.shape[0] * q.shape[1];
    call.paddedTokens =
        fp8PaddedTokens(std::vector<int64_t>(size_t(q.shape[0]), q.shape[1]));
    call.scratch = node.scratch >= 0 ? address(p, node.scratch) : 0;
    auto command = fp8AttentionCommand(p, call, instr);
    if (!command)
      return command.takeError();
    node.command = *command;
    return Status::ok();
  }
  params.q_gamma = qGamma >= 0
                       ? reinterpret_cast<const float *>(address(p, qGamma))
                       : nullptr;
  std::function<Status()> normalizeK, normalizeQ;
  if (kGamma >= 0 && options.attentionNorms != "fused") {
    // k into the dense scratch copy [B, Lk, H, d].
    auto norm = headNormCommand(address(p, node.in[1]), params.k_row_stride,
                                params.k_head_stride, address(p, node.scratch),
                                k.shape[0] * k.shape[1], heads, d,
                                address(p, kGamma), instr);
    if (!norm)
      return norm.takeError();
    normalizeK = *norm;
    params.k = reinterpret_cast<const void *>(address(p, node.scratch));
    params.k_row_stride = heads * d;
    params.k_head_stride = d;
    params.k_batch_stride =
        k.shape[0] == 1 && q.shape[0] > 1 ? 0 : k.shape[1] * heads * d;
    params.k_gamma = nullptr;
    if (qGamma >= 0 && options.attentionNorms == "prepass") {
      CUdeviceptr qCopy = address(p, node.scratch) + alignUp(bytesOf(k));
      auto qNorm = headNormCommand(
          address(p, node.in[0]), params.q_row_stride, params.q_head_stride,
          qCopy, q.shape[0] * q.shape[1], heads, d, address(p, qGamma), instr);
      if (!qNorm)
        return qNorm.takeError();
      normalizeQ = *qNorm;
      params.q = reinterpret_cast<const void *>(qCopy);
      params.q_row_stride = heads * d;
      params.q_head_stride = d;
      params.q_batch_stride = q.shape[1] * heads * d;
      params.q_gamma = nullptr;
    }
  }
  if (kGamma >= 0 && options.attentionNorms == "fused")
    params.k_gamma = reinterpret_cast<const float *>(address(p, kGamma));
  else if (kGamma >= 0) // applied by the pre-pass: bounds the logits
    params.k_norm_gamma = reinterpret_cast<const float *>(address(p, kGamma));
  params.num_seqs = int32_t(q.shape[0]);
  params.heads = int32_t(heads);
  params.seqlen_q = int32_t(q.shape[1]);
  params.seqlen_k = int32_t(k.shape[1]);
  params.head_dim = int32_t(d);
  params.softmax_scale = float(*scale);
  params.o_quantize = fp8OutputQuantize(p, node.out[0]);
  // The redo flags follow the normalized copies in the scratch (plan()).
  CUdeviceptr redoFlags = 0;
  if (node.scratch >= 0 &&
      attentionRedoFlagsBytes(q.shape[0], q.shape[1], heads) > 0)
    redoFlags = address(p, node.scratch) + attentionNormCopiesBytes(p, node);
  auto attend = attentionLaunch(params, kGamma >= 0, redoFlags, instr);
  if (!attend)
    return attend.takeError();
  node.command = [normalizeK, normalizeQ,
                  attend = *attend]() mutable -> Status {
    for (auto *norm : {&normalizeK, &normalizeQ})
      if (*norm)
        TRELLIS_RETURN_IF_ERROR((*norm)());
    return attend();
  };
  return Status::ok();
}

} // namespace trellis
