//===- SparseConv.cpp - Sparse 3D convolutions on the GPU -----------------===//
//
// The commands of trellis.sparse.conv3d: how a conv runs (convPlan: the
// implicit-GEMM kernel of runtime/kernels/sparse_conv_sm90.cuh, the taps-first
// order, or the generated gather and cuBLASLt) and the command of each path.
// sparseScratchBytes() asks convPlan() too, so the plan and the command agree.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/GpuExecutorImpl.h"
#include "runtime/cuda/SparseSupport.h"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace trellis {

namespace gpuexec {

namespace {

/// Whether the taps-first order's f32 products [k³, rows of x, Cout] fit the
/// scratch its tap-sum kernel was generated for (the conv's
/// trellis.taps_scratch_bytes).
bool convTapsFit(const Instr &conv, const ValueType &x, const ValueType &w) {
  int64_t kvol = w.shape[1] * w.shape[2] * w.shape[3];
  auto cap = conv.intAttr("trellis.taps_scratch_bytes");
  return cap && kvol * x.shape[0] * w.shape[0] * int64_t(sizeof(float)) <= *cap;
}

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

} // namespace

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

} // namespace gpuexec

/// trellis.sparse.conv3d: a 1×1×1 conv is one GEMM; a 3×3×3 one takes the
/// path convPlan() picks: implicit GEMM, taps first, or the gathered rows
/// (chunk by chunk) times W by cuBLASLt.
Result<bool> GpuExecutor::Impl::buildSparseConvCommand(Prepared &p,
                                                       Node &node) {
  const Instr &instr = *node.instr;
  const ValueType &x = slotType(p, node.in[0]);
  const int64_t rows = slotType(p, node.out[0]).shape.at(0);
  const ValueType &w = slotType(p, node.in[1]);
  int bias = -1, neighbors = -1;
  // Optional operands: the bias (features' dtype) and the neighbour map
  // (int32 [N, k³], built on the device).
  for (size_t i = 2; i < node.in.size(); ++i)
    (slotType(p, node.in[i]).dtype == DType::I32 ? neighbors : bias) =
        node.in[i];
  if (w.dtype != x.dtype || (bias >= 0 && slotType(p, bias).dtype != x.dtype))
    return opError(instr, "the GPU sparse conv needs x, W and b of one "
                          "dtype");
  int64_t cout = w.shape[0], cin = w.shape[4], k = w.shape[1];
  CUdeviceptr b = bias >= 0 ? address(p, bias) : 0;
  if (k == 1) { // spec §6.4: out = x·M + b, M = W's buffer as [Cin, Cout]
    TRELLIS_RETURN_IF_ERROR(
        buildGemm(p, node, address(p, node.in[1]), address(p, node.in[0]),
                  address(p, node.out[0]), b, x.dtype, cout, rows, cin,
                  /*transA=*/false, "", node.command));
    return true;
  }
  if (neighbors < 0)
    return opError(instr, "a 3x3x3 sparse conv needs a neighbour map");
  int32_t kvol = int32_t(k * k * k);
  int64_t kdim = kvol * cin;
  size_t elem = dtypeSize(x.dtype);
  const ConvPlan plan =
      convPlan(instr, x, w, rows, attentionFamily == TRELLIS_ATTN_SM90A);
  if (plan.path == ConvPlan::Path::Implicit)
    return buildImplicitConvCommand(p, node, plan.tiles, neighbors, b);
  // The other paths run generated kernels (32-bit indices).
  TRELLIS_RETURN_IF_ERROR(checkAddressable(p, node));
  if (plan.path == ConvPlan::Path::TapsFirst)
    return buildTapsFirstConvCommand(p, node, neighbors, b);
  // The generated gather, chunk by chunk: (x, neighbours, col, row0, rows).
  int64_t chunk =
      int64_t(bytesOf(slotType(p, node.scratch)) / (size_t(kdim) * elem));
  std::vector<std::function<Status()>> steps;
  CUdeviceptr xp = address(p, node.in[0]), nbr = address(p, neighbors),
              col = address(p, node.scratch), o = address(p, node.out[0]);
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    int64_t n = std::min(chunk, rows - r0);
    auto gatherLaunch = rowsLaunch(instr, "trellis.launch", n);
    if (!gatherLaunch)
      return opError(instr, gatherLaunch.message());
    std::function<Status()> gemm;
    // out rows [r0, r0+n) = col[n, K] · W[Cout, K]ᵀ (+ b), as linear.
    TRELLIS_RETURN_IF_ERROR(
        buildGemm(p, node, address(p, node.in[1]), col,
                  o + CUdeviceptr(r0 * cout * int64_t(elem)), b, x.dtype, cout,
                  n, kdim, /*transA=*/true, "", gemm));
    steps.push_back([this, l = *gatherLaunch, xp, nbr, col, r0, n, gemm,
                     &instr]() mutable -> Status {
      void *params[] = {&xp, &nbr, &col, &r0, &n};
      TRELLIS_RETURN_IF_ERROR(
          launch(l, params, instr, "the sparse conv gather"));
      return gemm();
    });
  }
  node.command = [steps]() -> Status {
    for (const auto &step : steps)
      TRELLIS_RETURN_IF_ERROR(step());
    return Status::ok();
  };
  return true;
}

/// The implicit-GEMM conv of `tiles` (sm_90a): `neighbors` the neighbour
/// map's slot, `b` the bias or 0.
Result<bool> GpuExecutor::Impl::buildImplicitConvCommand(Prepared &p,
                                                         Node &node,
                                                         const ConvTiles &tiles,
                                                         int neighbors,
                                                         CUdeviceptr b) {
  const Instr &instr = *node.instr;
  const ValueType &w = slotType(p, node.in[1]);
  const int64_t rows = slotType(p, node.out[0]).shape.at(0);
  int64_t cout = w.shape[0], cin = w.shape[4], k = w.shape[1];
  int32_t kvol = int32_t(k * k * k), cin32 = int32_t(cin);
  // Implicit GEMM (sm_90a): the neighbour rows go straight into shared
  // memory; no im2col rows in device memory.
  Result<CUfunction> f = runtimeKernel(tiles.kernel());
  if (!f)
    return opError(instr, f.message());
  unsigned smem = tiles.smem(kvol);
  if (CUresult r = api->cuFuncSetAttribute(
          *f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(smem));
      r != CUDA_SUCCESS)
    return opError(instr,
                   "cuFuncSetAttribute (implicit conv): " + api->describe(r));
  CUdeviceptr xp = address(p, node.in[0]), nbr = address(p, neighbors),
              wp = address(p, node.in[1]), o = address(p, node.out[0]);
  int32_t cout32 = int32_t(cout);
  unsigned gridX = unsigned((rows + tiles.bm - 1) / tiles.bm),
           gridY = unsigned(cout / tiles.bn), block = unsigned(2 * tiles.bm);
  node.command = [this, f = *f, xp, nbr, wp, b, o, rows, cin32, cout32, kvol,
                  gridX, gridY, block, smem, &instr]() mutable -> Status {
    if (rows == 0)
      return Status::ok();
    int64_t n = rows;
    void *params[] = {&xp, &nbr, &wp, &b, &o, &n, &cin32, &cout32, &kvol};
    CUresult r = api->cuLaunchKernel(f, gridX, gridY, 1, block, 1, 1, smem,
                                     stream, params, nullptr);
    if (r != CUDA_SUCCESS)
      return opError(instr,
                     "launching the implicit-GEMM conv: " + api->describe(r));
    return Status::ok();
  };
  return true;
}

/// The taps-first conv: the k³ products of every feature row (one
/// strided-batched GEMM into the scratch), then the generated tap sum.
Result<bool> GpuExecutor::Impl::buildTapsFirstConvCommand(Prepared &p,
                                                          Node &node,
                                                          int neighbors,
                                                          CUdeviceptr b) {
  const Instr &instr = *node.instr;
  const ValueType &x = slotType(p, node.in[0]), &w = slotType(p, node.in[1]);
  const int64_t rows = slotType(p, node.out[0]).shape.at(0);
  int64_t cout = w.shape[0], cin = w.shape[4], k = w.shape[1];
  int32_t kvol = int32_t(k * k * k);
  int64_t kdim = kvol * cin;
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
  TRELLIS_RETURN_IF_ERROR(
      buildGemm(p, node, address(p, node.in[1]), address(p, node.in[0]),
                address(p, node.scratch), 0, x.dtype, cout, rowsIn, cin,
                /*transA=*/true, "", gemm, taps));
  // The generated tap sum: (y, neighbours, [bias,] out, rows, rowsIn).
  auto sum = rowsLaunch(instr, "trellis.tap_sum", rows);
  if (!sum)
    return opError(instr, sum.message());
  auto args = std::make_shared<std::vector<CUdeviceptr>>();
  args->push_back(address(p, node.scratch));
  args->push_back(address(p, neighbors));
  if (b)
    args->push_back(b);
  args->push_back(address(p, node.out[0]));
  node.command = [this, l = *sum, gemm, args, rows, rowsIn,
                  &instr]() mutable -> Status {
    if (rows == 0)
      return Status::ok();
    TRELLIS_RETURN_IF_ERROR(gemm());
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

} // namespace trellis
