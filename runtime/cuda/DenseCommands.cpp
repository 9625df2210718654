//===- DenseCommands.cpp - The device commands of the dense ops -----------===//
//
// buildCommands() gives every node of a prepared function the command that
// enqueues its work: the time tables, linear and conv3d (cuBLASLt), the
// generated kernels the compiler annotated; the sparse and attention ops are
// built in their own files. The kernel launch helpers are here too.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/GpuExecutorImpl.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace trellis {

Result<GpuExecutor::Impl::Launch>
GpuExecutor::Impl::resolveLaunch(const json &annotation) {
  Launch l;
  std::string name = annotation.value("kernel", std::string());
  auto grid = annotation.value("grid", std::vector<int64_t>());
  auto block = annotation.value("block", std::vector<int64_t>());
  if (name.empty() || grid.size() != 3 || block.size() != 3)
    return Error{"malformed kernel annotation " + annotation.dump()};
  for (int i = 0; i < 3; ++i) {
    l.grid[i] = unsigned(grid[i]);
    l.block[i] = unsigned(block[i]);
  }
  l.smem = unsigned(annotation.value("smem", int64_t(0)));
  std::lock_guard<std::mutex> lock(functionsMutex);
  CUfunction &f = functions[name];
  if (!f) {
    if (!generated ||
        api->cuModuleGetFunction(&f, generated, name.c_str()) != CUDA_SUCCESS)
      return Error{"kernel '" + name + "' is not in the generated module"};
    if (l.smem > 48 * 1024)
      TRELLIS_RETURN_IF_ERROR(check(
          api->cuFuncSetAttribute(
              f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(l.smem)),
          "cuFuncSetAttribute"));
  }
  l.fn = f;
  return l;
}

Result<GpuExecutor::Impl::Launch>
GpuExecutor::Impl::rowsLaunch(const Instr &instr, const char *attr,
                              int64_t rows) {
  auto a = instr.attrs.find(attr);
  if (a == instr.attrs.end() || !a->is_object())
    return Error{std::string("has no GPU implementation (no ") + attr +
                 " annotation from the compiler)"};
  return rowsLaunch(*a, rows);
}

Result<GpuExecutor::Impl::Launch>
GpuExecutor::Impl::rowsLaunch(const json &annotation, int64_t rows) {
  auto l = resolveLaunch(annotation);
  if (!l)
    return l;
  auto tpr = annotation.find("threads_per_row");
  if (tpr == annotation.end() || !tpr->is_number_integer() ||
      tpr->get<int64_t>() < 1)
    return Error{"kernel annotation without threads_per_row (dynamic rows): " +
                 annotation.dump()};
  l->threadsPerRow = tpr->get<int64_t>();
  int64_t threads = rows * l->threadsPerRow;
  l->grid[0] = unsigned(
      std::max<int64_t>(1, (threads + l->block[0] - 1) / int64_t(l->block[0])));
  return l;
}

Status GpuExecutor::Impl::checkAddressable(const Prepared &p,
                                           const Node &node) const {
  constexpr int64_t kMaxElements = (int64_t(1) << 31) - 1;
  for (const std::vector<int> *slots : {&node.in, &node.out})
    for (int s : *slots) {
      const ValueType &t = p.slots[s].type;
      int64_t elements = 1;
      for (int64_t d : t.shape)
        elements *= d;
      if (elements > kMaxElements)
        return opError(*node.instr,
                       "tensor " + t.str() + " has " +
                           std::to_string(elements) +
                           " elements; the generated kernels address fewer "
                           "than 2^31 (32-bit indices)");
    }
  return Status::ok();
}

Status GpuExecutor::Impl::launch(const Launch &l, void **params,
                                 const Instr &instr, const char *what) {
  CUresult r = api->cuLaunchKernel(l.fn, l.grid[0], l.grid[1], l.grid[2],
                                   l.block[0], l.block[1], l.block[2], l.smem,
                                   stream, params, nullptr);
  if (r != CUDA_SUCCESS)
    return opError(instr,
                   std::string("launching ") + what + ": " + api->describe(r));
  return Status::ok();
}

Status GpuExecutor::Impl::launch1d(CUfunction f, int64_t threads, void **params,
                                   const Instr &instr, const char *what) {
  if (threads <= 0)
    return Status::ok();
  constexpr int64_t kThreads = 256;
  CUresult r = api->cuLaunchKernel(
      f, unsigned((threads + kThreads - 1) / kThreads), 1, 1,
      unsigned(kThreads), 1, 1, 0, stream, params, nullptr);
  if (r != CUDA_SUCCESS)
    return opError(instr,
                   std::string("launching ") + what + ": " + api->describe(r));
  return Status::ok();
}

Status GpuExecutor::Impl::buildCommand(Prepared &p, Node &node) {
  const Instr &instr = *node.instr;
  const std::string &op = instr.op;
  if (isHostOp(op)) {
    node.hostWork = true; // run by runNode, on the host or with a read-back
    return Status::ok();
  }
  // No device command: bound on the host, a view, a weight or constant, or
  // the sampler (runSampler runs its bodies).
  if (node.bound || node.view || instr.opClass == OpClass::Storage ||
      instr.opClass == OpClass::Region)
    return Status::ok();
  if (auto sparse = buildSparseCommand(p, node); !sparse)
    return sparse.takeError();
  else if (*sparse) {
    node.hostWork = true; // per-binding index work (and never in a graph:
                          // a sparse stage's commands are rebuilt per binding)
    return Status::ok();
  }

  if (op == "trellis.time_grid")
    return buildTimeGridCommand(p, node);
  if (op == "trellis.time_row")
    return buildTimeRowCommand(p, node);
  if (op == "trellis.linear")
    return buildLinearCommand(p, node);
  if (op == "trellis.conv3d")
    return buildConvCommand(p, node);
  if (op == "trellis.attention")
    return buildAttentionCommand(p, node); // AttentionCommands.cpp
  // Generated kernels.
  return buildKernelCommand(p, node);
}

/// trellis.time_grid: the table of the steps the sampler runs, from the host
/// once per run.
Status GpuExecutor::Impl::buildTimeGridCommand(Prepared &p, Node &node) {
  const Instr &instr = *node.instr;
  // The grid of the steps the sampler runs (a run-time override
  // included), from the host once per run.
  auto steps = instr.intAttr("steps");
  auto rescale = instr.floatAttr("rescale_t");
  if (!steps || !rescale)
    return opError(instr, "malformed time grid attributes");
  node.hostWork = true; // the grid is computed on the host every run
  // The tables' capacity: the result's rows (>= the compiled steps).
  node.command = [this, &p, &node, &instr, steps = *steps,
                  rows = slotType(p, node.out[0]).shape.at(0),
                  rescale = *rescale]() -> Status {
    int64_t run = steps;
    if (auto it = overrides.find(p.name); it != overrides.end())
      run = it->second.steps.value_or(run);
    auto grid = ref::timeGridTable(rows, run, rescale);
    if (!grid)
      return opError(instr, grid.message());
    HostTensor &host = p.timeGrids[node.out[0]] = std::move(grid).value();
    // Pageable memory: the copy has taken the bytes when the call returns.
    return check(api->cuMemcpyHtoDAsync(address(p, node.out[0]), host.raw(),
                                        host.nbytes(), stream),
                 "cuMemcpyHtoDAsync (time grid)");
  };
  return Status::ok();
}

/// trellis.time_row: the row of the step's τ, copied from the table.
Status GpuExecutor::Impl::buildTimeRowCommand(Prepared &p, Node &node) {
  const Instr &instr = *node.instr;
  // The row of the step's τ, found on the host (the sampler knows τ
  // before it launches the step), copied from the table with no kernel:
  // runBody issues it ahead of the step's CUDA graph.
  const ValueType &table = slotType(p, node.in[0]),
                  &out = slotType(p, node.out[0]);
  if (!isStatic(table) || !isStatic(out) || table.shape.empty() ||
      out.shape.empty() || tokenStride(p, node.in[0]) ||
      p.slots[root(p, node.in[1])].where == SlotInfo::Where::Bound)
    return opError(instr, "the GPU time_row needs static, contiguous "
                          "tables");
  size_t rowBytes = bytesOf(table) / size_t(table.shape[0]);
  node.hostWork = true; // the row is found on the host from the step's τ
  node.command = [this, &p, &node, &instr, rowBytes]() -> Status {
    auto grid = p.timeGrids.find(node.in[1]);
    auto tau = p.stepTau.find(node.in[2]);
    if (grid == p.timeGrids.end() || tau == p.stepTau.end())
      return opError(instr, "on the GPU, the grid must be a "
                            "trellis.time_grid and tau the argument of "
                            "the enclosing sampler body");
    int64_t k = ref::timeGridIndex(grid->second, tau->second);
    if (k < 0)
      return opError(instr, "tau = " + std::to_string(tau->second) +
                                " is not on the time grid");
    CUdeviceptr src = address(p, node.in[0]) + size_t(k) * rowBytes;
    CUdeviceptr dst = address(p, node.out[0]);
    int64_t batch = p.slots[node.out[0]].type.shape[0];
    for (int64_t b = 0; b < batch; ++b)
      if (Status s = check(api->cuMemcpyDtoDAsync(dst + size_t(b) * rowBytes,
                                                  src, rowBytes, stream),
                           "cuMemcpyDtoDAsync (time row)");
          !s)
        return opError(instr, s.message());
    return Status::ok();
  };
  return Status::ok();
}

/// trellis.linear: one cuBLASLt GEMM (+ bias, activation, residual).
Status GpuExecutor::Impl::buildLinearCommand(Prepared &p, Node &node) {
  const Instr &instr = *node.instr;
  const ValueType &x = slotType(p, node.in[0]), &w = slotType(p, node.in[1]);
  if (w.dtype != x.dtype ||
      (node.in.size() > 2 && slotType(p, node.in[2]).dtype != x.dtype))
    return opError(instr, "the GPU GEMM needs x, W and b of one dtype");
  int64_t k = w.shape[1], n = w.shape[0];
  int64_t m = int64_t(bytesOf(x) / dtypeSize(x.dtype)) / k;
  std::string act;
  if (auto a = instr.stringAttr("activation"))
    act = *a;
  // Row-major out[m_tok, n] is column-major [n, m_tok]: D = Wᵀᵀ·xᵀ (+ C,
  // the residual: operand 3, which comes with a bias).
  GemmLayout layout;
  if (node.in.size() > 3)
    layout.residual = address(p, node.in[3]);
  if (fp8Precision(instr))
    return buildFp8LinearCommand(p, node, n, m, k, act, layout);
  if (auto precision = instr.stringAttr("precision"))
    layout.tf32 = *precision == "tf32";
  return buildGemm(p, node, address(p, node.in[1]), address(p, node.in[0]),
                   address(p, node.out[0]),
                   node.in.size() > 2 ? address(p, node.in[2]) : 0, x.dtype, n,
                   m, k,
                   /*transA=*/true, act, node.command, layout);
}

/// trellis.conv3d: the direct kernel, or im2col then a cuBLASLt GEMM.
Status GpuExecutor::Impl::buildConvCommand(Prepared &p, Node &node) {
  const Instr &instr = *node.instr;
  auto launch = instr.attrs.find("trellis.launch");
  if (launch == instr.attrs.end())
    return opError(instr, "the compiler did not annotate this conv3d "
                          "with its im2col kernel");
  if (node.in.size() > 2)
    return opError(instr, "conv3d with a bias operand: the compiler's "
                          "partition step should have split the bias off");
  const ValueType &x = slotType(p, node.in[0]), &w = slotType(p, node.in[1]);
  if (x.shape[0] != 1)
    return opError(instr, "the GPU conv3d handles batch 1 only");
  if (instr.hasAttr("trellis.conv_direct")) {
    // Few output channels: one generated kernel (x, w, out), no GEMM.
    auto direct = resolveLaunch(*launch);
    if (!direct)
      return opError(instr, direct.message());
    CUdeviceptr xp = address(p, node.in[0]), wp = address(p, node.in[1]),
                yp = address(p, node.out[0]);
    node.command = [this, l = *direct, xp, wp, yp, &instr]() -> Status {
      CUdeviceptr args[3] = {xp, wp, yp};
      void *params[3] = {&args[0], &args[1], &args[2]};
      return this->launch(l, params, instr, "the direct conv");
    };
    return Status::ok();
  }
  int64_t cout = w.shape[0];
  int64_t k = w.shape[1] * w.shape[2] * w.shape[3] * w.shape[4];
  const ValueType &o = slotType(p, node.out[0]);
  int64_t positions = o.shape[2] * o.shape[3] * o.shape[4];
  std::function<Status()> im2col, gemm;
  // im2col: (x, col).
  auto im2colLaunch = resolveLaunch(*launch);
  if (!im2colLaunch)
    return opError(instr, im2colLaunch.message());
  CUdeviceptr xp = address(p, node.in[0]), col = address(p, node.scratch);
  im2col = [this, l = *im2colLaunch, xp, col, &instr]() -> Status {
    CUdeviceptr args[2] = {xp, col};
    void *params[2] = {&args[0], &args[1]};
    return this->launch(l, params, instr, "im2col");
  };
  // out[cout, P] row-major = column-major [P, cout] = col[P, k]ᶜᵐ · W[k,
  // cout]ᶜᵐ.
  TRELLIS_RETURN_IF_ERROR(
      buildGemm(p, node, address(p, node.scratch), address(p, node.in[1]),
                address(p, node.out[0]), 0, x.dtype, positions, cout, k,
                /*transA=*/false, "", gemm));
  node.command = [im2col, gemm]() -> Status {
    TRELLIS_RETURN_IF_ERROR(im2col());
    return gemm();
  };
  return Status::ok();
}

/// An op the compiler generated a kernel for (its trellis.launch).
Status GpuExecutor::Impl::buildKernelCommand(Prepared &p, Node &node) {
  const Instr &instr = *node.instr;
  auto launch = instr.attrs.find("trellis.launch");
  if (launch == instr.attrs.end() || !launch->is_object())
    return opError(instr, "has no GPU implementation (no trellis.launch "
                          "annotation from the compiler)");
  TRELLIS_RETURN_IF_ERROR(checkAddressable(p, node));
  // The E4M3 variant where the result's only reader, an FP8 GEMM, takes
  // it as its input (markFp8E4M3Outputs): its quantize scale follows the
  // results.
  std::shared_ptr<float> quantize;
  if (auto variant = instr.attrs.find("trellis.launch_e4m3");
      variant != instr.attrs.end() && variant->is_object()) {
    const size_t result = variant->value("result", size_t(0));
    if (result < node.out.size())
      if (float q = fp8OutputQuantize(p, node.out[result]); q != 0.0f) {
        launch = variant;
        quantize = std::make_shared<float>(q);
      }
  }
  // Dynamic rows (gpu-backend.md, "Sparse stages"): the kernel was generated
  // for the bound; it takes the actual row count last and the grid covers
  // rows · threads_per_row threads (rowsLaunch).
  std::shared_ptr<int64_t> rows;
  if (launch->contains("threads_per_row"))
    rows = std::make_shared<int64_t>(slotType(p, node.out[0]).shape.at(0));
  auto kernel = rows ? rowsLaunch(*launch, *rows) : resolveLaunch(*launch);
  if (!kernel)
    return opError(instr, kernel.message());
  Launch l = *kernel;
  auto args = std::make_shared<std::vector<CUdeviceptr>>();
  for (int s : node.in)
    args->push_back(address(p, s));
  for (int s : node.out)
    args->push_back(address(p, s));
  // Test hook for the error path (bench/ss_gpu/run_device.sh faults): the
  // first generated kernel of op TRELLIS_GPU_INJECT_FAULT gets an invalid
  // input address, so the GPU faults asynchronously inside it.
  if (const char *inject = std::getenv("TRELLIS_GPU_INJECT_FAULT");
      inject && instr.op == inject && !faultInjected && !args->empty()) {
    (*args)[0] = CUdeviceptr(0x10);
    faultInjected = true;
  }
  node.command = [this, l, args, quantize, rows, &instr]() -> Status {
    std::vector<void *> params;
    for (CUdeviceptr &a : *args)
      params.push_back(&a);
    if (quantize)
      params.push_back(quantize.get());
    if (rows)
      params.push_back(rows.get());
    return this->launch(l, params.data(), instr, "its kernel");
  };
  return Status::ok();
}

Status GpuExecutor::Impl::buildCommands(Prepared &p, Body &body) {
  for (Node &node : body.nodes) {
    TRELLIS_RETURN_IF_ERROR(buildCommand(p, node));
    const Instr &instr = *node.instr;
    node.what = instr.op;
    // (append, not " " + string: GCC 12 reports a false -Wrestrict)
    if (auto l = instr.attrs.find("trellis.launch"); l != instr.attrs.end())
      node.what.append(" ").append(l->value("kernel", std::string()));
    else if (instr.op == "trellis.linear" || instr.op == "trellis.attention")
      for (int s : node.in)
        node.what.append(" ").append(p.slots[s].type.str());
    else if (instr.op == "trellis.sparse.conv3d" && node.in.size() > 1)
      node.what.append(" ").append(p.slots[node.in[1]].type.str()); // W
    for (Body &region : node.regions)
      TRELLIS_RETURN_IF_ERROR(buildCommands(p, region));
  }
  return Status::ok();
}

} // namespace trellis
