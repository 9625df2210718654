//===- Fp8Gemm.cpp - The W8A8 E4M3 GEMM of an FP8 linear ------------------===//
//
// trellis.linear {precision = "fp8_e4m3"} (trellisc --precision=fp8): the
// weight is staged in E4M3 with its scale (stageWeights, SlotInfo::fp8; a
// weight that other ops read too gets an E4M3 copy here, made once); at
// every run the activation's amax and E4M3 copy (the node's scratch) come
// first, then cuBLASLt's FP8 GEMM (per-tensor scales, f32
// accumulation, f16 out, the bias / GELU / residual epilogues as in fp16).
// Both quantizations are runtime/kernels/fp8.cuh (sm_90a module); the CPU
// reference's model of all of it is include/trellis/Reference/Fp8.h.
// Dynamic per-tensor scales cost a pass over each activation:
// bench/fp8/BASELINE.md measures what that leaves of the GEMM speed-up.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/GpuExecutorImpl.h"

#include <string>

namespace trellis {

Status GpuExecutor::Impl::quantizeFp8(CUdeviceptr x, size_t n, CUdeviceptr q,
                                      CUdeviceptr amax, CUdeviceptr dequant,
                                      CUstream on) {
  auto amaxKernel = runtimeKernel("trellis_fp8_amax_f16");
  auto quantizeKernel = runtimeKernel("trellis_fp8_quantize_f16");
  for (auto *k : {&amaxKernel, &quantizeKernel})
    if (!*k)
      return Error{k->message()};
  unsigned long long count = n;
  // Enough blocks to fill the GPU, each thread 8 values per step.
  const unsigned blocks = unsigned(std::min<size_t>(
      std::max<size_t>((n / 8 + 255) / 256, 1), size_t(multiprocessors) * 8));
  TRELLIS_RETURN_IF_ERROR(
      check(api->cuMemsetD32Async(amax, 0, 1, on), "cuMemsetD32Async"));
  void *ap[] = {&x, &count, &amax};
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
  CUdeviceptr xq = address(p, node.scratch);
  CUdeviceptr xAmax = xq + alignUp(xElems), xScale = xAmax + kAlign;
  layout.fp8ScaleA = weight + alignUp(wElems) + kAlign;
  layout.fp8ScaleB = xScale;
  std::function<Status()> gemm;
  TRELLIS_RETURN_IF_ERROR(buildGemm(
      p, node, weight, xq, address(p, node.out[0]),
      node.in.size() > 2 ? address(p, node.in[2]) : 0, DType::F16, n, m, k,
      /*transA=*/true, act, gemm, layout));
  CUdeviceptr x = address(p, node.in[0]);
  node.command = [this, x, xElems, xq, xAmax, xScale, gemm,
                  &instr]() -> Status {
    if (Status s = quantizeFp8(x, xElems, xq, xAmax, xScale, stream); !s)
      return opError(instr, s.message());
    return gemm();
  };
  return Status::ok();
}

} // namespace trellis
