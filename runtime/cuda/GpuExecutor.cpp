//===- GpuExecutor.cpp - Runs a host program's CUDA functions -------------===//
//
// See include/trellis/Runtime/GpuExecutor.h for the shape of it and
// docs/design/gpu-backend.md for the contract with the compiler.
//
//===----------------------------------------------------------------------===//
#include "GpuExecutorImpl.h"

#include "runtime/kernels/attention.h"
#include "trellis/Reference/Kernels.h"
#include "trellis/Support/Half.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

namespace trellis {

//===----------------------------------------------------------------------===//
// Context, modules
//===----------------------------------------------------------------------===//

GpuExecutor::Impl::~Impl() {
  if (!api)
    return;
  for (auto &[name, p] : prepared)
    release(*p);
  for (auto &[name, buffer] : flexiScratch.buffers)
    if (buffer.first)
      api->cuMemFree(buffer.first);
  if (gemmWorkspace)
    api->cuMemFree(gemmWorkspace);
  if (gemmWorkspace2)
    api->cuMemFree(gemmWorkspace2);
  for (CUevent e : {fork, join})
    if (e)
      api->cuEventDestroy(e);
  if (stream2)
    api->cuStreamDestroy(stream2);
  if (lt)
    api->cublasLtDestroy(lt);
  if (generated)
    api->cuModuleUnload(generated);
  if (attention)
    api->cuModuleUnload(attention);
  if (stream)
    api->cuStreamDestroy(stream);
  if (context)
    api->cuDevicePrimaryCtxRelease(device);
}

Status GpuExecutor::Impl::loadModule(CUmodule &module, const std::string &image,
                                     const char *what) {
  char log[8192] = {0};
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER,
                         CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log, reinterpret_cast<void *>(sizeof(log))};
  CUresult r = api->cuModuleLoadDataEx(&module, image.c_str(), 2, opts, values);
  if (r != CUDA_SUCCESS)
    return Error{std::string("loading the ") + what + " module failed: " +
                 api->describe(r) + (log[0] ? std::string("\n") + log : "")};
  return Status::ok();
}

Status GpuExecutor::Impl::init(const GpuImages &images) {
  auto loaded = cuda::loadApi();
  if (!loaded)
    return Error{loaded.message()};
  api = *loaded;
  if (Status s = check(api->cuDeviceGet(&device, 0), "cuDeviceGet"); !s)
    return s;
  char name[256] = {0};
  api->cuDeviceGetName(name, sizeof(name), device);
  int major = 0, minor = 0;
  api->cuDeviceGetAttribute(
      &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  api->cuDeviceGetAttribute(
      &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  sm = major * 10 + minor;
  api->cuDeviceGetAttribute(&multiprocessors,
                            CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
  report.device = name;
  report.computeCapability = sm;
  if (sm < 75)
    return Error{std::string("the GPU '") + name + "' is sm_" +
                 std::to_string(sm) + "; trellis needs sm_75 or newer"};
  if (Status s = check(api->cuDevicePrimaryCtxRetain(&context, device),
                       "cuDevicePrimaryCtxRetain");
      !s)
    return s;
  if (Status s = check(api->cuCtxSetCurrent(context), "cuCtxSetCurrent"); !s)
    return s;
  if (Status s = check(api->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING),
                       "cuStreamCreate");
      !s)
    return s;
  const auto loadStart = std::chrono::steady_clock::now();
  // Generated kernels: on Hopper trellisc's sm_90a cubin (no JIT; where the
  // driver refuses it, e.g. one older than the toolkit that assembled it, the
  // PTX it came from), else its PTX; the portable PTX elsewhere.
  bool cubinLoaded = false;
  if (sm == 90 && !images.cubinSm90a.empty())
    cubinLoaded =
        bool(loadModule(generated, images.cubinSm90a, "generated-kernel"));
  const std::string &ptx = sm == 90 && !images.ptxSm90a.empty()
                               ? images.ptxSm90a
                               : images.ptxCompute75;
  if (!cubinLoaded && !ptx.empty())
    if (Status s = loadModule(generated, ptx, "generated-kernel"); !s)
      return s;
  // Attention: the wgmma cubin on sm_90, else the mma.sync PTX.
  if (sm == 90 && !images.attnSm90a.empty()) {
    attentionFamily = TRELLIS_ATTN_SM90A;
    if (Status s = loadModule(attention, images.attnSm90a, "attention"); !s)
      return s;
  } else if (sm >= 80 && !images.attnCompute80.empty()) {
    attentionFamily = TRELLIS_ATTN_SM80;
    if (Status s = loadModule(attention, images.attnCompute80, "attention"); !s)
      return s;
  } else if (!images.attnCompute75.empty()) {
    attentionFamily = TRELLIS_ATTN_SM75;
    if (Status s = loadModule(attention, images.attnCompute75, "attention"); !s)
      return s;
  }
  report.moduleLoadSeconds = std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - loadStart)
                                 .count();
  if (Status s = check(api->cublasLtCreate(&lt), "cublasLtCreate"); !s)
    return s;
  loadTuningCache();
  if (Status s = check(api->cuMemAlloc(&gemmWorkspace, kGemmWorkspaceBytes),
                       "cuMemAlloc (GEMM workspace)");
      !s)
    return s;
  if (concurrentBranches()) {
    if (Status s = check(api->cuStreamCreate(&stream2, CU_STREAM_NON_BLOCKING),
                         "cuStreamCreate");
        !s)
      return s;
    if (Status s = check(api->cuMemAlloc(&gemmWorkspace2, kGemmWorkspaceBytes),
                         "cuMemAlloc (GEMM workspace)");
        !s)
      return s;
    api->cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING);
    api->cuEventCreate(&join, CU_EVENT_DISABLE_TIMING);
  }
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Instantiation: inline calls, global slots
//===----------------------------------------------------------------------===//

Status GpuExecutor::Impl::instantiate(Prepared &p, const Function &fn,
                                      const std::vector<int> &argSlots,
                                      std::vector<int> &resultSlots,
                                      Body &into) {
  std::vector<int> map(size_t(fn.numSlots), -1);
  for (size_t i = 0; i < fn.args.size(); ++i)
    map[fn.args[i]] = argSlots[i];
  if (Status s = instantiateBody(p, fn.body, map, into); !s)
    return s;
  resultSlots.clear();
  for (int r : fn.results) {
    if (r < 0 || map[r] < 0)
      return Error{"function '" + fn.name + "' returns an undefined value"};
    resultSlots.push_back(map[r]);
  }
  return Status::ok();
}

Status GpuExecutor::Impl::instantiateBody(Prepared &p,
                                          const std::vector<Instr> &instrs,
                                          std::vector<int> &map, Body &into) {
  auto mapped = [&](int local) -> Result<int> {
    if (local < 0 || size_t(local) >= map.size() || map[local] < 0)
      return Error{"uses a value that is not defined before it"};
    return map[local];
  };
  for (const Instr &instr : instrs) {
    if (instr.op == "func.call") {
      auto callee = instr.stringAttr("callee");
      if (!callee)
        return opError(instr, callee.message());
      const Function *fn = program.find(*callee);
      if (!fn)
        return opError(instr, "calls '" + *callee + "', which is missing");
      std::vector<int> args, results;
      for (int s : instr.in) {
        auto g = mapped(s);
        if (!g)
          return opError(instr, g.message());
        args.push_back(*g);
      }
      if (Status s = instantiate(p, *fn, args, results, into); !s)
        return s;
      for (size_t i = 0; i < instr.out.size(); ++i)
        map[instr.out[i]] = results.at(i);
      continue;
    }
    Node node;
    node.instr = &instr;
    for (int s : instr.in) {
      auto g = mapped(s);
      if (!g)
        return opError(instr, g.message());
      node.in.push_back(*g);
    }
    for (size_t i = 0; i < instr.out.size(); ++i) {
      int g = newSlot(p, instr.types.at(i));
      map[instr.out[i]] = g;
      node.out.push_back(g);
    }
    for (const Region &region : instr.regions) {
      Body body;
      for (size_t i = 0; i < region.args.size(); ++i) {
        int g = newSlot(p, region.argTypes.at(i));
        map[region.args[i]] = g;
        body.args.push_back(g);
      }
      if (Status s = instantiateBody(p, region.body, map, body); !s)
        return s;
      for (int y : region.yield) {
        auto g = mapped(y);
        if (!g)
          return opError(instr, "yields " + g.message());
        body.yields.push_back(*g);
      }
      node.regions.push_back(std::move(body));
    }
    into.nodes.push_back(std::move(node));
  }
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// The memory plan
//===----------------------------------------------------------------------===//

std::vector<Body *> gpuexec::inRunOrder(Node &node) {
  std::vector<Body *> order;
  if (node.regions.size() == 3)
    order.push_back(&node.regions[2]);
  for (size_t i = 0; i < node.regions.size() && i < 2; ++i)
    order.push_back(&node.regions[i]);
  return order;
}

void GpuExecutor::Impl::number(Prepared &p, Body &body, int &pos) {
  for (Node &node : body.nodes) {
    node.pos = pos++;
    for (Body *region : inRunOrder(node))
      number(p, *region, pos);
    node.endPos = pos++;
  }
  body.endPos = pos++;
}

/// Records a use of `slot` at `pos`. A use inside a loop of a value defined
/// before the loop keeps the value alive to the end of the loop.
void GpuExecutor::Impl::use(Prepared &p, int slot, int pos,
                            const std::vector<const Node *> &loops) {
  int r = root(p, slot);
  int at = pos;
  for (auto it = loops.rbegin(); it != loops.rend(); ++it)
    if (p.slots[r].def < (*it)->pos)
      at = std::max(at, (*it)->endPos);
  p.slots[r].last = std::max(p.slots[r].last, at);
}

void GpuExecutor::Impl::liveness(Prepared &p, Body &body,
                                 std::vector<const Node *> &loops) {
  for (int a : body.args) {
    int r = root(p, a);
    if (p.slots[r].def < 0)
      p.slots[r].def = loops.empty() ? 0 : loops.back()->pos;
  }
  for (Node &node : body.nodes) {
    for (int s : node.in)
      use(p, s, node.pos, loops);
    for (int s : node.out) {
      int r = root(p, s);
      if (p.slots[r].def < 0)
        p.slots[r].def = node.pos;
      p.slots[r].last = std::max(p.slots[r].last, node.pos);
    }
    for (int s : node.loopSlots) {
      p.slots[s].def = node.pos;
      p.slots[s].last = node.endPos;
    }
    if (node.scratch >= 0) {
      p.slots[node.scratch].def = node.pos;
      p.slots[node.scratch].last = node.pos;
    }
    if (!node.regions.empty()) {
      // The sampler state (the op's result) lives through the loop.
      for (int s : node.out)
        p.slots[root(p, s)].last =
            std::max(p.slots[root(p, s)].last, node.endPos);
      // The arguments with their own storage (τ; the condition of the
      // one-body form) are written by runSampler at each evaluation, used
      // or not (a branch whose τ-only work moved to the shared region does
      // not read its τ): alive through the loop.
      for (Body &region : node.regions)
        for (int a : region.args)
          if (root(p, a) == a) {
            p.slots[a].def = node.pos;
            p.slots[a].last = std::max(p.slots[a].last, node.endPos);
          }
      loops.push_back(&node);
      for (Body *region : inRunOrder(node))
        liveness(p, *region, loops);
      loops.pop_back();
    }
  }
  for (int y : body.yields)
    use(p, y, body.endPos, loops);
}

/// Makes a split's results views of its operand when no copy is needed:
///  * every dimension before the axis is 1: each result is a contiguous
///    range of the operand (the adaLN modulation chunks);
///  * the packed q/k/v of attention ([B, L, S, H, d] split on axis 2 into
///    size-1 parts, each reshaped to [B, L, H, d] and used only as q, k or v
///    of trellis.attention; or a sparse stage's [N, S, H, d] split on axis 1,
///    reshaped to [N, H, d], of trellis.sparse.attention): strided views the
///    attention kernel reads in place (its row stride is S·H·d).
bool GpuExecutor::Impl::viewSplit(
    Prepared &p, Node &node,
    const std::multimap<int, std::pair<const Node *, int>> &users) {
  const Instr &instr = *node.instr;
  const ValueType &in = p.slots[node.in[0]].type;
  auto axisAttr = instr.intAttr("axis");
  auto sizes = instr.intArrayAttr("sizes");
  if (!axisAttr || !sizes || !isStatic(in))
    return false;
  int rank = int(in.shape.size());
  int axis = int(*axisAttr < 0 ? *axisAttr + rank : *axisAttr);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d)
    outer *= in.shape[d];
  for (int d = axis + 1; d < rank; ++d)
    inner *= in.shape[d];
  size_t elem = dtypeSize(in.dtype);
  if (outer == 1) {
    int64_t offset = 0;
    for (size_t i = 0; i < node.out.size(); ++i) {
      p.slots[node.out[i]].root = node.in[0];
      p.slots[node.out[i]].viewOffset = size_t(offset * inner) * elem;
      offset += (*sizes)[i];
    }
    return true;
  }
  // Strided q/k/v views.
  bool dense = rank == 5 && axis == 2, sparse = rank == 4 && axis == 1;
  if (!(dense || sparse) || in.dtype != DType::F16)
    return false;
  const char *attention =
      dense ? "trellis.attention" : "trellis.sparse.attention";
  for (size_t i = 0; i < node.out.size(); ++i) {
    if ((*sizes)[i] != 1)
      return false;
    auto range = users.equal_range(node.out[i]);
    if (range.first == range.second)
      return false;
    for (auto it = range.first; it != range.second; ++it) {
      const Node *user = it->second.first;
      if (user->instr->op != "trellis.reshape")
        return false;
      auto uses = users.equal_range(user->out[0]);
      if (uses.first == uses.second)
        return false;
      for (auto u = uses.first; u != uses.second; ++u)
        if (u->second.first->instr->op != attention || u->second.second > 2)
          return false;
    }
  }
  int64_t tokenStride = in.shape[axis] * inner;
  for (size_t i = 0; i < node.out.size(); ++i) {
    p.slots[node.out[i]].root = node.in[0];
    p.slots[node.out[i]].viewOffset = size_t(int64_t(i) * inner) * elem;
    p.slots[node.out[i]].tokenStride = tokenStride;
  }
  return true;
}

Status GpuExecutor::Impl::plan(Prepared &p) {
  // Who uses each slot (for view decisions).
  std::multimap<int, std::pair<const Node *, int>> users;
  std::function<void(Body &)> collect = [&](Body &body) {
    for (Node &node : body.nodes) {
      for (size_t i = 0; i < node.in.size(); ++i)
        users.insert({node.in[i], {&node, int(i)}});
      for (Body &region : node.regions)
        collect(region);
    }
  };
  collect(p.body);
  // Which storage each root uses, and the aliases (views, sampler state).
  std::function<Status(Body &)> classify = [&](Body &body) -> Status {
    for (Node &node : body.nodes) {
      const Instr &instr = *node.instr;
      if (node.bound) {
        for (int s : node.out)
          p.slots[s].where = SlotInfo::Where::Bound;
        continue;
      }
      if (instr.op == "trellis.reshape") {
        p.slots[node.out[0]].root = node.in[0];
        continue;
      }
      if (instr.op == "trellis.split" && viewSplit(p, node, users)) {
        node.view = true;
        continue;
      }
      if (instr.op == "trellis.weight") {
        SlotInfo &s = p.slots[node.out[0]];
        s.where = SlotInfo::Where::Weight;
        auto model = instr.stringAttr("model");
        auto name = instr.stringAttr("name");
        if (!model || !name)
          return opError(instr, "malformed weight op");
        s.weightModel = *model;
        s.weightName = *name;
        continue;
      }
      if (instr.op == "trellis.constant") {
        p.slots[node.out[0]].where = SlotInfo::Where::Constant;
        continue;
      }
      if (isHostOp(instr.op)) {
        for (int s : node.out)
          p.slots[s].where = SlotInfo::Where::Host;
        // Occupancy of f32 logits is compacted on the device
        // (deviceOccupancy): block counts, the total, the rows.
        const ValueType &logits = p.slots[node.in[0]].type;
        if (instr.op == "trellis.occupancy" && logits.dtype == DType::F32 &&
            isStatic(logits)) {
          int64_t cells = int64_t(bytesOf(logits) / 4);
          ValueType t;
          t.dtype = DType::U8;
          t.shape = {int64_t(alignUp(size_t((cells + 1023) / 1024) * 4) +
                             kAlign + size_t(cells) * 16)};
          node.scratch = newSlot(p, t);
          p.slots[node.scratch].where = SlotInfo::Where::Arena;
        }
        continue;
      }
      for (int s : node.out) {
        if (!isStatic(p.slots[s].type))
          return opError(instr, "produces " + p.slots[s].type.str() +
                                    ", which is not a static tensor; the "
                                    "GPU backend plans static shapes only");
        p.slots[s].where = SlotInfo::Where::Arena;
      }
      if (instr.op == "trellis.flow_sample") {
        // Regions' x argument = the sampler state (the op's result).
        const ValueType &state = p.slots[node.out[0]].type;
        // With a shared prefix, the branches' arguments after (x, τ) are its
        // yields (views: the branches read the prefix's storage).
        const Body *shared =
            node.regions.size() == 3 ? &node.regions[2] : nullptr;
        for (Body &region : node.regions) {
          if (region.args.size() < 2)
            return opError(instr, "malformed sampler body");
          p.slots[region.args[0]].root = node.out[0];
          p.slots[region.args[1]].where = SlotInfo::Where::Arena;
          size_t extra = region.args.size() - 2;
          if (extra &&
              (!shared || &region == shared || extra != shared->yields.size()))
            return opError(instr, "malformed sampler body");
          for (size_t i = 0; i < extra; ++i)
            p.slots[region.args[2 + i]].root = shared->yields[i];
        }
        node.loopSlots = {newSlot(p, state), newSlot(p, state)};
        for (int s : node.loopSlots)
          p.slots[s].where = SlotInfo::Where::Arena;
      }
      if (instr.op == "trellis.attention" &&
          attentionGammas(instr).second >= 0) {
        // k is normalized once into a scratch copy (the fused k prologue
        // repeats the norm in every query tile: bench/attention/NOTES.md).
        // With --attention-norms=prepass q is normalized the same way: the
        // scratch then holds [k | q]. Then the redo flags of the fixed
        // softmax reference (attentionLaunch).
        const ValueType &q = p.slots[node.in[0]].type;
        ValueType t;
        t.dtype = DType::U8;
        t.shape = {int64_t(attentionNormCopiesBytes(p, node) +
                           attentionRedoFlagsBytes(q.shape.at(0), q.shape.at(1),
                                                   q.shape.at(2)))};
        if (t.shape[0] > 0) {
          node.scratch = newSlot(p, t);
          p.slots[node.scratch].where = SlotInfo::Where::Arena;
        }
      }
      if (size_t bytes = p.dynamic ? sparseScratchBytes(p, node) : 0) {
        ValueType t;
        t.dtype = DType::U8;
        t.shape = {int64_t(bytes)};
        node.scratch = newSlot(p, t);
        p.slots[node.scratch].where = SlotInfo::Where::Arena;
      }
      if (instr.op == "trellis.conv3d" && instr.hasAttr("trellis.launch") &&
          !instr.hasAttr("trellis.conv_direct")) {
        auto bytes = instr.intAttr("trellis.scratch_bytes");
        if (!bytes)
          return opError(instr, "the im2col annotation lacks "
                                "trellis.scratch_bytes");
        ValueType t;
        t.dtype = DType::U8;
        t.shape = {*bytes};
        node.scratch = newSlot(p, t);
        p.slots[node.scratch].where = SlotInfo::Where::Arena;
      }
      for (Body &region : node.regions)
        if (Status s = classify(region); !s)
          return s;
    }
    return Status::ok();
  };
  for (int a : p.args)
    p.slots[a].where = SlotInfo::Where::Arena;
  if (Status s = classify(p.body); !s)
    return s;

  int pos = 1;
  number(p, p.body, pos);
  p.positions = pos;
  std::vector<const Node *> loops;
  for (int a : p.args)
    p.slots[root(p, a)].def = 0;
  liveness(p, p.body, loops);
  for (int r : p.results)
    p.slots[root(p, r)].last = pos;

  // The unconditional branch's own storage is lane 1 when the branches run
  // concurrently.
  if (concurrentBranches()) {
    std::function<void(Body &, const Node &)> markLane = [&](Body &body,
                                                             const Node &loop) {
      auto mark = [&](int slot) {
        SlotInfo &info = p.slots[slot];
        if (info.root != slot || info.where != SlotInfo::Where::Arena)
          return;
        info.lane = 1;
        info.laneFrom = loop.pos;
        info.laneTo = loop.endPos;
      };
      for (int a : body.args)
        mark(a);
      for (Node &node : body.nodes) {
        for (int o : node.out)
          mark(o);
        if (node.scratch >= 0)
          mark(node.scratch);
        for (Body &region : node.regions)
          markLane(region, loop);
      }
    };
    std::function<void(Body &)> find = [&](Body &body) {
      for (Node &node : body.nodes) {
        if (node.instr->op == "trellis.flow_sample" &&
            node.regions.size() >= 2) {
          markLane(node.regions[1], node);
          SlotInfo &vu = p.slots[node.loopSlots[1]];
          vu.lane = 1;
          vu.laneFrom = node.pos;
          vu.laneTo = node.endPos;
        }
        for (Body &region : node.regions)
          find(region);
      }
    };
    find(p.body);
  }

  // First-fit over the arena roots, in order of definition.
  std::vector<int> order;
  for (size_t s = 0; s < p.slots.size(); ++s)
    if (p.slots[s].root == int(s) &&
        p.slots[s].where == SlotInfo::Where::Arena && p.slots[s].def >= 0)
      order.push_back(int(s));
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return std::make_pair(p.slots[a].def, a) <
           std::make_pair(p.slots[b].def, b);
  });
  std::vector<int> placed;
  for (int s : order) {
    SlotInfo &info = p.slots[s];
    size_t size = alignUp(std::max<size_t>(bytesOf(info.type), 1));
    std::vector<std::pair<size_t, size_t>> busy;
    for (int o : placed) {
      const SlotInfo &other = p.slots[o];
      int aFrom = info.def, aTo = info.last;
      int bFrom = other.def, bTo = other.last;
      if (info.lane != other.lane) { // concurrent: the lane-1 side's loop
        if (info.lane) {
          aFrom = info.laneFrom;
          aTo = info.laneTo;
        } else {
          bFrom = other.laneFrom;
          bTo = other.laneTo;
        }
      }
      if (bTo < aFrom || aTo < bFrom)
        continue;
      busy.push_back(
          {other.offset,
           other.offset + alignUp(std::max<size_t>(bytesOf(other.type), 1))});
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (auto [b, e] : busy) {
      if (offset + size <= b)
        break;
      offset = std::max(offset, e);
    }
    info.offset = offset;
    p.arenaBytes = std::max(p.arenaBytes, offset + size);
    placed.push_back(s);
  }
  // Weights (one pool, each tensor once) and constants.
  std::map<std::pair<std::string, std::string>, size_t> weightOffsets;
  for (size_t s = 0; s < p.slots.size(); ++s) {
    SlotInfo &info = p.slots[s];
    if (info.where == SlotInfo::Where::Weight) {
      auto key = std::make_pair(info.weightModel, info.weightName);
      auto [it, inserted] = weightOffsets.try_emplace(key, p.weightBytes);
      if (inserted)
        p.weightBytes += alignUp(bytesOf(info.type));
      info.offset = it->second;
    } else if (info.where == SlotInfo::Where::Constant) {
      info.offset = p.constantBytes;
      p.constantBytes += alignUp(std::max<size_t>(bytesOf(info.type), 1));
    }
  }
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Weights: mapped safetensors -> pinned chunks -> device
//===----------------------------------------------------------------------===//

Status GpuExecutor::Impl::stageWeights(Prepared &p) {
  auto start = std::chrono::steady_clock::now();
  if (p.weightBytes == 0)
    return Status::ok();
  if (Status s = check(api->cuMemAlloc(&p.weightPool, p.weightBytes),
                       "cuMemAlloc (weights)");
      !s)
    return Error{"cannot allocate " + std::to_string(p.weightBytes >> 20) +
                 " MiB of device memory for the weights of '" + p.name +
                 "': " + s.message()};
  size_t half = std::max<size_t>(options.stagingBytes / 2, 1 << 20);
  void *pinned = nullptr;
  if (Status s = check(api->cuMemAllocHost(&pinned, 2 * half),
                       "cuMemAllocHost (staging buffer)");
      !s)
    return s;
  CUevent done[2] = {nullptr, nullptr};
  for (CUevent &e : done)
    api->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
  bool used[2] = {false, false};
  int buffer = 0;
  std::set<size_t> uploaded;
  Status status = Status::ok();
  for (size_t s = 0; s < p.slots.size() && status; ++s) {
    const SlotInfo &info = p.slots[s];
    if (info.where != SlotInfo::Where::Weight ||
        !uploaded.insert(info.offset).second)
      continue;
    auto t = weights(info.weightModel, info.weightName);
    if (!t) {
      status = Error{t.message()};
      break;
    }
    if (t->dtype() != info.type.dtype || t->shape() != info.type.shape) {
      status = Error{
          "weight '" + info.weightName + "' of '" + info.weightModel +
          "': the bundle expects " + info.type.str() + ", the file holds " +
          shapeToString(t->shape()) + " " + std::string(dtypeName(t->dtype()))};
      break;
    }
    const char *src = static_cast<const char *>(t->raw());
    size_t n = t->nbytes();
    for (size_t done_ = 0; done_ < n;) {
      size_t chunk = std::min(half, n - done_);
      if (used[buffer])
        api->cuEventSynchronize(done[buffer]);
      char *dst = static_cast<char *>(pinned) + buffer * half;
      std::memcpy(dst, src + done_, chunk);
      if (Status c =
              check(api->cuMemcpyHtoDAsync(p.weightPool + info.offset + done_,
                                           dst, chunk, stream),
                    "cuMemcpyHtoDAsync (weights)");
          !c) {
        status = c;
        break;
      }
      api->cuEventRecord(done[buffer], stream);
      used[buffer] = true;
      buffer ^= 1;
      done_ += chunk;
    }
  }
  if (Status c = check(api->cuStreamSynchronize(stream), "weight staging");
      !c && status)
    status = c;
  for (CUevent e : done)
    api->cuEventDestroy(e);
  api->cuMemFreeHost(pinned);
  report.weightUploadSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return status;
}

//===----------------------------------------------------------------------===//
// Commands
//===----------------------------------------------------------------------===//

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

} // namespace

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
  if (Status s = check(
          api->cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
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
  cudaDataType_t type = cudaType(dtype);
  cudaDataType_t typeD = cudaType(layout.outType.value_or(dtype));
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
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
  if (layout.batch > 1) {
    int32_t count = layout.batch;
    std::pair<cublasLtMatrixLayout_t, int64_t> strided[] = {
        {la, layout.strideA}, {lb, layout.strideB}, {ld, layout.strideD}};
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
  static const float kZero = 0.0f, kOne = 1.0f;
  const float *beta = layout.residual ? &kOne : &kZero;
  CUdeviceptr c = layout.residual ? layout.residual : d;
  // Up to 8 candidates from the heuristic; with several, each distinct GEMM
  // (shape, dtype, epilogue) is timed once on its real buffers and the
  // fastest kept (cuBLASLt's first choice is not always the best for the
  // thin shapes here). Only candidates without split-K compete, and only
  // when the first has none: each output element is then one CTA's K loop
  // in the same k order, so the choice changes the time, not the bits.
  constexpr int kCandidates = 8;
  cublasLtMatmulHeuristicResult_t heuristics[kCandidates] = {};
  int found = 0;
  cublasStatus_t hs = api->cublasLtMatmulAlgoGetHeuristic(
      lt, desc, la, lb, ld, ld, pref, options.tuneGemms ? kCandidates : 1,
      heuristics, &found);
  api->cublasLtMatmulPreferenceDestroy(pref);
  if (hs != CUBLAS_STATUS_SUCCESS || found == 0)
    return opError(instr, "cuBLASLt has no algorithm for this GEMM (m=" +
                              std::to_string(m) + ", n=" + std::to_string(n) +
                              ", k=" + std::to_string(k) + ", " +
                              api->describe(hs) + ")");
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
                    std::to_string(int(typeD)) + (layout.residual ? "r" : "");
  cublasLtMatmulAlgo_t algo = heuristics[0].algo;
  auto splitKFree = [&](int i) {
    return algoConfig(heuristics[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM) == 1;
  };
  // The candidate that is the pick of this process or of the tuning cache
  // (stored as the algorithm's bytes: the heuristic's list differs between
  // token counts); it must be one the timing could have chosen, so a cache
  // from elsewhere cannot change the bits.
  int picked = -1;
  if (auto it = tunedGemms.find(key); it != tunedGemms.end() && splitKFree(0))
    for (int i = 0; i < found && picked < 0; ++i)
      if (algoBytes(heuristics[i].algo) == it->second && splitKFree(i))
        picked = i;
  if (picked >= 0) {
    algo = heuristics[picked].algo;
  } else if (found > 1 && splitKFree(0)) {
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
          api->cuEventRecord(t0, stream);
        ok = api->cublasLtMatmul(
                 lt, desc, &kOne, reinterpret_cast<const void *>(a), la,
                 reinterpret_cast<const void *>(b), lb, beta,
                 reinterpret_cast<const void *>(c), ld,
                 reinterpret_cast<void *>(d), ld, &heuristics[i].algo,
                 reinterpret_cast<void *>(gemmWorkspace), kGemmWorkspaceBytes,
                 stream) == CUBLAS_STATUS_SUCCESS;
      }
      api->cuEventRecord(t1, stream);
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
    algo = heuristics[bestIndex].algo;
    report.tunedGemms.push_back(
        std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
        (layout.residual ? " +C" : "") + ": candidate " +
        std::to_string(bestIndex) + " of " + std::to_string(found) + " (" +
        describeAlgo(algo) + ") " + std::to_string(best / kTimedReps) +
        " ms; cuBLASLt's first (" + describeAlgo(heuristics[0].algo) + ") " +
        std::to_string(first / kTimedReps) + " ms");
  }
  out = [this, desc, la, lb, ld, algo, a, b, c, d, beta, &instr]() -> Status {
    cublasStatus_t s = api->cublasLtMatmul(
        lt, desc, &kOne, reinterpret_cast<const void *>(a), la,
        reinterpret_cast<const void *>(b), lb, beta,
        reinterpret_cast<const void *>(c), ld, reinterpret_cast<void *>(d), ld,
        &algo, reinterpret_cast<void *>(gemmWorkspace), kGemmWorkspaceBytes,
        stream);
    if (s != CUBLAS_STATUS_SUCCESS)
      return opError(instr, "cublasLtMatmul failed: " + api->describe(s));
    return Status::ok();
  };
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
  CUfunction &f = functions[name];
  if (!f) {
    if (!generated ||
        api->cuModuleGetFunction(&f, generated, name.c_str()) != CUDA_SUCCESS)
      return Error{"kernel '" + name + "' is not in the generated module"};
    if (l.smem > 48 * 1024)
      if (Status s =
              check(api->cuFuncSetAttribute(
                        f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        int(l.smem)),
                    "cuFuncSetAttribute");
          !s)
        return Error{s.message()};
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

Result<std::function<Status()>> GpuExecutor::Impl::headNormCommand(
    CUdeviceptr x, int64_t rowStride, int64_t headStride, CUdeviceptr y,
    int64_t rows, int64_t heads, int64_t d, CUdeviceptr gamma,
    const Instr &instr) {
  static const std::map<int64_t, const char *> kernels = {
      {64, "trellis_head_rmsnorm_d64"},
      {80, "trellis_head_rmsnorm_d80"},
      {128, "trellis_head_rmsnorm_d128"}};
  auto name = kernels.find(d);
  if (name == kernels.end())
    return opError(instr, "no head RMS-norm kernel for head dim " +
                              std::to_string(d));
  auto f = runtimeKernel(name->second);
  if (!f)
    return opError(instr, f.message());
  TrellisHeadRmsNormParams np{};
  np.x = reinterpret_cast<const void *>(x);
  np.y = reinterpret_cast<void *>(y);
  np.x_row_stride = rowStride;
  np.x_head_stride = headStride;
  np.y_row_stride = heads * d; // the normalized copy is dense
  np.y_head_stride = d;
  np.gamma = reinterpret_cast<const float *>(gamma);
  np.rows = int32_t(rows);
  np.heads = int32_t(heads);
  np.head_dim = int32_t(d);
  unsigned blocks = trellis_head_rmsnorm_grid(&np);
  return std::function<Status()>(
      [this, nf = *f, np, blocks, &instr]() mutable -> Status {
        if (np.rows == 0)
          return Status::ok();
        void *args[1] = {&np};
        CUresult r =
            api->cuLaunchKernel(nf, blocks, 1, 1, TRELLIS_HEAD_RMSNORM_THREADS,
                                1, 1, 0, stream, args, nullptr);
        if (r != CUDA_SUCCESS)
          return opError(instr,
                         "launching the head RMS norm: " + api->describe(r));
        return Status::ok();
      });
}

Result<CUfunction>
GpuExecutor::Impl::attentionFunction(const TrellisAttnConfig &config) {
  CUfunction &f = functions[config.name];
  if (!f) {
    if (Status s = check(api->cuModuleGetFunction(&f, attention, config.name),
                         "cuModuleGetFunction");
        !s)
      return Error{s.message()};
    if (config.smem_bytes > 48 * 1024)
      api->cuFuncSetAttribute(f,
                              CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                              config.smem_bytes);
  }
  return f;
}

size_t GpuExecutor::Impl::attentionNormCopiesBytes(const Prepared &p,
                                                   const Node &node) const {
  if (options.attentionNorms == "fused")
    return 0;
  return alignUp(bytesOf(p.slots[node.in[1]].type)) +
         (options.attentionNorms == "prepass"
              ? alignUp(bytesOf(p.slots[node.in[0]].type))
              : 0);
}

size_t GpuExecutor::Impl::attentionRedoFlagsBytes(int64_t seqs, int64_t rows,
                                                  int64_t heads) const {
  if (options.attentionSoftmax != "fixed")
    return 0;
  // Every configuration has >= 64 rows per CTA.
  return alignUp(size_t((rows + 63) / 64 * seqs * heads) * sizeof(int32_t));
}

Result<std::function<Status()>>
GpuExecutor::Impl::attentionLaunch(TrellisAttnParams params, bool kNormalized,
                                   CUdeviceptr redoFlags, const Instr &instr) {
  if (!attention)
    return opError(instr, "the bundle has no attention kernels for sm_" +
                              std::to_string(sm));
  const int64_t d = params.head_dim;
  static const std::map<int64_t, std::string> sm90Defaults = {
      {64, "trellis_attn_sm90_d64_m128_n64_s4"},
      {80, "trellis_attn_sm90_d80_m128_n64_s4"},
      {128, "trellis_attn_sm90_d128_m128_n128_s3"}};
  // Empty: the family's first configuration for d.
  std::string choice = options.attentionConfig;
  if (choice.empty() && attentionFamily == TRELLIS_ATTN_SM90A) {
    // Long d = 64 sequences: the 192- or 256-row kernel by a wave model.
    if (const char *name =
            trellis_attn_sm90_long_sequence_config(&params, multiprocessors))
      choice = name;
    else if (auto it = sm90Defaults.find(d); it != sm90Defaults.end())
      choice = it->second;
  }
  const TrellisAttnConfig *config = nullptr;
  for (int i = 0; i < trellis_attn_num_configs && !config; ++i) {
    const TrellisAttnConfig &c = trellis_attn_configs[i];
    if (c.family != attentionFamily || c.head_dim != d)
      continue;
    if (!choice.empty() && choice != c.name)
      continue;
    config = &c;
  }
  if (!config)
    return opError(instr,
                   "no attention kernel for head dim " + std::to_string(d));
  // The fixed softmax reference (attention_sm90.cuh, FIXED_REF): its kernel,
  // then the online one (`config`) for the CTAs it flags.
  const TrellisAttnConfig *fixed = nullptr;
  if (kNormalized && options.attentionSoftmax == "fixed" && redoFlags &&
      !(config->variant & TRELLIS_ATTN_SM90_FIXED_REF))
    fixed = trellis_attn_softmax_twin(config, 1);
  if (config->variant & TRELLIS_ATTN_SM90_FIXED_REF) { // named by the option
    fixed = config;
    config = trellis_attn_softmax_twin(fixed, 0);
  }
  if (fixed) {
    if (!redoFlags || size_t(trellis_attn_redo_flags_count(fixed, &params)) *
                              sizeof(int32_t) >
                          attentionRedoFlagsBytes(
                              params.num_seqs, params.seqlen_q, params.heads))
      return opError(instr, std::string("no room for the redo flags of ") +
                                fixed->name);
    params.redo_flags = reinterpret_cast<int32_t *>(redoFlags);
  }
  struct Launch {
    CUfunction f = nullptr;
    unsigned grid0 = 0, grid1 = 0, block0 = 0, smem = 0;
  };
  Launch launches[2];
  int count = 0;
  for (const TrellisAttnConfig *c : {fixed, config}) {
    if (!c)
      continue;
    if (const char *why = trellis_attn_check(c, &params))
      return opError(instr, std::string("attention parameters: ") + why);
    auto f = attentionFunction(*c);
    if (!f)
      return opError(instr, f.message());
    unsigned grid[3], block[3];
    trellis_attn_grid(c, &params, grid, block);
    launches[count++] = {*f, grid[0], grid[1], block[0],
                         unsigned(c->smem_bytes)};
  }
  return std::function<Status()>(
      [this, params, launches, count, &instr]() mutable -> Status {
        for (int i = 0; i < count; ++i) {
          const Launch &l = launches[i];
          void *args[1] = {&params};
          CUresult r = api->cuLaunchKernel(l.f, l.grid0, l.grid1, 1, l.block0,
                                           1, 1, l.smem, stream, args, nullptr);
          if (r != CUDA_SUCCESS)
            return opError(instr, "launching attention: " + api->describe(r));
        }
        return Status::ok();
      });
}

Status GpuExecutor::Impl::buildCommand(Prepared &p, Node &node) {
  const Instr &instr = *node.instr;
  const std::string &op = instr.op;
  auto ptr = [&](int slot) { return address(p, slot); };
  auto type = [&](int slot) -> const ValueType & { return p.slots[slot].type; };
  if (node.bound || node.view || op == "trellis.weight" ||
      op == "trellis.constant" || op == "trellis.reshape" || isHostOp(op) ||
      op == "trellis.flow_sample")
    return Status::ok(); // no device command (host ops run in runNode)
  if (auto sparse = buildSparseCommand(p, node); !sparse)
    return sparse.takeError();
  else if (*sparse)
    return Status::ok();

  if (op == "trellis.time_grid") {
    // The grid of the steps the sampler runs (a run-time override
    // included), from the host once per run.
    auto steps = instr.intAttr("steps");
    auto rescale = instr.floatAttr("rescale_t");
    if (!steps || !rescale)
      return opError(instr, "malformed time grid attributes");
    // The tables' capacity: the result's rows (>= the compiled steps).
    node.command = [this, &p, &node, &instr, steps = *steps,
                    rows = type(node.out[0]).shape.at(0),
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
  if (op == "trellis.time_row") {
    // The row of the step's τ, found on the host (the sampler knows τ
    // before it launches the step), copied from the table with no kernel:
    // runBody issues it ahead of the step's CUDA graph.
    const ValueType &table = type(node.in[0]), &out = type(node.out[0]);
    if (!isStatic(table) || !isStatic(out) || table.shape.empty() ||
        out.shape.empty() || tokenStride(p, node.in[0]) ||
        p.slots[root(p, node.in[1])].where == SlotInfo::Where::Bound)
      return opError(instr, "the GPU time_row needs static, contiguous "
                            "tables");
    size_t rowBytes = bytesOf(table) / size_t(table.shape[0]);
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

  if (op == "trellis.linear") {
    const ValueType &x = type(node.in[0]), &w = type(node.in[1]);
    if (w.dtype != x.dtype ||
        (node.in.size() > 2 && type(node.in[2]).dtype != x.dtype))
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
      layout.residual = ptr(node.in[3]);
    return buildGemm(p, node, ptr(node.in[1]), ptr(node.in[0]),
                     ptr(node.out[0]), node.in.size() > 2 ? ptr(node.in[2]) : 0,
                     x.dtype, n, m, k, /*transA=*/true, act, node.command,
                     layout);
  }

  if (op == "trellis.conv3d") {
    auto launch = instr.attrs.find("trellis.launch");
    if (launch == instr.attrs.end())
      return opError(instr, "the compiler did not annotate this conv3d "
                            "with its im2col kernel");
    if (node.in.size() > 2)
      return opError(instr, "conv3d with a bias operand: the compiler's "
                            "partition step should have split the bias off");
    const ValueType &x = type(node.in[0]), &w = type(node.in[1]);
    if (x.shape[0] != 1)
      return opError(instr, "the GPU conv3d handles batch 1 only");
    if (instr.hasAttr("trellis.conv_direct")) {
      // Few output channels: one generated kernel (x, w, out), no GEMM.
      auto direct = resolveLaunch(*launch);
      if (!direct)
        return opError(instr, direct.message());
      CUdeviceptr xp = ptr(node.in[0]), wp = ptr(node.in[1]),
                  yp = ptr(node.out[0]);
      node.command = [this, l = *direct, xp, wp, yp, &instr]() -> Status {
        CUdeviceptr args[3] = {xp, wp, yp};
        void *params[3] = {&args[0], &args[1], &args[2]};
        return this->launch(l, params, instr, "the direct conv");
      };
      return Status::ok();
    }
    int64_t cout = w.shape[0];
    int64_t k = w.shape[1] * w.shape[2] * w.shape[3] * w.shape[4];
    const ValueType &o = type(node.out[0]);
    int64_t positions = o.shape[2] * o.shape[3] * o.shape[4];
    std::function<Status()> im2col, gemm;
    // im2col: (x, col).
    auto im2colLaunch = resolveLaunch(*launch);
    if (!im2colLaunch)
      return opError(instr, im2colLaunch.message());
    CUdeviceptr xp = ptr(node.in[0]), col = ptr(node.scratch);
    im2col = [this, l = *im2colLaunch, xp, col, &instr]() -> Status {
      CUdeviceptr args[2] = {xp, col};
      void *params[2] = {&args[0], &args[1]};
      return this->launch(l, params, instr, "im2col");
    };
    // out[cout, P] row-major = column-major [P, cout] = col[P, k]ᶜᵐ · W[k,
    // cout]ᶜᵐ.
    if (Status s = buildGemm(p, node, ptr(node.scratch), ptr(node.in[1]),
                             ptr(node.out[0]), 0, x.dtype, positions, cout, k,
                             /*transA=*/false, "", gemm);
        !s)
      return s;
    node.command = [im2col, gemm]() -> Status {
      if (Status s = im2col(); !s)
        return s;
      return gemm();
    };
    return Status::ok();
  }

  if (op == "trellis.attention") {
    const ValueType &q = type(node.in[0]), &k = type(node.in[1]);
    if (q.dtype != DType::F16 || q.shape.size() != 4)
      return opError(instr, "the attention kernel takes fp16 [B, L, H, d]");
    auto scale = instr.floatAttr("scale");
    if (!scale)
      return opError(instr, scale.message());
    // Optional head-norm gains (trellis-form-attention).
    auto [qIndex, kIndex] = attentionGammas(instr);
    int qGamma = qIndex >= 0 ? node.in.at(qIndex) : -1;
    int kGamma = kIndex >= 0 ? node.in.at(kIndex) : -1;
    int64_t heads = q.shape[2], d = q.shape[3];
    TrellisAttnParams params{};
    params.q = reinterpret_cast<const void *>(ptr(node.in[0]));
    params.k = reinterpret_cast<const void *>(ptr(node.in[1]));
    params.v = reinterpret_cast<const void *>(ptr(node.in[2]));
    params.o = reinterpret_cast<void *>(ptr(node.out[0]));
    // Dense [B, L, H, d], or strided views into a packed qkv.
    auto strides = [&](int slot, int64_t &b, int64_t &r, int64_t &h) {
      const ValueType &t = type(slot);
      h = t.shape[3];
      r = tokenStride(p, slot);
      if (r == 0)
        r = t.shape[2] * t.shape[3];
      b = t.shape[1] * r;
    };
    strides(node.in[0], params.q_batch_stride, params.q_row_stride,
            params.q_head_stride);
    strides(node.in[1], params.k_batch_stride, params.k_row_stride,
            params.k_head_stride);
    strides(node.in[2], params.v_batch_stride, params.v_row_stride,
            params.v_head_stride);
    strides(node.out[0], params.o_batch_stride, params.o_row_stride,
            params.o_head_stride);
    if (k.shape[0] == 1 && q.shape[0] > 1) // one context for the batch
      params.k_batch_stride = params.v_batch_stride = 0;
    params.q_gamma =
        qGamma >= 0 ? reinterpret_cast<const float *>(ptr(qGamma)) : nullptr;
    std::function<Status()> normalizeK, normalizeQ;
    if (kGamma >= 0 && options.attentionNorms != "fused") {
      // k into the dense scratch copy [B, Lk, H, d].
      auto norm = headNormCommand(
          ptr(node.in[1]), params.k_row_stride, params.k_head_stride,
          ptr(node.scratch), k.shape[0] * k.shape[1], heads, d, ptr(kGamma),
          instr);
      if (!norm)
        return norm.takeError();
      normalizeK = *norm;
      params.k = reinterpret_cast<const void *>(ptr(node.scratch));
      params.k_row_stride = heads * d;
      params.k_head_stride = d;
      params.k_batch_stride =
          k.shape[0] == 1 && q.shape[0] > 1 ? 0 : k.shape[1] * heads * d;
      params.k_gamma = nullptr;
      if (qGamma >= 0 && options.attentionNorms == "prepass") {
        CUdeviceptr qCopy = ptr(node.scratch) + alignUp(bytesOf(k));
        auto qNorm = headNormCommand(ptr(node.in[0]), params.q_row_stride,
                                     params.q_head_stride, qCopy,
                                     q.shape[0] * q.shape[1], heads, d,
                                     ptr(qGamma), instr);
        if (!qNorm)
          return qNorm.takeError();
        normalizeQ = *qNorm;
        params.q = reinterpret_cast<const void *>(qCopy);
        params.q_row_stride = heads * d;
        params.q_head_stride = d;
        params.q_batch_stride = q.shape[1] * heads * d;
        params.q_gamma = nullptr;
      }
    }
    if (kGamma >= 0 && options.attentionNorms == "fused")
      params.k_gamma = reinterpret_cast<const float *>(ptr(kGamma));
    else if (kGamma >= 0) // applied by the pre-pass: bounds the logits
      params.k_norm_gamma = reinterpret_cast<const float *>(ptr(kGamma));
    params.num_seqs = int32_t(q.shape[0]);
    params.heads = int32_t(heads);
    params.seqlen_q = int32_t(q.shape[1]);
    params.seqlen_k = int32_t(k.shape[1]);
    params.head_dim = int32_t(d);
    params.softmax_scale = float(*scale);
    // The redo flags follow the normalized copies in the scratch (plan()).
    CUdeviceptr redoFlags = 0;
    if (node.scratch >= 0 &&
        attentionRedoFlagsBytes(q.shape[0], q.shape[1], heads) > 0)
      redoFlags = ptr(node.scratch) + attentionNormCopiesBytes(p, node);
    auto attend = attentionLaunch(params, kGamma >= 0, redoFlags, instr);
    if (!attend)
      return attend.takeError();
    node.command = [normalizeK, normalizeQ,
                    attend = *attend]() mutable -> Status {
      for (auto *norm : {&normalizeK, &normalizeQ})
        if (*norm)
          if (Status s = (*norm)(); !s)
            return s;
      return attend();
    };
    return Status::ok();
  }

  // Generated kernels.
  auto launch = instr.attrs.find("trellis.launch");
  if (launch == instr.attrs.end() || !launch->is_object())
    return opError(instr, "has no GPU implementation (no trellis.launch "
                          "annotation from the compiler)");
  if (Status s = checkAddressable(p, node); !s)
    return s;
  // Dynamic rows (gpu-backend.md, "Sparse stages"): the kernel was generated
  // for the bound; it takes the actual row count last and the grid covers
  // rows · threads_per_row threads (rowsLaunch).
  std::shared_ptr<int64_t> rows;
  if (launch->contains("threads_per_row"))
    rows = std::make_shared<int64_t>(type(node.out[0]).shape.at(0));
  auto kernel = rows ? rowsLaunch(*launch, *rows) : resolveLaunch(*launch);
  if (!kernel)
    return opError(instr, kernel.message());
  Launch l = *kernel;
  auto args = std::make_shared<std::vector<CUdeviceptr>>();
  for (int s : node.in)
    args->push_back(ptr(s));
  for (int s : node.out)
    args->push_back(ptr(s));
  // Test hook for the error path (bench/ss_gpu/run_device.sh faults): the
  // first generated kernel of op TRELLIS_GPU_INJECT_FAULT gets an invalid
  // input address, so the GPU faults asynchronously inside it.
  if (const char *inject = std::getenv("TRELLIS_GPU_INJECT_FAULT");
      inject && instr.op == inject && !faultInjected && !args->empty()) {
    (*args)[0] = CUdeviceptr(0x10);
    faultInjected = true;
  }
  node.command = [this, l, args, rows, &instr]() -> Status {
    std::vector<void *> params;
    for (CUdeviceptr &a : *args)
      params.push_back(&a);
    if (rows)
      params.push_back(rows.get());
    return this->launch(l, params.data(), instr, "its kernel");
  };
  return Status::ok();
}

Status GpuExecutor::Impl::buildCommands(Prepared &p, Body &body) {
  for (Node &node : body.nodes) {
    if (Status s = buildCommand(p, node); !s)
      return s;
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
      if (Status s = buildCommands(p, region); !s)
        return s;
  }
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Preparing an entry
//===----------------------------------------------------------------------===//

Result<GpuExecutor::Impl::Prepared *>
GpuExecutor::Impl::prepare(const std::string &name,
                           const std::vector<RtValue> *args) {
  const Function *fn = program.find(name);
  if (!fn)
    return Error{"the program has no function '" + name + "'"};
  bool dynamic = false;
  for (const ValueType &t : fn->argTypes)
    dynamic |= !isStatic(t);
  auto it = prepared.find(name);
  if (it != prepared.end() && !dynamic)
    return it->second.get();
  if (dynamic && !args)
    return Error{"'" + name + "' depends on the voxel count: it is planned "
                 "when it is called"};
  // A sparse stage stays prepared while its coordinate arguments are the
  // same bytes (the bench and the decoders call it repeatedly).
  if (it != prepared.end()) {
    const Prepared &old = *it->second;
    bool same = old.bindingKey.size() == args->size();
    for (size_t i = 0; same && i < args->size(); ++i) {
      const HostTensor *a = std::get_if<HostTensor>(&(*args)[i]);
      const std::optional<HostTensor> &b = old.bindingKey[i];
      if (!a) {
        same = false;
      } else if (b) { // a coordinate argument: the same bytes
        same = a->dtype() == b->dtype() && a->shape() == b->shape() &&
               std::memcmp(a->raw(), b->raw(), b->nbytes()) == 0;
      } else { // a feature argument: the same shape
        same = a->shape() == old.slots[old.args[i]].type.shape;
      }
    }
    if (same)
      return it->second.get();
  }
  auto p = std::make_unique<Prepared>();
  p->name = name;
  p->dynamic = dynamic;
  for (const ValueType &t : fn->argTypes)
    p->args.push_back(newSlot(*p, t));
  if (Status s = instantiate(*p, *fn, p->args, p->results, p->body); !s)
    return Error{s.message()};
  if (dynamic)
    if (Status s = bind(*p, *args); !s)
      return Error{s.message()};
  if (Status s = plan(*p); !s)
    return Error{s.message()};
  if (it != prepared.end()) {
    // Re-bound: keep the staged weights (same function, same weight plan).
    Prepared &old = *it->second;
    if (old.weightPool && old.weightBytes == p->weightBytes) {
      p->weightPool = old.weightPool;
      old.weightPool = 0;
    }
    release(old);
  }
  prepared[name] = std::move(p);
  return prepared[name].get();
}

void GpuExecutor::Impl::release(Prepared &p) {
  lastResults.clear();
  for (auto &[first, exec] : p.graphs)
    api->cuGraphExecDestroy(exec);
  p.graphs.clear();
  for (auto l : p.layouts)
    api->cublasLtMatrixLayoutDestroy(l);
  for (auto d : p.descs)
    api->cublasLtMatmulDescDestroy(d);
  p.layouts.clear();
  p.descs.clear();
  if (p.pinnedTau) {
    api->cuStreamSynchronize(stream);
    api->cuMemFreeHost(p.pinnedTau);
    p.pinnedTau = nullptr;
    p.pinnedTauBytes = 0;
  }
  for (CUdeviceptr *m :
       {&p.arena, &p.weightPool, &p.constantPool, &p.boundPool})
    if (*m) {
      api->cuMemFree(*m);
      *m = 0;
    }
  p.resident = false;
}

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

Result<HostTensor> GpuExecutor::Impl::download(const Prepared &p, int slot) {
  const SlotInfo &info = p.slots[slot];
  HostTensor t(info.type.dtype, info.type.shape);
  if (t.nbytes() == 0)
    return t;
  if (int64_t stride = tokenStride(p, slot)) {
    // A strided view ([B, L, H, d] or sparse [N, H, d]): gather its token
    // rows.
    int64_t tokens = 1;
    for (size_t d = 0; d + 2 < info.type.shape.size(); ++d)
      tokens *= info.type.shape[d];
    size_t row = t.nbytes() / size_t(tokens), elem = dtypeSize(t.dtype());
    std::vector<char> span(size_t((tokens - 1) * stride) * elem + row);
    if (Status s = check(api->cuMemcpyDtoHAsync(span.data(), address(p, slot),
                                                span.size(), stream),
                         "cuMemcpyDtoHAsync");
        !s)
      return Error{s.message()};
    if (Status s = check(api->cuStreamSynchronize(stream), "the GPU stream");
        !s)
      return Error{s.message()};
    for (int64_t i = 0; i < tokens; ++i)
      std::memcpy(static_cast<char *>(t.mutableRaw()) + i * row,
                  span.data() + size_t(i * stride) * elem, row);
    return t;
  }
  if (Status s = check(api->cuMemcpyDtoHAsync(t.mutableRaw(), address(p, slot),
                                              t.nbytes(), stream),
                       "cuMemcpyDtoHAsync");
      !s)
    return Error{s.message()};
  if (Status s = check(api->cuStreamSynchronize(stream), "the GPU stream"); !s)
    return Error{s.message()};
  return t;
}

Status GpuExecutor::Impl::upload(const Prepared &p, int slot,
                                 const HostTensor &t) {
  if (t.nbytes() == 0)
    return Status::ok();
  if (Status s = check(
          api->cuMemcpyHtoDAsync(address(p, slot), t.raw(), t.nbytes(), stream),
          "cuMemcpyHtoDAsync");
      !s)
    return s;
  // The host tensor may die when we return: wait for the copy.
  return check(api->cuStreamSynchronize(stream), "the GPU stream");
}

/// One uint32 configuration attribute of a cuBLASLt algorithm (-1 if the
/// library does not report it).
int64_t GpuExecutor::Impl::algoConfig(const cublasLtMatmulAlgo_t &algo,
                                      cublasLtMatmulAlgoConfigAttributes_t attr) {
  uint32_t v = 0;
  size_t written = 0;
  if (api->cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v),
                                                &written) !=
      CUBLAS_STATUS_SUCCESS)
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

/// The arena values that share storage with `slot`'s root, with their live
/// ranges (--gpu-check-ops: an operand that changed under its reader).
std::string GpuExecutor::Impl::storageNeighbours(const Prepared &p,
                                                 int slot) const {
  std::map<int, std::string> producer;
  std::function<void(const Body &)> collect = [&](const Body &body) {
    for (const Node &node : body.nodes) {
      for (int o : node.out)
        producer[o] = node.instr->op;
      if (node.scratch >= 0)
        producer[node.scratch] = node.instr->op + " (scratch)";
      for (int l : node.loopSlots)
        producer[l] = node.instr->op + " (loop state)";
      for (const Body &region : node.regions) {
        for (int a : region.args)
          producer[a] = node.instr->op + " (region argument)";
        collect(region);
      }
    }
  };
  collect(p.body);
  int r = root(p, slot);
  const SlotInfo &self = p.slots[r];
  size_t from = self.offset, to = from + bytesOf(self.type);
  std::string out =
      "; its storage (slot " + std::to_string(r) + ", arena bytes [" +
      std::to_string(from) + ", " + std::to_string(to) + "), live [" +
      std::to_string(self.def) + ", " + std::to_string(self.last) + "], lane " +
      std::to_string(self.lane) + ") is shared with:";
  for (size_t s = 0; s < p.slots.size(); ++s) {
    const SlotInfo &o = p.slots[s];
    if (int(s) == r || o.root != int(s) || o.where != SlotInfo::Where::Arena)
      continue;
    size_t a = o.offset, b = a + bytesOf(o.type);
    if (b <= from || to <= a)
      continue;
    out += " slot " + std::to_string(s) + " '" + producer[int(s)] + "' live [" +
           std::to_string(o.def) + ", " + std::to_string(o.last) + "] lane " +
           std::to_string(o.lane) + ";";
  }
  return out;
}

/// FNV-1a over a tensor's bytes (--gpu-check-ops: has a value changed?).
static uint64_t hashBytes(const HostTensor &t) {
  uint64_t h = 1469598103934665603ull;
  const auto *bytes = static_cast<const unsigned char *>(t.raw());
  for (size_t i = 0; i < t.nbytes(); ++i)
    h = (h ^ bytes[i]) * 1099511628211ull;
  return h;
}

Status GpuExecutor::Impl::checkNode(Prepared &p, const Node &node) {
  const Instr &instr = *node.instr;
  if (Status s = check(api->cuStreamSynchronize(stream), "the GPU stream"); !s)
    return opError(instr, s.message());
  std::vector<HostTensor> gpu;
  for (int s : node.out) {
    auto t = download(p, s);
    if (!t)
      return opError(instr, t.message());
    gpu.push_back(*t);
  }
  if (options.checkFinite)
    for (size_t i = 0; i < gpu.size(); ++i) {
      HostTensor f = gpu[i].toFloat32();
      for (int64_t j = 0; j < f.numel(); ++j)
        if (!std::isfinite(f.data<float>()[j]))
          return opError(instr, "result " + std::to_string(i) +
                                    " has a non-finite value (--check-finite)");
    }
  if (!options.checkOps)
    return Status::ok();
  // Inputs as the GPU holds them (views of weights included).
  std::vector<RtValue> inputs;
  for (size_t i = 0; i < node.in.size(); ++i) {
    int s = node.in[i];
    if (p.slots[root(p, s)].where == SlotInfo::Where::Bound) {
      inputs.push_back(p.boundValues[root(p, s)]);
      continue;
    }
    auto t = download(p, s);
    if (!t)
      return opError(instr, t.message());
    // Still what its producer wrote? (A storage plan that lets a later op
    // overwrite a live value, or a view of the wrong storage, passes every
    // op's own check and only shows in the end result.)
    // A value no command wrote (a reshape, a branch's shared argument) is
    // the one it views: up the view chain to the nearest written value
    // (split views are written: their view nodes are checked too).
    int from = s;
    while (!p.writtenHashes.count(from) && p.slots[from].root != from)
      from = p.slots[from].root;
    if (auto w = p.writtenHashes.find(from); w != p.writtenHashes.end())
      if (hashBytes(*t) != w->second.first)
        return opError(instr, "operand " + std::to_string(i) +
                                  " no longer holds what '" +
                                  w->second.second->op + "' " +
                                  program.describe(w->second.second->loc) +
                                  " wrote: the storage plan let another "
                                  "command overwrite it, or it reads the "
                                  "wrong storage" +
                                  storageNeighbours(p, from));
    if (auto w = p.windows.find(root(p, s)); w != p.windows.end())
      inputs.push_back(segmentsFromDevice(*t, w->second.rows));
    else
      inputs.push_back(*t);
  }
  // The CPU reference applies activations etc. from the same attributes.
  auto ref = CpuExecutor::evalOp(program, instr, std::move(inputs));
  if (!ref)
    return opError(instr, "the CPU reference failed: " + ref.message());
  for (size_t i = 0; i < gpu.size(); ++i)
    p.writtenHashes[node.out[i]] = {hashBytes(gpu[i]), &instr};
  for (size_t i = 0; i < gpu.size(); ++i) {
    // A window partition computed on the device: the same rows in the same
    // order, the same segments once the empty windows are dropped.
    if (auto *seg =
            std::get_if<std::shared_ptr<const ref::Segments>>(&(*ref)[i]);
        seg && *seg && p.windows.count(node.out[i])) {
      auto got = segmentsFromDevice(gpu[i], p.windows.at(node.out[i]).rows);
      const ref::Segments &want = **seg;
      auto same = [](const HostTensor &a, const HostTensor &b) {
        return a.shape() == b.shape() &&
               std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
      };
      ++report.checkedOps;
      if (!same(got->rows, want.rows) || !same(got->offsets, want.offsets))
        return opError(instr, "the device window partition differs from the "
                              "CPU reference's");
      continue;
    }
    auto *want = std::get_if<HostTensor>(&(*ref)[i]);
    if (!want)
      continue;
    HostTensor a = gpu[i].toFloat32(), b = want->toFloat32();
    double num = 0, den = 0, maxAbs = 0;
    for (int64_t j = 0; j < a.numel(); ++j) {
      double d = double(a.data<float>()[j]) - double(b.data<float>()[j]);
      num += d * d;
      den += double(b.data<float>()[j]) * b.data<float>()[j];
      maxAbs = std::max(maxAbs, std::abs(d));
    }
    double rel = std::sqrt(num / std::max(den, 1e-30));
    if (den == 0)
      rel = std::sqrt(num);
    ++report.checkedOps;
    if (rel > report.worstCheckError) {
      report.worstCheckError = rel;
      report.worstCheckOp = instr.op + " " + program.describe(instr.loc);
    }
    if (!(rel <= options.checkTolerance))
      return opError(instr, "result " + std::to_string(i) +
                                " differs from the CPU reference: relative "
                                "L2 error " +
                                std::to_string(rel) + ", max abs " +
                                std::to_string(maxAbs) + " (tolerance " +
                                std::to_string(options.checkTolerance) + ")");
  }
  return Status::ok();
}

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
  if (Status s = node.command(); !s)
    return s;
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
/// others read or write host memory per run, synchronize, or drive regions.
static bool graphSafe(const Node &node) {
  const std::string &op = node.instr->op;
  return !node.bound && node.regions.empty() && op != "trellis.occupancy" &&
         op != "trellis.time_grid" && op != "trellis.time_row" &&
         op.rfind("trellis.sparse.", 0) != 0;
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
    if (Status s = check(api->cuStreamBeginCapture(
                             stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                         "cuStreamBeginCapture");
        !s)
      return s;
    Status recorded = Status::ok();
    for (size_t i = from; i < to && recorded; ++i)
      recorded = runNode(p, nodes[i]);
    CUgraph graph = nullptr;
    CUresult end = api->cuStreamEndCapture(stream, &graph);
    if (!recorded)
      return recorded;
    if (Status s = check(end, "cuStreamEndCapture"); !s)
      return s;
    CUgraphExec exec = nullptr;
    CUresult inst = api->cuGraphInstantiate(&exec, graph, 0);
    api->cuGraphDestroy(graph);
    if (Status s = check(inst, "cuGraphInstantiate"); !s)
      return s;
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
      if (Status s = runNode(p, nodes[i]); !s)
        return s;
      ++i;
      continue;
    }
    if (Status s = launchGraph(p, nodes, i, end); !s)
      return s;
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
      if (Status s = runNode(p, body.nodes[i]); !s)
        return s;
    return launchGraph(p, body.nodes, lead, body.nodes.size());
  }
  for (Node &node : body.nodes)
    if (Status s = runNode(p, node); !s)
      return s;
  return Status::ok();
}

Status GpuExecutor::Impl::runSampler(Prepared &p, Node &node) {
  const Instr &instr = *node.instr;
  auto fail = [&](const std::string &m) -> Status { return opError(instr, m); };
  auto steps = instr.intAttr("steps");
  auto rescale = instr.floatAttr("rescale_t");
  auto cfg = instr.floatAttr("cfg_strength");
  auto interval = instr.floatArrayAttr("cfg_interval");
  if (!steps || !rescale || !cfg || !interval || interval->size() != 2)
    return fail("malformed sampler attributes");
  if (auto m = instr.stringAttr("multi_image");
      m && (m->find("stochastic") != std::string::npos ||
            m->find("multidiffusion") != std::string::npos))
    return fail("multi-image sampling is not on the GPU yet");
  int64_t n = *steps;
  double w = *cfg;
  if (auto it = overrides.find(p.name); it != overrides.end()) {
    n = it->second.steps.value_or(n);
    w = it->second.cfgStrength.value_or(w);
  }
  if (n < 1)
    return fail("steps must be >= 1, found " + std::to_string(n));
  auto update = instr.attrs.find("trellis.update");
  if (update == instr.attrs.end())
    return fail("the compiler did not annotate the sampler's update kernel");
  auto updateLaunch = resolveLaunch(*update);
  if (!updateLaunch)
    return fail(updateLaunch.message());
  int64_t stateRows = p.slots[node.out[0]].type.shape.at(0);
  bool dynamicUpdate = update->contains("threads_per_row");
  if (dynamicUpdate) {
    int64_t threads = stateRows * update->at("threads_per_row").get<int64_t>();
    updateLaunch->grid[0] = unsigned(std::max<int64_t>(
        1, (threads + updateLaunch->block[0] - 1) /
               int64_t(updateLaunch->block[0])));
  }

  // Two region forms: one body (x, τ, cond) evaluated with cond and with
  // neg_cond, or two bodies (x, τ) after trellis-specialize-guidance, with
  // a third that computes what both read, once per step
  // (trellis-share-guidance-prefix).
  bool specialized = node.regions.size() >= 2;
  Body &condBody = node.regions.at(0);
  Body &uncondBody = specialized ? node.regions[1] : node.regions[0];
  Body *sharedBody = node.regions.size() == 3 ? &node.regions[2] : nullptr;
  const SlotInfo &state = p.slots[node.out[0]];
  size_t stateBytes = bytesOf(state.type);
  CUdeviceptr x = address(p, node.out[0]);
  CUdeviceptr vc = address(p, node.loopSlots[0]);
  CUdeviceptr vu = address(p, node.loopSlots[1]);
  const ValueType &noiseType = p.slots[node.in[0]].type;
  if (noiseType.dtype != DType::F32)
    return fail("the GPU sampler expects f32 noise");
  if (Status s = check(
          api->cuMemcpyDtoDAsync(x, address(p, node.in[0]), stateBytes, stream),
          "cuMemcpyDtoDAsync");
      !s)
    return fail(s.message());
  int64_t batch =
      condBody.args.size() > 1 ? p.slots[condBody.args[1]].type.shape.at(0) : 1;
  // τ for every (step, branch), in pinned memory that outlives the copies
  // (Prepared::pinnedTau; a run's copies finish before the run returns).
  if (size_t bytes = size_t(n) * 3 * batch * 4; bytes > p.pinnedTauBytes) {
    if (p.pinnedTau) {
      api->cuStreamSynchronize(stream);
      api->cuMemFreeHost(p.pinnedTau);
      p.pinnedTau = nullptr;
      p.pinnedTauBytes = 0;
    }
    if (Status s =
            check(api->cuMemAllocHost(&p.pinnedTau, bytes), "cuMemAllocHost");
        !s)
      return fail(s.message());
    p.pinnedTauBytes = bytes;
  }
  float *taus = static_cast<float *>(p.pinnedTau);

  // τ into a region's argument (slot 0: cond, 1: uncond, 2: shared).
  auto setTau = [&](Body &body, float tau, int slotIndex,
                    int64_t step) -> Status {
    float *t = taus + (step * 3 + slotIndex) * batch;
    for (int64_t i = 0; i < batch; ++i)
      t[i] = tau;
    CUdeviceptr tauPtr = address(p, body.args[1]);
    p.stepTau[body.args[1]] = tau; // for the body's trellis.time_row
    if (Status s = check(api->cuMemcpyHtoDAsync(tauPtr, t, batch * 4, stream),
                         "cuMemcpyHtoDAsync (tau)");
        !s)
      return fail(s.message());
    return Status::ok();
  };
  auto evaluate = [&](Body &body, float tau, int slotIndex, int cond,
                      CUdeviceptr into, int64_t step) -> Status {
    if (Status s = setTau(body, tau, slotIndex, step); !s)
      return s;
    if (!specialized) {
      // The body's condition argument: copy cond or neg_cond (batch rows).
      const SlotInfo &arg = p.slots[body.args[2]];
      size_t argBytes = bytesOf(arg.type);
      CUdeviceptr src = address(p, node.in[cond]);
      size_t srcBytes = bytesOf(p.slots[node.in[cond]].type);
      if (argBytes % srcBytes != 0)
        return fail("the condition does not tile the model batch");
      for (size_t off = 0; off < argBytes; off += srcBytes)
        if (Status s =
                check(api->cuMemcpyDtoDAsync(address(p, body.args[2]) + off,
                                             src, srcBytes, stream),
                      "cuMemcpyDtoDAsync (condition)");
            !s)
          return fail(s.message());
    }
    if (Status s = runBody(p, body); !s)
      return s;
    return check(api->cuMemcpyDtoDAsync(into, address(p, body.yields.at(0)),
                                        stateBytes, stream),
                 "cuMemcpyDtoDAsync (velocity)");
  };

  CUevent stepEvents[2] = {nullptr, nullptr};
  if (onStep) {
    stepEvents[0] = nextEvent();
    stepEvents[1] = nextEvent();
  }
  auto reportStep = [&](int64_t step) -> Status {
    if (Status s = check(api->cuEventSynchronize(stepEvents[size_t(step % 2)]),
                         "the GPU stream");
        !s)
      return fail(s.message());
    onStep(p.name, step + 1, n);
    return Status::ok();
  };

  std::vector<double> grid_ = ref::timeGrid(int(n), *rescale);
  for (int64_t i = 0; i < n; ++i) {
    double t = grid_[size_t(i)], tPrev = grid_[size_t(i + 1)];
    float tau = ref::modelTime(t);
    bool guided = ref::isGuidedStep(t, (*interval)[0], (*interval)[1]);
    if (sharedBody) { // before either branch, on the main stream
      if (Status s = setTau(*sharedBody, tau, 2, i); !s)
        return s;
      if (Status s = runBody(p, *sharedBody); !s)
        return s;
    }
    if (guided && specialized && concurrentBranches()) {
      // The unconditional branch on the second stream, concurrently with
      // the conditional one (its storage is lane 1 of the plan).
      api->cuEventRecord(fork, stream);
      api->cuStreamWaitEvent(stream2, fork, 0);
      std::swap(stream, stream2);
      std::swap(gemmWorkspace, gemmWorkspace2);
      Status s = evaluate(uncondBody, tau, 1, 2, vu, i);
      api->cuEventRecord(join, stream);
      std::swap(stream, stream2);
      std::swap(gemmWorkspace, gemmWorkspace2);
      if (!s)
        return s;
      if (Status c = evaluate(condBody, tau, 0, 1, vc, i); !c)
        return c;
      api->cuStreamWaitEvent(stream, join, 0);
    } else {
      if (Status s = evaluate(condBody, tau, 0, 1, vc, i); !s)
        return s;
      if (guided)
        if (Status s = evaluate(uncondBody, tau, 1, 2, vu, i); !s)
          return s;
    }
    CUdeviceptr args4[4] = {x, vc, vu, x};
    float strength = float(w), dt = float(t - tPrev);
    int32_t guidedFlag = guided ? 1 : 0;
    void *params[8] = {&args4[0], &args4[1], &args4[2],   &args4[3],
                       &strength, &dt,       &guidedFlag, &stateRows};
    if (Status s = launch(*updateLaunch, params, instr, "the sampler update");
        !s)
      return s;
    ++report.commands;
    if (options.checkFinite) {
      auto xs = download(p, node.out[0]);
      if (!xs)
        return fail(xs.message());
      HostTensor f32 = xs->toFloat32();
      for (int64_t j = 0; j < f32.numel(); ++j)
        if (!std::isfinite(f32.data<float>()[j]))
          return fail("the sample has a non-finite value after step " +
                      std::to_string(i + 1) + " (--check-finite)");
    }
    if (onStep) {
      // Progress: report a step once it has finished on the GPU, one step
      // behind the launches, so that the next step is always queued and the
      // GPU does not idle while the host reports.
      CUevent done = stepEvents[size_t(i % 2)];
      api->cuEventRecord(done, stream);
      if (i > 0) {
        if (Status s = reportStep(i - 1); !s)
          return s;
      }
    }
  }
  if (onStep && n > 0)
    return reportStep(n - 1);
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// GpuExecutor
//===----------------------------------------------------------------------===//

GpuExecutor::GpuExecutor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuExecutor::~GpuExecutor() = default;

Result<std::unique_ptr<GpuExecutor>>
GpuExecutor::create(const Program &program, const GpuImages &images,
                    WeightProvider weights, GpuOptions options) {
  auto impl = std::make_unique<Impl>(program, std::move(weights), options);
  if (Status s = impl->init(images); !s)
    return Error{s.message()};
  return std::unique_ptr<GpuExecutor>(new GpuExecutor(std::move(impl)));
}

Result<GpuMemoryPlan>
GpuExecutor::planMemory(const Program &program, const std::string &function,
                        GpuOptions options, const std::vector<RtValue> *args) {
  // No driver calls: prepare() only inlines, binds and plans.
  Impl m(program, nullptr, options);
  auto pr = m.prepare(function, args);
  if (!pr)
    return Error{pr.message()};
  const Impl::Prepared &p = **pr;
  GpuMemoryPlan plan;
  plan.arenaBytes = p.arenaBytes;
  plan.weightBytes = p.weightBytes;
  plan.constantBytes = p.constantBytes;
  // The check, by a sweep over definition order (independent of the
  // first-fit): every pair of arena values with intersecting lifetimes must
  // have disjoint byte ranges inside the arena.
  struct Range {
    int from, to;         // lifetime
    int spanFrom, spanTo; // what other lanes see (the loop, for lane 1)
    size_t begin, end;
    int slot, lane;
  };
  std::vector<Range> ranges;
  for (size_t s = 0; s < p.slots.size(); ++s) {
    const SlotInfo &info = p.slots[s];
    if (info.root != int(s)) {
      ++plan.views;
      continue;
    }
    if (info.where != SlotInfo::Where::Arena || info.def < 0)
      continue;
    ++plan.values;
    size_t bytes = bytesOf(info.type);
    plan.naiveBytes += alignUp(std::max<size_t>(bytes, 1));
    if (info.offset + bytes > p.arenaBytes)
      return Error{"memory plan of '" + function + "': value " +
                   std::to_string(s) + " ends outside the arena"};
    // Stored but never live: something writes it (the sampler writes every
    // region's τ) while the plan gives its bytes to other values.
    if (info.last < info.def)
      return Error{"memory plan of '" + function + "': value " +
                   std::to_string(s) + " has storage but no live range (from " +
                   std::to_string(info.def) + " to " +
                   std::to_string(info.last) + ")"};
    Range r{info.def,    info.last,           info.def, info.last,
            info.offset, info.offset + bytes, int(s),   info.lane};
    if (info.lane) {
      r.spanFrom = std::min(info.def, info.laneFrom);
      r.spanTo = std::max(info.last, info.laneTo);
    }
    ranges.push_back(r);
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range &a, const Range &b) {
    return a.spanFrom < b.spanFrom;
  });
  auto alive = [](const Range &a, const Range &b) {
    // Same lane: the lifetimes; different lanes: the lane-1 value's span.
    int af = a.from, at = a.to, bf = b.from, bt = b.to;
    if (a.lane != b.lane) {
      if (a.lane) {
        af = a.spanFrom;
        at = a.spanTo;
      } else {
        bf = b.spanFrom;
        bt = b.spanTo;
      }
    }
    return !(at < bf || bt < af);
  };
  std::vector<const Range *> active;
  for (const Range &r : ranges) {
    active.erase(
        std::remove_if(active.begin(), active.end(),
                       [&](const Range *a) { return a->spanTo < r.spanFrom; }),
        active.end());
    for (const Range *a : active)
      if (a->begin < r.end && r.begin < a->end && alive(*a, r))
        return Error{"memory plan of '" + function + "': values " +
                     std::to_string(a->slot) + " and " +
                     std::to_string(r.slot) +
                     " are alive together and share memory"};
    active.push_back(&r);
  }
  return plan;
}

Status GpuExecutor::supports(const std::string &function) {
  auto p = impl_->prepare(function);
  if (!p)
    return Error{p.message()};
  return Status::ok();
}

void GpuExecutor::setSamplerOverrides(const std::string &function,
                                      SamplerRunOverrides overrides) {
  impl_->overrides[function] = overrides;
}

void GpuExecutor::setStepCallback(StepCallback callback) {
  impl_->onStep = std::move(callback);
}

const GpuReport &GpuExecutor::report() const { return impl_->report; }

Result<std::vector<RtValue>> GpuExecutor::run(const std::string &name,
                                              std::vector<RtValue> args) {
  Impl &m = *impl_;
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point since) {
    return std::chrono::duration<double>(Clock::now() - since).count();
  };
  const auto planStart = Clock::now();
  auto pr = m.prepare(name, &args);
  if (!pr)
    return Error{pr.message()};
  m.report.planSeconds = seconds(planStart);
  m.report.commandSeconds = 0;
  Impl::Prepared &p = **pr;
  const Api &api = *m.api;
  if (args.size() != p.args.size())
    return Error{"'" + name + "' takes " + std::to_string(p.args.size()) +
                 " arguments, " + std::to_string(args.size()) + " given"};
  if (!p.resident) {
    m.report.arenaBytes = p.arenaBytes;
    m.report.weightBytes = p.weightBytes;
    m.report.constantBytes = p.constantBytes;
    if (Status s = m.check(
            api.cuMemAlloc(&p.arena, std::max<size_t>(p.arenaBytes, 256)),
            "cuMemAlloc (arena)");
        !s)
      return Error{"cannot allocate the " + std::to_string(p.arenaBytes >> 20) +
                   " MiB activation arena of '" + name + "': " + s.message()};
    if (!p.weightPool)
      if (Status s = m.stageWeights(p); !s)
        return Error{s.message()};
    if (p.constantBytes)
      if (Status s = m.check(api.cuMemAlloc(&p.constantPool, p.constantBytes),
                             "cuMemAlloc (constants)");
          !s)
        return Error{s.message()};
    for (size_t s = 0; s < p.slots.size(); ++s) {
      SlotInfo &info = p.slots[s];
      if (info.root != int(s))
        continue;
      switch (info.where) {
      case SlotInfo::Where::Arena:
        info.ptr = p.arena + info.offset;
        break;
      case SlotInfo::Where::Weight:
        info.ptr = p.weightPool + info.offset;
        break;
      case SlotInfo::Where::Constant:
        info.ptr = p.constantPool + info.offset;
        break;
      default:
        break;
      }
    }
    // Constants: evaluate with the reference, upload once.
    std::function<Status(Body &)> constants = [&](Body &body) -> Status {
      for (Node &node : body.nodes) {
        if (node.instr->op == "trellis.constant") {
          auto v = CpuExecutor::evalOp(m.program, *node.instr, {});
          if (!v)
            return m.opError(*node.instr, v.message());
          if (Status s =
                  m.upload(p, node.out[0], std::get<HostTensor>((*v)[0]));
              !s)
            return m.opError(*node.instr, s.message());
        }
        for (Body &region : node.regions)
          if (Status s = constants(region); !s)
            return s;
      }
      return Status::ok();
    };
    if (Status s = constants(p.body); !s)
      return Error{s.message()};
    if (Status s = m.uploadBound(p); !s)
      return Error{s.message()};
    const auto commandStart = Clock::now();
    if (Status s = m.buildCommands(p, p.body); !s)
      return Error{s.message()};
    m.report.commandSeconds = seconds(commandStart);
    if (m.tunedGemmsChanged)
      m.saveTuningCache();
    p.resident = true;
  }
  p.hostSlots.assign(p.slots.size(), RtValue{});
  for (size_t i = 0; i < args.size(); ++i) {
    auto *t = std::get_if<HostTensor>(&args[i]);
    const ValueType &type = p.slots[p.args[i]].type;
    if (!t || t->dtype() != type.dtype || t->shape() != type.shape)
      return Error{"argument " + std::to_string(i) + " of '" + name +
                   "': expected " + type.str() +
                   (t ? ", found " + shapeToString(t->shape()) + " " +
                            std::string(dtypeName(t->dtype()))
                      : ", found a non-tensor")};
    if (Status s = m.upload(p, p.args[i], *t); !s)
      return Error{s.message()};
  }
  CUevent start = nullptr, stop = nullptr;
  api.cuEventCreate(&start, CU_EVENT_DEFAULT);
  api.cuEventCreate(&stop, CU_EVENT_DEFAULT);
  api.cuEventRecord(start, m.stream);
  m.report.commands = 0;
  m.lastResults.clear();
  m.timings.clear();
  m.eventsUsed = 0;
  Status ran = m.runSegments(p, p.body);
  api.cuEventRecord(stop, m.stream);
  CUresult sync = api.cuStreamSynchronize(m.stream);
  float ms = 0;
  api.cuEventElapsedTime(&ms, start, stop);
  api.cuEventDestroy(start);
  api.cuEventDestroy(stop);
  m.report.runSeconds = ms / 1e3;
  if (!ran)
    return Error{ran.message()};
  if (m.options.profile && sync == CUDA_SUCCESS) {
    std::map<std::string, GpuReport::ProfileEntry> byWhat;
    for (auto &[what, a, b] : m.timings) {
      float t = 0;
      api.cuEventElapsedTime(&t, a, b);
      auto &e = byWhat[*what];
      e.what = *what;
      ++e.count;
      e.ms += t;
    }
    m.report.profile.clear();
    for (auto &[k, e] : byWhat)
      m.report.profile.push_back(e);
    std::sort(m.report.profile.begin(), m.report.profile.end(),
              [](const auto &x, const auto &y) { return x.ms > y.ms; });
  }
  if (sync != CUDA_SUCCESS)
    return Error{"the GPU failed while running '" + name +
                 "': " + api.describe(sync) +
                 " (run with --gpu-sync-ops to name the op that failed)"};
  size_t freeBytes = 0, totalBytes = 0;
  api.cuMemGetInfo(&freeBytes, &totalBytes);
  m.report.deviceBytesInUse = totalBytes - freeBytes;
  std::vector<RtValue> results;
  for (int r : p.results) {
    if (p.slots[m.root(p, r)].where == SlotInfo::Where::Host) {
      results.push_back(p.hostSlots[m.root(p, r)]);
      continue;
    }
    if (p.slots[m.root(p, r)].where == SlotInfo::Where::Bound) {
      results.push_back(p.boundValues[m.root(p, r)]);
      continue;
    }
    auto t = m.download(p, r);
    if (!t)
      return Error{t.message()};
    if (!m.options.lowMemory && !m.tokenStride(p, r))
      m.lastResults.push_back({t->raw(), t->nbytes(), m.address(p, r)});
    results.push_back(*t);
  }
  if (m.options.lowMemory)
    m.release(p);
  return results;
}

} // namespace trellis
