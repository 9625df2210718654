//===- MemoryBudget.cpp - The pipeline's device memory, planned -----------===//
//
// planPipelineMemory plans every GPU function of a generation in each form
// (GpuExecutor::planMemory, no GPU), adds the workspaces and FlexiCubes'
// estimate, and sums (resident forms) or takes the largest (low-memory);
// chooseMemoryForm takes the fastest form that fits. See MemoryBudget.h.
//
//===----------------------------------------------------------------------===//
#include "trellis/Runtime/MemoryBudget.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <future>
#include <numeric>
#include <sstream>

namespace trellis {

namespace {

/// FlexiCubes' buffers (runtime/cuda/FlexiCubesGpu.cpp) besides the fields:
/// per fine cube its coordinates and row (20 B), vertex slots (~3 per cube,
/// 40 B each), surface-cube records (33 B) and outputs (~84 B); per grid
/// cell the dense case byte and the bitmaps and prefixes (~2.5 B); all with
/// the scratch's 1/8 headroom.
size_t flexiCubesScratch(int64_t fineCubes, int res) {
  const double perCube = 20 + 3 * 40 + 33 + 84;
  const double perCell = 2.5;
  const double cells = double(res) * res * res;
  return size_t((perCube * double(fineCubes) + perCell * cells) * 1.125);
}

struct Form {
  const char *name;
  bool lowMemory, concurrentBranches;
};
constexpr Form kForms[] = {{"default", false, true},
                           {"sequential-branches", false, false},
                           {"low-memory", true, false}};

/// Whether `body` (its regions and callees included) has a sampler: only
/// then does the second guidance branch's memory depend on the form.
bool hasSampler(const Program &program, const std::vector<Instr> &body) {
  for (const Instr &instr : body) {
    if (instr.op == "trellis.flow_sample")
      return true;
    for (const Region &r : instr.regions)
      if (hasSampler(program, r.body))
        return true;
    if (instr.op == "func.call")
      if (auto callee = instr.stringAttr("callee"))
        if (const Function *fn = program.find(*callee);
            fn && hasSampler(program, fn->body))
          return true;
  }
  return false;
}

} // namespace

std::string formatMiB(size_t bytes) {
  return std::to_string((bytes + (size_t(1) << 19)) >> 20) + " MiB";
}

Result<size_t> parseByteSize(const std::string &text) {
  auto bad = [&] {
    return Error{"expected a size such as 6G, 6GiB, 4096M or a byte count, "
                 "found '" +
                 text + "'"};
  };
  size_t i = 0;
  while (i < text.size() &&
         (std::isdigit((unsigned char)text[i]) || text[i] == '.'))
    ++i;
  if (i == 0)
    return bad();
  double value = 0;
  try {
    size_t used = 0;
    value = std::stod(text.substr(0, i), &used);
    if (used != i)
      return bad();
  } catch (...) {
    return bad();
  }
  std::string unit = text.substr(i);
  for (char &c : unit)
    c = char(std::toupper((unsigned char)c));
  double scale = 0;
  if (unit.empty() || unit == "B")
    scale = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB")
    scale = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB")
    scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TB" || unit == "TIB")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else
    return bad();
  double bytes = value * scale;
  if (!(bytes >= 1) || bytes > 9.0e18)
    return Error{"the size '" + text + "' is out of range (1 byte to 8 EiB)"};
  return size_t(bytes);
}

HostTensor surfaceCoords(int64_t n, int res) {
  const int64_t cells = int64_t(res) * res * res;
  n = std::clamp<int64_t>(n, 0, cells);
  std::vector<std::pair<double, int64_t>> byDistance(
      static_cast<size_t>(cells));
  const double centre = (res - 1) / 2.0, radius = 0.44 * res;
  for (int64_t i = 0; i < cells; ++i) {
    double x = double(i / (res * res)) - centre;
    double y = double(i / res % res) - centre;
    double z = double(i % res) - centre;
    byDistance[size_t(i)] = {
        std::abs(std::sqrt(x * x + y * y + z * z) - radius), i};
  }
  // The n closest (ties by flat index, as a stable sort), then by index.
  std::nth_element(byDistance.begin(), byDistance.begin() + n,
                   byDistance.end());
  std::vector<int64_t> keep(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k)
    keep[size_t(k)] = byDistance[size_t(k)].second;
  std::sort(keep.begin(), keep.end());
  HostTensor coords(DType::I32, {n, 4});
  int32_t *c = coords.mutableData<int32_t>();
  for (int64_t k = 0; k < n; ++k) {
    int64_t i = keep[size_t(k)];
    c[4 * k] = 0;
    c[4 * k + 1] = int32_t(i / (res * res));
    c[4 * k + 2] = int32_t(i / res % res);
    c[4 * k + 3] = int32_t(i % res);
  }
  return coords;
}

std::vector<RtValue> planArguments(const Function &fn,
                                   const HostTensor &coords) {
  std::vector<RtValue> args;
  for (size_t i = 0; i < fn.argTypes.size(); ++i) {
    const ValueType &t = fn.argTypes[i];
    if (i == 0 && t.dtype == DType::I32) {
      args.push_back(coords);
      continue;
    }
    Shape shape = t.shape;
    for (int64_t &d : shape)
      if (d < 0)
        d = coords.dim(0);
    HostTensor zeros(t.dtype, shape);
    std::memset(zeros.mutableRaw(), 0, zeros.nbytes());
    args.push_back(zeros);
  }
  return args;
}

const StageMemory *PipelineMemoryPlan::largestStage() const {
  auto it = std::max_element(stages.begin(), stages.end(),
                             [](const StageMemory &a, const StageMemory &b) {
                               return a.bytes() < b.bytes();
                             });
  return it == stages.end() ? nullptr : &*it;
}

Result<std::vector<PipelineMemoryPlan>>
planPipelineMemory(const Program &program,
                   const PipelineMemoryRequest &request) {
  const HostTensor coords =
      request.coords ? *request.coords
                     : surfaceCoords(request.voxels, request.resolution);
  const int64_t voxels = coords.dim(0);
  // A function's plan depends on the form only through the second branch's
  // memory: each function is planned with the branches concurrent and, if it
  // has a sampler, without; all on threads of their own (a sparse stage's
  // binding is most of the time).
  GpuOptions concurrent = request.options, sequential = request.options;
  sequential.concurrentBranches = false;
  struct Planned {
    std::string function;
    bool sparse = false;
    std::future<Result<GpuMemoryPlan>> withBranches;
    std::optional<std::future<Result<GpuMemoryPlan>>> withoutBranches;
  };
  std::vector<Planned> planned;
  for (const std::string &name : request.functions) {
    const Function *fn = program.find(name);
    if (!fn)
      return Error{"memory plan: the program has no function '" + name + "'"};
    Planned p;
    p.function = name;
    for (const ValueType &t : fn->argTypes)
      for (int64_t d : t.shape)
        p.sparse |= d < 0;
    auto plan = [&program, name, sparse = p.sparse, fn,
                 &coords](GpuOptions options) {
      std::vector<RtValue> args;
      if (sparse)
        args = planArguments(*fn, coords);
      return GpuExecutor::planMemory(program, name, options,
                                     sparse ? &args : nullptr);
    };
    p.withBranches = std::async(std::launch::async, plan, concurrent);
    if (hasSampler(program, fn->body))
      p.withoutBranches = std::async(std::launch::async, plan, sequential);
    planned.push_back(std::move(p));
  }
  struct Plans {
    GpuMemoryPlan withBranches, withoutBranches;
  };
  std::vector<Plans> plansOf;
  for (Planned &p : planned) {
    auto a = p.withBranches.get();
    auto b = p.withoutBranches ? p.withoutBranches->get() : a;
    if (!a || !b)
      return Error{"memory plan of '" + p.function +
                   "': " + (a ? b.message() : a.message())};
    plansOf.push_back({*a, *b});
  }
  std::vector<PipelineMemoryPlan> plans;
  for (const Form &form : kForms) {
    PipelineMemoryPlan plan;
    plan.form = form.name;
    plan.lowMemory = form.lowMemory;
    plan.concurrentBranches = form.concurrentBranches;
    plan.voxels = voxels;
    GpuOptions options = form.concurrentBranches ? concurrent : sequential;
    options.lowMemory = form.lowMemory;
    plan.workspaces = GpuExecutor::workspaceBytes(options);
    for (size_t i = 0; i < planned.size(); ++i) {
      const GpuMemoryPlan &p = form.concurrentBranches
                                   ? plansOf[i].withBranches
                                   : plansOf[i].withoutBranches;
      StageMemory stage;
      stage.function = planned[i].function;
      stage.voxels = planned[i].sparse ? voxels : 0;
      stage.weights = p.weightBytes;
      stage.arena = p.arenaAllocated;
      stage.constants = p.constantBytes;
      stage.coordinates = p.coordinateBytes;
      plan.stages.push_back(stage);
      if (stage.function == "decode_mesh" && request.flexiCubes &&
          !p.resultShapes.empty()) {
        // The mesh decoder's results are the fine cubes' coordinates and
        // fields: read in place while the decoder's arena is resident,
        // uploaded into the scratch in the low-memory form.
        StageMemory flexi;
        flexi.function = "flexicubes";
        flexi.voxels = voxels;
        const Shape &cubes = p.resultShapes[0];
        flexi.scratch = flexiCubesScratch(cubes.empty() ? 0 : cubes[0],
                                          4 * request.resolution);
        if (form.lowMemory)
          for (size_t r = 1; r < p.resultBytes.size(); ++r)
            flexi.scratch += p.resultBytes[r];
        plan.stages.push_back(flexi);
      }
    }
    size_t stages = 0;
    for (const StageMemory &s : plan.stages)
      stages =
          form.lowMemory ? std::max(stages, s.bytes()) : stages + s.bytes();
    plan.peak = plan.workspaces + stages;
    plans.push_back(std::move(plan));
  }
  return plans;
}

Result<PipelineMemoryPlan>
chooseMemoryForm(const std::vector<PipelineMemoryPlan> &plans, size_t budget) {
  for (const PipelineMemoryPlan &plan : plans)
    if (plan.peak <= budget)
      return plan;
  if (plans.empty())
    return Error{"memory plan: nothing was planned"};
  const PipelineMemoryPlan &lowest = plans.back();
  const StageMemory *stage = lowest.largestStage();
  std::ostringstream os;
  os << "the device memory budget of " << formatMiB(budget)
     << " is too small: in the low-memory form (one stage at a time) '"
     << (stage ? stage->function : "?") << "' needs "
     << formatMiB(stage ? stage->bytes() : 0);
  if (stage)
    os << " (weights " << formatMiB(stage->weights) << ", arena "
       << formatMiB(stage->arena) << ", coordinates "
       << formatMiB(stage->coordinates) << ", scratch "
       << formatMiB(stage->scratch) << ")";
  os << " plus " << formatMiB(lowest.workspaces) << " of GEMM workspaces";
  if (stage && stage->voxels)
    os << ", planned for " << stage->voxels << " voxels";
  os << ": " << formatMiB(lowest.peak) << " in all";
  return Error{os.str()};
}

std::string describeMemoryPlans(const std::vector<PipelineMemoryPlan> &plans,
                                size_t budget) {
  std::ostringstream os;
  for (const PipelineMemoryPlan &plan : plans) {
    os << "memory form " << plan.form << ": peak " << formatMiB(plan.peak);
    if (budget)
      os << (plan.peak <= budget ? " (fits " : " (does not fit ")
         << formatMiB(budget) << ")";
    os << "; GEMM workspaces " << formatMiB(plan.workspaces) << "\n";
    for (const StageMemory &s : plan.stages) {
      os << "  " << s.function << ": " << formatMiB(s.bytes());
      if (s.scratch)
        os << " (scratch, an estimate)";
      else
        os << " (weights " << formatMiB(s.weights) << ", arena "
           << formatMiB(s.arena) << ", constants " << formatMiB(s.constants)
           << ", coordinates " << formatMiB(s.coordinates) << ")";
      if (s.voxels)
        os << " at " << s.voxels << " voxels";
      os << "\n";
    }
  }
  return os.str();
}

} // namespace trellis
