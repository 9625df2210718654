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
//            the producer writes E4M3 at this op's scale itself
//            (Prepared::fp8E4M3Outputs): an FP8 linear (the MLP's fc1 →
//            fc2, cuBLASLt's D scale) or the attention kernels (their
//            epilogue, TrellisAttnParams::o_quantize: the out-projections).
// The kernels are runtime/kernels/fp8.cuh (sm_90a module); the CPU
// reference's model of all of it is include/trellis/Reference/Fp8.h.
// bench/fp8/BASELINE.md measures what each form leaves of the GEMM speed-up.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/GpuExecutorImpl.h"
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

Result<CUdeviceptr>
GpuExecutor::Impl::uploadFp8Constants(Prepared &p, const Instr &instr,
                                      const std::vector<float> &values,
                                      const std::string &what) {
  if (auto it = p.fp8StaticScales.find(&instr); it != p.fp8StaticScales.end())
    return it->second;
  const size_t bytes = values.size() * sizeof(float);
  CUdeviceptr at = 0;
  TRELLIS_RETURN_IF_ERROR(allocate(at, alignUp(bytes), what));
  p.fp8StaticScales[&instr] = at;
  TRELLIS_RETURN_IF_ERROR(
      check(api->cuMemcpyHtoDAsync(at, values.data(), bytes, setupStream),
            "cuMemcpyHtoDAsync (static FP8 scales)"));
  // `values` must outlive the copy.
  TRELLIS_RETURN_IF_ERROR(
      check(api->cuStreamSynchronize(setupStream), "the GPU stream"));
  return at;
}

Result<CUdeviceptr> GpuExecutor::Impl::fp8RunningAmax(Prepared &p,
                                                      const Instr &instr,
                                                      size_t count) {
  if (auto it = p.fp8Running.find(&instr); it != p.fp8Running.end())
    return it->second.at;
  if (!fp8Observer)
    return CUdeviceptr(0);
  CUdeviceptr at = 0;
  TRELLIS_RETURN_IF_ERROR(allocate(at, alignUp(count * sizeof(float)),
                                   "an FP8 calibration maximum"));
  p.fp8Running[&instr] = {at, count};
  TRELLIS_RETURN_IF_ERROR(
      check(api->cuMemsetD32Async(at, 0, unsigned(count), setupStream),
            "cuMemsetD32"));
  TRELLIS_RETURN_IF_ERROR(
      check(api->cuStreamSynchronize(setupStream), "the GPU stream"));
  return at;
}

Result<CUdeviceptr> GpuExecutor::Impl::fp8StaticScales(Prepared &p,
                                                       const Instr &instr) {
  if (auto it = p.fp8StaticScales.find(&instr); it != p.fp8StaticScales.end())
    return it->second;
  TRELLIS_ASSIGN_OR_RETURN(double amax, instr.floatAttr("activation_amax"));
  const ref::E4M3Scale scale = ref::e4m3ScaleFor(float(amax));
  std::vector<float> values(2 * kAlign / sizeof(float), 0.0f);
  values[0] = scale.quantize;
  values[kAlign / sizeof(float)] = scale.dequantize;
  return uploadFp8Constants(p, instr, values,
                            "the FP8 activation scales of an op of '" + p.name +
                                "'");
}

float GpuExecutor::Impl::fp8OutputQuantize(const Prepared &p, int out) const {
  auto it = p.fp8E4M3Outputs.find(out);
  if (it == p.fp8E4M3Outputs.end())
    return 0.0f;
  auto amax = it->second->floatAttr("activation_amax");
  return amax ? ref::e4m3ScaleFor(float(*amax)).quantize : 0.0f;
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
    // calibration: the op's largest amax
    TRELLIS_ASSIGN_OR_RETURN(CUdeviceptr running, fp8RunningAmax(p, instr, 1));
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
