//===- SparseCommands.cpp - The sparse stages' device commands ------------===//
//
// The second half of a sparse stage: the commands of the sparse ops over the
// runtime kernels (runtime/kernels/sparse.cuh), built once the stage is bound
// and planned: the neighbour maps, the window partition, the group norm, and
// trellis.occupancy compacted on the device; buildSparseCommand() dispatches
// the convs (SparseConv.cpp) and attention (SparseAttention.cpp) too.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/GpuExecutorImpl.h"
#include "runtime/cuda/SparseSupport.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace trellis {

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
  CUdeviceptr logits = address(p, node.in[0]),
              counts = address(p, node.scratch);
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
  TRELLIS_RETURN_IF_ERROR(
      launch(*count, unsigned(blocks), cp, "the occupancy count"));
  void *sp[] = {&counts, &blocks, &total};
  TRELLIS_RETURN_IF_ERROR(launch(*scan, 1, sp, "the occupancy scan"));
  // The voxel count: the one value read back before the rows.
  int32_t n = 0;
  if (Status s = check(api->cuMemcpyDtoHAsync(&n, total, 4, stream),
                       "cuMemcpyDtoHAsync (voxel count)");
      !s)
    return opError(instr, s.message());
  if (Status s = check(api->cuStreamSynchronize(stream), "the GPU stream"); !s)
    return opError(instr, s.message());
  void *wp[] = {&logits, &cells, &counts, &d, &h, &w, &rowsOut};
  TRELLIS_RETURN_IF_ERROR(
      launch(*write, unsigned(blocks), wp, "the occupancy rows"));
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
      return opError(instr, "the device compaction gives " + std::to_string(n) +
                                " voxels, the CPU " +
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
    if (fp8Precision(*node.instr)) { // its E4M3 operands (in-place segments)
      if (!g || !*g)
        return 0;
      return fp8AttentionScratchBytes(
          p.slots[node.in[0]].type.shape.at(0),
          fp8PaddedTokens(segmentLengths((*g)->offsets)),
          p.slots[node.in[0]].type.shape.at(1), (*g)->numSegments(),
          longestSegment((*g)->offsets));
    }
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
  if (op == "trellis.sparse.neighbor_map")
    return buildNeighborMapCommand(p, node);
  if (op == "trellis.sparse.window_segments")
    return buildWindowSegmentsCommand(p, node);
  if (op == "trellis.sparse.parent_neighbor_map")
    return buildParentNeighborMapCommand(p, node);
  const ValueType &x = p.slots[node.in[0]].type;
  if (x.dtype != DType::F16 && x.dtype != DType::F32)
    return opError(instr, "the GPU sparse ops take f16 or f32 features, "
                          "found " +
                              x.str());
  if (op == "trellis.sparse.conv3d")
    return buildSparseConvCommand(p, node); // SparseConv.cpp
  if (op == "trellis.sparse.group_norm")
    return buildSparseGroupNormCommand(p, node);
  // Attention over voxels (SparseAttention.cpp).
  return buildSparseAttentionCommand(p, node);
}

/// trellis.sparse.neighbor_map: the coordinates scattered into a dense index
/// volume (the scratch), then each row's k³ neighbours looked up.
Result<bool> GpuExecutor::Impl::buildNeighborMapCommand(Prepared &p,
                                                        Node &node) {
  const Instr &instr = *node.instr;
  auto *coords = std::get_if<CoordsPtr>(&boundValue(p, node.in[0]));
  auto k = instr.intAttr("kernel");
  if (!coords || !*coords || !k)
    return opError(instr, "its coordinate set was not bound");
  auto scatter = runtimeKernel("trellis_sparse_grid_scatter");
  auto lookup = runtimeKernel("trellis_sparse_neighbor_lookup");
  if (!scatter || !lookup)
    return opError(instr, (scatter ? lookup : scatter).message());
  CUdeviceptr c = address(p, node.in[0]), grid = address(p, node.scratch),
              nbr = address(p, node.out[0]);
  size_t gridBytes = bytesOf(slotType(p, node.scratch));
  int64_t n = (*coords)->size();
  int32_t res = int32_t((*coords)->resolution), kernelSize = int32_t(*k);
  node.command = [this, fs = *scatter, fl = *lookup, c, grid, nbr, gridBytes, n,
                  res, kernelSize, &instr]() mutable -> Status {
    // 0xFF bytes: every cell -1 (inactive).
    if (CUresult r = api->cuMemsetD8Async(grid, 0xFF, gridBytes, stream);
        r != CUDA_SUCCESS)
      return opError(instr, "clearing the index volume: " + api->describe(r));
    void *sp[] = {&c, &grid, &n, &res};
    TRELLIS_RETURN_IF_ERROR(launch1d(fs, n, sp, instr, "the index scatter"));
    void *lp[] = {&c, &grid, &nbr, &n, &res, &kernelSize};
    int64_t kvol = int64_t(kernelSize) * kernelSize * kernelSize;
    return launch1d(fl, n * kvol, lp, instr, "the neighbour lookup");
  };
  return true;
}

/// trellis.sparse.window_segments: the rows sorted by window on the device
/// (window ids, counts per block, their scan, the scatter, the offsets).
Result<bool> GpuExecutor::Impl::buildWindowSegmentsCommand(Prepared &p,
                                                           Node &node) {
  const Instr &instr = *node.instr;
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
  CUdeviceptr coords = address(p, node.in[0]), ids = address(p, node.scratch),
              counts = ids + alignUp(size_t(part.rows) * 4),
              rowsOut = address(p, node.out[0]),
              offsetsOut = rowsOut + CUdeviceptr(part.rows * 4);
  node.command = [this, part, coords, ids, counts, rowsOut, offsetsOut,
                  fIds = *fIds, fCounts = *fCounts, fScan = *fScan,
                  fScatter = *fScatter, fOffsets = *fOffsets,
                  &instr]() mutable -> Status {
    int64_t rows = part.rows, segments = part.segments,
            cells = segments * part.blocks;
    int32_t window = part.window, shift = part.shift, nx = part.n[0],
            ny = part.n[1], nz = part.n[2], blocks = part.blocks;
    if (CUresult r = api->cuMemsetD8Async(counts, 0, size_t(cells) * 4, stream);
        r != CUDA_SUCCESS)
      return opError(instr, "clearing the window counts: " + api->describe(r));
    void *idParams[] = {&coords, &rows, &window, &shift, &nx, &ny, &nz, &ids};
    TRELLIS_RETURN_IF_ERROR(
        launch1d(fIds, rows, idParams, instr, "the window ids"));
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
    TRELLIS_RETURN_IF_ERROR(launchBlocks(fCounts, unsigned(blocks), 256,
                                         countParams, "the window counts"));
    void *scanParams[] = {&counts, &cells};
    TRELLIS_RETURN_IF_ERROR(
        launchBlocks(fScan, 1, 1024, scanParams, "the window count scan"));
    void *scatterParams[] = {&ids, &rows, &blocks, &counts, &rowsOut};
    TRELLIS_RETURN_IF_ERROR(launchBlocks(fScatter, unsigned(blocks), 256,
                                         scatterParams, "the window scatter"));
    void *offsetParams[] = {&counts, &blocks, &segments, &rows, &offsetsOut};
    return launch1d(fOffsets, segments + 1, offsetParams, instr,
                    "the window offsets");
  };
  return true;
}

/// trellis.sparse.parent_neighbor_map: the fine set's map through the parent
/// rows bind() computed.
Result<bool> GpuExecutor::Impl::buildParentNeighborMapCommand(Prepared &p,
                                                              Node &node) {
  const Instr &instr = *node.instr;
  auto f = runtimeKernel("trellis_sparse_parent_neighbors");
  if (!f)
    return opError(instr, f.message());
  if (node.aux.size() != 1)
    return opError(instr, "its parent rows were not uploaded");
  CUdeviceptr nbr = address(p, node.in[0]), parents = node.aux[0],
              out = address(p, node.out[0]);
  int64_t entries =
      int64_t(bytesOf(slotType(p, node.out[0])) / sizeof(int32_t));
  node.command = [this, f = *f, nbr, parents, out, entries,
                  &instr]() mutable -> Status {
    void *params[] = {&nbr, &parents, &out, &entries};
    return launch1d(f, entries, params, instr, "the parent neighbour map");
  };
  return true;
}

/// trellis.sparse.group_norm: the statistics by the runtime's reduction
/// kernels over the chunk list, then the generated normalization.
Result<bool> GpuExecutor::Impl::buildSparseGroupNormCommand(Prepared &p,
                                                            Node &node) {
  const Instr &instr = *node.instr;
  const ValueType &x = slotType(p, node.in[0]);
  const ValueType &out = slotType(p, node.out[0]);
  const char *sfx = typeSuffix(x.dtype);
  auto kernel = [&](const std::string &name) -> Result<CUfunction> {
    auto f = runtimeKernel(name + "_" + sfx);
    if (!f)
      return opError(instr, f.message());
    return f;
  };
  const int64_t rows = out.shape.at(0);
  const int32_t c = int32_t(rowElems(out));

  auto *coords = std::get_if<CoordsPtr>(&boundValue(p, node.in[1]));
  if (!coords || !*coords)
    return opError(instr, "its coordinate set was not bound");
  auto groups = instr.intAttr("groups");
  auto eps = instr.floatAttr("eps");
  if (!groups || !eps || *groups < 1 || c % *groups != 0)
    return opError(instr, "malformed group count or eps");
  for (int s : {node.in[2], node.in[3]})
    if (slotType(p, s).dtype != DType::F32)
      return opError(instr, "the GPU group norm takes f32 γ and β");
  TRELLIS_RETURN_IF_ERROR(checkAddressable(p, node));
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
  CUdeviceptr src = address(p, node.in[0]),
              offsets = p.slots[root(p, node.in[1])].aux,
              coordsPtr = address(p, node.in[1]), st = address(p, node.scratch),
              part = st + alignUp(size_t(items) * 2 * 4), chunks = node.aux[0],
              gamma = address(p, node.in[2]), beta = address(p, node.in[3]),
              dst = address(p, node.out[0]);
  float e = float(*eps);
  unsigned threads = unsigned(std::min(256, (width + 31) / 32 * 32));
  node.command = [this, fp = *partial, fr = *reduce, la = *apply, src, offsets,
                  coordsPtr, st, part, chunks, numChunks, gamma, beta, dst,
                  rows, width, g, items, e, threads,
                  &instr]() mutable -> Status {
    for (int32_t centered = 0; centered < 2 && numChunks > 0; ++centered) {
      void *pp[] = {&src, &chunks, &st, &part, &width, &g, &centered};
      if (CUresult r =
              api->cuLaunchKernel(fp, unsigned(numChunks), 1, 1, threads, 1, 1,
                                  0, stream, pp, nullptr);
          r != CUDA_SUCCESS)
        return opError(instr,
                       "launching the group-norm sums: " + api->describe(r));
      void *rp[] = {&chunks, &numChunks, &offsets, &part,    &st,
                    &width,  &g,         &e,       &centered};
      if (CUresult r = api->cuLaunchKernel(fr, unsigned(items), 1, 1, 256, 1, 1,
                                           0, stream, rp, nullptr);
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

} // namespace trellis
