//===- GemmCommands.cpp - cuBLASLt GEMM commands and their tuning ---------===//
//
// buildGemm() turns one GEMM of an op (linear, im2col conv, sparse conv) into
// a cuBLASLt command: descriptors and layouts, the heuristic's candidates,
// the pick of this process or the GEMM tuning cache, else the fastest
// split-K-free candidate timed on the op's own buffers (on the setup stream).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/GpuExecutorImpl.h"

#include <iterator>
#include <string>

namespace trellis {

namespace {

cudaDataType_t cudaType(DType t) {
  switch (t) {
  case DType::F16:
    return CUDA_R_16F;
  case DType::BF16:
    return CUDA_R_16BF;
  default:
    return CUDA_R_32F;
  }
}

/// α and β of the GEMMs (β = 1 adds a residual).
const float kZero = 0.0f, kOne = 1.0f;

} // namespace

/// One GEMM as buildGemm() set it up: its descriptors and operands, the
/// heuristic's candidates, and what its tuning key is made of.
struct GpuExecutor::Impl::GemmProblem {
  const Instr &instr;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc, ld;
  CUdeviceptr a, b, c, d;
  const float *beta;
  int64_t m, n, k, lda;
  bool transA;
  DType dtype;
  cublasLtEpilogue_t epilogue;
  cudaDataType_t typeD;
  const GemmLayout &layout;
  const cublasLtMatmulHeuristicResult_t *heuristics;
  int found;
};

Status GpuExecutor::Impl::buildGemm(Prepared &p, Node &node, CUdeviceptr a,
                                    CUdeviceptr b, CUdeviceptr d,
                                    CUdeviceptr bias, DType dtype, int64_t m,
                                    int64_t n, int64_t k, bool transA,
                                    const std::string &act,
                                    std::function<Status()> &out,
                                    const GemmLayout &layout) {
  // Column-major D[m, n] = op(A)[m, k] · B[k, n] (+ bias[m]) (GELU).
  const Instr &instr = *node.instr;
  auto fail = [&](Status s) { return opError(instr, s.message()); };
  cublasLtMatmulDesc_t desc = nullptr;
  const cublasComputeType_t compute = layout.tf32 && dtype == DType::F32
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  if (Status s =
          check(api->cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F),
                "cublasLtMatmulDescCreate");
      !s)
    return fail(s);
  p.descs.push_back(desc);
  cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = CUBLAS_OP_N;
  // Every descriptor call is checked; the first failure is reported.
  cublasStatus_t setup = CUBLAS_STATUS_SUCCESS;
  auto keep = [&](cublasStatus_t r) {
    if (setup == CUBLAS_STATUS_SUCCESS)
      setup = r;
  };
  keep(api->cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                           &opA, sizeof(opA)));
  keep(api->cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                           &opB, sizeof(opB)));
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (act == "gelu_tanh")
    epilogue = bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
  else if (!act.empty())
    return opError(instr, "activation '" + act + "' has no GEMM epilogue");
  else if (bias)
    epilogue = CUBLASLT_EPILOGUE_BIAS;
  keep(api->cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                           &epilogue, sizeof(epilogue)));
  if (bias)
    keep(api->cublasLtMatmulDescSetAttribute(
        desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  const bool fp8 = layout.fp8ScaleA != 0;
  if (fp8) {
    // E4M3 operands with per-tensor dequantize scales (device pointers);
    // the bias, C and D keep the GEMM's dtype.
    keep(api->cublasLtMatmulDescSetAttribute(
        desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &layout.fp8ScaleA,
        sizeof(layout.fp8ScaleA)));
    keep(api->cublasLtMatmulDescSetAttribute(
        desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &layout.fp8ScaleB,
        sizeof(layout.fp8ScaleB)));
    if (bias) {
      cudaDataType_t biasType = cudaType(dtype);
      keep(api->cublasLtMatmulDescSetAttribute(
          desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType,
          sizeof(biasType)));
    }
    if (layout.fp8ScaleD) // D = E4M3(scale_D · epilogue(...)), C in dtype
      keep(api->cublasLtMatmulDescSetAttribute(
          desc, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, &layout.fp8ScaleD,
          sizeof(layout.fp8ScaleD)));
  }
  cudaDataType_t type = fp8 ? CUDA_R_8F_E4M3 : cudaType(dtype);
  cudaDataType_t typeD = fp8 && layout.fp8ScaleD
                             ? CUDA_R_8F_E4M3
                             : cudaType(layout.outType.value_or(dtype));
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr, ld = nullptr;
  int64_t lda = layout.lda ? layout.lda : transA ? k : m;
  if (transA)
    keep(api->cublasLtMatrixLayoutCreate(&la, type, uint64_t(k), uint64_t(m),
                                         lda));
  else
    keep(api->cublasLtMatrixLayoutCreate(&la, type, uint64_t(m), uint64_t(k),
                                         lda));
  keep(api->cublasLtMatrixLayoutCreate(&lb, type, uint64_t(k), uint64_t(n), k));
  keep(
      api->cublasLtMatrixLayoutCreate(&ld, typeD, uint64_t(m), uint64_t(n), m));
  p.layouts.insert(p.layouts.end(), {la, lb, ld});
  lc = ld;
  if (typeD == CUDA_R_8F_E4M3) { // C keeps the GEMM's dtype
    keep(api->cublasLtMatrixLayoutCreate(&lc, cudaType(dtype), uint64_t(m),
                                         uint64_t(n), m));
    p.layouts.push_back(lc);
  }
  if (layout.batch > 1) {
    int32_t count = layout.batch;
    std::pair<cublasLtMatrixLayout_t, int64_t> strided[] = {
        {la, layout.strideA},
        {lb, layout.strideB},
        {ld, layout.strideD},
        {lc, layout.strideD}};
    for (auto [l, stride] : strided) {
      keep(api->cublasLtMatrixLayoutSetAttribute(
          l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
      keep(api->cublasLtMatrixLayoutSetAttribute(
          l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
          sizeof(stride)));
    }
  }
  cublasLtMatmulPreference_t pref = nullptr;
  keep(api->cublasLtMatmulPreferenceCreate(&pref));
  size_t ws = kGemmWorkspaceBytes;
  keep(api->cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  if (setup != CUBLAS_STATUS_SUCCESS) {
    if (pref)
      api->cublasLtMatmulPreferenceDestroy(pref);
    return opError(instr, "setting up the cuBLASLt GEMM failed: " +
                              api->describe(setup));
  }
  // D = α·op(A)·B (+ bias) (+ β·C: the residual, laid out as D), α = 1,
  // β = 1 with a residual, else 0.
  const float *beta = layout.residual ? &kOne : &kZero;
  // Without a residual C is D (in place), except beside an E4M3 D: C's
  // layout differs then, which in place is invalid; unread at β = 0, it is
  // passed as null (as PyTorch's scaled_gemm does).
  CUdeviceptr c = layout.residual           ? layout.residual
                  : typeD == CUDA_R_8F_E4M3 ? 0
                                            : d;
  // Up to 8 candidates from the heuristic; with several, each distinct GEMM
  // (shape, dtype, epilogue) is timed once on its real buffers and the
  // fastest kept (cuBLASLt's first choice is not always the best for the
  // thin shapes here). Only candidates without split-K compete, and only
  // when the first has none: each output element is then one CTA's K loop
  // in the same k order, so the choice changes the time, not the bits.
  constexpr int kCandidates = std::size(GemmHeuristics{}.results);
  const std::string problemKey =
      std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
      (transA ? "T" : "N") + std::to_string(int(dtype)) + "e" +
      std::to_string(int(epilogue)) + "l" + std::to_string(lda) + "b" +
      std::to_string(layout.batch) + "s" + std::to_string(layout.strideA) +
      "," + std::to_string(layout.strideB) + "," +
      std::to_string(layout.strideD) + "d" + std::to_string(int(typeD)) +
      (layout.residual ? "r" : "") + (layout.tf32 ? "t" : "") +
      (fp8 ? "f8" : "");
  auto [asked, isNew] = gemmHeuristics.try_emplace(problemKey);
  GemmHeuristics &answer = asked->second;
  if (isNew)
    answer.status = api->cublasLtMatmulAlgoGetHeuristic(
        lt, desc, la, lb, lc, ld, pref, options.tuneGemms ? kCandidates : 1,
        answer.results, &answer.found);
  api->cublasLtMatmulPreferenceDestroy(pref);
  const cublasStatus_t hs = answer.status;
  const int found = answer.found;
  const cublasLtMatmulHeuristicResult_t *heuristics = answer.results;
  if (hs != CUBLAS_STATUS_SUCCESS || found == 0)
    return opError(instr, "cuBLASLt has no algorithm for this GEMM (m=" +
                              std::to_string(m) + ", n=" + std::to_string(n) +
                              ", k=" + std::to_string(k) + ", " +
                              api->describe(hs) + ")");
  if (answer.picked < 0) {
    const GemmProblem problem{
        instr, desc,     la,    lb,     lc,         ld,   a,   b,
        c,     d,        beta,  m,      n,          k,    lda, transA,
        dtype, epilogue, typeD, layout, heuristics, found};
    TRELLIS_RETURN_IF_ERROR(pickGemmAlgo(problem, answer.picked));
  }
  const cublasLtMatmulAlgo_t algo = heuristics[answer.picked].algo;
  out = [this, desc, la, lb, lc, ld, algo, a, b, c, d, beta,
         &instr]() -> Status {
    cublasStatus_t s = api->cublasLtMatmul(
        lt, desc, &kOne, reinterpret_cast<const void *>(a), la,
        reinterpret_cast<const void *>(b), lb, beta,
        reinterpret_cast<const void *>(c), lc, reinterpret_cast<void *>(d), ld,
        &algo, reinterpret_cast<void *>(gemmWorkspace), kGemmWorkspaceBytes,
        stream);
    if (s != CUBLAS_STATUS_SUCCESS)
      return opError(instr, "cublasLtMatmul failed: " + api->describe(s));
    return Status::ok();
  };
  return Status::ok();
}

/// The candidate of `g` to run: cuBLASLt's first, the pick of this process or
/// of the tuning cache for its shape bucket, or the fastest candidate timed on
/// the real buffers when the bucket has no pick yet. (Asked once per exact
/// problem: buildGemm keeps the answer.)
Status GpuExecutor::Impl::pickGemmAlgo(const GemmProblem &g, int &picked) {
  const Instr &instr = g.instr;
  const cublasLtMatmulDesc_t desc = g.desc;
  const cublasLtMatrixLayout_t la = g.la, lb = g.lb, lc = g.lc, ld = g.ld;
  const CUdeviceptr a = g.a, b = g.b, c = g.c, d = g.d;
  const float *beta = g.beta;
  const int64_t m = g.m, n = g.n, k = g.k, lda = g.lda;
  const bool transA = g.transA;
  const DType dtype = g.dtype;
  const cublasLtEpilogue_t epilogue = g.epilogue;
  const cudaDataType_t typeD = g.typeD;
  const GemmLayout &layout = g.layout;
  const cublasLtMatmulHeuristicResult_t *heuristics = g.heuristics;
  const int found = g.found;
  // The tuning key: everything but the token count n, which is rounded up to
  // one of 8 steps per octave, so that the sparse stages' GEMMs of another
  // voxel count (within ~12%) reuse the pick instead of timing again.
  const int64_t nBucket = [&] {
    int64_t step = 1;
    while (step * 16 <= n)
      step *= 2;
    return (n + step - 1) / step * step;
  }();
  std::string key = std::to_string(m) + "x" + std::to_string(nBucket) + "x" +
                    std::to_string(k) + (transA ? "T" : "N") +
                    std::to_string(int(dtype)) + "e" +
                    std::to_string(int(epilogue)) + "l" + std::to_string(lda) +
                    "b" + std::to_string(layout.batch) + "d" +
                    std::to_string(int(typeD)) + (layout.residual ? "r" : "") +
                    (layout.tf32 ? "t" : "") + (layout.fp8ScaleA ? "f8" : "");
  auto splitKFree = [&](int i) {
    return algoConfig(heuristics[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM) == 1;
  };
  // The candidate that is the pick of this process or of the tuning cache
  // (stored as the algorithm's bytes: the heuristic's list differs between
  // token counts); it must be one the timing could have chosen, so a cache
  // from elsewhere cannot change the bits.
  picked = 0;
  if (found < 2 || !splitKFree(0))
    return Status::ok();
  if (auto it = tunedGemms.find(key); it != tunedGemms.end()) {
    // The bucket is tuned. Where this token count's list lacks its pick,
    // cuBLASLt's first is taken instead of timing again: a stream of new
    // voxel counts would otherwise time (and re-pick) the bucket each time.
    for (int i = 0; i < found; ++i)
      if (algoBytes(heuristics[i].algo) == it->second && splitKFree(i)) {
        picked = i;
        break;
      }
  } else {
    CUevent t0 = nullptr, t1 = nullptr;
    api->cuEventCreate(&t0, CU_EVENT_DEFAULT);
    api->cuEventCreate(&t1, CU_EVENT_DEFAULT);
    float best = 0, first = 0;
    int bestIndex = 0;
    constexpr int kTimedReps = 10;
    for (int i = 0; i < found; ++i) {
      if (!splitKFree(i))
        continue;
      float ms = 0;
      bool ok = true;
      for (int rep = 0; rep <= kTimedReps && ok; ++rep) { // rep 0 warms up
        if (rep == 1)
          api->cuEventRecord(t0, setupStream);
        ok = api->cublasLtMatmul(
                 lt, desc, &kOne, reinterpret_cast<const void *>(a), la,
                 reinterpret_cast<const void *>(b), lb, beta,
                 reinterpret_cast<const void *>(c), lc,
                 reinterpret_cast<void *>(d), ld, &heuristics[i].algo,
                 reinterpret_cast<void *>(setupWorkspace), kGemmWorkspaceBytes,
                 setupStream) == CUBLAS_STATUS_SUCCESS;
      }
      api->cuEventRecord(t1, setupStream);
      if (api->cuEventSynchronize(t1) != CUDA_SUCCESS)
        return opError(instr, "the GPU failed while timing GEMM candidates");
      api->cuEventElapsedTime(&ms, t0, t1);
      if (i == 0)
        first = ms;
      if (ok && (i == 0 || ms < best)) {
        best = ms;
        bestIndex = i;
      }
    }
    api->cuEventDestroy(t0);
    api->cuEventDestroy(t1);
    tunedGemms[key] = algoBytes(heuristics[bestIndex].algo);
    tunedGemmsChanged = true;
    picked = bestIndex;
    const cublasLtMatmulAlgo_t &algo = heuristics[bestIndex].algo;
    report.tunedGemms.push_back(
        std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
        (layout.residual ? " +C" : "") + ": candidate " +
        std::to_string(bestIndex) + " of " + std::to_string(found) + " (" +
        describeAlgo(algo) + ") " + std::to_string(best / kTimedReps) +
        " ms; cuBLASLt's first (" + describeAlgo(heuristics[0].algo) + ") " +
        std::to_string(first / kTimedReps) + " ms");
  }
  return Status::ok();
}

std::string GpuExecutor::Impl::algoBytes(const cublasLtMatmulAlgo_t &algo) {
  static const char *const digits = "0123456789abcdef";
  std::string hex;
  const auto *bytes = reinterpret_cast<const unsigned char *>(&algo);
  for (size_t i = 0; i < sizeof(algo); ++i) {
    hex += digits[bytes[i] >> 4];
    hex += digits[bytes[i] & 15];
  }
  return hex;
}

std::string GpuExecutor::Impl::tuningCacheSection() const {
  return report.device + " | cuBLASLt " +
         std::to_string(api->cublasLtGetVersion());
}

void GpuExecutor::Impl::loadTuningCache() {
  if (options.gemmTuningCache.empty() || !options.tuneGemms)
    return;
  tunedGemms =
      readGemmTuningCache(options.gemmTuningCache, tuningCacheSection());
}

void GpuExecutor::Impl::saveTuningCache() {
  tunedGemmsChanged = false;
  if (options.gemmTuningCache.empty())
    return;
  // A cache that cannot be written costs the next process the timing only.
  (void)writeGemmTuningCache(options.gemmTuningCache, tuningCacheSection(),
                             tunedGemms);
}

/// One uint32 configuration attribute of a cuBLASLt algorithm (-1 if the
/// library does not report it).
int64_t
GpuExecutor::Impl::algoConfig(const cublasLtMatmulAlgo_t &algo,
                              cublasLtMatmulAlgoConfigAttributes_t attr) {
  uint32_t v = 0;
  size_t written = 0;
  if (api->cublasLtMatmulAlgoConfigGetAttribute(
          &algo, attr, &v, sizeof(v), &written) != CUBLAS_STATUS_SUCCESS)
    return -1;
  return v;
}

/// A cuBLASLt algorithm's tile, stages, split-K, swizzle and cluster ids
/// (the tuning report: which candidate won).
std::string GpuExecutor::Impl::describeAlgo(const cublasLtMatmulAlgo_t &algo) {
  auto get = [&](cublasLtMatmulAlgoConfigAttributes_t attr) {
    return algoConfig(algo, attr);
  };
  return "tile " + std::to_string(get(CUBLASLT_ALGO_CONFIG_TILE_ID)) +
         " stages " + std::to_string(get(CUBLASLT_ALGO_CONFIG_STAGES_ID)) +
         " splitk " + std::to_string(get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM)) +
         " swizzle " + std::to_string(get(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING)) +
         " cluster " +
         std::to_string(get(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
}

} // namespace trellis
