//===- TileAttention.cpp - Attention tile configurations ------------------===//
//
// trellis-tile-attention: the tiling phase decides which attention kernels
// (runtime/kernels/attention.h: block of query rows, key tile, pipeline
// stages) each attention op may run, and writes them into the op's `tiles`;
// the runtime launches only what is listed. The choice is the one the
// runtime used to make by itself, from the same functions of attention.h.
//
//===----------------------------------------------------------------------===//
#include "lib/Transforms/Passes.h"
#include "runtime/kernels/attention.h"

#include "mlir/IR/Builders.h"

#include <algorithm>

namespace mlir::trellis {
#define GEN_PASS_DEF_TRELLISTILEATTENTION
#include "dialect/Passes.h.inc"
} // namespace mlir::trellis

using namespace mlir;
using namespace mlir::trellis;

namespace {

/// What the choice depends on: the head dim, the sequences × heads of one
/// call, and the query rows of the longest sequence (static, or a bound).
struct AttentionShape {
  int64_t headDim = 0, seqs = 1, heads = 1;
  int64_t rows = 0;  ///< static query rows, or 0 when known at run time
  int64_t bound = 0; ///< an upper bound of the rows when `rows` is 0
};

AttentionShape shapeOf(Operation *op) {
  auto q = cast<RankedTensorType>(op->getOperand(0).getType());
  AttentionShape s;
  s.headDim = q.getShape().back();
  if (isa<AttentionOp>(op)) { // q [B, Lq, H, d]
    s.seqs = q.getDimSize(0);
    s.heads = q.getDimSize(2);
    if (q.isDynamicDim(1))
      s.bound = getDimUpperBound(q, 1);
    else
      s.rows = q.getDimSize(1);
    return s;
  }
  // q [N, H, d]: groups of rows known at run time.
  s.heads = q.getDimSize(1);
  if (auto sparse = dyn_cast<SparseAttentionOp>(op))
    s.bound = sparse.getSegments().getType().getMaxLength();
  else
    s.bound = cast<SparseCrossAttentionOp>(op).getCoords().getType().getBound();
  return s;
}

/// The kernels `op` may run in `family`, the default first; empty when the
/// family has none for the head dim.
SmallVector<const TrellisAttnConfig *>
tilesFor(int family, const AttentionShape &s, int64_t multiprocessors) {
  const TrellisAttnConfig *byDefault =
      trellis_attn_default_config(family, int(s.headDim));
  if (!byDefault)
    return {};
  SmallVector<const TrellisAttnConfig *> candidates{byDefault};
  for (int i = 0; i < trellis_attn_num_configs; ++i) {
    const TrellisAttnConfig *c = &trellis_attn_configs[i];
    if (c->family == family && c->head_dim == s.headDim &&
        trellis_attn_long_sequence_rate(c) > 0)
      candidates.push_back(c);
  }
  // The fewer rows per CTA first: the wave model keeps the first of a tie.
  std::stable_sort(candidates.begin() + 1, candidates.end(),
                   [](const TrellisAttnConfig *a, const TrellisAttnConfig *b) {
                     return a->block_m < b->block_m;
                   });
  if (s.rows > 0) // static: decided here
    return {trellis_attn_choose(candidates.data(), int(candidates.size()),
                                s.rows, s.seqs, s.heads, int(multiprocessors))};
  if (s.bound < TRELLIS_ATTN_LONG_SEQUENCE_ROWS) // never long: the default
    return {byDefault};
  return candidates;
}

struct TileAttentionPass
    : trellis::impl::TrellisTileAttentionBase<TileAttentionPass> {
  using TrellisTileAttentionBase::TrellisTileAttentionBase;

  void runOnOperation() override {
    static constexpr struct {
      int family;
      const char *name;
    } kFamilies[] = {{TRELLIS_ATTN_SM90A, "sm_90a"},
                     {TRELLIS_ATTN_SM80, "compute_80"},
                     {TRELLIS_ATTN_SM75, "compute_75"}};
    if (multiprocessors < 1) {
      getOperation()->emitError("trellis-tile-attention: multiprocessors "
                                "must be >= 1, found ")
          << int64_t(multiprocessors);
      return signalPassFailure();
    }
    Builder b(&getContext());
    WalkResult walk = getOperation().walk([&](Operation *op) {
      if (!isa<AttentionOp, SparseAttentionOp, SparseCrossAttentionOp>(op))
        return WalkResult::advance();
      AttentionShape shape = shapeOf(op);
      SmallVector<Attribute> names;
      for (const auto &f : kFamilies) {
        auto tiles = tilesFor(f.family, shape, multiprocessors);
        if (tiles.empty()) {
          op->emitOpError()
              << "cannot run on the GPU: no attention kernel "
                 "of the "
              << f.name << " family for head dim " << shape.headDim
              << " (runtime/kernels/attention.h has 64, 80 "
                 "and 128)";
          return WalkResult::interrupt();
        }
        for (const TrellisAttnConfig *c : tiles)
          names.push_back(b.getStringAttr(c->name));
      }
      op->setAttr("tiles", b.getArrayAttr(names));
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
