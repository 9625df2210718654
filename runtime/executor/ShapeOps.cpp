//===- ShapeOps.cpp - Shape and layout ops of the CPU executor ------------===//
//
// Reshape, permute, concat, split, broadcast_rows and the dense 3D pixel
// shuffle: ops that move values without arithmetic.
//
//===----------------------------------------------------------------------===//
#include "runtime/executor/CpuOps.h"

#include <algorithm>

namespace trellis {
namespace cpu {
namespace {

Status broadcastRowsOp(const OpContext &ctx) {
  const Operands &in = ctx.in;
  TRELLIS_ASSIGN_OR_RETURN(auto &row, in.tensor(0));
  Shape shape = ctx.instr.types.at(0).shape;
  if (in.size() > 1) {
    // A dynamic result: its leading dimensions are those of `like`.
    TRELLIS_ASSIGN_OR_RETURN(auto &like, in.tensor(1));
    size_t lead = shape.size() - size_t(row.rank()) + 1;
    if (size_t(like.rank()) < lead)
      return Error{"'like' has rank " + std::to_string(like.rank()) +
                   ", fewer than the " + std::to_string(lead) +
                   " leading dimensions of the result"};
    std::copy_n(like.shape().begin(), lead, shape.begin());
  }
  return ctx.single(ref::broadcastRows(row, shape));
}

Status pixelShuffle3dOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &x, ctx.in.tensor(0));
  return ctx.single(ref::pixelShuffle3d(x, intOr(ctx.instr, "factor", 2)));
}

Status reshapeOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &x, ctx.in.tensor(0));
  return ctx.single(ref::reshape(x, ctx.instr.types.at(0).shape));
}

Status permuteOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &x, ctx.in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &perm, ctx.instr.intArrayAttr("perm"));
  return ctx.single(
      ref::permute(x, std::vector<int>(perm.begin(), perm.end())));
}

Status concatOp(const OpContext &ctx) {
  const Operands &in = ctx.in;
  std::vector<HostTensor> parts;
  for (size_t i = 0; i < in.size(); ++i) {
    TRELLIS_ASSIGN_OR_RETURN(auto &p, in.tensor(i));
    parts.push_back(p);
  }
  TRELLIS_ASSIGN_OR_RETURN(auto &axis, ctx.instr.intAttr("axis"));
  return ctx.single(ref::concat(parts, int(axis)));
}

Status splitOp(const OpContext &ctx) {
  const Instr &instr = ctx.instr;
  TRELLIS_ASSIGN_OR_RETURN(auto &x, ctx.in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &axis, instr.intAttr("axis"));
  TRELLIS_ASSIGN_OR_RETURN(auto &sizes, instr.intArrayAttr("sizes"));
  TRELLIS_ASSIGN_OR_RETURN(auto &parts, ref::split(x, int(axis), sizes));
  for (HostTensor &p : parts)
    ctx.out.push_back(std::move(p));
  return Status::ok();
}

} // namespace

void registerShapeOps(OpTable &table) {
  addOp(table, "trellis.broadcast_rows", broadcastRowsOp);
  addOp(table, "trellis.pixel_shuffle_3d", pixelShuffle3dOp);
  addOp(table, "trellis.reshape", reshapeOp);
  addOp(table, "trellis.permute", permuteOp);
  addOp(table, "trellis.concat", concatOp);
  addOp(table, "trellis.split", splitOp);
}

} // namespace cpu
} // namespace trellis
