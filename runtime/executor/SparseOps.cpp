//===- SparseOps.cpp - Sparse-structure ops of the CPU executor -----------===//
//
// Coordinate sets (occupancy, from/to tensor, coarsen, subdivide), neighbour
// maps, attention segments, sparse conv and resampling, and the row ops over
// sparse features (gather_rows, segment_mean, batch_broadcast, unique_mean).
//
//===----------------------------------------------------------------------===//
#include "runtime/executor/CpuOps.h"

namespace trellis {
namespace cpu {
namespace {

//===----------------------------------------------------------------------===//
// Coordinate sets, neighbour maps and segments
//===----------------------------------------------------------------------===//

Status occupancyOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &logits, ctx.in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &rows, ref::occupancy(logits));
  return ctx.coordsOut(
      ref::CoordSet::create(rows, logits.dim(2), logits.dim(0)));
}

Status fromTensorOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &t, ctx.in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &res, ctx.instr.intAttr("resolution"));
  return ctx.coordsOut(ref::CoordSet::create(t, res));
}

Status toTensorOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &c, ctx.in.coords(0));
  ctx.out.push_back(c->coords);
  return Status::ok();
}

Status xyzOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &c, ctx.in.coords(0));
  ctx.out.push_back(ref::xyz(*c));
  return Status::ok();
}

Status coarsenOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &c, ctx.in.coords(0));
  return ctx.coordsOut(ref::coarsen(*c, intOr(ctx.instr, "factor", 2)));
}

Status subdivideOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &c, ctx.in.coords(0));
  return ctx.coordsOut(ref::subdivideCoords(*c));
}

Status neighborMapOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &c, ctx.in.coords(0));
  return ctx.single(ref::neighborMap(*c, intOr(ctx.instr, "kernel", 3)));
}

Status batchSegmentsOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &c, ctx.in.coords(0));
  return ctx.segmentsOut(ref::batchSegments(*c));
}

Status windowSegmentsOp(const OpContext &ctx) {
  const Instr &instr = ctx.instr;
  TRELLIS_ASSIGN_OR_RETURN(auto &c, ctx.in.coords(0));
  return ctx.segmentsOut(ref::windowSegments(*c, intOr(instr, "window", 8),
                                             intOr(instr, "shift", 0)));
}

Status parentNeighborMapOp(const OpContext &ctx) {
  const Operands &in = ctx.in;
  TRELLIS_ASSIGN_OR_RETURN(auto &nb, in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &coarse, in.coords(1));
  TRELLIS_ASSIGN_OR_RETURN(auto &fine, in.coords(2));
  return ctx.single(ref::parentNeighborMap(nb, *coarse, *fine));
}

Status parentRowsOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &fine, ctx.in.coords(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &coarse, ctx.in.coords(1));
  return ctx.single(ref::parentRows(*fine, *coarse));
}

Status childRowsOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &fine, ctx.in.coords(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &coarse, ctx.in.coords(1));
  TRELLIS_ASSIGN_OR_RETURN(auto &csr, ref::childRows(*fine, *coarse));
  ctx.out.push_back(csr.first);
  ctx.out.push_back(csr.second);
  return Status::ok();
}

Status batchIndexOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &c, ctx.in.coords(0));
  ctx.out.push_back(ref::batchIndex(*c));
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Sparse features
//===----------------------------------------------------------------------===//

Status sparseConv3dOp(const OpContext &ctx) {
  const Operands &in = ctx.in;
  TRELLIS_ASSIGN_OR_RETURN(auto &feats, in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &w, in.tensor(1));
  // Optional operands: bias (tensor) and neighbour map (the last one,
  // present for k > 1). The types tell them apart: a neighbour map is
  // [N, k³] i32.
  std::optional<HostTensor> bias, nbmap;
  for (size_t i = 2; i < in.size(); ++i) {
    TRELLIS_ASSIGN_OR_RETURN(auto &t, in.tensor(i));
    if (t.dtype() == DType::I32)
      nbmap = t;
    else
      bias = t;
  }
  if (w.rank() == 5 && w.dim(1) == 1 && w.dim(2) == 1 && w.dim(3) == 1)
    return ctx.single(ref::sparseConv1x1(feats, w, bias ? &*bias : nullptr));
  if (!nbmap)
    return Error{"a 3x3x3 sparse conv needs a neighbour map"};
  return ctx.single(
      ref::sparseConv3d(feats, *nbmap, w, bias ? &*bias : nullptr));
}

Status downsampleOp(const OpContext &ctx) {
  const Operands &in = ctx.in;
  TRELLIS_ASSIGN_OR_RETURN(auto &f, in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &fine, in.coords(1));
  TRELLIS_ASSIGN_OR_RETURN(auto &coarse, in.coords(2));
  return ctx.single(ref::sparseDownsample(f, *fine, *coarse));
}

Status upsampleOp(const OpContext &ctx) {
  const Operands &in = ctx.in;
  TRELLIS_ASSIGN_OR_RETURN(auto &f, in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &coarse, in.coords(1));
  TRELLIS_ASSIGN_OR_RETURN(auto &fine, in.coords(2));
  return ctx.single(ref::sparseUpsample(f, *coarse, *fine));
}

Status subdivideFeaturesOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &f, ctx.in.tensor(0));
  return ctx.single(ref::subdivideFeats(f));
}

Status gatherRowsOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &x, ctx.in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &index, ctx.in.tensor(1));
  return ctx.single(ref::gatherRows(x, index));
}

Status segmentMeanOp(const OpContext &ctx) {
  const Operands &in = ctx.in;
  TRELLIS_ASSIGN_OR_RETURN(auto &x, in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &offsets, in.tensor(1));
  TRELLIS_ASSIGN_OR_RETURN(auto &rows, in.tensor(2));
  return ctx.single(
      ref::segmentMean(x, offsets, rows, intOr(ctx.instr, "extra_count", 0)));
}

Status batchBroadcastOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &v, ctx.in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &c, ctx.in.coords(1));
  return ctx.single(ref::batchBroadcast(v, *c));
}

Status uniqueMeanOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &keys, ctx.in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &values, ctx.in.tensor(1));
  TRELLIS_ASSIGN_OR_RETURN(auto &r, ref::uniqueMean(keys, values));
  ctx.out.push_back(r.keys);
  ctx.out.push_back(r.means);
  return Status::ok();
}

} // namespace

void registerSparseOps(OpTable &table) {
  addOp(table, "trellis.occupancy", occupancyOp);
  addOp(table, "trellis.sparse.from_tensor", fromTensorOp);
  addOp(table, "trellis.sparse.to_tensor", toTensorOp);
  addOp(table, "trellis.sparse.xyz", xyzOp);
  addOp(table, "trellis.sparse.coarsen", coarsenOp);
  addOp(table, "trellis.sparse.subdivide", subdivideOp);
  addOp(table, "trellis.sparse.neighbor_map", neighborMapOp);
  addOp(table, "trellis.sparse.batch_segments", batchSegmentsOp);
  addOp(table, "trellis.sparse.window_segments", windowSegmentsOp);
  addOp(table, "trellis.sparse.parent_neighbor_map", parentNeighborMapOp);
  addOp(table, "trellis.sparse.parent_rows", parentRowsOp);
  addOp(table, "trellis.sparse.child_rows", childRowsOp);
  addOp(table, "trellis.sparse.batch_index", batchIndexOp);
  addOp(table, "trellis.sparse.conv3d", sparseConv3dOp);
  addOp(table, "trellis.sparse.downsample", downsampleOp);
  addOp(table, "trellis.sparse.upsample", upsampleOp);
  addOp(table, "trellis.sparse.subdivide_features", subdivideFeaturesOp);
  addOp(table, "trellis.gather_rows", gatherRowsOp);
  addOp(table, "trellis.segment_mean", segmentMeanOp);
  addOp(table, "trellis.sparse.batch_broadcast", batchBroadcastOp);
  addOp(table, "trellis.sparse.unique_mean", uniqueMeanOp);
}

} // namespace cpu
} // namespace trellis
