//===- TrellisRt.cpp - libtrellis_rt.so: the runtime behind a C ABI -----===//
//
// include/trellis/trellis_rt.h over the runtime library (Runner.h): the
// pipeline (runPipeline) and single entry functions (Session). Nothing
// throws across the boundary: every entry point catches and reports.
//
//===----------------------------------------------------------------------===//
#include "trellis/trellis_rt.h"

#include "trellis/Reference/Parallel.h"
#include "trellis/Runtime/Runner.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>

using namespace trellis;

struct trellis_program {
  LoadedBundle bundle;
  std::string metaJson;
};

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
Result<HostTensor> viewOf(const trellis_tensor *t, const std::string &what) {
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
  if (!t->data && numElements(shape) > 0)
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
  auto table = std::make_shared<
      std::map<std::pair<std::string, std::string>, const trellis_tensor *>>();
  WeightProvider fromDir;
  if (w) {
    for (size_t i = 0; i < w->count && w->entries; ++i) {
      const trellis_weight &e = w->entries[i];
      (*table)[{e.model ? e.model : "", e.name ? e.name : ""}] = &e.tensor;
    }
    if (w->model_dir && *w->model_dir)
      fromDir = modelDirectoryWeights(bundle.weights, w->model_dir);
  }
  return [table, fromDir](const std::string &model,
                          const std::string &name) -> Result<HostTensor> {
    auto it = table->find({model, name});
    if (it != table->end())
      return viewOf(it->second, "weight '" + name + "' of model '" + model +
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
  if (s.steps < 0)
    return Error{what +
                 ".steps must be >= 0 (0 keeps the compiled value), "
                 "found " +
                 std::to_string(s.steps)};
  if (s.steps > 0)
    o.steps = s.steps;
  if (!std::isnan(s.cfg_strength)) {
    if (s.cfg_strength < 0)
      return Error{what + ".cfg_strength must be >= 0"};
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
  if (Status st = compiled("sigma_min", s.sigma_min, "sigma_min"); !st)
    return Error{st.message()};
  if (Status st = compiled("rescale_t", s.rescale_t, "rescale_t"); !st)
    return Error{st.message()};
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

trellis_status runPipelineC(const trellis_run_spec *spec,
                            const trellis_weights *weights,
                            const trellis_embeddings *emb,
                            trellis_outputs *outputs, trellis_error *err) {
  if (!spec)
    return report(err, TRELLIS_ERR_INVALID_ARGUMENT, "spec is NULL");
  if (spec->struct_size < sizeof(trellis_run_spec))
    return report(err, TRELLIS_ERR_INVALID_ARGUMENT,
                  "spec->struct_size is " + std::to_string(spec->struct_size) +
                      ", expected " + std::to_string(sizeof(trellis_run_spec)) +
                      " (call trellis_run_spec_init)");
  if (!emb)
    return report(err, TRELLIS_ERR_INVALID_ARGUMENT, "embeddings is NULL");
  std::optional<LoadedBundle> own;
  const LoadedBundle *bundle = nullptr;
  if (spec->program) {
    bundle = &spec->program->bundle;
  } else if (spec->bundle_path && *spec->bundle_path) {
    std::string path = spec->bundle_path;
    auto b = Bundle::readEmbedded(path);
    auto loaded =
        b ? LoadedBundle::load(path, true) : LoadedBundle::load(path, false);
    if (!loaded)
      return report(err, TRELLIS_ERR_BUNDLE, loaded.message());
    own = std::move(*loaded);
    bundle = &*own;
  } else {
    return report(err, TRELLIS_ERR_INVALID_ARGUMENT,
                  "spec names no program: set spec->program or "
                  "spec->bundle_path");
  }
  PipelineRequest req;
  auto cond = viewOf(&emb->cond, "embeddings.cond");
  if (!cond)
    return report(err, TRELLIS_ERR_INVALID_ARGUMENT, cond.message());
  req.cond = {*cond, "embeddings.cond"};
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
  for (Status s : {optional(emb->neg_cond, "embeddings.neg_cond", req.negCond),
                   optional(spec->ss_noise, "spec.ss_noise", req.ssNoise),
                   optional(spec->slat_noise, "spec.slat_noise", req.slatNoise),
                   optional(spec->coords, "spec.coords", req.coords)})
    if (!s)
      return report(err, TRELLIS_ERR_INVALID_ARGUMENT, s.message());
  auto ss = samplerOverrides(bundle->program, "ss_stage", spec->ss, "spec.ss");
  if (!ss)
    return report(err, TRELLIS_ERR_UNSUPPORTED, ss.message());
  auto slat =
      samplerOverrides(bundle->program, "slat_stage", spec->slat, "spec.slat");
  if (!slat)
    return report(err, TRELLIS_ERR_UNSUPPORTED, slat.message());
  req.ss = *ss;
  req.slat = *slat;
  uint32_t targets = spec->targets ? spec->targets : TRELLIS_TARGET_ALL;
  if (targets & ~TRELLIS_TARGET_ALL)
    return report(err, TRELLIS_ERR_INVALID_ARGUMENT,
                  "spec.targets has unknown bits (expected TRELLIS_TARGET_GS "
                  "| _RF | _MESH)");
  req.gs = targets & TRELLIS_TARGET_GS;
  req.rf = targets & TRELLIS_TARGET_RF;
  req.mesh = targets & TRELLIS_TARGET_MESH;
  req.seed = spec->seed;
  req.checkFinite = spec->flags & TRELLIS_FLAG_CHECK_FINITE;
  req.gpu.options.lowMemory = spec->flags & TRELLIS_FLAG_LOW_MEMORY;
  req.gpu.options.cudaGraphs = spec->flags & TRELLIS_FLAG_GRAPHS;
  if ((spec->flags & TRELLIS_FLAG_CPU_ONLY) &&
      (spec->flags & TRELLIS_FLAG_REQUIRE_GPU))
    return report(err, TRELLIS_ERR_INVALID_ARGUMENT,
                  "spec.flags: TRELLIS_FLAG_CPU_ONLY and "
                  "TRELLIS_FLAG_REQUIRE_GPU exclude each other");
  if (spec->flags & TRELLIS_FLAG_CPU_ONLY)
    req.gpu.mode = GpuMode::Off;
  else if (spec->flags & TRELLIS_FLAG_REQUIRE_GPU)
    req.gpu.mode = GpuMode::Require;
  req.weights = weightProvider(weights, *bundle);
  req.outDir = spec->out_dir ? spec->out_dir : "";
  setThreads(spec->threads);
  CallbackObserver observer(spec->progress, spec->user_data);
  auto result = runPipeline(*bundle, req, &observer);
  if (!result) {
    const std::string &m = result.message();
    trellis_status code = m.rfind("embeddings.", 0) == 0 ||
                                  m.rfind("spec.", 0) == 0 ||
                                  m.find("text pipeline") != std::string::npos
                              ? TRELLIS_ERR_INVALID_ARGUMENT
                              : TRELLIS_ERR_RUNTIME;
    return report(err, code, m);
  }
  if (!outputs)
    return TRELLIS_OK;
  const PipelineResult &r = *result;
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
      {&r.meshFaces, &outputs->mesh_faces}};
  static const char *const names[] = {
      "ss_latent",      "coords",        "slat",           "gs_xyz",
      "gs_features_dc", "gs_scaling",    "gs_rotation",    "gs_opacity",
      "rf_trivec",      "rf_density",    "rf_features_dc", "mesh_cubes",
      "mesh_fields",    "mesh_vertices", "mesh_faces"};
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

} // namespace

extern "C" {

int trellis_rt_abi_version(void) { return TRELLIS_RT_ABI_VERSION; }

size_t trellis_dtype_size(trellis_dtype d) {
  auto t = toDType(d);
  return t ? dtypeSize(*t) : 0;
}

void trellis_error_clear(trellis_error *err) { clearError(err); }

void trellis_tensor_free(trellis_tensor *t) {
  if (t && t->owned) {
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
        &o->mesh_vertices, &o->mesh_faces})
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

void trellis_program_close(trellis_program *p) { delete p; }

const char *trellis_program_meta(const trellis_program *p) {
  return p ? p->metaJson.c_str() : "{}";
}

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
    for (size_t i = 0; i < num_inputs; ++i) {
      std::string what = "input " + std::to_string(i);
      auto v = viewOf(&inputs[i], what);
      if (!v)
        return report(err, TRELLIS_ERR_INVALID_ARGUMENT, v.message());
      args.push_back(*v);
    }
    SessionOptions o;
    if (options) {
      o.checkFinite = options->check_finite != 0;
      setThreads(options->threads);
    }
    Session session(p, weightProvider(weights, program->bundle), o);
    auto r = session.call(function, std::move(args));
    if (!r)
      return report(err, TRELLIS_ERR_RUNTIME, r.message());
    for (size_t i = 0; i < r->size(); ++i) {
      const HostTensor *t = std::get_if<HostTensor>(&(*r)[i]);
      if (!t)
        return report(err, TRELLIS_ERR_UNSUPPORTED,
                      "output " + std::to_string(i) +
                          " is not a tensor (coordinates, neighbour maps and "
                          "segments stay inside the program)");
      if (trellis_status s =
              deliver(*t, &outputs[i], "output " + std::to_string(i), err);
          s != TRELLIS_OK)
        return s;
    }
    return TRELLIS_OK;
  });
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
  return guarded(err, [&]() {
    return runPipelineC(spec, weights, embeddings, outputs, err);
  });
}

} // extern "C"
