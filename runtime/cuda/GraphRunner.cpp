//===- GraphRunner.cpp - Runs the op tree: nodes, CUDA graphs -------------===//
//
// runNode() runs one node (its command, or the host work of a host op);
// runSegments() replays the function body's runs of graph-safe commands as
// CUDA graphs, and runBody() a sampler region after its leading time rows.
// The graphs are captured at the first run and kept in the Prepared.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/GpuExecutorImpl.h"

#include <string>
#include <vector>

namespace trellis {

Status GpuExecutor::Impl::runNode(Prepared &p, Node &node) {
  const Instr &instr = *node.instr;
  if (node.bound)
    return Status::ok(); // evaluated when the coordinates were bound
  if (instr.op == "trellis.flow_sample")
    return runSampler(p, node);
  if (instr.op == "trellis.occupancy" && node.scratch >= 0)
    return deviceOccupancy(p, node);
  if (instr.op == "trellis.occupancy") {
    auto logits = download(p, node.in[0]);
    if (!logits)
      return opError(instr, logits.message());
    auto rows = ref::occupancy(*logits);
    if (!rows)
      return opError(instr, rows.message());
    auto coords = ref::CoordSet::create(*rows, logits->dim(2), logits->dim(0));
    if (!coords)
      return opError(instr, coords.message());
    p.hostSlots[node.out[0]] =
        std::make_shared<const ref::CoordSet>(std::move(coords).value());
    return Status::ok();
  }
  if (instr.op == "trellis.time_grid") {
    // Computed on the host by the reference function itself (with the
    // run's steps, which the check's CPU reference would not know).
    ++report.commands;
    return node.command();
  }
  if (instr.op == "trellis.sparse.to_tensor") {
    auto *c = std::get_if<CoordsPtr>(&p.hostSlots[root(p, node.in[0])]);
    if (!c || !*c)
      return opError(instr, "its coordinate set was not computed");
    p.hostSlots[node.out[0]] = (*c)->coords;
    return Status::ok();
  }
  // Views have no command; --gpu-check-ops still compares what they show
  // with the CPU's copy (a wrong view offset or stride would otherwise pass
  // every op's check and only show in the end result).
  if (node.view && options.checkOps)
    return checkNode(p, node);
  if (!node.command)
    return Status::ok();
  ++report.commands;
  CUevent start = nullptr;
  if (options.profile) {
    start = nextEvent();
    api->cuEventRecord(start, stream);
  }
  TRELLIS_RETURN_IF_ERROR(node.command());
  if (options.profile) {
    CUevent stop = nextEvent();
    api->cuEventRecord(stop, stream);
    timings.emplace_back(&node.what, start, stop);
  }
  if (options.checkOps || options.checkFinite)
    return checkNode(p, node);
  if (options.syncEachOp)
    if (CUresult r = api->cuStreamSynchronize(stream); r != CUDA_SUCCESS)
      return opError(instr, "the GPU failed in this op: " + api->describe(r));
  return Status::ok();
}

/// Ops whose command is plain device work with fixed arguments (kernels,
/// cuBLASLt, device copies): a run of them can be replayed from a graph. The
/// others read or write host memory per run, synchronize (Node::hostWork,
/// set where their commands are built), or drive regions.
static bool graphSafe(const Node &node) {
  return !node.bound && node.regions.empty() && !node.hostWork;
}

bool GpuExecutor::Impl::graphsAllowed() const {
  return options.cudaGraphs && !options.checkOps && !options.checkFinite &&
         !options.profile && !options.syncEachOp;
}

Status GpuExecutor::Impl::launchGraph(Prepared &p, std::vector<Node> &nodes,
                                      size_t from, size_t to) {
  if (from == to)
    return Status::ok();
  auto it = p.graphs.find(&nodes[from]);
  if (it == p.graphs.end()) {
    TRELLIS_RETURN_IF_ERROR(check(
        api->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
        "cuStreamBeginCapture"));
    Status recorded = Status::ok();
    for (size_t i = from; i < to && recorded; ++i)
      recorded = runNode(p, nodes[i]);
    CUgraph graph = nullptr;
    CUresult end = api->cuStreamEndCapture(stream, &graph);
    if (!recorded)
      return recorded;
    TRELLIS_RETURN_IF_ERROR(check(end, "cuStreamEndCapture"));
    CUgraphExec exec = nullptr;
    CUresult inst = api->cuGraphInstantiate(&exec, graph, 0);
    api->cuGraphDestroy(graph);
    TRELLIS_RETURN_IF_ERROR(check(inst, "cuGraphInstantiate"));
    it = p.graphs.emplace(&nodes[from], exec).first;
  } else {
    for (size_t i = from; i < to; ++i) // as runNode counts them
      report.commands += nodes[i].command ? 1 : 0;
  }
  return check(api->cuGraphLaunch(it->second, stream), "cuGraphLaunch");
}

Status GpuExecutor::Impl::runSegments(Prepared &p, Body &body) {
  // Launching ~100 commands one by one costs the host 5-20 us each (the
  // sparse-structure stage's prologue: the hoisted K/V and time tables, and
  // its decoder); a graph replays them back to back. Only for functions of
  // static shapes (a sparse stage's commands are rebuilt per binding).
  constexpr size_t kMinRun = 8;
  std::vector<Node> &nodes = body.nodes;
  size_t i = 0;
  while (i < nodes.size()) {
    size_t end = i;
    if (graphsAllowed() && !p.dynamic)
      while (end < nodes.size() && graphSafe(nodes[end]))
        ++end;
    if (end - i < kMinRun) {
      TRELLIS_RETURN_IF_ERROR(runNode(p, nodes[i]));
      ++i;
      continue;
    }
    TRELLIS_RETURN_IF_ERROR(launchGraph(p, nodes, i, end));
    i = end;
  }
  return Status::ok();
}

Status GpuExecutor::Impl::runBody(Prepared &p, Body &body) {
  bool graphs = graphsAllowed();
  // The leading time_row nodes (trellis-hoist-time puts them first) copy
  // the step's rows ahead of the graph: what varies per step stays out of
  // it. Any other time_row would be baked into the graph: no graph then.
  size_t lead = 0;
  while (lead < body.nodes.size() &&
         body.nodes[lead].instr->op == "trellis.time_row")
    ++lead;
  for (size_t i = lead; i < body.nodes.size() && graphs; ++i)
    graphs = body.nodes[i].instr->op != "trellis.time_row";
  if (graphs) {
    for (size_t i = 0; i < lead; ++i)
      TRELLIS_RETURN_IF_ERROR(runNode(p, body.nodes[i]));
    return launchGraph(p, body.nodes, lead, body.nodes.size());
  }
  for (Node &node : body.nodes)
    TRELLIS_RETURN_IF_ERROR(runNode(p, node));
  return Status::ok();
}

} // namespace trellis
