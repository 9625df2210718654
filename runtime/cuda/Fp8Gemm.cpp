//===- Fp8Gemm.cpp - The W8A8 E4M3 GEMM of an FP8 linear ------------------===//
//
// trellis.linear {precision = "fp8_e4m3"} (trellisc --precision=fp8): the
// weight is staged in E4M3 with its scale (stageWeights, SlotInfo::fp8; a
// weight that other ops read too gets an E4M3 copy here, made once). The
// activation's E4M3 copy (the node's scratch) comes first, then cuBLASLt's
// FP8 GEMM (per-tensor scales, f32 accumulation, f16 out, the bias / GELU /
// residual epilogues as in fp16). The activation's scale is
//   dynamic  its amax at every call: an amax pass, then the quantization;
//   static   activation_amax (trellisc --fp8-scales, from trellis.exe
//            --calibrate): the quantization alone, and none at all when
//            the producer is an FP8 linear that writes E4M3 directly
//            (Prepared::fp8E4M3Outputs: the MLP's fc1 → fc2).
// The kernels are runtime/kernels/fp8.cuh (sm_90a module); the CPU
// reference's model of all of it is include/trellis/Reference/Fp8.h.
// bench/fp8/BASELINE.md measures what each form leaves of the GEMM speed-up.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/GpuExecutorImpl.h"
#include "runtime/kernels/norm_e4m3.h"
#include "trellis/Reference/Fp8.h"

#include <string>

namespace trellis {

namespace {
/// Enough blocks of 256 threads to fill the GPU, each thread 8 values per
/// step.
unsigned quantizeBlocks(size_t n, int multiprocessors) {
  return unsigned(std::min<size_t>(std::max<size_t>((n / 8 + 255) / 256, 1),
                                   size_t(multiprocessors) * 8));
}
} // namespace

Status GpuExecutor::Impl::quantizeFp8(CUdeviceptr x, size_t n, CUdeviceptr q,
                                      CUdeviceptr amax, CUdeviceptr dequant,
                                      CUstream on, CUdeviceptr running) {
  auto amaxKernel = runtimeKernel("trellis_fp8_amax_f16");
  auto quantizeKernel = runtimeKernel("trellis_fp8_quantize_f16");
  for (auto *k : {&amaxKernel, &quantizeKernel})
    if (!*k)
      return Error{k->message()};
  unsigned long long count = n;
  const unsigned blocks = quantizeBlocks(n, multiprocessors);
  TRELLIS_RETURN_IF_ERROR(
      check(api->cuMemsetD32Async(amax, 0, 1, on), "cuMemsetD32Async"));
  void *ap[] = {&x, &count, &amax, &running};
  if (CUresult r = api->cuLaunchKernel(*amaxKernel, blocks, 1, 1, 256, 1, 1, 0,
                                       on, ap, nullptr);
      r != CUDA_SUCCESS)
    return Error{"launching the FP8 amax: " + api->describe(r)};
  void *qp[] = {&x, &count, &amax, &q, &dequant};
  if (CUresult r = api->cuLaunchKernel(*quantizeKernel, blocks, 1, 1, 256, 1, 1,
                                       0, on, qp, nullptr);
      r != CUDA_SUCCESS)
    return Error{"launching the FP8 quantization: " + api->describe(r)};
  return Status::ok();
}

Result<CUdeviceptr> GpuExecutor::Impl::fp8Weight(Prepared &p, int w,
                                                 const Instr &instr) {
  const int root = this->root(p, w);
  if (p.slots[root].fp8) // staged in E4M3 (markFp8Weights)
    return address(p, w);
  if (auto it = p.fp8Weights.find(root); it != p.fp8Weights.end())
    return it->second;
  const size_t n = bytesOf(p.slots[root].type) / 2;
  CUdeviceptr copy = 0;
  TRELLIS_RETURN_IF_ERROR(
      allocate(copy, alignUp(n) + 2 * kAlign,
               "the FP8 copy of a weight of '" + p.name + "'"));
  p.fp8Weights[root] = copy;
  CUdeviceptr amax = copy + alignUp(n);
  if (Status s =
          quantizeFp8(address(p, w), n, copy, amax, amax + kAlign, setupStream);
      !s)
    return opError(instr, s.message());
  if (Status s = check(api->cuStreamSynchronize(setupStream), "the GPU stream");
      !s)
    return opError(instr, s.message());
  return copy;
}

Result<CUdeviceptr> GpuExecutor::Impl::fp8StaticScales(Prepared &p,
                                                       const Instr &instr) {
  if (auto it = p.fp8StaticScales.find(&instr); it != p.fp8StaticScales.end())
    return it->second;
  TRELLIS_ASSIGN_OR_RETURN(double amax, instr.floatAttr("activation_amax"));
  const ref::E4M3Scale scale = ref::e4m3ScaleFor(float(amax));
  CUdeviceptr scales = 0;
  TRELLIS_RETURN_IF_ERROR(
      allocate(scales, 2 * kAlign,
               "the FP8 activation scales of an op of '" + p.name + "'"));
  p.fp8StaticScales[&instr] = scales;
  for (auto [at, value] : {std::pair{scales, scale.quantize},
                           std::pair{scales + kAlign, scale.dequantize}}) {
    TRELLIS_RETURN_IF_ERROR(
        check(api->cuMemcpyHtoDAsync(at, &value, sizeof(value), setupStream),
              "cuMemcpyHtoDAsync (FP8 scales)"));
    TRELLIS_RETURN_IF_ERROR(
        check(api->cuStreamSynchronize(setupStream), "the GPU stream"));
  }
  return scales;
}

float GpuExecutor::Impl::fp8OutputQuantize(const Prepared &p,
                                           const Node &producer) const {
  auto it = p.fp8E4M3Outputs.find(producer.out.at(0));
  if (it == p.fp8E4M3Outputs.end())
    return 0.0f;
  auto amax = it->second->floatAttr("activation_amax");
  return amax ? ref::e4m3ScaleFor(float(*amax)).quantize : 0.0f;
}

namespace {
/// Operand segments of trellis.gated_residual_norm: x, h, gate, plus,
/// shift, scale, weight, bias.
enum NormSegment { kPlus = 3, kShift, kScale, kWeight, kBias, kSegments };
} // namespace

int GpuExecutor::Impl::normE4M3Result(const Prepared &p,
                                      const Node &node) const {
  const Instr &instr = *node.instr;
  const bool gated = instr.op == "trellis.gated_residual_norm";
  if ((!gated && instr.op != "trellis.layer_norm_modulate") ||
      instr.hasAttr("f32_result"))
    return -1;
  const int result = gated ? 1 : 0;
  if (node.out.size() != size_t(result + 1))
    return -1;
  const ValueType &x = p.slots[node.in[0]].type;
  if (x.dtype != DType::F16 || x.shape.empty() ||
      p.slots[node.out[result]].type.dtype != DType::F16)
    return -1;
  const int64_t n = x.shape.back();
  if (n % 8 != 0 || n > 2048)
    return -1;
  // Dense rows, and vectors x-shaped or one row per sample.
  const int64_t rows = int64_t(bytesOf(x) / 2) / n;
  for (size_t i = 0; i < node.in.size(); ++i) {
    const ValueType &t = p.slots[node.in[i]].type;
    if (tokenStride(p, node.in[i]) || t.shape.empty() || t.shape.back() != n)
      return -1;
    const int64_t vectorRows =
        int64_t(bytesOf(t) / dtypeSize(t.dtype)) / n;
    if (vectorRows <= 0 || rows % vectorRows != 0)
      return -1;
  }
  return result;
}

Status GpuExecutor::Impl::buildNormE4M3Command(Prepared &p, Node &node) {
  const Instr &instr = *node.instr;
  const bool gated = instr.op == "trellis.gated_residual_norm";
  const int result = gated ? 1 : 0;
  TRELLIS_ASSIGN_OR_RETURN(double eps, instr.floatAttr("eps"));
  const ValueType &x = slotType(p, node.in[0]);
  const int64_t n = x.shape.back();
  const int64_t rows = int64_t(bytesOf(x) / 2) / n;
  TrellisNormE4M3Params params{};
  params.rows = rows;
  params.n = n;
  params.eps = float(eps);
  params.quantize = fp8OutputQuantize(p, node);
  params.out = reinterpret_cast<void *>(address(p, node.out[result]));
  auto half = [&](int slot) {
    return reinterpret_cast<const void *>(address(p, slot));
  };
  // Rows per vector row: a per-sample [B, n] vector spans rows / B rows.
  auto rowsPer = [&](int slot) -> Result<int64_t> {
    const int64_t vectorRows = int64_t(bytesOf(slotType(p, slot)) / 2) / n;
    if (vectorRows <= 0 || rows % vectorRows != 0)
      return opError(instr, "the E4M3 norm kernel needs vectors of one row "
                            "per sample or per row");
    return rows / vectorRows;
  };
  params.x = half(node.in[0]);
  size_t next = 1;
  std::vector<int64_t> sizes(kSegments, 0);
  if (gated) {
    TRELLIS_ASSIGN_OR_RETURN(sizes, instr.intArrayAttr("operandSegmentSizes"));
    if (sizes.size() != kSegments)
      return opError(instr, "operandSegmentSizes must have 8 entries");
    params.h = half(node.in[1]);
    params.gate = half(node.in[2]);
    TRELLIS_ASSIGN_OR_RETURN(params.gate_rows, rowsPer(node.in[2]));
    params.residual_out = reinterpret_cast<void *>(address(p, node.out[0]));
    next = 3;
  } else {
    sizes[kShift] = sizes[kScale] = 1;
  }
  if (sizes[kPlus]) {
    params.plus = half(node.in[next]);
    TRELLIS_ASSIGN_OR_RETURN(params.plus_rows, rowsPer(node.in[next]));
    ++next;
  }
  if (sizes[kShift]) {
    params.shift = half(node.in[next]);
    params.scale = half(node.in[next + 1]);
    TRELLIS_ASSIGN_OR_RETURN(params.mod_rows, rowsPer(node.in[next]));
  } else if (sizes[kWeight]) {
    params.weight = reinterpret_cast<const float *>(address(p, node.in[next]));
    params.bias =
        reinterpret_cast<const float *>(address(p, node.in[next + 1]));
  }
  const int vec = n <= 256 ? 1 : n <= 512 ? 2 : n <= 1024 ? 4 : 8;
  auto kernel = runtimeKernel("trellis_norm_e4m3_v" + std::to_string(vec));
  if (!kernel)
    return opError(instr, kernel.message());
  const unsigned rowsPerBlock = TRELLIS_NORM_E4M3_THREADS / 32;
  const unsigned blocks = unsigned((rows + rowsPerBlock - 1) / rowsPerBlock);
  node.command = [this, f = *kernel, params, blocks,
                  &instr]() mutable -> Status {
    if (blocks == 0)
      return Status::ok();
    void *args[] = {&params};
    if (CUresult r =
            api->cuLaunchKernel(f, blocks, 1, 1, TRELLIS_NORM_E4M3_THREADS, 1,
                                1, 0, stream, args, nullptr);
        r != CUDA_SUCCESS)
      return opError(instr, "launching the E4M3 norm: " + api->describe(r));
    return Status::ok();
  };
  return Status::ok();
}

Status GpuExecutor::Impl::buildFp8LinearCommand(Prepared &p, Node &node,
                                                int64_t n, int64_t m, int64_t k,
                                                const std::string &act,
                                                GemmLayout layout) {
  const Instr &instr = *node.instr;
  if (attentionFamily != TRELLIS_ATTN_SM90A)
    return opError(instr, "the FP8 GEMM (precision \"fp8_e4m3\") runs on sm_90 "
                          "(Hopper) only so far; this GPU runs the " +
                              report.codePath +
                              " code: run on the CPU reference (--gpu off) or "
                              "compile without --precision=fp8");
  if (slotType(p, node.in[0]).dtype != DType::F16)
    return opError(instr, "the FP8 GEMM quantizes f16 operands");
  TRELLIS_ASSIGN_OR_RETURN(CUdeviceptr weight, fp8Weight(p, node.in[1], instr));
  const size_t wElems = size_t(n) * size_t(k), xElems = size_t(m) * size_t(k);
  layout.fp8ScaleA = weight + alignUp(wElems) + kAlign;
  // The output in E4M3 for the FP8 linear that reads it, at its scale.
  if (auto it = p.fp8E4M3Outputs.find(node.out[0]);
      it != p.fp8E4M3Outputs.end()) {
    TRELLIS_ASSIGN_OR_RETURN(CUdeviceptr readerScales,
                             fp8StaticScales(p, *it->second));
    layout.fp8ScaleD = readerScales; // its quantize scale
  }
  // The input in E4M3 and its dequantize scale, and what makes them.
  CUdeviceptr x = address(p, node.in[0]), xq = address(p, node.scratch);
  std::function<Status()> quantize;
  if (instr.hasAttr("activation_amax")) {
    TRELLIS_ASSIGN_OR_RETURN(CUdeviceptr scales, fp8StaticScales(p, instr));
    layout.fp8ScaleB = scales + kAlign;
    if (p.fp8E4M3Outputs.count(root(p, node.in[0]))) {
      xq = x; // the producer wrote E4M3 at this op's scale
    } else {
      auto kernel = runtimeKernel("trellis_fp8_quantize_static_f16");
      if (!kernel)
        return opError(instr, kernel.message());
      TRELLIS_ASSIGN_OR_RETURN(double amax, instr.floatAttr("activation_amax"));
      float q = ref::e4m3ScaleFor(float(amax)).quantize;
      const unsigned blocks = quantizeBlocks(xElems, multiprocessors);
      quantize = [this, f = *kernel, x, xq, xElems, q, blocks,
                  &instr]() mutable -> Status {
        unsigned long long count = xElems;
        void *args[] = {&x, &count, &q, &xq};
        if (CUresult r = api->cuLaunchKernel(f, blocks, 1, 1, 256, 1, 1, 0,
                                             stream, args, nullptr);
            r != CUDA_SUCCESS)
          return opError(instr,
                         "launching the FP8 quantization: " + api->describe(r));
        return Status::ok();
      };
    }
  } else {
    CUdeviceptr xAmax = xq + alignUp(xElems), xScale = xAmax + kAlign;
    layout.fp8ScaleB = xScale;
    CUdeviceptr running = 0;
    if (fp8Observer) { // calibration: this op's largest amax of every call
      TRELLIS_RETURN_IF_ERROR(
          allocate(running, kAlign, "an FP8 calibration maximum"));
      p.fp8Running.push_back({&instr, running});
      TRELLIS_RETURN_IF_ERROR(check(
          api->cuMemsetD32Async(running, 0, 1, setupStream), "cuMemsetD32"));
      TRELLIS_RETURN_IF_ERROR(
          check(api->cuStreamSynchronize(setupStream), "the GPU stream"));
    }
    quantize = [this, x, xElems, xq, xAmax, xScale, running,
                &instr]() -> Status {
      if (Status s = quantizeFp8(x, xElems, xq, xAmax, xScale, stream, running);
          !s)
        return opError(instr, s.message());
      return Status::ok();
    };
  }
  std::function<Status()> gemm;
  TRELLIS_RETURN_IF_ERROR(buildGemm(
      p, node, weight, xq, address(p, node.out[0]),
      node.in.size() > 2 ? address(p, node.in[2]) : 0, DType::F16, n, m, k,
      /*transA=*/true, act, gemm, layout));
  if (!quantize) {
    node.command = std::move(gemm);
    return Status::ok();
  }
  node.command = [quantize, gemm]() -> Status {
    TRELLIS_RETURN_IF_ERROR(quantize());
    return gemm();
  };
  return Status::ok();
}

} // namespace trellis
