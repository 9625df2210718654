//===- SparseCommands.cpp - The sparse stages on the GPU -------------------===//
//
// The part of the CUDA executor that runs functions over voxel sets whose size
// is known only at call time (docs/design/gpu-backend.md, "Sparse stages"):
//   * bind(): the coordinate values (coords, segments, the resampling index
//     arrays of trellis.sparse.parent_rows / child_rows / batch_index, and
//     everything computed from coordinates alone, e.g. the APE) are evaluated
//     on the host with the CPU reference; every dynamic tensor gets its
//     concrete row count, so that plan() sees static shapes;
//   * uploadBound(): those values (and the group norms' chunk lists) go to
//     the device once, in one pool;
//   * buildSparseCommand(): the sparse feature ops as commands over the
//     runtime kernels (runtime/kernels/sparse.cuh, the attention kernels) and
//     cuBLASLt.
//
//===----------------------------------------------------------------------===//
#include "GpuExecutorImpl.h"

#include "runtime/kernels/attention.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace trellis {

using SegmentsPtr = std::shared_ptr<const ref::Segments>;

namespace {

/// Ops evaluated on the host when a sparse function is bound: they compute
/// coordinate structures, or features of the coordinates alone. (Neighbour
/// maps, the largest of them, are built on the device instead: a device op
/// whose result is an int32 [N, k³] tensor.)
bool isCoordinateOp(const std::string &op) {
  static const char *const ops[] = {"trellis.sparse.from_tensor",
                                    "trellis.sparse.coarsen",
                                    "trellis.sparse.subdivide",
                                    "trellis.sparse.batch_segments",
                                    "trellis.sparse.xyz",
                                    "trellis.sparse.to_tensor",
                                    "trellis.sparse.parent_rows",
                                    "trellis.sparse.child_rows",
                                    "trellis.sparse.batch_index",
                                    "trellis.ape"};
  return std::find(std::begin(ops), std::end(ops), op) != std::end(ops);
}

/// Whether the taps-first order's f32 products [k³, rows of x, Cout] fit the
/// scratch its tap-sum kernel was generated for (the conv's
/// trellis.taps_scratch_bytes).
bool convTapsFit(const Instr &conv, const ValueType &x, const ValueType &w) {
  int64_t kvol = w.shape[1] * w.shape[2] * w.shape[3];
  auto cap = conv.intAttr("trellis.taps_scratch_bytes");
  return cap && kvol * x.shape[0] * w.shape[0] * int64_t(sizeof(float)) <= *cap;
}

/// The tiles of the implicit-GEMM conv (runtime/kernels/sparse_conv_sm90.cuh):
/// rows BM, output channels BN, input channels per chunk KC, ring stages.
struct ConvTiles {
  int bm = 0, bn = 0, kc = 0, stages = 0;
  explicit operator bool() const { return bn > 0; }
  std::string kernel() const {
    return "trellis_sparse_conv_implicit_m" + std::to_string(bm) + "_n" +
           std::to_string(bn) + "_k" + std::to_string(kc) + "_s" +
           std::to_string(stages) + "_f16";
  }
  /// Dynamic shared memory: 1 KiB of alignment slack, the stages of (BM + BN)
  /// rows of KC halves, then the CTA's BM · kvol neighbour-map rows (the
  /// kernel's layout).
  unsigned smem(int64_t kvol) const {
    return unsigned(1024 + stages * (bm + bn) * kc * 2 + bm * kvol * 4);
  }
};

/// The implicit-GEMM conv's tiles for this conv, or none for the gather +
/// cuBLASLt paths. Chosen for narrow convs (Cout <= 256, Cin <= 1024: the mesh
/// decoder's subdivided levels, the SLat flow's 128-channel convs), where the
/// gathered rows [N, k³·Cin] cost more device-memory traffic than the product
/// itself; the wide convs stay on cuBLASLt (the implicit kernel measured
/// slower there: the SLat flow's 16 convs of one step 6.6 ms against 4.0).
/// The widest output tile that divides Cout (32: the tiny preset's convs,
/// which --gpu-check-ops compares with the CPU reference); 64-channel chunks
/// (128-byte rows, half the chunks and barriers of 32-channel ones, 3 stages so
/// that two CTAs share an SM) when Cin allows. TRELLIS_SPARSE_CONV=gather turns
/// the kernel off and TRELLIS_SPARSE_CONV_TILES=mBM_nBN_kKC_sST picks a built
/// configuration (A/B measurements, bench/slat_gpu/conv_ab.sh). `sm90a`: the
/// runtime module is the sm_90a one (the only one with the kernel). The
/// scratch plan and the command both ask here, so an implicit conv gets no
/// gather scratch.
ConvTiles convImplicitTiles(const ValueType &x, const ValueType &w,
                            bool sm90a) {
  if (!sm90a)
    return {};
  if (const char *mode = std::getenv("TRELLIS_SPARSE_CONV");
      mode && std::string(mode) == "gather")
    return {};
  int64_t cout = w.shape[0], cin = w.shape[4];
  if (x.dtype != DType::F16 || cin % 32 != 0 || cin > 1024 || cout > 256)
    return {};
  if (const char *forced = std::getenv("TRELLIS_SPARSE_CONV_TILES")) {
    ConvTiles t;
    if (std::sscanf(forced, "m%d_n%d_k%d_s%d", &t.bm, &t.bn, &t.kc,
                    &t.stages) == 4 &&
        cout % t.bn == 0 && cin % t.kc == 0)
      return t;
  }
  for (int bn : {192, 128, 96, 64, 32})
    if (cout % bn == 0)
      return cin % 64 == 0 ? ConvTiles{128, bn, 64, 3}
                           : ConvTiles{128, bn, 32, 4};
  return {};
}

/// How a 3×3×3 sparse conv runs on the GPU:
///   * taps first: the k³ products x·W_oᵀ of every row of x first (f32, 27
///     strided-batched GEMMs), then each output row sums its active
///     neighbours' products. Taken when x has fewer rows than the output (a
///     parent neighbour map: the products are formed on the coarse rows,
///     trellis-sink-upsample), and for narrow outputs (Cout < Cin / 2) that
///     the implicit kernel does not take: f32 [k³, N, Cout] is then smaller
///     than the gathered rows [N, k³·Cin] it replaces;
///   * implicit GEMM (convImplicitTiles);
///   * otherwise the neighbour rows are gathered (im2col order, in chunks)
///     and multiplied by cuBLASLt.
/// The gather and the tap sum are generated kernels (the codegen's
/// emitSparseConvKernels: the op's trellis.launch and trellis.tap_sum).
struct ConvPlan {
  enum class Path { Gather, TapsFirst, Implicit } path = Path::Gather;
  ConvTiles tiles;
};
ConvPlan convPlan(const Instr &conv, const ValueType &x, const ValueType &w,
                  int64_t outRows, bool sm90a) {
  const bool tapsFit = convTapsFit(conv, x, w);
  if (tapsFit && x.shape[0] < outRows)
    return {ConvPlan::Path::TapsFirst, {}};
  if (ConvTiles tiles = convImplicitTiles(x, w, sm90a))
    return {ConvPlan::Path::Implicit, tiles};
  if (tapsFit && 2 * w.shape[0] < w.shape[4])
    return {ConvPlan::Path::TapsFirst, {}};
  return {};
}

int64_t rowElems(const ValueType &t) {
  int64_t n = 1;
  for (size_t d = 1; d < t.shape.size(); ++d)
    n *= t.shape[d];
  return n;
}

const char *typeSuffix(DType t) { return t == DType::F16 ? "f16" : "f32"; }

bool isIdentity(const ref::Segments &s) {
  const int32_t *rows = s.rows.data<int32_t>();
  for (int64_t i = 0; i < s.rows.numel(); ++i)
    if (rows[i] != i)
      return false;
  return true;
}

} // namespace

std::shared_ptr<const ref::Segments>
GpuExecutor::Impl::segmentsFromDevice(const HostTensor &t, int64_t rows) {
  auto seg = std::make_shared<ref::Segments>();
  seg->rows = HostTensor(DType::I32, {rows});
  const int32_t *d = t.data<int32_t>();
  std::memcpy(seg->rows.mutableRaw(), d, size_t(rows) * 4);
  std::vector<int32_t> offsets{0};
  for (int64_t i = rows + 1; i < t.numel(); ++i)
    if (d[i] != offsets.back())
      offsets.push_back(d[i]);
  seg->offsets = HostTensor(DType::I32, {int64_t(offsets.size())});
  std::memcpy(seg->offsets.mutableRaw(), offsets.data(), offsets.size() * 4);
  return seg;
}

namespace {

int32_t longestSegment(const HostTensor &offsets) {
  const int32_t *o = offsets.data<int32_t>();
  int32_t longest = 0;
  for (int64_t i = 0; i + 1 < offsets.numel(); ++i)
    longest = std::max(longest, o[i + 1] - o[i]);
  return longest;
}

/// The longest segment of a window partition: a full window, or all rows
/// (the attention grid covers it; shorter and empty windows end early).
int64_t longestWindow(const GpuExecutor::Impl::Prepared::WindowPartition &w) {
  return std::min<int64_t>(int64_t(w.window) * w.window * w.window,
                           std::max<int64_t>(w.rows, 1));
}

/// Rows per chunk of the group norm's partial sums.
constexpr int64_t kGroupNormChunkRows = 1024;

/// The group norm's chunks: int32 [K, 3] (sample, first row, end row), each
/// inside one sample, in row order.
HostTensor groupNormChunks(const ref::CoordSet &c) {
  std::vector<int32_t> rows;
  for (int64_t b = 0; b < c.batchSize(); ++b)
    for (int64_t r = c.offsets[size_t(b)]; r < c.offsets[size_t(b + 1)];
         r += kGroupNormChunkRows)
      rows.insert(rows.end(),
                  {int32_t(b), int32_t(r),
                   int32_t(std::min(r + kGroupNormChunkRows,
                                    c.offsets[size_t(b + 1)]))});
  HostTensor t(DType::I32, {int64_t(rows.size() / 3), 3});
  std::copy(rows.begin(), rows.end(), t.mutableData<int32_t>());
  return t;
}

HostTensor offsetsOf(const ref::CoordSet &c) {
  HostTensor t(DType::I32, {int64_t(c.offsets.size())});
  for (size_t i = 0; i < c.offsets.size(); ++i)
    t.mutableData<int32_t>()[i] = int32_t(c.offsets[i]);
  return t;
}

} // namespace

//===----------------------------------------------------------------------===//
// Binding
//===----------------------------------------------------------------------===//

Status GpuExecutor::Impl::bind(Prepared &p, const std::vector<RtValue> &args) {
  const std::string where = "'" + p.name + "'";
  if (args.size() != p.args.size())
    return Error{where + " takes " + std::to_string(p.args.size()) +
                 " arguments, " + std::to_string(args.size()) + " given"};
  p.boundValues.assign(p.slots.size(), RtValue{});
  p.bindingKey.assign(args.size(), std::nullopt);
  p.windows.clear();
  std::vector<char> isArg(p.slots.size(), 0), isBound(p.slots.size(), 0);
  std::map<int, const Instr *> constants;
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
  auto argIndex = [&](int slot) {
    for (size_t i = 0; i < p.args.size(); ++i)
      if (p.args[i] == slot)
        return int(i);
    return -1;
  };
  auto hostValue = [&](int slot) -> Result<RtValue> {
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
  };
  // The number of rows of any slot with a concrete value or shape.
  auto rowsOf = [&](int slot) -> int64_t {
    const ValueType &t = p.slots[slot].type;
    const RtValue &v = p.boundValues[slot];
    if (auto *c = std::get_if<CoordsPtr>(&v); c && *c)
      return (*c)->size();
    if (auto *s = std::get_if<SegmentsPtr>(&v); s && *s)
      return (*s)->rows.numel();
    if (auto *h = std::get_if<HostTensor>(&v); h && h->rank() > 0)
      return h->dim(0);
    return t.shape.empty() ? 1 : t.shape[0];
  };
  auto coordsOf = [&](int slot) -> const ref::CoordSet * {
    auto *c = std::get_if<CoordsPtr>(&p.boundValues[slot]);
    return c ? c->get() : nullptr;
  };

  // One walk in program order: evaluates the bound ops, then gives the
  // device ops' dynamic results their row counts.
  std::function<Status(Body &)> walk = [&](Body &body) -> Status {
    for (Node &node : body.nodes) {
      const Instr &instr = *node.instr;
      const std::string &op = instr.op;
      if (op == "trellis.constant") {
        constants[node.out[0]] = &instr;
        continue;
      }
      bool coordinateOp = isCoordinateOp(op);
      bool anyBound = false, allHost = !node.in.empty();
      for (int s : node.in) {
        anyBound |= isBound[s] != 0;
        allHost &= isBound[s] || constants.count(s) ||
                   (coordinateOp && isArg[s]);
      }
      // (Neighbour maps and window partitions are built on the device.)
      if (node.regions.empty() && op != "trellis.weight" &&
          op != "trellis.sparse.neighbor_map" &&
          op != "trellis.sparse.window_segments" &&
          (coordinateOp || (allHost && anyBound))) {
        if (!allHost)
          return opError(instr, "computes coordinates from values that are "
                                "not coordinates; the GPU backend needs them "
                                "on the host before the stage runs");
        std::vector<RtValue> inputs;
        for (int s : node.in) {
          auto v = hostValue(s);
          if (!v)
            return opError(instr, v.message());
          inputs.push_back(*v);
          if (int a = argIndex(s); a >= 0)
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
        continue;
      }
      if (op == "trellis.sparse.neighbor_map") {
        // Built on the device: an int32 [N, k³] tensor of the arena.
        const ref::CoordSet *c = coordsOf(node.in[0]);
        auto k = instr.intAttr("kernel");
        if (!c || !k)
          return opError(instr, "its coordinate set was not bound");
        ValueType &t = p.slots[node.out[0]].type;
        t.kind = ValueType::Kind::Tensor;
        t.dtype = DType::I32;
        t.shape = {c->size(), *k * *k * *k};
        p.slots[node.out[0]].dynamicRows = false;
        continue;
      }
      if (op == "trellis.sparse.window_segments") {
        // Computed on the device (the command below); fixed here from the
        // bound coordinates: the window grid (n_a from the maxima over all
        // rows, spec §7.1 step 2) and so the segment count.
        const ref::CoordSet *c = coordsOf(node.in[0]);
        auto window = instr.intAttr("window"), shift = instr.intAttr("shift");
        if (!c)
          return opError(instr, "its coordinate set was not bound");
        Prepared::WindowPartition w;
        w.window = int32_t(window ? *window : 8);
        w.shift = int32_t(shift ? *shift : 0);
        w.rows = c->size();
        const std::array<int64_t, 3> grid =
            ref::windowGrid(*c, w.window, w.shift);
        for (int a = 0; a < 3; ++a)
          w.n[a] = int32_t(grid[size_t(a)]);
        w.segments =
            std::max<int64_t>(c->batchSize(), 1) * w.n[0] * w.n[1] * w.n[2];
        w.blocks = int32_t((w.rows + 255) / 256);
        if (w.segments > INT32_MAX / std::max<int32_t>(w.blocks, 1))
          return opError(instr, "too many windows for the device partition");
        p.windows[node.out[0]] = w;
        ValueType &t = p.slots[node.out[0]].type;
        t.kind = ValueType::Kind::Tensor;
        t.dtype = DType::I32;
        t.shape = {w.rows + w.segments + 1};
        p.slots[node.out[0]].dynamicRows = false;
        continue;
      }
      if (op == "trellis.sparse.parent_neighbor_map") {
        // Built on the device from the (device-built) map of the fine set and
        // the fine row -> coarse row index array computed here.
        const ref::CoordSet *coarse = coordsOf(node.in[1]);
        const ref::CoordSet *fine = coordsOf(node.in[2]);
        if (!coarse || !fine)
          return opError(instr, "its coordinate sets were not bound");
        auto parents = ref::parentRows(*fine, *coarse);
        if (!parents)
          return opError(instr, parents.message());
        node.auxHost = {*parents};
        ValueType &t = p.slots[node.out[0]].type;
        t = p.slots[node.in[0]].type;
        p.slots[node.out[0]].dynamicRows = false;
        continue;
      }
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
        if (Status s = walk(*region); !s)
          return s;
        if (node.regions.size() == 3 && region == &node.regions[2])
          for (int b = 0; b < 2; ++b)
            for (size_t i = 2; i < node.regions[b].args.size(); ++i)
              p.slots[node.regions[b].args[i]].type =
                  p.slots[region->yields.at(i - 2)].type;
      }
      // Row counts of the dynamic results.
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
          rows = rowsOf(node.in.at(1));
        } else if (op == "trellis.segment_mean") {
          rows = rowsOf(node.in.at(1)) - 1;
        } else if (op == "trellis.sparse.subdivide_features") {
          rows = 8 * rowsOf(node.in.at(0));
        } else if (op == "trellis.sparse.conv3d" && node.in.size() > 2 &&
                   p.slots[node.in.back()].type.dtype == DType::I32) {
          // The neighbour map's rows (the fine set's, for a parent map whose
          // entries are coarse rows of the features).
          rows = p.slots[node.in.back()].type.shape.at(0);
        } else {
          for (int s : node.in)
            if (p.slots[s].dynamicRows) {
              rows = rowsOf(s);
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
      if (op == "trellis.sparse.group_norm") {
        const ref::CoordSet *c = coordsOf(node.in[1]);
        if (!c)
          return opError(instr, "its coordinate set was not bound");
        node.auxHost = {groupNormChunks(*c)};
        continue;
      }
    }
    return Status::ok();
  };
  return walk(p.body);
}

Status GpuExecutor::Impl::uploadBound(Prepared &p) {
  if (!p.dynamic)
    return Status::ok();
  // Lay every bound value (and the nodes' index arrays) out in one buffer.
  struct Piece {
    const void *data;
    size_t bytes, offset;
  };
  std::vector<Piece> pieces;
  std::vector<HostTensor> keep; // offsets converted to int32
  size_t total = 0;
  auto add = [&](const void *data, size_t bytes) {
    pieces.push_back({data, bytes, total});
    total += alignUp(std::max<size_t>(bytes, 1));
    return pieces.size() - 1;
  };
  std::vector<std::pair<size_t, size_t>> slotPieces(p.slots.size(),
                                                     {SIZE_MAX, SIZE_MAX});
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
  std::vector<std::pair<Node *, size_t>> nodePieces;
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
  if (total == 0)
    return Status::ok();
  // (The pieces point into the tensors' heap storage, which stays where it is
  // when `keep` grows.)
  std::vector<char> host(total);
  for (const Piece &piece : pieces)
    if (piece.bytes)
      std::memcpy(host.data() + piece.offset, piece.data, piece.bytes);
  if (Status s = check(api->cuMemAlloc(&p.boundPool, total),
                       "cuMemAlloc (coordinates)");
      !s)
    return Error{"cannot allocate " + std::to_string(total >> 20) +
                 " MiB for the coordinates of '" + p.name + "': " +
                 s.message()};
  p.boundBytes = total;
  if (Status s = check(api->cuMemcpyHtoDAsync(p.boundPool, host.data(), total,
                                              stream),
                       "cuMemcpyHtoDAsync (coordinates)");
      !s)
    return s;
  if (Status s = check(api->cuStreamSynchronize(stream), "the GPU stream"); !s)
    return s;
  for (size_t s = 0; s < p.slots.size(); ++s) {
    if (slotPieces[s].first != SIZE_MAX)
      p.slots[s].ptr = p.boundPool + pieces[slotPieces[s].first].offset;
    if (slotPieces[s].second != SIZE_MAX)
      p.slots[s].aux = p.boundPool + pieces[slotPieces[s].second].offset;
  }
  for (auto &[node, piece] : nodePieces)
    node->aux.push_back(p.boundPool + pieces[piece].offset);
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Commands
//===----------------------------------------------------------------------===//

Status GpuExecutor::Impl::deviceOccupancy(Prepared &p, Node &node) {
  const Instr &instr = *node.instr;
  const ValueType &t = p.slots[node.in[0]].type; // [B, 1, D, H, W] f32
  if (t.shape.size() != 5 || t.shape[1] != 1)
    return opError(instr, "needs logits [B, 1, D, H, W], found " + t.str());
  auto count = runtimeKernel("trellis_occupancy_count");
  auto scan = runtimeKernel("trellis_occupancy_scan");
  auto write = runtimeKernel("trellis_occupancy_write");
  for (auto *k : {&count, &scan, &write})
    if (!*k)
      return opError(instr, k->message());
  int64_t cells = int64_t(bytesOf(t) / 4);
  int32_t blocks = int32_t((cells + 1023) / 1024);
  int32_t d = int32_t(t.shape[2]), h = int32_t(t.shape[3]),
          w = int32_t(t.shape[4]);
  CUdeviceptr logits = address(p, node.in[0]), counts = address(p, node.scratch);
  CUdeviceptr total = counts + alignUp(size_t(blocks) * 4);
  CUdeviceptr rowsOut = total + kAlign;
  auto launch = [&](CUfunction f, unsigned grid, void **params,
                    const char *what) -> Status {
    if (CUresult r = api->cuLaunchKernel(f, grid, 1, 1, 256, 1, 1, 0, stream,
                                         params, nullptr);
        r != CUDA_SUCCESS)
      return opError(instr, std::string("launching ") + what + ": " +
                                api->describe(r));
    return Status::ok();
  };
  void *cp[] = {&logits, &cells, &counts};
  if (Status s = launch(*count, unsigned(blocks), cp, "the occupancy count"); !s)
    return s;
  void *sp[] = {&counts, &blocks, &total};
  if (Status s = launch(*scan, 1, sp, "the occupancy scan"); !s)
    return s;
  // The voxel count: the one value read back before the rows.
  int32_t n = 0;
  if (Status s = check(api->cuMemcpyDtoHAsync(&n, total, 4, stream),
                       "cuMemcpyDtoHAsync (voxel count)");
      !s)
    return opError(instr, s.message());
  if (Status s = check(api->cuStreamSynchronize(stream), "the GPU stream"); !s)
    return opError(instr, s.message());
  void *wp[] = {&logits, &cells, &counts, &d, &h, &w, &rowsOut};
  if (Status s = launch(*write, unsigned(blocks), wp, "the occupancy rows"); !s)
    return s;
  HostTensor rows(DType::I32, {int64_t(n), 4});
  if (n > 0) {
    if (Status s = check(api->cuMemcpyDtoHAsync(rows.mutableRaw(), rowsOut,
                                                rows.nbytes(), stream),
                         "cuMemcpyDtoHAsync (voxels)");
        !s)
      return opError(instr, s.message());
  }
  if (Status s = check(api->cuStreamSynchronize(stream), "the GPU stream"); !s)
    return opError(instr, s.message());
  if (options.checkOps) {
    // The CPU's compaction of the same logits must give the same rows.
    auto host = download(p, node.in[0]);
    if (!host)
      return opError(instr, host.message());
    auto want = ref::occupancy(*host);
    if (!want)
      return opError(instr, want.message());
    if (want->shape() != rows.shape() ||
        std::memcmp(want->raw(), rows.raw(), rows.nbytes()) != 0)
      return opError(instr, "the device compaction gives " +
                                std::to_string(n) + " voxels, the CPU " +
                                std::to_string(want->dim(0)) +
                                " (or another order)");
    ++report.checkedOps;
  }
  auto coords = ref::CoordSet::create(rows, t.shape[2], t.shape[0]);
  if (!coords)
    return opError(instr, coords.message());
  p.hostSlots[node.out[0]] =
      std::make_shared<const ref::CoordSet>(std::move(coords).value());
  return Status::ok();
}

Result<CUfunction> GpuExecutor::Impl::runtimeKernel(const std::string &name) {
  CUfunction &f = functions[name];
  if (!f) {
    if (!attention ||
        api->cuModuleGetFunction(&f, attention, name.c_str()) != CUDA_SUCCESS)
      return Error{"kernel '" + name + "' is not in the bundle's runtime "
                   "kernel module"};
  }
  return f;
}

Status GpuExecutor::Impl::launch1d(CUfunction f, int64_t threads,
                                   void **params, const Instr &instr,
                                   const char *what) {
  if (threads <= 0)
    return Status::ok();
  constexpr int64_t kThreads = 256;
  CUresult r = api->cuLaunchKernel(f, unsigned((threads + kThreads - 1) /
                                               kThreads),
                                   1, 1, unsigned(kThreads), 1, 1, 0, stream,
                                   params, nullptr);
  if (r != CUDA_SUCCESS)
    return opError(instr,
                   std::string("launching ") + what + ": " + api->describe(r));
  return Status::ok();
}

size_t GpuExecutor::Impl::sparseScratchBytes(const Prepared &p,
                                             const Node &node) const {
  const std::string &op = node.instr->op;
  if (node.in.empty()) // trellis.time_grid
    return 0;
  const ValueType &x = p.slots[node.in[0]].type;
  if (op == "trellis.sparse.conv3d") {
    const ValueType &w = p.slots[node.in[1]].type;
    if (w.shape.size() != 5 || w.shape[1] == 1)
      return 0;
    const int64_t outRows = p.slots[node.out[0]].type.shape.at(0);
    ConvPlan plan = convPlan(*node.instr, x, w, outRows,
                             attentionFamily == TRELLIS_ATTN_SM90A);
    if (plan.path == ConvPlan::Path::Implicit)
      return 0;
    if (plan.path == ConvPlan::Path::TapsFirst)
      return size_t(rowElems(w) / w.shape[4] * x.shape[0] * w.shape[0]) *
             sizeof(float);
    // The gather's chunk (its kernel's col buffer), no more rows than the
    // output has.
    size_t rowBytes = size_t(rowElems(w)) * dtypeSize(x.dtype);
    auto annotated = node.instr->intAttr("trellis.scratch_bytes");
    size_t chunk = annotated ? size_t(*annotated) / rowBytes : 1;
    chunk = std::min<size_t>(std::max<size_t>(chunk, 1),
                             size_t(std::max<int64_t>(outRows, 1)));
    return chunk * rowBytes;
  }
  if (op == "trellis.sparse.neighbor_map") { // the dense index volume
    auto *c = std::get_if<CoordsPtr>(&p.boundValues[root(p, node.in[0])]);
    if (!c || !*c)
      return 0;
    int64_t r = (*c)->resolution;
    return size_t(std::max<int64_t>((*c)->batchSize(), 1) * r * r * r) *
           sizeof(int32_t);
  }
  if (op == "trellis.sparse.group_norm") {
    auto *c = std::get_if<CoordsPtr>(&p.boundValues[root(p, node.in[1])]);
    auto groups = node.instr->intAttr("groups");
    if (!c || !*c || !groups)
      return 0;
    // The statistics [B·G, 2], then the partial sums [chunks, C] (the chunk
    // list bind() built).
    int64_t chunks = node.auxHost.empty() ? 0 : node.auxHost[0].dim(0);
    return alignUp(size_t((*c)->batchSize() * *groups * 2) * 4) +
           size_t(chunks * rowElems(x)) * 4;
  }
  if (op == "trellis.sparse.window_segments") {
    auto w = p.windows.find(node.out[0]);
    if (w == p.windows.end())
      return 0;
    // the window ids [N], then the counts per (window, block)
    return alignUp(size_t(w->second.rows) * 4) +
           size_t(w->second.segments) * size_t(w->second.blocks) * 4;
  }
  if (op == "trellis.sparse.attention") {
    auto *g = std::get_if<SegmentsPtr>(&p.boundValues[root(p, node.in[3])]);
    size_t bytes = 0;
    if (sparseAttentionGammas(*node.instr).second >= 0) // normalized k
      bytes += alignUp(bytesOf(p.slots[node.in[1]].type));
    // q, k, v and the output in window order
    auto window = p.windows.find(root(p, node.in[3]));
    if ((g && *g && !isIdentity(**g)) || window != p.windows.end())
      for (int s : {node.in[0], node.in[1], node.in[2], node.out[0]})
        bytes += alignUp(bytesOf(p.slots[s].type));
    // The redo flags of the fixed softmax reference (normalized k only).
    if (sparseAttentionGammas(*node.instr).second >= 0) {
      const int64_t heads = p.slots[node.in[0]].type.shape.at(1);
      if (window != p.windows.end())
        bytes += attentionRedoFlagsBytes(window->second.segments,
                                         longestWindow(window->second), heads);
      else if (g && *g)
        bytes += attentionRedoFlagsBytes((*g)->numSegments(),
                                         longestSegment((*g)->offsets), heads);
    }
    return bytes;
  }
  return 0;
}

Result<bool> GpuExecutor::Impl::buildSparseCommand(Prepared &p, Node &node) {
  const Instr &instr = *node.instr;
  const std::string &op = instr.op;
  static const char *const ops[] = {
      "trellis.sparse.neighbor_map",   "trellis.sparse.window_segments",
      "trellis.sparse.conv3d",         "trellis.sparse.parent_neighbor_map",
      "trellis.sparse.group_norm",     "trellis.sparse.attention",
      "trellis.sparse.cross_attention"};
  if (std::find(std::begin(ops), std::end(ops), op) == std::end(ops))
    return false;
  auto ptr = [&](int slot) { return address(p, slot); };
  auto type = [&](int slot) -> const ValueType & { return p.slots[slot].type; };
  auto bound = [&](int slot) -> const RtValue & {
    return p.boundValues[root(p, slot)];
  };
  if (op == "trellis.sparse.neighbor_map") {
    auto *coords = std::get_if<CoordsPtr>(&bound(node.in[0]));
    auto k = instr.intAttr("kernel");
    if (!coords || !*coords || !k)
      return opError(instr, "its coordinate set was not bound");
    auto scatter = runtimeKernel("trellis_sparse_grid_scatter");
    auto lookup = runtimeKernel("trellis_sparse_neighbor_lookup");
    if (!scatter || !lookup)
      return opError(instr, (scatter ? lookup : scatter).message());
    CUdeviceptr c = ptr(node.in[0]), grid = ptr(node.scratch),
                nbr = ptr(node.out[0]);
    size_t gridBytes = bytesOf(type(node.scratch));
    int64_t n = (*coords)->size();
    int32_t res = int32_t((*coords)->resolution), kernelSize = int32_t(*k);
    node.command = [this, fs = *scatter, fl = *lookup, c, grid, nbr, gridBytes,
                    n, res, kernelSize, &instr]() mutable -> Status {
      // 0xFF bytes: every cell -1 (inactive).
      if (CUresult r = api->cuMemsetD8Async(grid, 0xFF, gridBytes, stream);
          r != CUDA_SUCCESS)
        return opError(instr, "clearing the index volume: " + api->describe(r));
      void *sp[] = {&c, &grid, &n, &res};
      if (Status s = launch1d(fs, n, sp, instr, "the index scatter"); !s)
        return s;
      void *lp[] = {&c, &grid, &nbr, &n, &res, &kernelSize};
      int64_t kvol = int64_t(kernelSize) * kernelSize * kernelSize;
      return launch1d(fl, n * kvol, lp, instr, "the neighbour lookup");
    };
    return true;
  }
  if (op == "trellis.sparse.window_segments") {
    auto w = p.windows.find(node.out[0]);
    if (w == p.windows.end())
      return opError(instr, "its window grid was not fixed at binding");
    const Prepared::WindowPartition part = w->second;
    Result<CUfunction> fIds = runtimeKernel("trellis_window_ids"),
                       fCounts = runtimeKernel("trellis_window_counts"),
                       fScan = runtimeKernel("trellis_exclusive_scan_i32"),
                       fScatter = runtimeKernel("trellis_window_scatter"),
                       fOffsets = runtimeKernel("trellis_window_offsets");
    for (auto *f : {&fIds, &fCounts, &fScan, &fScatter, &fOffsets})
      if (!*f)
        return opError(instr, f->message());
    CUdeviceptr coords = ptr(node.in[0]), ids = ptr(node.scratch),
                counts = ids + alignUp(size_t(part.rows) * 4),
                rowsOut = ptr(node.out[0]),
                offsetsOut = rowsOut + CUdeviceptr(part.rows * 4);
    node.command = [this, part, coords, ids, counts, rowsOut, offsetsOut,
                    fIds = *fIds, fCounts = *fCounts, fScan = *fScan,
                    fScatter = *fScatter, fOffsets = *fOffsets,
                    &instr]() mutable -> Status {
      int64_t rows = part.rows, segments = part.segments,
              cells = segments * part.blocks;
      int32_t window = part.window, shift = part.shift, nx = part.n[0],
              ny = part.n[1], nz = part.n[2], blocks = part.blocks;
      if (CUresult r =
              api->cuMemsetD8Async(counts, 0, size_t(cells) * 4, stream);
          r != CUDA_SUCCESS)
        return opError(instr,
                       "clearing the window counts: " + api->describe(r));
      void *idParams[] = {&coords, &rows, &window, &shift, &nx, &ny, &nz, &ids};
      if (Status s = launch1d(fIds, rows, idParams, instr, "the window ids");
          !s)
        return s;
      // Kernels with one block per 256 rows (or one block of 1024 threads).
      auto launchBlocks = [&](CUfunction f, unsigned grid, unsigned block,
                              void **params, const char *what) -> Status {
        if (grid == 0)
          return Status::ok();
        CUresult r = api->cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, stream,
                                         params, nullptr);
        if (r != CUDA_SUCCESS)
          return opError(instr, std::string("launching ") + what + ": " +
                                    api->describe(r));
        return Status::ok();
      };
      void *countParams[] = {&ids, &rows, &blocks, &counts};
      if (Status s = launchBlocks(fCounts, unsigned(blocks), 256, countParams,
                                  "the window counts");
          !s)
        return s;
      void *scanParams[] = {&counts, &cells};
      if (Status s =
              launchBlocks(fScan, 1, 1024, scanParams, "the window count scan");
          !s)
        return s;
      void *scatterParams[] = {&ids, &rows, &blocks, &counts, &rowsOut};
      if (Status s = launchBlocks(fScatter, unsigned(blocks), 256,
                                  scatterParams, "the window scatter");
          !s)
        return s;
      void *offsetParams[] = {&counts, &blocks, &segments, &rows, &offsetsOut};
      return launch1d(fOffsets, segments + 1, offsetParams, instr,
                      "the window offsets");
    };
    return true;
  }
  if (op == "trellis.sparse.parent_neighbor_map") {
    auto f = runtimeKernel("trellis_sparse_parent_neighbors");
    if (!f)
      return opError(instr, f.message());
    if (node.aux.size() != 1)
      return opError(instr, "its parent rows were not uploaded");
    CUdeviceptr nbr = ptr(node.in[0]), parents = node.aux[0],
                out = ptr(node.out[0]);
    int64_t entries = int64_t(bytesOf(type(node.out[0])) / sizeof(int32_t));
    node.command = [this, f = *f, nbr, parents, out, entries,
                    &instr]() mutable -> Status {
      void *params[] = {&nbr, &parents, &out, &entries};
      return launch1d(f, entries, params, instr, "the parent neighbour map");
    };
    return true;
  }
  const ValueType &x = type(node.in[0]);
  const ValueType &out = type(node.out[0]);
  if (x.dtype != DType::F16 && x.dtype != DType::F32)
    return opError(instr, "the GPU sparse ops take f16 or f32 features, "
                          "found " +
                              x.str());
  const char *sfx = typeSuffix(x.dtype);
  auto kernel = [&](const std::string &name) -> Result<CUfunction> {
    auto f = runtimeKernel(name + "_" + sfx);
    if (!f)
      return opError(instr, f.message());
    return f;
  };
  const int64_t rows = out.shape.at(0);
  const int32_t c = int32_t(rowElems(out));

  if (op == "trellis.sparse.conv3d") {
    const ValueType &w = type(node.in[1]);
    int bias = -1, neighbors = -1;
    // Optional operands: the bias (features' dtype) and the neighbour map
    // (int32 [N, k³], built on the device).
    for (size_t i = 2; i < node.in.size(); ++i)
      (type(node.in[i]).dtype == DType::I32 ? neighbors : bias) = node.in[i];
    if (w.dtype != x.dtype || (bias >= 0 && type(bias).dtype != x.dtype))
      return opError(instr, "the GPU sparse conv needs x, W and b of one "
                            "dtype");
    int64_t cout = w.shape[0], cin = w.shape[4], k = w.shape[1];
    CUdeviceptr b = bias >= 0 ? ptr(bias) : 0;
    if (k == 1) { // spec §6.4: out = x·M + b, M = W's buffer as [Cin, Cout]
      if (Status s = buildGemm(p, node, ptr(node.in[1]), ptr(node.in[0]),
                               ptr(node.out[0]), b, x.dtype, cout, rows, cin,
                               /*transA=*/false, "", node.command);
          !s)
        return Error{s.message()};
      return true;
    }
    if (neighbors < 0)
      return opError(instr, "a 3x3x3 sparse conv needs a neighbour map");
    int32_t kvol = int32_t(k * k * k), cin32 = int32_t(cin);
    int64_t kdim = kvol * cin;
    size_t elem = dtypeSize(x.dtype);
    const ConvPlan plan =
        convPlan(instr, x, w, rows, attentionFamily == TRELLIS_ATTN_SM90A);
    if (plan.path == ConvPlan::Path::Implicit) {
      const ConvTiles &tiles = plan.tiles;
      // Implicit GEMM (sm_90a): the neighbour rows go straight into shared
      // memory; no im2col rows in device memory.
      Result<CUfunction> f = runtimeKernel(tiles.kernel());
      if (!f)
        return opError(instr, f.message());
      unsigned smem = tiles.smem(kvol);
      if (CUresult r = api->cuFuncSetAttribute(
              *f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(smem));
          r != CUDA_SUCCESS)
        return opError(instr, "cuFuncSetAttribute (implicit conv): " +
                                  api->describe(r));
      CUdeviceptr xp = ptr(node.in[0]), nbr = ptr(neighbors),
                  wp = ptr(node.in[1]), o = ptr(node.out[0]);
      int32_t cout32 = int32_t(cout);
      unsigned gridX = unsigned((rows + tiles.bm - 1) / tiles.bm),
               gridY = unsigned(cout / tiles.bn),
               block = unsigned(2 * tiles.bm);
      node.command = [this, f = *f, xp, nbr, wp, b, o, rows, cin32, cout32,
                      kvol, gridX, gridY, block, smem,
                      &instr]() mutable -> Status {
        if (rows == 0)
          return Status::ok();
        int64_t n = rows;
        void *params[] = {&xp, &nbr, &wp, &b, &o, &n, &cin32, &cout32, &kvol};
        CUresult r = api->cuLaunchKernel(f, gridX, gridY, 1, block, 1, 1, smem,
                                         stream, params, nullptr);
        if (r != CUDA_SUCCESS)
          return opError(instr, "launching the implicit-GEMM conv: " +
                                    api->describe(r));
        return Status::ok();
      };
      return true;
    }
    // The other paths run generated kernels (32-bit indices).
    if (Status s = checkAddressable(p, node); !s)
      return Error{s.message()};
    if (plan.path == ConvPlan::Path::TapsFirst) {
      // y[o] = x · W_oᵀ for the k³ taps at once (W_o: columns o·Cin.. of
      // W [Cout, k³·Cin]), f32; then each row sums its neighbours' products.
      // (Over the feature rows: the coarse ones for a parent neighbour map.)
      const int64_t rowsIn = x.shape.at(0);
      std::function<Status()> gemm;
      GemmLayout taps;
      taps.lda = kdim;
      taps.outType = DType::F32;
      taps.batch = kvol;
      taps.strideA = cin;
      taps.strideB = 0;
      taps.strideD = rowsIn * cout;
      if (Status s = buildGemm(p, node, ptr(node.in[1]), ptr(node.in[0]),
                               ptr(node.scratch), 0, x.dtype, cout, rowsIn, cin,
                               /*transA=*/true, "", gemm, taps);
          !s)
        return Error{s.message()};
      // The generated tap sum: (y, neighbours, [bias,] out, rows, rowsIn).
      auto sum = rowsLaunch(instr, "trellis.tap_sum", rows);
      if (!sum)
        return opError(instr, sum.message());
      auto args = std::make_shared<std::vector<CUdeviceptr>>();
      args->push_back(ptr(node.scratch));
      args->push_back(ptr(neighbors));
      if (b)
        args->push_back(b);
      args->push_back(ptr(node.out[0]));
      node.command = [this, l = *sum, gemm, args, rows, rowsIn,
                      &instr]() mutable -> Status {
        if (rows == 0)
          return Status::ok();
        if (Status s = gemm(); !s)
          return s;
        int64_t n = rows, nIn = rowsIn;
        std::vector<void *> params;
        for (CUdeviceptr &a : *args)
          params.push_back(&a);
        params.push_back(&n);
        params.push_back(&nIn);
        return launch(l, params.data(), instr, "the conv tap sum");
      };
      return true;
    }
    // The generated gather, chunk by chunk: (x, neighbours, col, row0, rows).
    int64_t chunk =
        int64_t(bytesOf(type(node.scratch)) / (size_t(kdim) * elem));
    std::vector<std::function<Status()>> steps;
    CUdeviceptr xp = ptr(node.in[0]), nbr = ptr(neighbors),
                col = ptr(node.scratch), o = ptr(node.out[0]);
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
      int64_t n = std::min(chunk, rows - r0);
      auto gatherLaunch = rowsLaunch(instr, "trellis.launch", n);
      if (!gatherLaunch)
        return opError(instr, gatherLaunch.message());
      std::function<Status()> gemm;
      // out rows [r0, r0+n) = col[n, K] · W[Cout, K]ᵀ (+ b), as linear.
      if (Status s = buildGemm(p, node, ptr(node.in[1]), col,
                               o + CUdeviceptr(r0 * cout * int64_t(elem)), b,
                               x.dtype, cout, n, kdim, /*transA=*/true, "",
                               gemm);
          !s)
        return Error{s.message()};
      steps.push_back([this, l = *gatherLaunch, xp, nbr, col, r0, n, gemm,
                       &instr]() mutable -> Status {
        void *params[] = {&xp, &nbr, &col, &r0, &n};
        if (Status s = launch(l, params, instr, "the sparse conv gather"); !s)
          return s;
        return gemm();
      });
    }
    node.command = [steps]() -> Status {
      for (const auto &step : steps)
        if (Status s = step(); !s)
          return s;
      return Status::ok();
    };
    return true;
  }

  if (op == "trellis.sparse.group_norm") {
    auto *coords = std::get_if<CoordsPtr>(&bound(node.in[1]));
    if (!coords || !*coords)
      return opError(instr, "its coordinate set was not bound");
    auto groups = instr.intAttr("groups");
    auto eps = instr.floatAttr("eps");
    if (!groups || !eps || *groups < 1 || c % *groups != 0)
      return opError(instr, "malformed group count or eps");
    for (int s : {node.in[2], node.in[3]})
      if (type(s).dtype != DType::F32)
        return opError(instr, "the GPU group norm takes f32 γ and β");
    if (Status s = checkAddressable(p, node); !s)
      return Error{s.message()};
    // The statistics: the runtime's reduction kernels; the normalization:
    // the generated kernel (x, coords, γ, β, out, stats, rows).
    auto partial = kernel("trellis_sparse_group_norm_partial");
    if (!partial)
      return partial.takeError();
    auto reduce = runtimeKernel("trellis_sparse_group_norm_reduce");
    if (!reduce)
      return opError(instr, reduce.message());
    auto apply = rowsLaunch(instr, "trellis.launch", rows);
    if (!apply)
      return opError(instr, apply.message());
    if (node.aux.size() != 1 || node.auxHost.size() != 1)
      return opError(instr, "its chunk list was not built");
    int32_t numChunks = int32_t(node.auxHost[0].dim(0));
    int32_t g = int32_t(*groups), width = c;
    int32_t items = int32_t((*coords)->batchSize() * *groups);
    CUdeviceptr src = ptr(node.in[0]), offsets = p.slots[root(p, node.in[1])].aux,
                coordsPtr = ptr(node.in[1]), st = ptr(node.scratch),
                part = st + alignUp(size_t(items) * 2 * 4), chunks = node.aux[0],
                gamma = ptr(node.in[2]), beta = ptr(node.in[3]),
                dst = ptr(node.out[0]);
    float e = float(*eps);
    unsigned threads = unsigned(std::min(256, (width + 31) / 32 * 32));
    node.command = [this, fp = *partial, fr = *reduce, la = *apply, src,
                    offsets, coordsPtr, st, part, chunks, numChunks, gamma,
                    beta, dst, rows, width, g, items, e, threads,
                    &instr]() mutable -> Status {
      for (int32_t centered = 0; centered < 2 && numChunks > 0; ++centered) {
        void *pp[] = {&src, &chunks, &st, &part, &width, &g, &centered};
        if (CUresult r = api->cuLaunchKernel(fp, unsigned(numChunks), 1, 1,
                                             threads, 1, 1, 0, stream, pp,
                                             nullptr);
            r != CUDA_SUCCESS)
          return opError(instr, "launching the group-norm sums: " +
                                    api->describe(r));
        void *rp[] = {&chunks, &numChunks, &offsets, &part, &st,
                      &width,  &g,         &e,       &centered};
        if (CUresult r = api->cuLaunchKernel(fr, unsigned(items), 1, 1, 256, 1,
                                             1, 0, stream, rp, nullptr);
            r != CUDA_SUCCESS)
          return opError(instr, "launching the group-norm statistics: " +
                                    api->describe(r));
      }
      int64_t n = rows;
      void *ap[] = {&src, &coordsPtr, &gamma, &beta, &dst, &st, &n};
      return launch(la, ap, instr, "the group norm");
    };
    return true;
  }

  // Attention over voxels: the attention kernels in variable-length mode.
  auto scale = instr.floatAttr("scale");
  if (!scale)
    return opError(instr, scale.message());
  const ValueType &k = type(node.in[1]), &v = type(node.in[2]);
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

  if (op == "trellis.sparse.cross_attention") {
    // Queries: each sample's rows; keys: that sample's Lc tokens (dense).
    auto *coords = std::get_if<CoordsPtr>(&bound(node.in[3]));
    if (!coords || !*coords || k.shape.size() != 4)
      return opError(instr, "needs bound coordinates and k [B, Lc, H, d]");
    HostTensor offsets = offsetsOf(**coords);
    params.q = reinterpret_cast<const void *>(ptr(node.in[0]));
    params.o = reinterpret_cast<void *>(ptr(node.out[0]));
    params.k = reinterpret_cast<const void *>(ptr(node.in[1]));
    params.v = reinterpret_cast<const void *>(ptr(node.in[2]));
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
  } else {
    // Self-attention inside each segment. Segments of consecutive rows
    // (one per sample) are read in place; windows are gathered into segment
    // order first and the output scattered back.
    // Segments bound on the host (rows, offsets in the binding pool) or a
    // window partition computed on the device (rows then offsets in one
    // arena tensor; empty windows are empty segments).
    auto *segments = std::get_if<SegmentsPtr>(&bound(node.in[3]));
    auto window = p.windows.find(root(p, node.in[3]));
    const bool onDevice = window != p.windows.end();
    if (!onDevice && (!segments || !*segments))
      return opError(instr, "its segments were not bound");
    CUdeviceptr q = ptr(node.in[0]), kp = ptr(node.in[1]), vp = ptr(node.in[2]),
                o = ptr(node.out[0]);
    // q, k, v may be strided views of a packed qkv [N, 3, H, d].
    auto rowStride = [&](int slot) {
      int64_t s = tokenStride(p, slot);
      return s ? s : rowElems(type(slot));
    };
    int64_t qStride = rowStride(node.in[0]), kStride = rowStride(node.in[1]),
            vStride = rowStride(node.in[2]);
    auto [qGamma, kGamma] = sparseAttentionGammas(instr);
    CUdeviceptr at = node.scratch >= 0 ? ptr(node.scratch) : 0;
    if (kGamma >= 0) {
      // k is normalized once into a dense scratch copy; q in the kernel's
      // prologue (as the dense stage's attention, bench/attention/NOTES.md).
      auto norm = headNormCommand(kp, kStride, k.shape.back(), at, rows, heads,
                                  k.shape.back(), ptr(node.in[kGamma]), instr);
      if (!norm)
        return norm.takeError();
      before.push_back(*norm);
      kp = at;
      kStride = rowElems(k);
      at += alignUp(bytesOf(k));
      kNormalized = true;
      params.k_norm_gamma =
          reinterpret_cast<const float *>(ptr(node.in[kGamma]));
    }
    if (qGamma >= 0)
      params.q_gamma = reinterpret_cast<const float *>(ptr(node.in[qGamma]));
    if (onDevice || !isIdentity(**segments)) {
      // Into window order and back: the generated kernels of the op's
      // trellis.window_rows (q, k, v gathers, the output's scatter).
      auto kernels = instr.attrs.find("trellis.window_rows");
      if (kernels == instr.attrs.end() || !kernels->is_array() ||
          kernels->size() != 4)
        return opError(instr, "its window rows have no generated kernels "
                              "(trellis.window_rows from the compiler)");
      CUdeviceptr rowsPtr =
          onDevice ? ptr(node.in[3]) : p.slots[root(p, node.in[3])].ptr;
      CUdeviceptr *dst[4] = {&q, &kp, &vp, &o};
      int64_t strides[4] = {qStride, kStride, vStride, 0};
      int widthSlots[4] = {node.in[0], node.in[1], node.in[2], node.out[0]};
      for (int i = 0; i < 4; ++i) {
        auto l = rowsLaunch((*kernels)[size_t(i)], rows);
        if (!l)
          return opError(instr, l.message());
        CUdeviceptr src = *dst[i];
        *dst[i] = at;
        at += alignUp(bytesOf(type(widthSlots[i])));
        CUdeviceptr window = *dst[i];
        // The kernel moves width / threads_per_row elements per thread as
        // one vector: a strided source must keep them aligned.
        int64_t vec = rowElems(type(widthSlots[i])) / l->threadsPerRow,
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
          reinterpret_cast<const int32_t *>(ptr(node.in[3]) +
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
  }
  if (params.num_seqs == 0 || params.seqlen_q == 0) {
    node.command = [] { return Status::ok(); };
    return true;
  }
  auto attend = attentionLaunch(params, kNormalized, redoFlags, instr);
  if (!attend)
    return attend.takeError();
  before.push_back(*attend);
  node.command = [before, after]() mutable -> Status {
    for (auto *steps : {&before, &after})
      for (auto &step : *steps)
        if (Status s = step(); !s)
          return s;
    return Status::ok();
  };
  return true;
}

} // namespace trellis
