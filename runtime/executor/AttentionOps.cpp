//===- AttentionOps.cpp - Attention ops of the CPU executor ---------------===//
//
// Softmax, dense attention, and the sparse self- and cross-attention (with
// their optional fused q/k head RMS norms), and the absolute position
// embedding (trellis.ape) the attention blocks take. Self-attention with
// precision = "fp8_e4m3" runs the E4M3 model of the GPU's FP8 kernel
// (ref::attentionFp8 / ref::sparseAttentionFp8), which needs both gammas.
//
//===----------------------------------------------------------------------===//
#include "runtime/executor/CpuOps.h"

namespace trellis {
namespace cpu {
namespace {

Status softmaxOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &x, ctx.in.tensor(0));
  return ctx.single(ref::softmax(x, int(intOr(ctx.instr, "axis", -1))));
}

/// The attention's `precision`: true for "fp8_e4m3" (the one value the
/// dialect allows), false when absent; any other value is an error naming it.
Result<bool> fp8Precision(const Instr &instr) {
  if (!instr.hasAttr("precision"))
    return false;
  TRELLIS_ASSIGN_OR_RETURN(auto &precision, instr.stringAttr("precision"));
  if (precision == "fp8_e4m3")
    return true;
  return Error{instr.op + ": unknown precision '" + precision +
               "' (expected \"fp8_e4m3\")"};
}

/// Operands `first` and `first + 1` of an op whose operandSegmentSizes say
/// both q_gamma and k_gamma are present (at segment indices qg, qg + 1); an
/// error naming the op when one is missing.
Result<std::pair<HostTensor, HostTensor>> fp8Gammas(const OpContext &ctx,
                                                    size_t qg, size_t first) {
  const Instr &instr = ctx.instr;
  bool both = false;
  if (instr.hasAttr("operandSegmentSizes")) {
    TRELLIS_ASSIGN_OR_RETURN(auto &segments,
                             instr.intArrayAttr("operandSegmentSizes"));
    both =
        segments.size() == qg + 2 && segments[qg] == 1 && segments[qg + 1] == 1;
  }
  if (!both)
    return Error{instr.op +
                 ": precision = \"fp8_e4m3\" needs q_gamma and k_gamma (the "
                 "FP8 kernel quantizes the head-RMS-normalized q and k)"};
  TRELLIS_ASSIGN_OR_RETURN(auto &qGamma, ctx.in.tensor(first));
  TRELLIS_ASSIGN_OR_RETURN(auto &kGamma, ctx.in.tensor(first + 1));
  return std::pair<HostTensor, HostTensor>{qGamma, kGamma};
}

/// An FP8 attention's static v scales (v_amax, from a calibration: empty
/// when dynamic), after telling a calibration (ctx.fp8Observer) the
/// largest |v| of each head.
Result<std::vector<float>> fp8VAmax(const OpContext &ctx, const HostTensor &v) {
  if (ctx.fp8Observer) {
    TRELLIS_ASSIGN_OR_RETURN(auto amax, ref::fp8HeadAmax(v));
    (*ctx.fp8Observer)(ctx.instr, amax);
  }
  std::vector<float> vAmax;
  if (ctx.instr.hasAttr("v_amax")) {
    TRELLIS_ASSIGN_OR_RETURN(auto &values, ctx.instr.floatArrayAttr("v_amax"));
    vAmax.assign(values.begin(), values.end());
  }
  return vAmax;
}

Status attentionOp(const OpContext &ctx) {
  const Operands &in = ctx.in;
  const Instr &instr = ctx.instr;
  TRELLIS_ASSIGN_OR_RETURN(auto &q, in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &k, in.tensor(1));
  TRELLIS_ASSIGN_OR_RETURN(auto &v, in.tensor(2));
  TRELLIS_ASSIGN_OR_RETURN(auto &scale, instr.floatAttr("scale"));
  TRELLIS_ASSIGN_OR_RETURN(bool fp8, fp8Precision(instr));
  if (fp8) {
    TRELLIS_ASSIGN_OR_RETURN(auto &gammas, fp8Gammas(ctx, 3, 3));
    TRELLIS_ASSIGN_OR_RETURN(auto &vAmax, fp8VAmax(ctx, v));
    return ctx.single(ref::attentionFp8(q, k, v, gammas.first, gammas.second,
                                        float(scale), vAmax));
  }
  // Optional q_gamma / k_gamma (operandSegmentSizes q, k, v, qg, kg):
  // the head RMS norm, rounded as trellis.head_rms_norm does.
  size_t next = 3;
  if (instr.hasAttr("operandSegmentSizes")) {
    TRELLIS_ASSIGN_OR_RETURN(auto &segments,
                             instr.intArrayAttr("operandSegmentSizes"));
    for (auto [i, t] : {std::pair<size_t, HostTensor *>{3, &q},
                        std::pair<size_t, HostTensor *>{4, &k}}) {
      if (segments.size() != 5 || segments[i] == 0)
        continue;
      TRELLIS_ASSIGN_OR_RETURN(auto &gamma, in.tensor(next++));
      TRELLIS_ASSIGN_OR_RETURN(auto &normed, ref::headRmsNorm(*t, gamma));
      *t = normed;
    }
  }
  return ctx.single(ref::attention(q, k, v, float(scale)));
}

Status sparseAttentionOp(const OpContext &ctx) {
  const Operands &in = ctx.in;
  const Instr &instr = ctx.instr;
  TRELLIS_ASSIGN_OR_RETURN(auto &q, in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &k, in.tensor(1));
  TRELLIS_ASSIGN_OR_RETURN(auto &v, in.tensor(2));
  TRELLIS_ASSIGN_OR_RETURN(auto &s, in.segments(3));
  TRELLIS_ASSIGN_OR_RETURN(auto &scale, instr.floatAttr("scale"));
  TRELLIS_ASSIGN_OR_RETURN(bool fp8, fp8Precision(instr));
  if (fp8) {
    TRELLIS_ASSIGN_OR_RETURN(auto &gammas, fp8Gammas(ctx, 4, 4));
    TRELLIS_ASSIGN_OR_RETURN(auto &vAmax, fp8VAmax(ctx, v));
    return ctx.single(ref::sparseAttentionFp8(
        q, k, v, *s, gammas.first, gammas.second, float(scale), vAmax));
  }
  // Optional q_gamma / k_gamma (operandSegmentSizes q, k, v, segments,
  // qg, kg): the head RMS norm, rounded as trellis.head_rms_norm does.
  size_t next = 4;
  if (instr.hasAttr("operandSegmentSizes")) {
    TRELLIS_ASSIGN_OR_RETURN(auto &segments,
                             instr.intArrayAttr("operandSegmentSizes"));
    for (auto [i, t] : {std::pair<size_t, HostTensor *>{4, &q},
                        std::pair<size_t, HostTensor *>{5, &k}}) {
      if (segments.size() != 6 || segments[i] == 0)
        continue;
      TRELLIS_ASSIGN_OR_RETURN(auto &gamma, in.tensor(next++));
      TRELLIS_ASSIGN_OR_RETURN(auto &normed, ref::headRmsNorm(*t, gamma));
      *t = normed;
    }
  }
  return ctx.single(ref::sparseAttention(q, k, v, *s, float(scale)));
}

Status sparseCrossAttentionOp(const OpContext &ctx) {
  const Operands &in = ctx.in;
  TRELLIS_ASSIGN_OR_RETURN(auto &q, in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &k, in.tensor(1));
  TRELLIS_ASSIGN_OR_RETURN(auto &v, in.tensor(2));
  TRELLIS_ASSIGN_OR_RETURN(auto &c, in.coords(3));
  TRELLIS_ASSIGN_OR_RETURN(auto &scale, ctx.instr.floatAttr("scale"));
  return ctx.single(ref::sparseCrossAttention(q, k, v, *c, float(scale)));
}

Status apeOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &pos, ctx.in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &channels, ctx.instr.intAttr("channels"));
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
