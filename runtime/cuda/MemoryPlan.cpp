//===- MemoryPlan.cpp - The activation arena's memory plan ----------------===//
//
// Numbers the op tree, computes every value's live range (a value used in a
// sampler loop lives to the end of the loop), makes split results views where
// no copy is needed and places the arena values first-fit; weights and
// constants get their own pools. GpuExecutor::planMemory checks a plan
// without a GPU by an independent sweep over the live ranges.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/GpuExecutorImpl.h"

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace trellis {

std::vector<Body *> gpuexec::inRunOrder(Node &node) {
  std::vector<Body *> order;
  if (node.regions.size() == 3)
    order.push_back(&node.regions[2]);
  for (size_t i = 0; i < node.regions.size() && i < 2; ++i)
    order.push_back(&node.regions[i]);
  return order;
}

void GpuExecutor::Impl::number(Prepared &p, Body &body, int &pos) const {
  for (Node &node : body.nodes) {
    node.pos = pos++;
    for (Body *region : inRunOrder(node))
      number(p, *region, pos);
    node.endPos = pos++;
  }
  body.endPos = pos++;
}

/// Records a use of `slot` at `pos`. A use inside a loop of a value defined
/// before the loop keeps the value alive to the end of the loop.
void GpuExecutor::Impl::use(Prepared &p, int slot, int pos,
                            const std::vector<const Node *> &loops) const {
  int r = root(p, slot);
  int at = pos;
  for (auto it = loops.rbegin(); it != loops.rend(); ++it)
    if (p.slots[r].def < (*it)->pos)
      at = std::max(at, (*it)->endPos);
  p.slots[r].last = std::max(p.slots[r].last, at);
}

void GpuExecutor::Impl::liveness(Prepared &p, Body &body,
                                 std::vector<const Node *> &loops) const {
  for (int a : body.args) {
    int r = root(p, a);
    if (p.slots[r].def < 0)
      p.slots[r].def = loops.empty() ? 0 : loops.back()->pos;
  }
  for (Node &node : body.nodes) {
    for (int s : node.in)
      use(p, s, node.pos, loops);
    for (int s : node.out) {
      int r = root(p, s);
      if (p.slots[r].def < 0)
        p.slots[r].def = node.pos;
      p.slots[r].last = std::max(p.slots[r].last, node.pos);
    }
    for (int s : node.loopSlots) {
      p.slots[s].def = node.pos;
      p.slots[s].last = node.endPos;
    }
    if (node.scratch >= 0) {
      p.slots[node.scratch].def = node.pos;
      p.slots[node.scratch].last = node.pos;
    }
    if (!node.regions.empty()) {
      // The sampler state (the op's result) lives through the loop, and so
      // do the operands of the one-body form, which copies cond (or one of
      // its images) and neg_cond into its condition argument at every step.
      for (int s : node.out)
        p.slots[root(p, s)].last =
            std::max(p.slots[root(p, s)].last, node.endPos);
      if (node.regions.size() == 1)
        for (int s : node.in)
          p.slots[root(p, s)].last =
              std::max(p.slots[root(p, s)].last, node.endPos);
      // The arguments with their own storage (τ; the condition of the
      // one-body form) are written by runSampler at each evaluation, used
      // or not (a branch whose τ-only work moved to the shared region does
      // not read its τ): alive through the loop.
      for (Body &region : node.regions)
        for (int a : region.args)
          if (root(p, a) == a) {
            p.slots[a].def = node.pos;
            p.slots[a].last = std::max(p.slots[a].last, node.endPos);
          }
      loops.push_back(&node);
      for (Body *region : inRunOrder(node))
        liveness(p, *region, loops);
      loops.pop_back();
    }
  }
  for (int y : body.yields)
    use(p, y, body.endPos, loops);
}

/// Makes a split's results views of its operand when no copy is needed:
///  * every dimension before the axis is 1: each result is a contiguous
///    range of the operand (the adaLN modulation chunks);
///  * the packed q/k/v of attention ([B, L, S, H, d] split on axis 2 into
///    size-1 parts, each reshaped to [B, L, H, d] and used only as q, k or v
///    of trellis.attention; or a sparse stage's [N, S, H, d] split on axis 1,
///    reshaped to [N, H, d], of trellis.sparse.attention): strided views the
///    attention kernel reads in place (its row stride is S·H·d).
bool GpuExecutor::Impl::viewSplit(Prepared &p, Node &node,
                                  const SlotUsers &users) const {
  const Instr &instr = *node.instr;
  const ValueType &in = p.slots[node.in[0]].type;
  auto axisAttr = instr.intAttr("axis");
  auto sizes = instr.intArrayAttr("sizes");
  if (!axisAttr || !sizes || !isStatic(in))
    return false;
  int rank = int(in.shape.size());
  int axis = int(*axisAttr < 0 ? *axisAttr + rank : *axisAttr);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d)
    outer *= in.shape[d];
  for (int d = axis + 1; d < rank; ++d)
    inner *= in.shape[d];
  size_t elem = dtypeSize(in.dtype);
  if (outer == 1) {
    int64_t offset = 0;
    for (size_t i = 0; i < node.out.size(); ++i) {
      p.slots[node.out[i]].root = node.in[0];
      p.slots[node.out[i]].viewOffset = size_t(offset * inner) * elem;
      offset += (*sizes)[i];
    }
    return true;
  }
  // Strided q/k/v views.
  bool dense = rank == 5 && axis == 2, sparse = rank == 4 && axis == 1;
  if (!(dense || sparse) || in.dtype != DType::F16)
    return false;
  const char *attention =
      dense ? "trellis.attention" : "trellis.sparse.attention";
  for (size_t i = 0; i < node.out.size(); ++i) {
    if ((*sizes)[i] != 1)
      return false;
    auto range = users.equal_range(node.out[i]);
    if (range.first == range.second)
      return false;
    for (auto it = range.first; it != range.second; ++it) {
      const Node *user = it->second.first;
      if (user->instr->op != "trellis.reshape")
        return false;
      auto uses = users.equal_range(user->out[0]);
      if (uses.first == uses.second)
        return false;
      for (auto u = uses.first; u != uses.second; ++u)
        if (u->second.first->instr->op != attention || u->second.second > 2)
          return false;
    }
  }
  int64_t tokenStride = in.shape[axis] * inner;
  for (size_t i = 0; i < node.out.size(); ++i) {
    p.slots[node.out[i]].root = node.in[0];
    p.slots[node.out[i]].viewOffset = size_t(int64_t(i) * inner) * elem;
    p.slots[node.out[i]].tokenStride = tokenStride;
  }
  return true;
}

namespace {

/// Who uses each slot (for view decisions).
void collectUsers(Body &body, SlotUsers &users) {
  for (Node &node : body.nodes) {
    for (size_t i = 0; i < node.in.size(); ++i)
      users.insert({node.in[i], {&node, int(i)}});
    for (Body &region : node.regions)
      collectUsers(region, users);
  }
}

} // namespace

Status GpuExecutor::Impl::plan(Prepared &p) const {
  // Who uses each slot (for view decisions).
  SlotUsers users;
  collectUsers(p.body, users);
  // Which storage each root uses, and the aliases (views, sampler state).
  for (int a : p.args)
    p.slots[a].where = SlotInfo::Where::Arena;
  TRELLIS_RETURN_IF_ERROR(classify(p, p.body, users));
  markFp8Weights(p, users);
  markFp8E4M3Outputs(p, users);

  int pos = 1;
  number(p, p.body, pos);
  p.positions = pos;
  std::vector<const Node *> loops;
  for (int a : p.args)
    p.slots[root(p, a)].def = 0;
  liveness(p, p.body, loops);
  for (int r : p.results)
    p.slots[root(p, r)].last = pos;

  // The unconditional branch's own storage is lane 1 when the branches run
  // concurrently.
  if (concurrentBranches())
    assignLanes(p, p.body);
  placeArena(p);
  placePools(p);
  return Status::ok();
}

/// A weight whose every reader is an FP8 linear (as its weight operand) is
/// staged in E4M3: half the bytes, and no separate copy to make.
void GpuExecutor::Impl::markFp8Weights(Prepared &p,
                                       const SlotUsers &users) const {
  for (size_t s = 0; s < p.slots.size(); ++s) {
    SlotInfo &info = p.slots[s];
    if (info.where != SlotInfo::Where::Weight || info.root != int(s) ||
        info.type.dtype != DType::F16)
      continue;
    auto [first, last] = users.equal_range(int(s));
    bool fp8 = first != last;
    for (auto it = first; it != last && fp8; ++it)
      fp8 = it->second.second == 1 &&
            it->second.first->instr->op == "trellis.linear" &&
            fp8Precision(*it->second.first->instr);
    info.fp8 = fp8;
  }
}

namespace {
template <typename Fn> void forEachNode(const Body &body, Fn &&fn) {
  for (const Node &node : body.nodes) {
    fn(node);
    for (const Body &region : node.regions)
      forEachNode(region, fn);
  }
}
} // namespace

void GpuExecutor::Impl::markFp8E4M3Outputs(Prepared &p,
                                           const SlotUsers &users) const {
  p.fp8E4M3Outputs.clear();
  if (options.checkOps) // every op's f16 result is compared
    return;
  // The nodes that read storage root `r`, through reshapes (views without a
  // command) — or nullopt when a reader is a function result.
  auto readersOf = [&](int r) {
    std::vector<std::pair<const Node *, int>> readers;
    std::vector<int> pending{r};
    while (!pending.empty()) {
      const int s = pending.back();
      pending.pop_back();
      if (std::count(p.results.begin(), p.results.end(), s))
        return std::optional<decltype(readers)>();
      auto [first, last] = users.equal_range(s);
      for (auto it = first; it != last; ++it) {
        const Node *reader = it->second.first;
        if (reader->instr->op == "trellis.reshape")
          pending.push_back(reader->out[0]);
        else
          readers.push_back(it->second);
      }
    }
    return std::optional(readers);
  };
  forEachNode(p.body, [&](const Node &node) {
    const Instr &instr = *node.instr;
    // Producers that can write E4M3: an FP8 linear without a residual (C
    // in f16 beside an E4M3 D is not fused), the attention kernels where
    // they write the result in place (not through a window scatter), a
    // generated kernel with an E4M3 variant (the fused layer norms in front
    // of the GEMMs; trellis.launch_e4m3 names the result it writes).
    const bool linear = instr.op == "trellis.linear" && fp8Precision(instr) &&
                        node.in.size() <= 3;
    const bool attention = instr.op == "trellis.attention" ||
                           instr.op == "trellis.sparse.cross_attention" ||
                           (instr.op == "trellis.sparse.attention" &&
                            !instr.attrs.contains("trellis.window_rows"));
    size_t result = 0;
    if (auto variant = instr.attrs.find("trellis.launch_e4m3");
        variant != instr.attrs.end() && variant->is_object())
      result = variant->value("result", size_t(0));
    else if ((!linear && !attention) || node.out.size() != 1)
      return;
    if (result >= node.out.size())
      return;
    const int out = node.out[result];
    if (p.slots[out].root != out ||
        p.slots[out].where != SlotInfo::Where::Arena)
      return;
    auto readers = readersOf(out);
    if (!readers || readers->size() != 1)
      return;
    const auto [reader, operand] = readers->front();
    if (operand == 0 && reader->instr->op == "trellis.linear" &&
        fp8Precision(*reader->instr) &&
        reader->instr->hasAttr("activation_amax"))
      p.fp8E4M3Outputs[out] = reader->instr;
  });
}

/// Which storage each root of `body` uses, and the aliases (views, sampler
/// state).
Status GpuExecutor::Impl::classify(Prepared &p, Body &body,
                                   const SlotUsers &users) const {
  for (Node &node : body.nodes)
    TRELLIS_RETURN_IF_ERROR(classifyNode(p, node, users));
  return Status::ok();
}

Status GpuExecutor::Impl::classifyNode(Prepared &p, Node &node,
                                       const SlotUsers &users) const {
  const Instr &instr = *node.instr;
  if (node.bound) {
    for (int s : node.out)
      p.slots[s].where = SlotInfo::Where::Bound;
    return Status::ok();
  }
  if (instr.op == "trellis.reshape") {
    p.slots[node.out[0]].root = node.in[0];
    return Status::ok();
  }
  if (instr.op == "trellis.split" && viewSplit(p, node, users)) {
    node.view = true;
    return Status::ok();
  }
  if (instr.op == "trellis.weight") {
    SlotInfo &s = p.slots[node.out[0]];
    s.where = SlotInfo::Where::Weight;
    auto model = instr.stringAttr("model");
    auto name = instr.stringAttr("name");
    if (!model || !name)
      return opError(instr, "malformed weight op");
    s.weightModel = *model;
    s.weightName = *name;
    return Status::ok();
  }
  if (instr.op == "trellis.constant") {
    p.slots[node.out[0]].where = SlotInfo::Where::Constant;
    return Status::ok();
  }
  if (isHostOp(instr.op)) {
    classifyHostOp(p, node);
    return Status::ok();
  }
  TRELLIS_RETURN_IF_ERROR(classifyDeviceOp(p, node));
  for (Body &region : node.regions)
    TRELLIS_RETURN_IF_ERROR(classify(p, region, users));
  return Status::ok();
}

/// A host op's results stay on the host; occupancy of f32 logits gets the
/// scratch of its device compaction.
void GpuExecutor::Impl::classifyHostOp(Prepared &p, Node &node) const {
  const Instr &instr = *node.instr;
  for (int s : node.out)
    p.slots[s].where = SlotInfo::Where::Host;
  // Occupancy of f32 logits is compacted on the device
  // (deviceOccupancy): block counts, the total, the rows.
  const ValueType &logits = p.slots[node.in[0]].type;
  if (instr.op == "trellis.occupancy" && logits.dtype == DType::F32 &&
      isStatic(logits)) {
    int64_t cells = int64_t(bytesOf(logits) / 4);
    ValueType t;
    t.dtype = DType::U8;
    t.shape = {int64_t(alignUp(size_t((cells + 1023) / 1024) * 4) + kAlign +
                       size_t(cells) * 16)};
    node.scratch = newSlot(p, t);
    p.slots[node.scratch].where = SlotInfo::Where::Arena;
  }
}

/// A device op's results are static arena values; its scratch (attention,
/// the sparse ops, the im2col conv) is one more.
Status GpuExecutor::Impl::classifyDeviceOp(Prepared &p, Node &node) const {
  const Instr &instr = *node.instr;
  for (int s : node.out) {
    if (!isStatic(p.slots[s].type))
      return opError(instr, "produces " + p.slots[s].type.str() +
                                ", which is not a static tensor; the "
                                "GPU backend plans static shapes only");
    p.slots[s].where = SlotInfo::Where::Arena;
  }
  if (instr.op == "trellis.flow_sample")
    TRELLIS_RETURN_IF_ERROR(classifySampler(p, node));
  if (instr.op == "trellis.attention" && attentionGammas(instr).second >= 0)
    addAttentionScratch(p, node);
  if (instr.op == "trellis.linear" && fp8Precision(instr)) {
    // The activation's E4M3 copy, then its amax and dequantize scale.
    ValueType t;
    t.dtype = DType::U8;
    t.shape = {
        int64_t(alignUp(bytesOf(p.slots[node.in[0]].type) / 2) + 2 * kAlign)};
    node.scratch = newSlot(p, t);
    p.slots[node.scratch].where = SlotInfo::Where::Arena;
  }
  if (size_t bytes = p.dynamic ? sparseScratchBytes(p, node) : 0) {
    ValueType t;
    t.dtype = DType::U8;
    t.shape = {int64_t(bytes)};
    node.scratch = newSlot(p, t);
    p.slots[node.scratch].where = SlotInfo::Where::Arena;
  }
  if (instr.op == "trellis.conv3d" && instr.hasAttr("trellis.launch") &&
      !instr.hasAttr("trellis.conv_direct")) {
    auto bytes = instr.intAttr("trellis.scratch_bytes");
    if (!bytes)
      return opError(instr, "the im2col annotation lacks "
                            "trellis.scratch_bytes");
    ValueType t;
    t.dtype = DType::U8;
    t.shape = {*bytes};
    node.scratch = newSlot(p, t);
    p.slots[node.scratch].where = SlotInfo::Where::Arena;
  }
  return Status::ok();
}

/// A sampler: its regions' x arguments are the state (the op's result), the
/// branches' arguments after (x, τ) views of the shared prefix's yields, or,
/// in the one-body form (multi-image: guidance not specialized), the
/// condition argument c, which gets its own storage (runSampler copies cond,
/// one of its images or neg_cond into it); the velocities v_cond, v_uncond
/// get their own slots.
Status GpuExecutor::Impl::classifySampler(Prepared &p, Node &node) const {
  const Instr &instr = *node.instr;
  // Regions' x argument = the sampler state (the op's result).
  const ValueType &state = p.slots[node.out[0]].type;
  // With a shared prefix, the branches' arguments after (x, τ) are its
  // yields (views: the branches read the prefix's storage).
  const Body *shared = node.regions.size() == 3 ? &node.regions[2] : nullptr;
  for (Body &region : node.regions) {
    if (region.args.size() < 2)
      return opError(instr, "malformed sampler body");
    p.slots[region.args[0]].root = node.out[0];
    p.slots[region.args[1]].where = SlotInfo::Where::Arena;
    size_t extra = region.args.size() - 2;
    if (node.regions.size() == 1 && extra == 1) { // (x, τ, c)
      p.slots[region.args[2]].where = SlotInfo::Where::Arena;
      continue;
    }
    if (extra &&
        (!shared || &region == shared || extra != shared->yields.size()))
      return opError(instr, "malformed sampler body");
    for (size_t i = 0; i < extra; ++i)
      p.slots[region.args[2 + i]].root = shared->yields[i];
  }
  node.loopSlots = {newSlot(p, state), newSlot(p, state)};
  for (int s : node.loopSlots)
    p.slots[s].where = SlotInfo::Where::Arena;
  return Status::ok();
}

/// A dense attention's scratch: the head-normalized copies, the redo flags.
void GpuExecutor::Impl::addAttentionScratch(Prepared &p, Node &node) const {
  // k is normalized once into a scratch copy (the fused k prologue
  // repeats the norm in every query tile: bench/attention/README.md).
  // With --attention-norms=prepass q is normalized the same way: the
  // scratch then holds [k | q]. Then the redo flags of the fixed
  // softmax reference (attentionLaunch).
  // An FP8 attention's scratch holds its E4M3 operands instead.
  const ValueType &q = p.slots[node.in[0]].type;
  ValueType t;
  t.dtype = DType::U8;
  if (fp8Precision(*node.instr)) {
    const int64_t b = q.shape.at(0), l = q.shape.at(1);
    t.shape = {int64_t(fp8AttentionScratchBytes(
        b * l, fp8PaddedTokens(std::vector<int64_t>(size_t(b), l)),
        q.shape.at(2), b, l))};
  } else {
    t.shape = {int64_t(
        attentionNormCopiesBytes(p, node) +
        attentionRedoFlagsBytes(q.shape.at(0), q.shape.at(1), q.shape.at(2)))};
  }
  if (t.shape[0] > 0) {
    node.scratch = newSlot(p, t);
    p.slots[node.scratch].where = SlotInfo::Where::Arena;
  }
}

/// Marks the own storage of a branch body of `loop` as lane 1.
void GpuExecutor::Impl::markLane(Prepared &p, Body &body,
                                 const Node &loop) const {
  auto mark = [&](int slot) {
    SlotInfo &info = p.slots[slot];
    if (info.root != slot || info.where != SlotInfo::Where::Arena)
      return;
    info.lane = 1;
    info.laneFrom = loop.pos;
    info.laneTo = loop.endPos;
  };
  for (int a : body.args)
    mark(a);
  for (Node &node : body.nodes) {
    for (int o : node.out)
      mark(o);
    if (node.scratch >= 0)
      mark(node.scratch);
    for (Body &region : node.regions)
      markLane(p, region, loop);
  }
}

/// The unconditional branch's own storage (and v_uncond) of every guided
/// sampler is lane 1 when the branches run concurrently.
void GpuExecutor::Impl::assignLanes(Prepared &p, Body &body) const {
  for (Node &node : body.nodes) {
    if (node.instr->op == "trellis.flow_sample" && node.regions.size() >= 2) {
      markLane(p, node.regions[1], node);
      SlotInfo &vu = p.slots[node.loopSlots[1]];
      vu.lane = 1;
      vu.laneFrom = node.pos;
      vu.laneTo = node.endPos;
    }
    for (Body &region : node.regions)
      assignLanes(p, region);
  }
}

/// First-fit over the arena roots, in order of definition.
void GpuExecutor::Impl::placeArena(Prepared &p) const {
  std::vector<int> order;
  for (size_t s = 0; s < p.slots.size(); ++s)
    if (p.slots[s].root == int(s) &&
        p.slots[s].where == SlotInfo::Where::Arena && p.slots[s].def >= 0)
      order.push_back(int(s));
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return std::make_pair(p.slots[a].def, a) <
           std::make_pair(p.slots[b].def, b);
  });
  std::vector<int> placed;
  for (int s : order) {
    SlotInfo &info = p.slots[s];
    size_t size = alignUp(std::max<size_t>(bytesOf(info.type), 1));
    std::vector<std::pair<size_t, size_t>> busy;
    for (int o : placed) {
      const SlotInfo &other = p.slots[o];
      int aFrom = info.def, aTo = info.last;
      int bFrom = other.def, bTo = other.last;
      if (info.lane != other.lane) { // concurrent: the lane-1 side's loop
        if (info.lane) {
          aFrom = info.laneFrom;
          aTo = info.laneTo;
        } else {
          bFrom = other.laneFrom;
          bTo = other.laneTo;
        }
      }
      if (bTo < aFrom || aTo < bFrom)
        continue;
      busy.push_back(
          {other.offset,
           other.offset + alignUp(std::max<size_t>(bytesOf(other.type), 1))});
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (auto [b, e] : busy) {
      if (offset + size <= b)
        break;
      offset = std::max(offset, e);
    }
    info.offset = offset;
    p.arenaBytes = std::max(p.arenaBytes, offset + size);
    placed.push_back(s);
  }
}

/// Weights (one pool, each tensor once) and constants.
void GpuExecutor::Impl::placePools(Prepared &p) const {
  std::map<std::pair<std::string, std::string>, size_t> weightOffsets;
  for (size_t s = 0; s < p.slots.size(); ++s) {
    SlotInfo &info = p.slots[s];
    if (info.where == SlotInfo::Where::Weight) {
      auto key = std::make_pair(info.weightModel, info.weightName);
      auto [it, inserted] = weightOffsets.try_emplace(key, p.weightBytes);
      if (inserted)
        p.weightBytes +=
            alignUp(info.fp8 ? fp8StoredBytes(info.type) : bytesOf(info.type));
      info.offset = it->second;
    } else if (info.where == SlotInfo::Where::Constant) {
      info.offset = p.constantBytes;
      p.constantBytes += alignUp(std::max<size_t>(bytesOf(info.type), 1));
    }
  }
}

Result<GpuMemoryPlan>
GpuExecutor::planMemory(const Program &program, const std::string &function,
                        GpuOptions options, const std::vector<RtValue> *args) {
  // No driver calls: prepare() only inlines, binds and plans.
  Impl m(program, nullptr, options);
  auto pr = m.prepare(function, args);
  if (!pr)
    return Error{pr.message()};
  Impl::Prepared &p = **pr;
  GpuMemoryPlan plan;
  plan.arenaBytes = p.arenaBytes;
  plan.weightBytes = p.weightBytes;
  plan.constantBytes = p.constantBytes;
  plan.arenaAllocated = capacityFor(p.arenaBytes, p.dynamic);
  if (p.dynamic)
    if (size_t bound = m.layoutBound(p).total)
      plan.coordinateBytes = capacityFor(bound, true);
  for (int r : p.results) {
    plan.resultBytes.push_back(bytesOf(p.slots[r].type));
    plan.resultShapes.push_back(p.slots[r].type.shape);
  }
  // The check, by a sweep over definition order (independent of the
  // first-fit): every pair of arena values with intersecting lifetimes must
  // have disjoint byte ranges inside the arena.
  struct Range {
    int from, to;         // lifetime
    int spanFrom, spanTo; // what other lanes see (the loop, for lane 1)
    size_t begin, end;
    int slot, lane;
  };
  std::vector<Range> ranges;
  for (size_t s = 0; s < p.slots.size(); ++s) {
    const SlotInfo &info = p.slots[s];
    if (info.root != int(s)) {
      ++plan.views;
      continue;
    }
    if (info.where != SlotInfo::Where::Arena || info.def < 0)
      continue;
    ++plan.values;
    size_t bytes = bytesOf(info.type);
    plan.naiveBytes += alignUp(std::max<size_t>(bytes, 1));
    if (info.offset + bytes > p.arenaBytes)
      return Error{"memory plan of '" + function + "': value " +
                   std::to_string(s) + " ends outside the arena"};
    // Stored but never live: something writes it (the sampler writes every
    // region's τ) while the plan gives its bytes to other values.
    if (info.last < info.def)
      return Error{"memory plan of '" + function + "': value " +
                   std::to_string(s) + " has storage but no live range (from " +
                   std::to_string(info.def) + " to " +
                   std::to_string(info.last) + ")"};
    Range r{info.def,    info.last,           info.def, info.last,
            info.offset, info.offset + bytes, int(s),   info.lane};
    if (info.lane) {
      r.spanFrom = std::min(info.def, info.laneFrom);
      r.spanTo = std::max(info.last, info.laneTo);
    }
    ranges.push_back(r);
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range &a, const Range &b) {
    return a.spanFrom < b.spanFrom;
  });
  auto alive = [](const Range &a, const Range &b) {
    // Same lane: the lifetimes; different lanes: the lane-1 value's span.
    int af = a.from, at = a.to, bf = b.from, bt = b.to;
    if (a.lane != b.lane) {
      if (a.lane) {
        af = a.spanFrom;
        at = a.spanTo;
      } else {
        bf = b.spanFrom;
        bt = b.spanTo;
      }
    }
    return !(at < bf || bt < af);
  };
  std::vector<const Range *> active;
  for (const Range &r : ranges) {
    active.erase(
        std::remove_if(active.begin(), active.end(),
                       [&](const Range *a) { return a->spanTo < r.spanFrom; }),
        active.end());
    for (const Range *a : active)
      if (a->begin < r.end && r.begin < a->end && alive(*a, r))
        return Error{"memory plan of '" + function + "': values " +
                     std::to_string(a->slot) + " and " +
                     std::to_string(r.slot) +
                     " are alive together and share memory"};
    active.push_back(&r);
  }
  return plan;
}

} // namespace trellis
