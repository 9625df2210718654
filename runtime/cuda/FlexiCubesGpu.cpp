//===- FlexiCubesGpu.cpp - FlexiCubes mesh extraction on the GPU ----------===//
//
// Host side of the GPU FlexiCubes (kernels: runtime/kernels/flexicubes.cuh,
// in the runtime kernel module). The same mesh as the CPU reference
// (runtime/mesh/FlexiCubes.cpp): the candidate, surface and quad sets are
// dense bitmaps whose popcount scans give every element its place in the
// CPU's ascending order, so vertices and faces are written straight to their
// final index and only the final arrays come back. The host waits three times
// for counts (vertex slots, surface cubes, output sizes) and once per pass of
// the ambiguous-face resolution (usually one or two). One call is a
// FlexiCubesRun (its stream, kernels, buffers and first error) whose steps
// run in order: inputs, active cubes, vertices and cases, surface cubes,
// ambiguity passes, output counts, dual vertices and quads, download.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/GpuExecutorImpl.h"

#include "runtime/kernels/flexicubes.cuh"

#include <algorithm>
#include <array>
#include <cstring>

namespace trellis {

namespace {
#include "runtime/mesh/FlexiCubesTables.inc"

constexpr int kEdges[12][2] = {{0, 1}, {1, 5}, {4, 5}, {0, 4}, {2, 3}, {3, 7},
                               {6, 7}, {2, 6}, {2, 0}, {3, 1}, {7, 5}, {6, 4}};

/// The kernels' view of the generated tables; facePairing as in
/// FlexiCubes.cpp (bit 0: the two face edges at each inside corner share a
/// group, bit 1: the same at each outside corner).
const TrellisFcTables &deviceTables() {
  static const TrellisFcTables tables = [] {
    TrellisFcTables t;
    std::memset(&t, 0xff, sizeof(t));
    for (int alt = 0; alt < 2; ++alt)
      for (int c = 0; c < 256; ++c) {
        const auto &groups = alt ? kAltDualGroups[c] : kDualGroups[c];
        int n = alt ? kAltNumDualVertices[c] : kNumDualVertices[c];
        t.numDual[alt][c] = int8_t(n);
        std::memcpy(t.groups[alt][c], groups, sizeof(t.groups[alt][c]));
        for (int g = 0; g < n; ++g)
          for (int j = 0; j < 7 && groups[g][j] >= 0; ++j)
            t.edgeGroup[alt][c][groups[g][j]] = int8_t(g);
        for (int f = 0; f < 6; ++f) {
          int axis = f / 2, side = f % 2;
          bool in = true, out = true;
          for (int corner = 0; corner < 8; ++corner) {
            if (((corner >> axis) & 1) != side)
              continue;
            int found[2], k = 0;
            for (int e = 0; e < 12; ++e) {
              int a = kEdges[e][0], b = kEdges[e][1];
              if (((a >> axis) & 1) != side || ((b >> axis) & 1) != side)
                continue;
              if (a == corner || b == corner)
                found[k++] = t.edgeGroup[alt][c][e];
            }
            bool same = k == 2 && found[0] >= 0 && found[0] == found[1];
            if ((c >> corner) & 1)
              in = in && same;
            else
              out = out && same;
          }
          t.facePairing[alt][c][f] = uint8_t((in ? 1 : 0) | (out ? 2 : 0));
        }
      }
    for (int c = 0; c < 256; ++c) {
      t.ambiguousFaces[c] = kAmbiguousFaces[c];
      t.primaryInside[c] = kPrimaryGroupsInside[c];
    }
    return t;
  }();
  return tables;
}

Error err(std::string msg, const std::string &detail) {
  msg += detail;
  return Error{std::move(msg)};
}

} // namespace

Result<CUdeviceptr> GpuExecutor::Impl::scratch(const std::string &name,
                                               size_t bytes) {
  auto &b = flexiScratch.buffers[name];
  bytes = alignUp(std::max<size_t>(bytes, 1));
  if (b.first && b.second >= bytes)
    return b.first;
  deallocate(b.first);
  b = {0, 0};
  // Some headroom, so that slightly larger inputs reuse the buffer.
  size_t n = alignUp(bytes + bytes / 8);
  if (Status s = allocate(b.first, n, "FlexiCubes' '" + name + "'"); !s)
    return Error{"FlexiCubes on the GPU: " + s.message()};
  b.second = n;
  return b.first;
}

namespace {

/// Items per block of the exclusive scans.
constexpr int64_t kTile = 2048;

/// One extractFlexiCubes call on the GPU: its stream, kernels, events,
/// scratch buffers and counts, and the first error. Once `status` holds an
/// error the helpers enqueue nothing more; each step returns it at its next
/// wait. The kernels take their arguments by address, so the sizes are
/// members too. The steps run in the order they are declared.
struct FlexiCubesRun {
  GpuExecutor::Impl &m;
  const Api &api;
  CUstream st;
  const HostTensor &coords, &fields;
  int32_t Ri, W, Wv; // resolution; bitmap words per cube row, per vertex row
  int64_t N, cw, vw; // cubes; words of the cube and of the vertex bitmaps
  int32_t one = 1, zero = 0;
  std::map<std::string, CUfunction> fn;
  Status status = Status::ok();
  /// Bounds of the upload, compute and download times.
  CUevent ev[4] = {};

  // Device buffers: inputs; bitmaps over the grid and their prefixes.
  CUdeviceptr dCoords = 0, dFields = 0, dTables = 0;
  CUdeviceptr active = 0, activePrefix = 0, flags = 0, counters = 0;
  CUdeviceptr rowOf = 0, vert = 0, vertPrefix = 0, cand = 0, surf = 0;
  CUdeviceptr surfPrefix = 0, caseDense = 0, quad[3] = {}, quadCount = 0;
  CUdeviceptr quadPrefix = 0;
  // Per vertex slot, per surface cube, and the outputs.
  CUdeviceptr vsdf = 0, vpos = 0, vcol = 0;
  CUdeviceptr surfKey = 0, surfCase = 0, surfAlt = 0, surfNum = 0;
  CUdeviceptr classPrefix = 0, classTotal = 0, base = 0, gamma = 0;
  CUdeviceptr outV = 0, outA = 0, faces = 0;
  // Read back: range, duplicate, flip, flips; then the counts.
  int32_t hostFlags[4] = {0, 0, 0, 0};
  uint32_t nVert = 0, nSurf = 0, nCand = 0, counts[4] = {0, 0, 0, 0};
  uint32_t nQuads = 0;
  int64_t ns = 0, nv = 0;

  FlexiCubesRun(GpuExecutor::Impl &m, const HostTensor &coords,
                const HostTensor &fields, int R)
      : m(m), api(*m.api), st(m.stream), coords(coords), fields(fields), Ri(R),
        W((R + 31) / 32), Wv((R + 32) / 32), N(coords.dim(0)),
        cw(int64_t(R) * R * W), vw(int64_t(R + 1) * (R + 1) * Wv) {}
  FlexiCubesRun(const FlexiCubesRun &) = delete;
  FlexiCubesRun &operator=(const FlexiCubesRun &) = delete;
  ~FlexiCubesRun() {
    for (int i = 0; i < 4; ++i)
      if (ev[i])
        api.cuEventDestroy(ev[i]);
  }

  CUdeviceptr buffer(const char *name, size_t bytes);
  void ok(CUresult r, const char *what);
  void launch(const char *name, int64_t threads, unsigned block,
              std::vector<void *> params);
  CUdeviceptr scan(bool cls, const char *sumsName, CUdeviceptr in, int64_t n,
                   int32_t popc, CUdeviceptr outPtr);
  void readBack(void *dst, CUdeviceptr src, size_t bytes);
  void wait();

  Status loadKernels();
  void createEvents();
  Status uploadInputs();
  Status activeCubes();
  Status verticesAndCases(mesh::MeshResult &out);
  void surfaceCubes();
  Status resolveAmbiguities(mesh::MeshResult &out);
  Status countOutputs();
  void dualVerticesAndQuads(mesh::MeshResult &out);
  Status download(mesh::MeshResult &out);
};

// -- Helpers ------------------------------------------------------------------

CUdeviceptr FlexiCubesRun::buffer(const char *name, size_t bytes) {
  if (!status)
    return 0;
  auto b = m.scratch(name, bytes);
  if (!b) {
    status = Error{b.message()};
    return 0;
  }
  return *b;
}

void FlexiCubesRun::ok(CUresult r, const char *what) {
  if (status)
    status = m.check(r, what);
}

void FlexiCubesRun::launch(const char *name, int64_t threads, unsigned block,
                           std::vector<void *> params) {
  if (!status || threads <= 0)
    return;
  ok(api.cuLaunchKernel(fn[name], unsigned((threads + block - 1) / block), 1, 1,
                        block, 1, 1, 0, st, params.data(), nullptr),
     name);
}

/// Exclusive scan of n items into `outPtr`; returns the address of the total.
CUdeviceptr FlexiCubesRun::scan(bool cls, const char *sumsName, CUdeviceptr in,
                                int64_t n, int32_t popc, CUdeviceptr outPtr) {
  const size_t elem = cls ? 16 : 4;
  int64_t nb = std::max<int64_t>(1, (n + kTile - 1) / kTile);
  CUdeviceptr sums = buffer(sumsName, size_t(nb + 1) * elem);
  if (cls) {
    launch("trellis_fc_scan_reduce_cls", nb * 256, 256, {&in, &n, &sums});
    launch("trellis_fc_scan_blocks_cls", 1024, 1024, {&sums, &nb});
    launch("trellis_fc_scan_down_cls", nb * 256, 256,
           {&in, &n, &sums, &outPtr});
  } else {
    launch("trellis_fc_scan_reduce_u32", nb * 256, 256,
           {&in, &n, &popc, &sums});
    launch("trellis_fc_scan_blocks_u32", 1024, 1024, {&sums, &nb});
    launch("trellis_fc_scan_down_u32", nb * 256, 256,
           {&in, &n, &popc, &sums, &outPtr});
  }
  return sums + size_t(nb) * elem;
}

void FlexiCubesRun::readBack(void *dst, CUdeviceptr src, size_t bytes) {
  if (status && bytes)
    ok(api.cuMemcpyDtoHAsync(dst, src, bytes, st), "cuMemcpyDtoHAsync");
}

void FlexiCubesRun::wait() {
  if (status)
    ok(api.cuStreamSynchronize(st), "cuStreamSynchronize");
}

// -- Steps --------------------------------------------------------------------

Status FlexiCubesRun::loadKernels() {
  for (const char *name :
       {"trellis_fc_scan_reduce_u32", "trellis_fc_scan_blocks_u32",
        "trellis_fc_scan_down_u32", "trellis_fc_scan_reduce_cls",
        "trellis_fc_scan_blocks_cls", "trellis_fc_scan_down_cls",
        "trellis_fc_mark", "trellis_fc_rows", "trellis_fc_dilate",
        "trellis_fc_vertices", "trellis_fc_cases", "trellis_fc_surface",
        "trellis_fc_ambiguity", "trellis_fc_classes", "trellis_fc_quad_counts",
        "trellis_fc_dual", "trellis_fc_quads"}) {
    auto f = m.runtimeKernel(name);
    if (!f)
      return Error{f.message() + " (rebuild the bundle with this trellisc "
                                 "for the GPU FlexiCubes)"};
    fn[name] = *f;
  }
  return Status::ok();
}

void FlexiCubesRun::createEvents() {
  for (CUevent &e : ev)
    api.cuEventCreate(&e, CU_EVENT_DEFAULT);
}

/// Coords, fields (unless still on the device) and tables; the upload time
/// is ev[0] to ev[1].
Status FlexiCubesRun::uploadInputs() {
  api.cuEventRecord(ev[0], st);
  dCoords = buffer("coords", size_t(coords.nbytes()));
  // The mesh decoder's fields are usually still on the device (its last
  // result): read in place, else uploaded.
  CUdeviceptr resident = m.deviceCopyOf(fields);
  if (!resident && !fields.raw() && fields.nbytes())
    return Error{"extractFlexiCubes on the GPU: the fields were kept on the "
                 "device by a run that is no longer the last one"};
  dFields = resident ? resident : buffer("fields", size_t(fields.nbytes()));
  dTables = buffer("tables", sizeof(TrellisFcTables));
  if (status) {
    ok(api.cuMemcpyHtoDAsync(dCoords, coords.data<int32_t>(),
                             size_t(coords.nbytes()), st),
       "uploading coords");
    if (!resident)
      ok(api.cuMemcpyHtoDAsync(dFields, fields.data<float>(),
                               size_t(fields.nbytes()), st),
         "uploading fields");
    ok(api.cuMemcpyHtoDAsync(dTables, &deviceTables(), sizeof(TrellisFcTables),
                             st),
       "uploading tables");
  }
  api.cuEventRecord(ev[1], st);
  return Status::ok();
}

/// Active cubes, their rows; vertex slots and candidates by dilation. Waits
/// for the number of vertex slots and the input checks.
Status FlexiCubesRun::activeCubes() {
  active = buffer("active", size_t(cw) * 4);
  activePrefix = buffer("activePrefix", size_t(cw) * 4);
  flags = buffer("flags", 16);       // range, duplicate, flip, flips
  counters = buffer("counters", 16); // candidates
  rowOf = buffer("rowOf", size_t(N) * 4);
  vert = buffer("vert", size_t(vw) * 4);
  vertPrefix = buffer("vertPrefix", size_t(vw) * 4);
  cand = buffer("cand", size_t(cw) * 4);
  surf = buffer("surf", size_t(cw) * 4);
  surfPrefix = buffer("surfPrefix", size_t(cw) * 4);
  caseDense = buffer("caseDense", size_t(Ri) * Ri * Ri);
  quad[0] = buffer("quadX", size_t(vw) * 4);
  quad[1] = buffer("quadY", size_t(vw) * 4);
  quad[2] = buffer("quadZ", size_t(vw) * 4);
  quadCount = buffer("quadCount", size_t(vw) * 4);
  quadPrefix = buffer("quadPrefix", size_t(vw) * 4);
  if (status) {
    ok(api.cuMemsetD8Async(active, 0, size_t(cw) * 4, st), "memset");
    ok(api.cuMemsetD8Async(flags, 0, 16, st), "memset");
    ok(api.cuMemsetD8Async(counters, 0, 16, st), "memset");
    for (CUdeviceptr q : quad)
      ok(api.cuMemsetD8Async(q, 0, size_t(vw) * 4, st), "memset");
  }
  launch("trellis_fc_mark", N, 256,
         {&dCoords, &N, &Ri, &W, &Wv, &active, &flags});
  scan(false, "sumsActive", active, cw, one, activePrefix);
  launch("trellis_fc_rows", N, 256,
         {&dCoords, &N, &Ri, &W, &Wv, &active, &activePrefix, &rowOf});
  launch("trellis_fc_dilate", vw, 256, {&active, &Ri, &W, &Wv, &vert, &cand});
  CUdeviceptr nVertPtr = scan(false, "sumsVert", vert, vw, one, vertPrefix);
  readBack(hostFlags, flags, 8);
  readBack(&nVert, nVertPtr, 4);
  wait();
  if (!status)
    return status;
  if (hostFlags[0] || hostFlags[1]) {
    // Bad input: the CPU reference finds the first bad row and says so.
    auto cpu = mesh::extractFlexiCubes(coords, fields, Ri);
    if (!cpu)
      return Error{cpu.message()};
    return Error{"extractFlexiCubes on the GPU: invalid coordinates"};
  }
  return Status::ok();
}

/// Vertex values, cases, surface cubes. Waits for the surface and candidate
/// counts.
Status FlexiCubesRun::verticesAndCases(mesh::MeshResult &out) {
  vsdf = buffer("vsdf", size_t(nVert) * 4);
  vpos = buffer("vpos", size_t(nVert) * 12);
  vcol = buffer("vcol", size_t(nVert) * 24);
  const float bias = -1.0f / float(Ri);
  const float defScale = float((1.0 - 1e-8) / (2.0 * Ri));
  float biasArg = bias, defArg = defScale;
  launch("trellis_fc_vertices", vw * 32, 256,
         {&Ri, &W, &Wv, &vert, &vertPrefix, &active, &activePrefix, &rowOf,
          &dFields, &biasArg, &defArg, &vsdf, &vpos, &vcol});
  launch("trellis_fc_cases", cw * 32, 256,
         {&Ri, &W, &Wv, &cand, &vert, &vertPrefix, &vsdf, &surf, &caseDense,
          &counters});
  CUdeviceptr nSurfPtr = scan(false, "sumsSurf", surf, cw, one, surfPrefix);
  readBack(&nSurf, nSurfPtr, 4);
  readBack(&nCand, counters, 4);
  wait();
  if (!status)
    return status;
  out.candidateCubes = nCand;
  out.surfaceCubes = nSurf;
  return Status::ok();
}

/// The surface cubes' keys, cases and quad bitmaps (nSurf > 0).
void FlexiCubesRun::surfaceCubes() {
  ns = nSurf;
  surfKey = buffer("surfKey", size_t(ns) * 4);
  surfCase = buffer("surfCase", size_t(ns));
  surfAlt = buffer("surfAlt", size_t(ns));
  surfNum = buffer("surfNum", size_t(ns));
  classPrefix = buffer("classPrefix", size_t(ns) * 16);
  base = buffer("base", size_t(ns) * 4);
  gamma = buffer("gamma", size_t(ns) * 4);
  launch("trellis_fc_surface", cw * 32, 256,
         {&Ri, &W, &Wv, &surf, &surfPrefix, &caseDense, &surfKey, &surfCase,
          &surfAlt, &quad[0], &quad[1], &quad[2]});
}

/// Ambiguous faces: passes until none flips, one wait each.
Status FlexiCubesRun::resolveAmbiguities(mesh::MeshResult &out) {
  CUdeviceptr changed = flags + 8;
  for (int pass = 0; status; ++pass) {
    ok(api.cuMemsetD8Async(changed, 0, 4, st), "memset");
    launch("trellis_fc_ambiguity", ns, 256,
           {&Ri, &W, &Wv, &ns, &surfKey, &surfCase, &surfAlt, &surf,
            &surfPrefix, &dTables, &changed});
    readBack(hostFlags + 2, changed, 8);
    wait();
    if (!hostFlags[2])
      break;
    if (pass > int64_t(ns))
      return Error{"extractFlexiCubes on the GPU: the ambiguous-face "
                   "resolution does not converge"};
  }
  out.resolvedAmbiguities = hostFlags[3];
  return Status::ok();
}

/// Dual vertices per class and quads: their places, and a wait for the
/// output sizes.
Status FlexiCubesRun::countOutputs() {
  launch("trellis_fc_classes", ns, 256,
         {&ns, &surfCase, &surfAlt, &dTables, &surfNum});
  classTotal = scan(true, "sumsClass", surfNum, ns, zero, classPrefix);
  launch("trellis_fc_quad_counts", vw, 256,
         {&vw, &quad[0], &quad[1], &quad[2], &quadCount});
  CUdeviceptr nQuadPtr =
      scan(false, "sumsQuad", quadCount, vw, zero, quadPrefix);
  readBack(counts, classTotal, 16);
  readBack(&nQuads, nQuadPtr, 4);
  wait();
  if (!status)
    return status;
  nv = int64_t(counts[0]) + 2 * int64_t(counts[1]) + 3 * int64_t(counts[2]) +
       4 * int64_t(counts[3]);
  if (nv > int64_t(INT32_MAX))
    return Error{"extractFlexiCubes: too many vertices for I32 faces"};
  return Status::ok();
}

/// Dual vertices and faces, each written to its final index (nQuads > 0).
void FlexiCubesRun::dualVerticesAndQuads(mesh::MeshResult &out) {
  outV = buffer("outV", size_t(nv) * 12);
  outA = buffer("outA", size_t(nv) * 24);
  faces = buffer("faces", size_t(nQuads) * 24);
  launch("trellis_fc_dual", ns, 128,
         {&Ri,         &W,        &Wv,      &ns,
          &surfKey,    &surfCase, &surfAlt, &classPrefix,
          &classTotal, &dTables,  &active,  &activePrefix,
          &rowOf,      &dFields,  &vert,    &vertPrefix,
          &vsdf,       &vpos,     &vcol,    &outV,
          &outA,       &base,     &gamma});
  launch("trellis_fc_quads", ns, 256,
         {&Ri,         &W,          &Wv,      &ns,      &surfKey,
          &surfCase,   &surfAlt,    &base,    &gamma,   &surf,
          &surfPrefix, &quad[0],    &quad[1], &quad[2], &quadPrefix,
          &vert,       &vertPrefix, &vsdf,    &dTables, &faces});
  out.vertices = HostTensor(DType::F32, {nv, 3});
  out.vertexAttrs = HostTensor(DType::F32, {nv, 6});
  out.faces = HostTensor(DType::I32, {2 * int64_t(nQuads), 3});
}

/// The final arrays into `out` (ev[2] to ev[3]), and the three times.
Status FlexiCubesRun::download(mesh::MeshResult &out) {
  api.cuEventRecord(ev[2], st);
  if (nQuads > 0) {
    readBack(out.vertices.mutableData<float>(), outV,
             size_t(out.vertices.nbytes()));
    readBack(out.vertexAttrs.mutableData<float>(), outA,
             size_t(out.vertexAttrs.nbytes()));
    readBack(out.faces.mutableData<int32_t>(), faces,
             size_t(out.faces.nbytes()));
  }
  api.cuEventRecord(ev[3], st);
  wait();
  if (!status)
    return status;
  float ms[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i)
    api.cuEventElapsedTime(&ms[i], ev[i], ev[i + 1]);
  m.report.flexiUploadMs = ms[0];
  m.report.flexiComputeMs = ms[1];
  m.report.flexiDownloadMs = ms[2];
  return Status::ok();
}

} // namespace

Result<mesh::MeshResult>
GpuExecutor::extractFlexiCubes(const HostTensor &coords,
                               const HostTensor &fields, int R) {
  using mesh::kMeshHeadChannels;
  Impl &m = *impl_;
  TRELLIS_RETURN_IF_ERROR(m.makeCurrent());
  // The CPU's checks and messages.
  TRELLIS_RETURN_IF_ERROR(mesh::checkFlexiCubesInput(coords, fields, R));
  if (R > 512)
    return err("extractFlexiCubes on the GPU: resolution up to 512, got ",
               std::to_string(R));
  const int64_t N = coords.dim(0);
  if (N >= int64_t(INT32_MAX) / kMeshHeadChannels)
    return Error{"extractFlexiCubes on the GPU: too many cubes"};

  mesh::MeshResult out;
  out.vertices = HostTensor(DType::F32, {0, 3});
  out.faces = HostTensor(DType::I32, {0, 3});
  out.vertexAttrs = HostTensor(DType::F32, {0, 6});
  m.report.flexiUploadMs = m.report.flexiComputeMs = 0;
  m.report.flexiDownloadMs = 0;
  if (N == 0)
    return out;

  // With lowMemory the scratch goes when the extraction ends, however it
  // ends: the next generation's stages need the memory more than the next
  // extraction needs the reuse.
  struct ReleaseScratch {
    Impl &m;
    ~ReleaseScratch() {
      if (!m.options.lowMemory)
        return;
      m.api->cuStreamSynchronize(m.stream);
      for (auto &[name, buffer] : m.flexiScratch.buffers)
        m.deallocate(buffer.first);
      m.flexiScratch.buffers.clear();
    }
  } releaseScratch{m};
  FlexiCubesRun run(m, coords, fields, R);
  TRELLIS_RETURN_IF_ERROR(run.loadKernels());
  run.createEvents();
  TRELLIS_RETURN_IF_ERROR(run.uploadInputs());
  TRELLIS_RETURN_IF_ERROR(run.activeCubes());
  TRELLIS_RETURN_IF_ERROR(run.verticesAndCases(out));
  if (run.nSurf > 0) {
    run.surfaceCubes();
    TRELLIS_RETURN_IF_ERROR(run.resolveAmbiguities(out));
    TRELLIS_RETURN_IF_ERROR(run.countOutputs());
    if (run.nQuads > 0)
      run.dualVerticesAndQuads(out);
  }
  TRELLIS_RETURN_IF_ERROR(run.download(out));
  return out;
}

} // namespace trellis
