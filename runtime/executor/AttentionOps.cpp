//===- AttentionOps.cpp - Attention ops of the CPU executor ---------------===//
//
// Softmax, dense attention, and the sparse self- and cross-attention (with
// their optional fused q/k head RMS norms), and the absolute position
// embedding (trellis.ape) the attention blocks take.
//
//===----------------------------------------------------------------------===//
#include "CpuOps.h"

namespace trellis {
namespace cpu {
namespace {

Status softmaxOp(const OpContext &ctx) {
  TRY(x, ctx.in.tensor(0));
  return ctx.single(ref::softmax(x, int(intOr(ctx.instr, "axis", -1))));
}

Status attentionOp(const OpContext &ctx) {
  const Operands &in = ctx.in;
  const Instr &instr = ctx.instr;
  TRY(q, in.tensor(0));
  TRY(k, in.tensor(1));
  TRY(v, in.tensor(2));
  TRY(scale, instr.floatAttr("scale"));
  // Optional q_gamma / k_gamma (operandSegmentSizes q, k, v, qg, kg):
  // the head RMS norm, rounded as trellis.head_rms_norm does.
  size_t next = 3;
  if (instr.hasAttr("operandSegmentSizes")) {
    TRY(segments, instr.intArrayAttr("operandSegmentSizes"));
    for (auto [i, t] : {std::pair<size_t, HostTensor *>{3, &q},
                        std::pair<size_t, HostTensor *>{4, &k}}) {
      if (segments.size() != 5 || segments[i] == 0)
        continue;
      TRY(gamma, in.tensor(next++));
      TRY(normed, ref::headRmsNorm(*t, gamma));
      *t = normed;
    }
  }
  return ctx.single(ref::attention(q, k, v, float(scale)));
}

Status sparseAttentionOp(const OpContext &ctx) {
  const Operands &in = ctx.in;
  const Instr &instr = ctx.instr;
  TRY(q, in.tensor(0));
  TRY(k, in.tensor(1));
  TRY(v, in.tensor(2));
  TRY(s, in.segments(3));
  TRY(scale, instr.floatAttr("scale"));
  // Optional q_gamma / k_gamma (operandSegmentSizes q, k, v, segments,
  // qg, kg): the head RMS norm, rounded as trellis.head_rms_norm does.
  size_t next = 4;
  if (instr.hasAttr("operandSegmentSizes")) {
    TRY(segments, instr.intArrayAttr("operandSegmentSizes"));
    for (auto [i, t] : {std::pair<size_t, HostTensor *>{4, &q},
                        std::pair<size_t, HostTensor *>{5, &k}}) {
      if (segments.size() != 6 || segments[i] == 0)
        continue;
      TRY(gamma, in.tensor(next++));
      TRY(normed, ref::headRmsNorm(*t, gamma));
      *t = normed;
    }
  }
  return ctx.single(ref::sparseAttention(q, k, v, *s, float(scale)));
}

Status sparseCrossAttentionOp(const OpContext &ctx) {
  const Operands &in = ctx.in;
  TRY(q, in.tensor(0));
  TRY(k, in.tensor(1));
  TRY(v, in.tensor(2));
  TRY(c, in.coords(3));
  TRY(scale, ctx.instr.floatAttr("scale"));
  return ctx.single(ref::sparseCrossAttention(q, k, v, *c, float(scale)));
}

Status apeOp(const OpContext &ctx) {
  TRY(pos, ctx.in.tensor(0));
  TRY(channels, ctx.instr.intAttr("channels"));
  return ctx.single(ref::ape(pos, channels));
}

} // namespace

void registerAttentionOps(OpTable &table) {
  addOp(table, "trellis.softmax", softmaxOp);
  addOp(table, "trellis.attention", attentionOp);
  addOp(table, "trellis.sparse.attention", sparseAttentionOp);
  addOp(table, "trellis.sparse.cross_attention", sparseCrossAttentionOp);
  addOp(table, "trellis.ape", apeOp);
}

} // namespace cpu
} // namespace trellis
