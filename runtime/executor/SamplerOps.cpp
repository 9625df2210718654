//===- SamplerOps.cpp - Flow-sampler pieces of the CPU executor -----------===//
//
// The single-op pieces of the rectified-flow sampler (spec §3.2-3.3): time
// tables (time_grid, time_row), the timestep embedding, CFG combination and
// the Euler update. trellis.flow_sample itself runs in CpuExecutor.cpp.
//
//===----------------------------------------------------------------------===//
#include "runtime/executor/CpuOps.h"

namespace trellis {
namespace cpu {
namespace {

Status timestepEmbeddingOp(const OpContext &ctx) {
  const Instr &instr = ctx.instr;
  TRELLIS_ASSIGN_OR_RETURN(auto &t, ctx.in.tensor(0));
  return ctx.single(ref::timestepEmbedding(t, intOr(instr, "dim", 256),
                                           floatOr(instr, "max_period", 1e4)));
}

Status timeGridOp(const OpContext &ctx) {
  const Instr &instr = ctx.instr;
  // A run-time override of the sampler's steps applies to the grid of
  // its time tables too (the same entry function).
  TRELLIS_ASSIGN_OR_RETURN(auto &steps, instr.intAttr("steps"));
  TRELLIS_ASSIGN_OR_RETURN(auto &rescale, instr.floatAttr("rescale_t"));
  int64_t run = steps;
  if (auto it = ctx.samplerOverrides.find(ctx.entry);
      it != ctx.samplerOverrides.end())
    run = it->second.steps.value_or(run);
  // The tables' capacity: the result's rows (>= the compiled steps).
  return ctx.single(
      ref::timeGridTable(instr.types.at(0).shape.at(0), run, rescale));
}

Status timeRowOp(const OpContext &ctx) {
  const Operands &in = ctx.in;
  TRELLIS_ASSIGN_OR_RETURN(auto &table, in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &grid, in.tensor(1));
  TRELLIS_ASSIGN_OR_RETURN(auto &tau, in.tensor(2));
  return ctx.single(ref::timeRow(table, grid, tau));
}

Status cfgCombineOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &vc, ctx.in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &vu, ctx.in.tensor(1));
  TRELLIS_ASSIGN_OR_RETURN(auto &w, ctx.instr.floatAttr("strength"));
  return ctx.single(ref::cfgCombine(vc, vu, w));
}

Status eulerUpdateOp(const OpContext &ctx) {
  TRELLIS_ASSIGN_OR_RETURN(auto &x, ctx.in.tensor(0));
  TRELLIS_ASSIGN_OR_RETURN(auto &v, ctx.in.tensor(1));
  TRELLIS_ASSIGN_OR_RETURN(auto &dt, ctx.instr.floatAttr("dt"));
  return ctx.single(ref::eulerUpdate(x, v, dt));
}

} // namespace

void registerSamplerOps(OpTable &table) {
  addOp(table, "trellis.timestep_embedding", timestepEmbeddingOp);
  addOp(table, "trellis.time_grid", timeGridOp);
  addOp(table, "trellis.time_row", timeRowOp);
  addOp(table, "trellis.cfg_combine", cfgCombineOp);
  addOp(table, "trellis.euler_update", eulerUpdateOp);
}

} // namespace cpu
} // namespace trellis
