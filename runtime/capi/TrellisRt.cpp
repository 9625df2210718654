//===- TrellisRt.cpp - libtrellis_rt.so: the runtime behind a C ABI -------===//
//
// include/trellis/trellis_rt.h over the runtime library: the pipeline
// (Engine.h; trellis_run is create + run + destroy) and single entry
// functions (Session, Runner.h). Nothing throws across the boundary: every
// entry point catches and reports.
//
//===----------------------------------------------------------------------===//
#include "trellis/trellis_rt.h"

#include "trellis/Image/Preprocess.h"
#include "trellis/Reference/Parallel.h"
#include "trellis/Runtime/Engine.h"

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>

using namespace trellis;

struct trellis_program {
  LoadedBundle bundle;
  std::string metaJson;
  /// The caller's handle plus one per engine: the last release frees it.
  std::atomic<int> refs{1};
};

struct trellis_engine {
  trellis_program *program;
  std::unique_ptr<Engine> engine;
};

struct trellis_session {
  trellis_program *program;
  std::unique_ptr<Session> session;
  std::atomic<bool> busy{false};
  double gpuSeconds = NAN; // of the last call
};

namespace {
void releaseProgram(trellis_program *p) {
  if (p && p->refs.fetch_sub(1) == 1)
    delete p;
}
} // namespace

namespace {

trellis_status report(trellis_error *err, trellis_status code,
                      const std::string &message) {
  if (err) {
    std::free(err->message);
    err->code = code;
    err->message = static_cast<char *>(std::malloc(message.size() + 1));
    if (err->message)
      std::memcpy(err->message, message.c_str(), message.size() + 1);
  }
  return code;
}

void clearError(trellis_error *err) {
  if (err) {
    std::free(err->message);
    err->message = nullptr;
    err->code = TRELLIS_OK;
  }
}

/// Runs `body`, turning any C++ exception into TRELLIS_ERR_INTERNAL.
template <typename F> trellis_status guarded(trellis_error *err, F &&body) {
  try {
    clearError(err);
    return body();
  } catch (const std::bad_alloc &) {
    return report(err, TRELLIS_ERR_INTERNAL, "out of host memory");
  } catch (const std::exception &e) {
    return report(err, TRELLIS_ERR_INTERNAL,
                  std::string("internal error: ") + e.what());
  } catch (...) {
    return report(err, TRELLIS_ERR_INTERNAL, "internal error");
  }
}

std::optional<DType> toDType(trellis_dtype d) {
  switch (d) {
  case TRELLIS_F32:
    return DType::F32;
  case TRELLIS_F16:
    return DType::F16;
  case TRELLIS_I32:
    return DType::I32;
  case TRELLIS_I64:
    return DType::I64;
  case TRELLIS_U8:
    return DType::U8;
  }
  return std::nullopt;
}

std::optional<trellis_dtype> fromDType(DType d) {
  switch (d) {
  case DType::F32:
    return TRELLIS_F32;
  case DType::F16:
    return TRELLIS_F16;
  case DType::I32:
    return TRELLIS_I32;
  case DType::I64:
    return TRELLIS_I64;
  case DType::U8:
  case DType::Bool:
    return TRELLIS_U8;
  default:
    return std::nullopt;
  }
}

/// A read-only view of a caller tensor; errors name it (`what`).
/// `allowNull`: a shape and dtype only (a device tensor's description).
Result<HostTensor> viewOf(const trellis_tensor *t, const std::string &what,
                          bool allowNull = false) {
  if (!t)
    return Error{what + " is NULL"};
  auto dtype = toDType(t->dtype);
  if (!dtype)
    return Error{what + ": unknown dtype code " +
                 std::to_string(int(t->dtype))};
  if (t->rank < 0 || t->rank > TRELLIS_MAX_RANK)
    return Error{what + ": rank " + std::to_string(t->rank) +
                 " is outside 0.." + std::to_string(TRELLIS_MAX_RANK)};
  Shape shape(t->shape, t->shape + t->rank);
  for (int64_t d : shape)
    if (d < 0)
      return Error{what + ": negative dimension in " + shapeToString(shape)};
  if (!t->data && !allowNull && numElements(shape) > 0)
    return Error{what + ": data is NULL for a " + shapeToString(shape) +
                 " tensor"};
  return HostTensor::view(*dtype, shape, t->data);
}

/// Copies `src` into the caller's output tensor (or a runtime allocation).
trellis_status deliver(const HostTensor &src, trellis_tensor *dst,
                       const std::string &what, trellis_error *err) {
  auto dtype = fromDType(src.dtype());
  if (!dtype)
    return report(err, TRELLIS_ERR_UNSUPPORTED,
                  what + ": dtype " + std::string(dtypeName(src.dtype())) +
                      " has no trellis_dtype");
  if (src.rank() > TRELLIS_MAX_RANK)
    return report(err, TRELLIS_ERR_UNSUPPORTED, what + ": rank too large");
  size_t bytes = src.nbytes();
  if (dst->data && !dst->owned) {
    if (dst->capacity < bytes)
      return report(err, TRELLIS_ERR_BUFFER_TOO_SMALL,
                    what + " needs " + std::to_string(bytes) + " bytes (" +
                        shapeToString(src.shape()) + " " +
                        std::string(dtypeName(src.dtype())) +
                        "), the caller's buffer has " +
                        std::to_string(dst->capacity));
  } else {
    if (dst->owned)
      std::free(dst->data);
    dst->data = std::malloc(bytes ? bytes : 1);
    if (!dst->data)
      return report(err, TRELLIS_ERR_INTERNAL,
                    what + ": cannot allocate " + std::to_string(bytes) +
                        " bytes");
    dst->owned = 1;
    dst->capacity = bytes;
  }
  if (bytes)
    std::memcpy(dst->data, src.raw(), bytes);
  dst->dtype = *dtype;
  dst->rank = src.rank();
  for (int i = 0; i < TRELLIS_MAX_RANK; ++i)
    dst->shape[i] = i < src.rank() ? src.dim(i) : 0;
  return TRELLIS_OK;
}

/// Weights from the caller's table, else from model_dir.
WeightProvider weightProvider(const trellis_weights *w,
                              const LoadedBundle &bundle) {
  // The table is copied (an engine outlives the caller's array); the
  // tensors' memory stays the caller's.
  auto table = std::make_shared<
      std::map<std::pair<std::string, std::string>, trellis_tensor>>();
  WeightProvider fromDir;
  if (w) {
    for (size_t i = 0; i < w->count && w->entries; ++i) {
      const trellis_weight &e = w->entries[i];
      (*table)[{e.model ? e.model : "", e.name ? e.name : ""}] = e.tensor;
    }
    if (w->model_dir && *w->model_dir)
      fromDir = modelDirectoryWeights(bundle.weights, w->model_dir);
  }
  return [table, fromDir](const std::string &model,
                          const std::string &name) -> Result<HostTensor> {
    auto it = table->find({model, name});
    if (it != table->end())
      return viewOf(&it->second, "weight '" + name + "' of model '" + model +
                                     "' (weight table)");
    if (fromDir)
      return fromDir(model, name);
    return Error{"the weight table has no tensor '" + name + "' of model '" +
                 model + "' (and no model_dir is set)"};
  };
}

void setThreads(int32_t n) {
  if (n > 0)
    ref::setNumThreads(n);
}

/// The first flow_sample reachable from function `name`.
const Instr *findSampler(const Program &p, const std::string &name,
                         int depth = 0) {
  const Function *fn = p.find(name);
  if (!fn || depth > 8)
    return nullptr;
  std::vector<const std::vector<Instr> *> bodies = {&fn->body};
  while (!bodies.empty()) {
    const std::vector<Instr> *body = bodies.back();
    bodies.pop_back();
    for (const Instr &i : *body) {
      if (i.op == "trellis.flow_sample")
        return &i;
      if (i.op == "func.call")
        if (auto callee = i.stringAttr("callee"))
          if (const Instr *s = findSampler(p, *callee, depth + 1))
            return s;
      for (const Region &r : i.regions)
        bodies.push_back(&r.body);
    }
  }
  return nullptr;
}

/// Run-time sampler overrides from a spec; compiled-in settings may only be
/// restated.
Result<SamplerRunOverrides> samplerOverrides(const Program &p,
                                             const char *stage,
                                             const trellis_sampler_spec &s,
                                             const std::string &what) {
  SamplerRunOverrides o;
  // The ranges pipeline.json allows (trellis.exe's --steps-* / --cfg-*).
  if (s.steps < 0 || s.steps > 10000)
    return Error{what +
                 ".steps must be in 0..10000 (0 keeps the compiled value), "
                 "found " +
                 std::to_string(s.steps)};
  if (s.steps > 0)
    o.steps = s.steps;
  if (!std::isnan(s.cfg_strength)) {
    if (s.cfg_strength < 0 || !std::isfinite(s.cfg_strength))
      return Error{what +
                   ".cfg_strength must be a finite number >= 0 (NaN "
                   "keeps the compiled value), found " +
                   std::to_string(s.cfg_strength)};
    o.cfgStrength = s.cfg_strength;
  }
  const Instr *sampler = findSampler(p, stage);
  auto compiled = [&](const char *attr, double given,
                      const std::string &field) -> Status {
    if (std::isnan(given))
      return Status::ok();
    auto v = sampler ? sampler->floatAttr(attr) : Result<double>(Error{""});
    if (v && std::abs(*v - given) <= 1e-12 * std::max(1.0, std::abs(*v)))
      return Status::ok();
    return Error{what + "." + field + " = " + std::to_string(given) +
                 ": this setting is compiled into the program" +
                 (v ? " (" + std::to_string(*v) + ")" : std::string()) +
                 "; recompile to change it (set it to NaN to keep it)"};
  };
  TRELLIS_RETURN_IF_ERROR(compiled("sigma_min", s.sigma_min, "sigma_min"));
  TRELLIS_RETURN_IF_ERROR(compiled("rescale_t", s.rescale_t, "rescale_t"));
  if (!std::isnan(s.cfg_interval[0]) || !std::isnan(s.cfg_interval[1])) {
    auto iv = sampler ? sampler->floatArrayAttr("cfg_interval")
                      : Result<std::vector<double>>(Error{""});
    bool same = iv && iv->size() == 2 &&
                std::abs((*iv)[0] - s.cfg_interval[0]) < 1e-12 &&
                std::abs((*iv)[1] - s.cfg_interval[1]) < 1e-12;
    if (!same)
      return Error{what + ".cfg_interval: this setting is compiled into the "
                          "program; recompile to change it (set it to NaN "
                          "to keep it)"};
  }
  return o;
}

/// Forwards pipeline progress to the caller's callback.
class CallbackObserver : public PipelineObserver {
public:
  CallbackObserver(trellis_progress_fn fn, void *user) : fn_(fn), user_(user) {}
  void stageBegin(const std::string &f, const std::string &) override {
    call(base(TRELLIS_PROGRESS_STAGE_BEGIN, f));
  }
  void stageEnd(const std::string &f, const std::string &,
                double seconds) override {
    trellis_progress p = base(TRELLIS_PROGRESS_STAGE_END, f);
    p.seconds = seconds;
    call(p);
  }
  void step(const std::string &f, int64_t k, int64_t n) override {
    trellis_progress p = base(TRELLIS_PROGRESS_STEP, f);
    p.step = k;
    p.steps = n;
    call(p);
  }
  void coords(const HostTensor &c) override {
    trellis_tensor t{};
    t.dtype = TRELLIS_I32;
    t.rank = c.rank();
    for (int i = 0; i < c.rank() && i < TRELLIS_MAX_RANK; ++i)
      t.shape[i] = c.dim(i);
    t.data = const_cast<void *>(c.raw());
    t.capacity = c.nbytes();
    trellis_progress p = base(TRELLIS_PROGRESS_COORDS, "ss_stage");
    p.coords = &t;
    call(p);
  }
  void message(const std::string &line) override {
    trellis_progress p = base(TRELLIS_PROGRESS_MESSAGE, "");
    p.message = line.c_str();
    call(p);
  }

private:
  trellis_progress base(trellis_progress_kind kind, const std::string &stage) {
    stage_ = stage;
    trellis_progress p{};
    p.kind = kind;
    p.stage = stage_.c_str();
    return p;
  }
  void call(const trellis_progress &p) {
    if (fn_)
      fn_(&p, user_);
  }
  trellis_progress_fn fn_;
  void *user_;
  std::string stage_;
};

constexpr uint32_t kEngineFlags =
    TRELLIS_FLAG_LOW_MEMORY | TRELLIS_FLAG_GRAPHS | TRELLIS_FLAG_CHECK_FINITE |
    TRELLIS_FLAG_CPU_ONLY | TRELLIS_FLAG_REQUIRE_GPU | TRELLIS_FLAG_IMAGES |
    TRELLIS_FLAG_SYNC_OPS | TRELLIS_FLAG_PORTABLE_GPU;
constexpr uint32_t kAllFlags = kEngineFlags | TRELLIS_FLAG_DETERMINISTIC;

/// Engine options from C flags; errors name the field.
Result<EngineOptions> engineOptions(uint32_t flags, int32_t device,
                                    const std::string &what) {
  if (flags & ~kAllFlags)
    return Error{what + ".flags has unknown bits (see TRELLIS_FLAG_*)"};
  if ((flags & TRELLIS_FLAG_CPU_ONLY) && (flags & TRELLIS_FLAG_REQUIRE_GPU))
    return Error{what + ".flags: TRELLIS_FLAG_CPU_ONLY and "
                        "TRELLIS_FLAG_REQUIRE_GPU exclude each other"};
  if (device < 0)
    return Error{what + ".device must be >= 0, found " +
                 std::to_string(device)};
  EngineOptions o;
  o.checkFinite = flags & TRELLIS_FLAG_CHECK_FINITE;
  o.gpu.options.lowMemory = flags & TRELLIS_FLAG_LOW_MEMORY;
  o.gpu.options.cudaGraphs = flags & TRELLIS_FLAG_GRAPHS;
  o.gpu.options.syncEachOp = flags & TRELLIS_FLAG_SYNC_OPS;
  o.gpu.options.portable = flags & TRELLIS_FLAG_PORTABLE_GPU;
  o.gpu.options.device = device;
  o.images = flags & TRELLIS_FLAG_IMAGES;
  if (flags & TRELLIS_FLAG_CPU_ONLY)
    o.gpu.mode = GpuMode::Off;
  else if (flags & TRELLIS_FLAG_REQUIRE_GPU)
    o.gpu.mode = GpuMode::Require;
  return o;
}

/// The status of an Engine::create failure.
trellis_status engineFailure(const std::string &message) {
  if (message.rfind("weights: ", 0) == 0)
    return TRELLIS_ERR_WEIGHTS;
  // No usable GPU, or an FP8 program on a GPU other than sm_90
  // (checkFp8Device).
  if (message.rfind("--gpu=require", 0) == 0 ||
      message.rfind("--precision=fp8", 0) == 0)
    return TRELLIS_ERR_UNSUPPORTED;
  return TRELLIS_ERR_RUNTIME;
}

/// spec.images, preprocessed as TRELLIS does and normalized: f32
/// [N, 3, 518, 518].
Result<NamedTensor> conditioningImages(const trellis_run_spec *spec) {
  if (spec->num_images < 1 || spec->num_images > 4096)
    return Error{"spec.num_images must be 1..4096 with spec.images set, "
                 "found " +
                 std::to_string(spec->num_images)};
  std::vector<RgbaImage> images;
  std::vector<std::string> names;
  for (int32_t i = 0; i < spec->num_images; ++i) {
    std::string what = "spec.images[" + std::to_string(i) + "]";
    const trellis_tensor &t = spec->images[i];
    if (t.dtype != TRELLIS_U8 || t.rank != 3)
      return Error{what + ": expected uint8 [height, width, 4] (RGBA) or " +
                   "[height, width, 3] (RGB), found rank " +
                   std::to_string(t.rank) + " dtype code " +
                   std::to_string(int(t.dtype))};
    TRELLIS_ASSIGN_OR_RETURN(
        RgbaImage image,
        imageFromPixels(static_cast<const uint8_t *>(t.data), t.shape[0],
                        t.shape[1], t.shape[2], what));
    images.push_back(std::move(image));
    names.push_back(std::move(what));
  }
  PreprocessOptions options;
  options.noBackgroundRemoval = spec->no_background_removal != 0;
  options.noBackgroundRemovalOption =
      "set spec.no_background_removal (Python: no_background_removal=True)";
  TRELLIS_ASSIGN_OR_RETURN(ConditioningImages prepared,
                           prepareConditioningImages(images, names, options));
  return NamedTensor{std::move(prepared.normalized), "spec.images"};
}

/// One generation's request from the C structs (spec->flags, program and
/// bundle_path are the caller's business).
Result<GenerationRequest> generationRequest(const Program &program,
                                            const trellis_run_spec *spec,
                                            const trellis_embeddings *emb,
                                            trellis_status &code) {
  code = TRELLIS_ERR_INVALID_ARGUMENT;
  GenerationRequest req;
  if (spec->images) {
    if (emb && (emb->cond.rank != 0 || emb->cond.data))
      return Error{"embeddings.cond and spec.images are both set: give the "
                   "conditioning tokens or the images, not both"};
    TRELLIS_ASSIGN_OR_RETURN(req.images, conditioningImages(spec));
  } else {
    if (!emb)
      return Error{"embeddings is NULL (and spec.images is not set)"};
    auto cond = viewOf(&emb->cond, "embeddings.cond");
    if (!cond)
      return Error{cond.message()};
    req.cond = {*cond, "embeddings.cond"};
  }
  const trellis_tensor *negCond = emb ? emb->neg_cond : nullptr;
  auto optional = [&](const trellis_tensor *t, const char *what,
                      std::optional<NamedTensor> &dst) -> Status {
    if (!t)
      return Status::ok();
    auto v = viewOf(t, what);
    if (!v)
      return Error{v.message()};
    dst = NamedTensor{*v, what};
    return Status::ok();
  };
  for (Status s : {optional(negCond, "embeddings.neg_cond", req.negCond),
                   optional(spec->ss_noise, "spec.ss_noise", req.ssNoise),
                   optional(spec->slat_noise, "spec.slat_noise", req.slatNoise),
                   optional(spec->coords, "spec.coords", req.coords)})
    if (!s)
      return Error{s.message()};
  code = TRELLIS_ERR_UNSUPPORTED;
  auto ss = samplerOverrides(program, "ss_stage", spec->ss, "spec.ss");
  if (!ss)
    return Error{ss.message()};
  auto slat = samplerOverrides(program, "slat_stage", spec->slat, "spec.slat");
  if (!slat)
    return Error{slat.message()};
  req.ss = *ss;
  req.slat = *slat;
  code = TRELLIS_ERR_INVALID_ARGUMENT;
  uint32_t targets = spec->targets ? spec->targets : TRELLIS_TARGET_ALL;
  if (targets & ~TRELLIS_TARGET_ALL)
    return Error{"spec.targets has unknown bits (expected TRELLIS_TARGET_GS "
                 "| _RF | _MESH)"};
  req.gs = targets & TRELLIS_TARGET_GS;
  req.rf = targets & TRELLIS_TARGET_RF;
  req.mesh = targets & TRELLIS_TARGET_MESH;
  req.seed = spec->seed;
  req.outDir = spec->out_dir ? spec->out_dir : "";
  code = TRELLIS_OK;
  return req;
}

/// Copies a generation's tensors into the caller's outputs.
trellis_status deliverOutputs(const PipelineResult &r, trellis_outputs *outputs,
                              trellis_error *err) {
  if (!outputs)
    return TRELLIS_OK;
  std::pair<const HostTensor *, trellis_tensor *> all[] = {
      {&r.ssLatent, &outputs->ss_latent},
      {&r.coords, &outputs->coords},
      {&r.slat, &outputs->slat},
      {&r.gsXyz, &outputs->gs_xyz},
      {&r.gsFeaturesDc, &outputs->gs_features_dc},
      {&r.gsScaling, &outputs->gs_scaling},
      {&r.gsRotation, &outputs->gs_rotation},
      {&r.gsOpacity, &outputs->gs_opacity},
      {&r.rfTrivec, &outputs->rf_trivec},
      {&r.rfDensity, &outputs->rf_density},
      {&r.rfFeaturesDc, &outputs->rf_features_dc},
      {&r.meshCubes, &outputs->mesh_cubes},
      {&r.meshFields, &outputs->mesh_fields},
      {&r.meshVertices, &outputs->mesh_vertices},
      {&r.meshFaces, &outputs->mesh_faces},
      {&r.cond, &outputs->cond}};
  static const char *const names[] = {
      "ss_latent",      "coords",        "slat",           "gs_xyz",
      "gs_features_dc", "gs_scaling",    "gs_rotation",    "gs_opacity",
      "rf_trivec",      "rf_density",    "rf_features_dc", "mesh_cubes",
      "mesh_fields",    "mesh_vertices", "mesh_faces",     "cond"};
  size_t i = 0;
  for (auto [src, dst] : all) {
    const char *name = names[i++];
    if (src->rank() == 0 && !src->raw())
      continue; // not produced (stage skipped)
    if (trellis_status s =
            deliver(*src, dst, std::string("outputs.") + name, err);
        s != TRELLIS_OK)
      return s;
  }
  return TRELLIS_OK;
}

trellis_status checkSpec(const trellis_run_spec *spec, trellis_error *err) {
  if (!spec)
    return report(err, TRELLIS_ERR_INVALID_ARGUMENT, "spec is NULL");
  if (spec->struct_size < sizeof(trellis_run_spec))
    return report(err, TRELLIS_ERR_INVALID_ARGUMENT,
                  "spec->struct_size is " + std::to_string(spec->struct_size) +
                      ", expected " + std::to_string(sizeof(trellis_run_spec)) +
                      " (call trellis_run_spec_init)");
  return TRELLIS_OK;
}

/// One generation through `e`; progress to the spec's callback.
trellis_status engineRun(trellis_engine *e, const trellis_embeddings *emb,
                         const trellis_run_spec *spec, trellis_outputs *outputs,
                         trellis_error *err) {
  trellis_status code = TRELLIS_OK;
  auto req = generationRequest(e->program->bundle.program, spec, emb, code);
  if (!req)
    return report(err, code, req.message());
  req->keepMeshFields = outputs != nullptr;
  setThreads(spec->threads);
  CallbackObserver observer(spec->progress, spec->user_data);
  auto result = e->engine->run(*req, &observer);
  if (!result) {
    const std::string &m = result.message();
    trellis_status code =
        m.rfind("engine busy", 0) == 0 ? TRELLIS_ERR_BUSY
        : m.rfind("embeddings.", 0) == 0 || m.rfind("spec.", 0) == 0 ||
                m.find("compiled without the image") != std::string::npos ||
                m.find("text pipeline") != std::string::npos
            ? TRELLIS_ERR_INVALID_ARGUMENT
        : m.rfind("writing ", 0) == 0 ? TRELLIS_ERR_IO
                                      : TRELLIS_ERR_RUNTIME;
    return report(err, code, m);
  }
  return deliverOutputs(*result, outputs, err);
}

/// The caller's engine options over the defaults: a struct_size from before
/// memory_budget and max_voxels were added gets their defaults; a smaller
/// one than that is an error.
Result<trellis_engine_options>
readEngineOptions(const trellis_engine_options *options) {
  trellis_engine_options o;
  trellis_engine_options_init(&o);
  if (!options)
    return o;
  constexpr size_t kFirstVersion =
      offsetof(trellis_engine_options, memory_budget);
  if (options->struct_size < kFirstVersion)
    return Error{"options->struct_size is " +
                 std::to_string(options->struct_size) + ", expected " +
                 std::to_string(sizeof(trellis_engine_options)) +
                 " (call trellis_engine_options_init)"};
  std::memcpy(&o, options, std::min<size_t>(options->struct_size, sizeof(o)));
  o.struct_size = sizeof(o);
  if (o.max_voxels < 0)
    return Error{"options->max_voxels must be 0 (the default) or positive, "
                 "found " +
                 std::to_string(o.max_voxels)};
  return o;
}

/// Creates an engine for `program` (which gains a reference).
trellis_status engineCreate(trellis_program *program,
                            const trellis_weights *weights, uint32_t flags,
                            int32_t device, trellis_progress_fn progress,
                            void *user, trellis_engine **out,
                            trellis_error *err, uint64_t memoryBudget = 0,
                            int64_t maxVoxels = 0) {
  auto options = engineOptions(flags, device, "options");
  if (!options)
    return report(err, TRELLIS_ERR_INVALID_ARGUMENT, options.message());
  options->gpu.options.memoryBudget = size_t(memoryBudget);
  if (maxVoxels > 0)
    options->memoryPlanVoxels = maxVoxels;
  options->weights = weightProvider(weights, program->bundle);
  auto observer = std::make_shared<CallbackObserver>(progress, user);
  options->notice = [observer](const std::string &line) {
    observer->message(line);
  };
  auto engine = Engine::create(program->bundle, std::move(*options));
  if (!engine)
    return report(err, engineFailure(engine.message()), engine.message());
  program->refs.fetch_add(1);
  *out = new trellis_engine{program, std::move(*engine)};
  return TRELLIS_OK;
}

} // namespace

extern "C" {

int trellis_rt_abi_version(void) { return TRELLIS_RT_ABI_VERSION; }

size_t trellis_dtype_size(trellis_dtype d) {
  auto t = toDType(d);
  return t ? dtypeSize(*t) : 0;
}

void trellis_error_clear(trellis_error *err) { clearError(err); }

void trellis_tensor_free(trellis_tensor *t) {
  if (t && t->owned && !t->on_device) {
    std::free(t->data);
    t->data = nullptr;
    t->owned = 0;
    t->capacity = 0;
  }
}

void trellis_outputs_free(trellis_outputs *o) {
  if (!o)
    return;
  for (trellis_tensor *t :
       {&o->ss_latent, &o->coords, &o->slat, &o->gs_xyz, &o->gs_features_dc,
        &o->gs_scaling, &o->gs_rotation, &o->gs_opacity, &o->rf_trivec,
        &o->rf_density, &o->rf_features_dc, &o->mesh_cubes, &o->mesh_fields,
        &o->mesh_vertices, &o->mesh_faces, &o->cond})
    trellis_tensor_free(t);
}

trellis_status trellis_program_open(const char *path, trellis_program **out,
                                    trellis_error *err) {
  return guarded(err, [&]() -> trellis_status {
    if (!out || !path)
      return report(err, TRELLIS_ERR_INVALID_ARGUMENT,
                    "trellis_program_open: path and out must not be NULL");
    *out = nullptr;
    // An executable carries its bundle at the end; a bundle file starts
    // with the magic.
    auto embedded = Bundle::readEmbedded(path);
    auto loaded = embedded ? LoadedBundle::load(path, true)
                           : LoadedBundle::load(path, false);
    if (!loaded)
      return report(err, TRELLIS_ERR_BUNDLE, loaded.message());
    auto *p = new trellis_program{std::move(*loaded), ""};
    p->metaJson = p->bundle.meta.dump();
    *out = p;
    return TRELLIS_OK;
  });
}

trellis_status trellis_program_from_memory(const void *bytes, size_t size,
                                           trellis_program **out,
                                           trellis_error *err) {
  return guarded(err, [&]() -> trellis_status {
    if (!out || (!bytes && size))
      return report(err, TRELLIS_ERR_INVALID_ARGUMENT,
                    "trellis_program_from_memory: bytes and out must not be "
                    "NULL");
    *out = nullptr;
    auto loaded = LoadedBundle::fromBytes(
        std::string_view(static_cast<const char *>(bytes), size),
        "<bundle in memory>");
    if (!loaded)
      return report(err, TRELLIS_ERR_BUNDLE, loaded.message());
    auto *p = new trellis_program{std::move(*loaded), ""};
    p->metaJson = p->bundle.meta.dump();
    *out = p;
    return TRELLIS_OK;
  });
}

void trellis_program_close(trellis_program *p) { releaseProgram(p); }

const char *trellis_program_meta(const trellis_program *p) {
  return p ? p->metaJson.c_str() : "{}";
}

} // extern "C"

namespace {

/// One call of entry `function` through `session` (the checks of
/// trellis_program_call and trellis_session_call).
trellis_status callEntry(trellis_program *program, Session &session,
                         const char *function, const trellis_tensor *inputs,
                         size_t num_inputs, trellis_tensor *outputs,
                         size_t num_outputs, trellis_error *err) {
  const Program &p = program->bundle.program;
  const Function *fn = p.find(function);
  if (!fn || !p.hasEntry(function))
    return report(err, TRELLIS_ERR_INVALID_ARGUMENT,
                  std::string("the program has no entry function '") +
                      function + "'");
  if (num_inputs != fn->argTypes.size())
    return report(err, TRELLIS_ERR_INVALID_ARGUMENT,
                  std::string("'") + function + "' takes " +
                      std::to_string(fn->argTypes.size()) + " inputs, " +
                      std::to_string(num_inputs) + " given");
  if (num_outputs != fn->results.size())
    return report(err, TRELLIS_ERR_INVALID_ARGUMENT,
                  std::string("'") + function + "' returns " +
                      std::to_string(fn->results.size()) + " outputs, " +
                      std::to_string(num_outputs) + " requested");
  std::vector<RtValue> args;
  DeviceIo io;
  bool anyDevice = false;
  for (size_t i = 0; i < num_inputs; ++i) {
    std::string what = "input " + std::to_string(i);
    trellis_tensor t = inputs[i];
    const bool onDevice = t.on_device != 0;
    void *data = t.data;
    if (onDevice && !data)
      return report(err, TRELLIS_ERR_INVALID_ARGUMENT,
                    what + ": on_device is set and data is NULL");
    if (onDevice)
      t.data = nullptr; // a shape to check, not host memory
    auto v = onDevice ? viewOf(&t, what, /*allowNull=*/true) : viewOf(&t, what);
    if (!v)
      return report(err, TRELLIS_ERR_INVALID_ARGUMENT, v.message());
    args.push_back(*v);
    io.args.push_back(onDevice ? uint64_t(uintptr_t(data)) : 0);
    anyDevice |= onDevice;
  }
  for (size_t i = 0; i < num_outputs; ++i) {
    io.resultsOnDevice.push_back(outputs[i].on_device != 0);
    anyDevice |= outputs[i].on_device != 0;
  }
  auto r = session.call(function, std::move(args), nullptr,
                        anyDevice ? &io : nullptr);
  if (!r)
    return report(err, TRELLIS_ERR_RUNTIME, r.message());
  for (size_t i = 0; i < r->size(); ++i) {
    const HostTensor *t = std::get_if<HostTensor>(&(*r)[i]);
    if (!t)
      return report(err, TRELLIS_ERR_UNSUPPORTED,
                    "output " + std::to_string(i) +
                        " is not a tensor (coordinates, neighbour maps and "
                        "segments stay inside the program)");
    if (anyDevice && io.results.size() > i && io.results[i]) {
      trellis_tensor &o = outputs[i];
      o.dtype = *fromDType(t->dtype());
      o.rank = t->rank();
      for (int d = 0; d < t->rank(); ++d)
        o.shape[d] = t->dim(d);
      o.data = reinterpret_cast<void *>(uintptr_t(io.results[i]));
      o.capacity = t->nbytes();
      o.owned = 1;
      o.on_device = 1;
      continue;
    }
    outputs[i].on_device = 0; // (asked on the device, it ran on the CPU)
    if (trellis_status s =
            deliver(*t, &outputs[i], "output " + std::to_string(i), err);
        s != TRELLIS_OK)
      return s;
  }
  return TRELLIS_OK;
}

} // namespace

extern "C" {

trellis_status trellis_program_call(
    trellis_program *program, const char *function,
    const trellis_tensor *inputs, size_t num_inputs,
    const trellis_weights *weights, const trellis_call_options *options,
    trellis_tensor *outputs, size_t num_outputs, trellis_error *err) {
  return guarded(err, [&]() -> trellis_status {
    if (!program || !function)
      return report(err, TRELLIS_ERR_INVALID_ARGUMENT,
                    "trellis_program_call: program and function must not be "
                    "NULL");
    SessionOptions o;
    if (options) {
      o.checkFinite = options->check_finite != 0;
      setThreads(options->threads);
    }
    Session session(program->bundle.program,
                    weightProvider(weights, program->bundle), o);
    return callEntry(program, session, function, inputs, num_inputs, outputs,
                     num_outputs, err);
  });
}

trellis_status trellis_session_create(trellis_program *program,
                                      const trellis_weights *weights,
                                      const trellis_engine_options *options,
                                      trellis_session **out,
                                      trellis_error *err) {
  return guarded(err, [&]() -> trellis_status {
    if (!program || !out)
      return report(err, TRELLIS_ERR_INVALID_ARGUMENT,
                    "trellis_session_create: program and out must not be "
                    "NULL");
    *out = nullptr;
    auto read = readEngineOptions(options);
    if (!read)
      return report(err, TRELLIS_ERR_INVALID_ARGUMENT, read.message());
    options = &*read;
    auto engine = engineOptions(options->flags, options->device, "options");
    if (!engine)
      return report(err, TRELLIS_ERR_INVALID_ARGUMENT, engine.message());
    setThreads(options->threads);
    SessionOptions so;
    so.gpu = engine->gpu;
    so.gpuCode = BundleGpuCode::from(program->bundle);
    so.checkFinite = engine->checkFinite;
    auto observer = std::make_shared<CallbackObserver>(options->progress,
                                                       options->user_data);
    so.notice = [observer](const std::string &line) {
      observer->message(line);
    };
    auto session = std::make_unique<Session>(
        program->bundle.program, weightProvider(weights, program->bundle), so);
    if (so.gpu.mode == GpuMode::Require && !session->gpuUnavailable().empty())
      return report(err, TRELLIS_ERR_UNSUPPORTED,
                    "TRELLIS_FLAG_REQUIRE_GPU: no usable GPU (" +
                        session->gpuUnavailable() + ")");
    program->refs.fetch_add(1);
    *out = new trellis_session{program, std::move(session)};
    return TRELLIS_OK;
  });
}

trellis_status trellis_session_call(trellis_session *session,
                                    const char *function,
                                    const trellis_tensor *inputs,
                                    size_t num_inputs, trellis_tensor *outputs,
                                    size_t num_outputs, trellis_error *err) {
  return guarded(err, [&]() -> trellis_status {
    if (!session || !function)
      return report(err, TRELLIS_ERR_INVALID_ARGUMENT,
                    "trellis_session_call: session and function must not be "
                    "NULL");
    if (session->busy.exchange(true))
      return report(err, TRELLIS_ERR_BUSY,
                    "the session is running a call on another thread");
    struct Release {
      std::atomic<bool> &flag;
      ~Release() { flag.store(false); }
    } release{session->busy};
    session->gpuSeconds = NAN;
    trellis_status s = callEntry(session->program, *session->session, function,
                                 inputs, num_inputs, outputs, num_outputs, err);
    const GpuReport *report = session->session->gpuReport();
    if (s == TRELLIS_OK && report &&
        std::string(session->session->backend(function)) == "cuda")
      session->gpuSeconds = report->runSeconds;
    return s;
  });
}

double trellis_session_gpu_seconds(const trellis_session *session) {
  return session ? session->gpuSeconds : NAN;
}

void trellis_session_tensor_free(trellis_session *session, trellis_tensor *t) {
  if (!t || !t->owned)
    return;
  if (!t->on_device) {
    trellis_tensor_free(t);
    return;
  }
  if (session && session->session->gpuExecutor())
    (void)session->session->gpuExecutor()->freeDeviceBuffer(
        uint64_t(uintptr_t(t->data)));
  t->data = nullptr;
  t->owned = 0;
  t->capacity = 0;
}

trellis_status trellis_session_copy_to_host(trellis_session *session,
                                            const trellis_tensor *device,
                                            void *host, size_t capacity,
                                            trellis_error *err) {
  return guarded(err, [&]() -> trellis_status {
    if (!session || !device || !host)
      return report(err, TRELLIS_ERR_INVALID_ARGUMENT,
                    "trellis_session_copy_to_host: session, device and host "
                    "must not be NULL");
    if (!device->on_device || !device->data)
      return report(err, TRELLIS_ERR_INVALID_ARGUMENT,
                    "trellis_session_copy_to_host: the tensor is not in "
                    "device memory");
    size_t bytes = size_t(numElements(
                       Shape(device->shape, device->shape + device->rank))) *
                   trellis_dtype_size(device->dtype);
    if (capacity < bytes)
      return report(err, TRELLIS_ERR_BUFFER_TOO_SMALL,
                    "trellis_session_copy_to_host: the host buffer has " +
                        std::to_string(capacity) + " bytes, the tensor " +
                        std::to_string(bytes));
    GpuExecutor *gpu = session->session->gpuExecutor();
    if (!gpu)
      return report(err, TRELLIS_ERR_UNSUPPORTED,
                    "the session does not run on the GPU");
    if (Status s =
            gpu->copyToHost(uint64_t(uintptr_t(device->data)), host, bytes);
        !s)
      return report(err, TRELLIS_ERR_RUNTIME, s.message());
    return TRELLIS_OK;
  });
}

const char *trellis_session_backend(const trellis_session *session,
                                    const char *function) {
  if (!session || !function || !session->program->bundle.program.find(function))
    return nullptr;
  return session->session->backend(function);
}

void trellis_session_destroy(trellis_session *session) {
  if (!session)
    return;
  trellis_program *program = session->program;
  delete session;
  releaseProgram(program);
}

void trellis_run_spec_init(trellis_run_spec *spec) {
  if (!spec)
    return;
  std::memset(spec, 0, sizeof(*spec));
  spec->struct_size = sizeof(*spec);
  spec->seed = 42;
  for (trellis_sampler_spec *s : {&spec->ss, &spec->slat}) {
    s->steps = 0;
    s->sigma_min = s->cfg_strength = s->rescale_t = NAN;
    s->cfg_interval[0] = s->cfg_interval[1] = NAN;
  }
  spec->targets = TRELLIS_TARGET_ALL;
  spec->flags = TRELLIS_FLAG_DETERMINISTIC | TRELLIS_FLAG_GRAPHS;
}

trellis_status trellis_run(const trellis_run_spec *spec,
                           const trellis_weights *weights,
                           const trellis_embeddings *embeddings,
                           trellis_outputs *outputs, trellis_error *err) {
  return guarded(err, [&]() -> trellis_status {
    if (trellis_status s = checkSpec(spec, err); s != TRELLIS_OK)
      return s;
    if (!embeddings && !spec->images)
      return report(err, TRELLIS_ERR_INVALID_ARGUMENT,
                    "embeddings is NULL (and spec.images is not set)");
    trellis_program *program = spec->program;
    if (!program) {
      if (!spec->bundle_path || !*spec->bundle_path)
        return report(err, TRELLIS_ERR_INVALID_ARGUMENT,
                      "spec names no program: set spec->program or "
                      "spec->bundle_path");
      if (trellis_status s =
              trellis_program_open(spec->bundle_path, &program, err);
          s != TRELLIS_OK)
        return s;
    } else {
      program->refs.fetch_add(1);
    }
    // The run's reference to the program (the engine takes its own).
    std::unique_ptr<trellis_program, void (*)(trellis_program *)> hold(
        program, releaseProgram);
    setThreads(spec->threads);
    trellis_engine *engine = nullptr;
    if (trellis_status s =
            engineCreate(program, weights,
                         (spec->flags & kEngineFlags) |
                             (spec->images ? TRELLIS_FLAG_IMAGES : 0u),
                         0, spec->progress, spec->user_data, &engine, err);
        s != TRELLIS_OK)
      return s;
    std::unique_ptr<trellis_engine, void (*)(trellis_engine *)> own(
        engine, trellis_engine_destroy);
    return engineRun(engine, embeddings, spec, outputs, err);
  });
}

void trellis_engine_options_init(trellis_engine_options *o) {
  if (!o)
    return;
  std::memset(o, 0, sizeof(*o));
  o->struct_size = sizeof(*o);
  o->flags = TRELLIS_FLAG_GRAPHS;
}

trellis_status trellis_engine_create(trellis_program *program,
                                     const trellis_weights *weights,
                                     const trellis_engine_options *options,
                                     trellis_engine **out, trellis_error *err) {
  return guarded(err, [&]() -> trellis_status {
    if (!program || !out)
      return report(err, TRELLIS_ERR_INVALID_ARGUMENT,
                    "trellis_engine_create: program and out must not be NULL");
    *out = nullptr;
    auto read = readEngineOptions(options);
    if (!read)
      return report(err, TRELLIS_ERR_INVALID_ARGUMENT, read.message());
    const trellis_engine_options &o = *read;
    if (o.flags & ~kEngineFlags)
      return report(err, TRELLIS_ERR_INVALID_ARGUMENT,
                    "options.flags: only TRELLIS_FLAG_LOW_MEMORY, _GRAPHS, "
                    "_CHECK_FINITE, _CPU_ONLY, _REQUIRE_GPU, _IMAGES, "
                    "_SYNC_OPS and _PORTABLE_GPU are engine options");
    setThreads(o.threads);
    return engineCreate(program, weights, o.flags, o.device, o.progress,
                        o.user_data, out, err, o.memory_budget, o.max_voxels);
  });
}

trellis_status trellis_engine_run(trellis_engine *engine,
                                  const trellis_embeddings *embeddings,
                                  const trellis_run_spec *spec,
                                  trellis_outputs *outputs,
                                  trellis_error *err) {
  return guarded(err, [&]() -> trellis_status {
    if (!engine)
      return report(err, TRELLIS_ERR_INVALID_ARGUMENT,
                    "trellis_engine_run: engine is NULL");
    if (trellis_status s = checkSpec(spec, err); s != TRELLIS_OK)
      return s;
    if (spec->program && spec->program != engine->program)
      return report(err, TRELLIS_ERR_INVALID_ARGUMENT,
                    "spec.program is not the program this engine was "
                    "created for (set it to NULL)");
    if (spec->bundle_path && *spec->bundle_path)
      return report(err, TRELLIS_ERR_INVALID_ARGUMENT,
                    "spec.bundle_path must be NULL for trellis_engine_run "
                    "(the engine has its program)");
    return engineRun(engine, embeddings, spec, outputs, err);
  });
}

void trellis_engine_destroy(trellis_engine *engine) {
  if (!engine)
    return;
  trellis_program *program = engine->program;
  engine->engine.reset();
  delete engine;
  releaseProgram(program);
}

} // extern "C"
