//===- SparseBinding.cpp - Binds a sparse stage's coordinates -------------===//
//
// The first half of a sparse stage (docs/design/gpu-backend.md, "Sparse
// stages"): bind() evaluates the coordinate values (coords, segments, the
// resampling index arrays, everything computed from coordinates alone) on the
// host with the CPU reference and gives every dynamic tensor its row count,
// so that plan() sees static shapes; uploadBound() copies them to the device
// in one pool.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/GpuExecutorImpl.h"

#include "runtime/cuda/SparseSupport.h"
#include "trellis/Reference/Parallel.h"

#include "trellis/Runtime/CpuExecutor.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace trellis {

namespace {

/// Rows per chunk of the group norm's partial sums.
constexpr int64_t kGroupNormChunkRows = 1024;

/// The group norm's chunks: int32 [K, 3] (sample, first row, end row), each
/// inside one sample, in row order.
HostTensor groupNormChunks(const ref::CoordSet &c) {
  std::vector<int32_t> rows;
  for (int64_t b = 0; b < c.batchSize(); ++b)
    for (int64_t r = c.offsets[size_t(b)]; r < c.offsets[size_t(b + 1)];
         r += kGroupNormChunkRows)
      rows.insert(rows.end(), {int32_t(b), int32_t(r),
                               int32_t(std::min(r + kGroupNormChunkRows,
                                                c.offsets[size_t(b + 1)]))});
  HostTensor t(DType::I32, {int64_t(rows.size() / 3), 3});
  std::copy(rows.begin(), rows.end(), t.mutableData<int32_t>());
  return t;
}

/// The index of `slot` among the function's arguments, or -1.
int argIndex(const Prepared &p, int slot) {
  for (size_t i = 0; i < p.args.size(); ++i)
    if (p.args[i] == slot)
      return int(i);
  return -1;
}

/// The number of rows of any slot with a concrete value or shape.
int64_t rowsOf(const Prepared &p, int slot) {
  const ValueType &t = p.slots[slot].type;
  const RtValue &v = p.boundValues[slot];
  if (auto *c = std::get_if<CoordsPtr>(&v); c && *c)
    return (*c)->size();
  if (auto *s = std::get_if<SegmentsPtr>(&v); s && *s)
    return (*s)->rows.numel();
  if (auto *h = std::get_if<HostTensor>(&v); h && h->rank() > 0)
    return h->dim(0);
  return t.shape.empty() ? 1 : t.shape[0];
}

/// The bound coordinate set of `slot`, if it has one.
const ref::CoordSet *coordsOf(const Prepared &p, int slot) {
  auto *c = std::get_if<CoordsPtr>(&p.boundValues[slot]);
  return c ? c->get() : nullptr;
}

} // namespace

//===----------------------------------------------------------------------===//
// Binding
//===----------------------------------------------------------------------===//

/// What bind() knows while it walks a sparse stage: the argument slots, the
/// slots it has bound, and the constants (evaluated when a bound op reads
/// them).
struct GpuExecutor::Impl::BindState {
  std::vector<char> isArg, isBound;
  std::map<int, const Instr *> constants;
};

Status GpuExecutor::Impl::bind(Prepared &p,
                               const std::vector<RtValue> &args) const {
  const std::string where = "'" + p.name + "'";
  if (args.size() != p.args.size())
    return Error{where + " takes " + std::to_string(p.args.size()) +
                 " arguments, " + std::to_string(args.size()) + " given"};
  p.boundValues.assign(p.slots.size(), RtValue{});
  p.bindingKey.assign(args.size(), std::nullopt);
  p.windows.clear();
  BindState st;
  st.isArg.assign(p.slots.size(), 0);
  st.isBound.assign(p.slots.size(), 0);
  std::vector<char> &isArg = st.isArg;
  for (size_t i = 0; i < args.size(); ++i) {
    const HostTensor *t = std::get_if<HostTensor>(&args[i]);
    ValueType &type = p.slots[p.args[i]].type;
    std::string what = "argument " + std::to_string(i) + " of " + where;
    if (!t)
      return Error{what + ": expected " + type.str() + ", found a non-tensor"};
    bool ok = t->dtype() == type.dtype && t->rank() == int(type.shape.size());
    size_t dyn = 0;
    for (size_t d = 0; ok && d < type.shape.size(); ++d) {
      if (type.shape[d] >= 0) {
        ok = t->dim(int(d)) == type.shape[d];
      } else {
        int64_t bound = dyn < type.bounds.size() ? type.bounds[dyn] : -1;
        ++dyn;
        if (bound >= 0 && t->dim(int(d)) > bound)
          return Error{what + ": " + std::to_string(t->dim(int(d))) +
                       " rows exceed the compiled bound of " +
                       std::to_string(bound)};
      }
    }
    if (!ok)
      return Error{what + ": expected " + type.str() + ", found " +
                   shapeToString(t->shape()) + " " +
                   std::string(dtypeName(t->dtype()))};
    type.shape = t->shape();
    isArg[p.args[i]] = 1;
    p.boundValues[p.args[i]] = *t;
  }
  // One walk in program order: evaluates the bound ops, then gives the
  // device ops' dynamic results their row counts.
  return bindBody(p, p.body, st);
}

/// The host value of a bound, argument or constant slot (a constant is
/// evaluated on first use).
Result<RtValue> GpuExecutor::Impl::hostValue(Prepared &p, BindState &st,
                                             int slot) const {
  std::vector<char> &isArg = st.isArg, &isBound = st.isBound;
  std::map<int, const Instr *> &constants = st.constants;
  if (isBound[slot] || isArg[slot])
    return p.boundValues[slot];
  auto c = constants.find(slot);
  if (c == constants.end())
    return Error{"internal: slot " + std::to_string(slot) +
                 " has no host value"};
  auto v = CpuExecutor::evalOp(program, *c->second, {});
  if (!v)
    return v.takeError();
  p.boundValues[slot] = (*v)[0];
  return (*v)[0];
}

Status GpuExecutor::Impl::bindBody(Prepared &p, Body &body,
                                   BindState &st) const {
  for (Node &node : body.nodes)
    TRELLIS_RETURN_IF_ERROR(bindNode(p, node, st));
  return Status::ok();
}

Status GpuExecutor::Impl::bindNode(Prepared &p, Node &node,
                                   BindState &st) const {
  std::vector<char> &isArg = st.isArg, &isBound = st.isBound;
  std::map<int, const Instr *> &constants = st.constants;
  const Instr &instr = *node.instr;
  const std::string &op = instr.op;
  if (op == "trellis.constant") {
    constants[node.out[0]] = &instr;
    return Status::ok();
  }
  // Coordinate ops (features of the coordinates alone): their class says so
  // (the HostBound trait). Neighbour maps, the largest coordinate
  // structures, are built on the device instead: a device op whose result is
  // an int32 [N, k³] tensor.
  bool coordinateOp = instr.opClass == OpClass::HostBound;
  bool anyBound = false, allHost = !node.in.empty();
  for (int s : node.in) {
    anyBound |= isBound[s] != 0;
    allHost &= isBound[s] || constants.count(s) || (coordinateOp && isArg[s]);
  }
  // (Neighbour maps and window partitions are built on the device.)
  if (node.regions.empty() && op != "trellis.sparse.neighbor_map" &&
      op != "trellis.sparse.window_segments" &&
      (coordinateOp || (allHost && anyBound)))
    return bindHostOp(p, node, st, allHost);
  if (op == "trellis.sparse.neighbor_map")
    return bindNeighborMap(p, node);
  if (op == "trellis.sparse.window_segments")
    return bindWindowSegments(p, node);
  if (op == "trellis.sparse.parent_neighbor_map")
    return bindParentNeighborMap(p, node);
  if (op == "trellis.flow_sample") {
    // The sampler state and the bodies' x argument: the noise's shape.
    p.slots[node.out[0]].type = p.slots[node.in[0]].type;
    for (Body &region : node.regions)
      if (!region.args.empty())
        p.slots[region.args[0]].type = p.slots[node.in[0]].type;
  }
  // A sampler's shared prefix first: the branches' arguments after
  // (x, τ) are its yields, of their row counts.
  for (Body *region : inRunOrder(node)) {
    TRELLIS_RETURN_IF_ERROR(bindBody(p, *region, st));
    if (node.regions.size() == 3 && region == &node.regions[2])
      for (int b = 0; b < 2; ++b)
        for (size_t i = 2; i < node.regions[b].args.size(); ++i)
          p.slots[node.regions[b].args[i]].type =
              p.slots[region->yields.at(i - 2)].type;
  }
  TRELLIS_RETURN_IF_ERROR(bindResultRows(p, node));
  if (op == "trellis.sparse.group_norm") {
    const ref::CoordSet *c = coordsOf(p, node.in[1]);
    if (!c)
      return opError(instr, "its coordinate set was not bound");
    node.auxHost = {groupNormChunks(*c)};
    return Status::ok();
  }
  return Status::ok();
}

/// An op evaluated on the host at binding (a coordinate op, or one of bound
/// values only): its results become bound values.
Status GpuExecutor::Impl::bindHostOp(Prepared &p, Node &node, BindState &st,
                                     bool allHost) const {
  const Instr &instr = *node.instr;
  std::vector<char> &isBound = st.isBound;
  if (!allHost)
    return opError(instr, "computes coordinates from values that are "
                          "not coordinates; the GPU backend needs them "
                          "on the host before the stage runs");
  std::vector<RtValue> inputs;
  for (int s : node.in) {
    auto v = hostValue(p, st, s);
    if (!v)
      return opError(instr, v.message());
    inputs.push_back(*v);
    if (int a = argIndex(p, s); a >= 0)
      p.bindingKey[size_t(a)] = std::get<HostTensor>(p.boundValues[s]);
  }
  auto results = CpuExecutor::evalOp(program, instr, std::move(inputs));
  if (!results)
    return opError(instr, results.message());
  node.bound = true;
  for (size_t i = 0; i < node.out.size(); ++i) {
    int s = node.out[i];
    isBound[s] = 1;
    p.boundValues[s] = (*results)[i];
    if (auto *t = std::get_if<HostTensor>(&p.boundValues[s]))
      p.slots[s].type.shape = t->shape();
  }
  return Status::ok();
}

/// trellis.sparse.neighbor_map, built on the device: its result's shape.
Status GpuExecutor::Impl::bindNeighborMap(Prepared &p, Node &node) const {
  const Instr &instr = *node.instr;
  // Built on the device: an int32 [N, k³] tensor of the arena.
  const ref::CoordSet *c = coordsOf(p, node.in[0]);
  auto k = instr.intAttr("kernel");
  if (!c || !k)
    return opError(instr, "its coordinate set was not bound");
  ValueType &t = p.slots[node.out[0]].type;
  t.kind = ValueType::Kind::Tensor;
  t.dtype = DType::I32;
  t.shape = {c->size(), *k * *k * *k};
  p.slots[node.out[0]].dynamicRows = false;
  return Status::ok();
}

/// trellis.sparse.window_segments, computed on the device: its window grid
/// and segment count from the bound coordinates, and its result's shape.
Status GpuExecutor::Impl::bindWindowSegments(Prepared &p, Node &node) const {
  const Instr &instr = *node.instr;
  // Computed on the device (the command below); fixed here from the
  // bound coordinates: the window grid (n_a from the maxima over all
  // rows, spec §7.1 step 2) and so the segment count.
  const ref::CoordSet *c = coordsOf(p, node.in[0]);
  auto window = instr.intAttr("window"), shift = instr.intAttr("shift");
  if (!c)
    return opError(instr, "its coordinate set was not bound");
  Prepared::WindowPartition w;
  w.window = int32_t(window ? *window : 8);
  w.shift = int32_t(shift ? *shift : 0);
  w.rows = c->size();
  const std::array<int64_t, 3> grid = ref::windowGrid(*c, w.window, w.shift);
  for (int a = 0; a < 3; ++a)
    w.n[a] = int32_t(grid[size_t(a)]);
  w.segments = std::max<int64_t>(c->batchSize(), 1) * w.n[0] * w.n[1] * w.n[2];
  w.blocks = int32_t((w.rows + 255) / 256);
  if (w.segments > INT32_MAX / std::max<int32_t>(w.blocks, 1))
    return opError(instr, "too many windows for the device partition");
  p.windows[node.out[0]] = w;
  ValueType &t = p.slots[node.out[0]].type;
  t.kind = ValueType::Kind::Tensor;
  t.dtype = DType::I32;
  t.shape = {w.rows + w.segments + 1};
  p.slots[node.out[0]].dynamicRows = false;
  return Status::ok();
}

/// trellis.sparse.parent_neighbor_map, built on the device: the fine row ->
/// coarse row index array it reads, and its result's shape.
Status GpuExecutor::Impl::bindParentNeighborMap(Prepared &p, Node &node) const {
  const Instr &instr = *node.instr;
  // Built on the device from the (device-built) map of the fine set and
  // the fine row -> coarse row index array computed here.
  const ref::CoordSet *coarse = coordsOf(p, node.in[1]);
  const ref::CoordSet *fine = coordsOf(p, node.in[2]);
  if (!coarse || !fine)
    return opError(instr, "its coordinate sets were not bound");
  auto parents = ref::parentRows(*fine, *coarse);
  if (!parents)
    return opError(instr, parents.message());
  node.auxHost = {*parents};
  ValueType &t = p.slots[node.out[0]].type;
  t = p.slots[node.in[0]].type;
  p.slots[node.out[0]].dynamicRows = false;
  return Status::ok();
}

/// The row counts of a device op's dynamic results, from its operands'.
Status GpuExecutor::Impl::bindResultRows(Prepared &p, Node &node) const {
  const Instr &instr = *node.instr;
  const std::string &op = instr.op;
  for (int out : node.out) {
    SlotInfo &info = p.slots[out];
    if (!info.dynamicRows || op == "trellis.flow_sample")
      continue;
    int64_t rows = -1;
    if (op == "trellis.reshape") {
      int64_t inner = rowElems(info.type);
      int64_t total = 1;
      for (int64_t d : p.slots[node.in[0]].type.shape)
        total *= d;
      if (inner > 0 && total % inner == 0)
        rows = total / inner;
    } else if (op == "trellis.gather_rows") {
      rows = rowsOf(p, node.in.at(1));
    } else if (op == "trellis.segment_mean") {
      rows = rowsOf(p, node.in.at(1)) - 1;
    } else if (op == "trellis.sparse.subdivide_features") {
      rows = 8 * rowsOf(p, node.in.at(0));
    } else if (op == "trellis.sparse.conv3d" && node.in.size() > 2 &&
               p.slots[node.in.back()].type.dtype == DType::I32) {
      // The neighbour map's rows (the fine set's, for a parent map whose
      // entries are coarse rows of the features).
      rows = p.slots[node.in.back()].type.shape.at(0);
    } else {
      for (int s : node.in)
        if (p.slots[s].dynamicRows) {
          rows = rowsOf(p, s);
          break;
        }
    }
    if (rows < 0)
      return opError(instr, "cannot tell the row count of its result " +
                                info.type.str());
    if (!info.type.bounds.empty() && rows > info.type.bounds[0])
      return opError(instr, std::to_string(rows) +
                                " rows exceed the compiled bound of " +
                                std::to_string(info.type.bounds[0]));
    info.type.shape[0] = rows;
  }
  return Status::ok();
}

GpuExecutor::Impl::BoundLayout
GpuExecutor::Impl::layoutBound(Prepared &p) const {
  BoundLayout l;
  auto &pieces = l.pieces;
  auto &keep = l.keep;
  auto &slotPieces = l.slotPieces;
  auto &nodePieces = l.nodePieces;
  size_t &total = l.total;
  auto add = [&](const void *data, size_t bytes) {
    pieces.push_back({data, bytes, total});
    total += alignUp(std::max<size_t>(bytes, 1));
    return pieces.size() - 1;
  };
  slotPieces.assign(p.slots.size(), {SIZE_MAX, SIZE_MAX});
  for (size_t s = 0; s < p.slots.size(); ++s) {
    if (p.slots[s].where != SlotInfo::Where::Bound || p.slots[s].root != int(s))
      continue;
    const RtValue &v = p.boundValues[s];
    if (auto *t = std::get_if<HostTensor>(&v)) {
      slotPieces[s].first = add(t->raw(), t->nbytes());
    } else if (auto *c = std::get_if<CoordsPtr>(&v); c && *c) {
      slotPieces[s].first = add((*c)->coords.raw(), (*c)->coords.nbytes());
      keep.push_back(offsetsOf(**c));
      slotPieces[s].second = add(keep.back().raw(), keep.back().nbytes());
    } else if (auto *g = std::get_if<SegmentsPtr>(&v); g && *g) {
      slotPieces[s].first = add((*g)->rows.raw(), (*g)->rows.nbytes());
      slotPieces[s].second = add((*g)->offsets.raw(), (*g)->offsets.nbytes());
    }
  }
  std::function<void(Body &)> collect = [&](Body &body) {
    for (Node &node : body.nodes) {
      node.aux.clear(); // a re-upload (after lowMemory released the pool)
      for (const HostTensor &t : node.auxHost)
        nodePieces.push_back({&node, add(t.raw(), t.nbytes())});
      for (Body &region : node.regions)
        collect(region);
    }
  };
  collect(p.body);
  return l;
}

Status GpuExecutor::Impl::uploadBound(Prepared &p) {
  if (!p.dynamic)
    return Status::ok();
  BoundLayout layout = layoutBound(p);
  const auto &pieces = layout.pieces;
  const size_t total = layout.total;
  if (total == 0)
    return Status::ok();
  // (The pieces point into the tensors' heap storage, which stays where it is
  // when `keep` grows.) They are gathered into pinned memory (kept by the
  // executor): a pageable copy of a decoder's ~60 MB of positional
  // embeddings cost ~40 ms per new voxel set.
  auto host = pinnedStaging(total);
  if (!host)
    return Error{host.message()};
  char *staging = static_cast<char *>(*host);
  ref::parallelFor(int64_t(pieces.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      if (pieces[size_t(i)].bytes)
        std::memcpy(staging + pieces[size_t(i)].offset, pieces[size_t(i)].data,
                    pieces[size_t(i)].bytes);
  });
  if (p.boundPool && p.boundCapacity < total)
    deallocate(p.boundPool);
  if (!p.boundPool) {
    size_t capacity = capacityFor(total, p.dynamic);
    TRELLIS_RETURN_IF_ERROR(
        allocate(p.boundPool, capacity, "the coordinates of '" + p.name + "'"));
    p.boundCapacity = capacity;
  }
  p.boundBytes = total;
  TRELLIS_RETURN_IF_ERROR(
      check(api->cuMemcpyHtoDAsync(p.boundPool, staging, total, setupStream),
            "cuMemcpyHtoDAsync (coordinates)"));
  TRELLIS_RETURN_IF_ERROR(
      check(api->cuStreamSynchronize(setupStream), "the GPU stream"));
  for (size_t s = 0; s < p.slots.size(); ++s) {
    auto [first, second] = layout.slotPieces[s];
    if (first != SIZE_MAX)
      p.slots[s].ptr = p.boundPool + pieces[first].offset;
    if (second != SIZE_MAX)
      p.slots[s].aux = p.boundPool + pieces[second].offset;
  }
  for (auto &[node, piece] : layout.nodePieces)
    node->aux.push_back(p.boundPool + pieces[piece].offset);
  return Status::ok();
}

} // namespace trellis
