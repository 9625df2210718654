//===- Manifest.cpp - The tensors each TRELLIS checkpoint must hold -------===//
//
// One function per model family, each walking TRELLIS's module tree in
// registration order (trellis/models/*.py, trellis/modules/**): the names
// are the state-dict keys, the shapes follow PyTorch's conventions (Linear
// [out, in], Conv3d [out, in, k, k, k], spconv [out, k, k, k, in]).
//
//===----------------------------------------------------------------------===//

#include "trellis/Models/Manifest.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <unordered_map>

namespace trellis::models {

using namespace config;

std::string_view tensorRoleName(TensorRole role) {
  switch (role) {
  case TensorRole::LinearWeight:
    return "linear weight";
  case TensorRole::LinearBias:
    return "linear bias";
  case TensorRole::ConvWeight:
    return "conv weight";
  case TensorRole::ConvBias:
    return "conv bias";
  case TensorRole::SparseConvWeight:
    return "sparse conv weight";
  case TensorRole::SparseConvBias:
    return "sparse conv bias";
  case TensorRole::NormWeight:
    return "norm weight";
  case TensorRole::NormBias:
    return "norm bias";
  case TensorRole::RmsGamma:
    return "RMS norm gamma";
  case TensorRole::PositionEmbedding:
    return "position embedding buffer";
  case TensorRole::OffsetPerturbation:
    return "offset perturbation buffer";
  }
  return "tensor";
}

std::string ArgRef::describe() const {
  std::string s = name + " = " + value;
  if (defaulted)
    s += " (default; " + pos.path + " not set in " + pos.location() + ")";
  else
    s += " (" + pos.location() + ")";
  return s;
}

int64_t ManifestTensor::fanIn() const {
  switch (role) {
  case TensorRole::LinearWeight:
    return shape.size() == 2 ? shape[1] : 0;
  case TensorRole::ConvWeight:
  case TensorRole::SparseConvWeight:
    return shape.empty() ? 0 : numel() / shape[0];
  default:
    return 0;
  }
}

std::string ManifestTensor::describeShapeArgs() const {
  std::string s;
  for (const ArgRef &a : shapeArgs) {
    if (!s.empty())
      s += ", ";
    s += a.describe();
  }
  return s;
}

const ManifestTensor *ModelManifest::find(std::string_view name) const {
  for (const ManifestTensor &t : tensors)
    if (t.name == name)
      return &t;
  return nullptr;
}

int64_t ModelManifest::numElements() const {
  int64_t n = 0;
  for (const ManifestTensor &t : tensors)
    n += t.numel();
  return n;
}

uint64_t ModelManifest::dataBytes() const {
  uint64_t n = 0;
  for (const ManifestTensor &t : tensors)
    n += t.nbytes();
  return n;
}

std::vector<TensorSpec> ModelManifest::specs() const {
  std::vector<TensorSpec> out;
  out.reserve(tensors.size());
  for (const ManifestTensor &t : tensors)
    out.push_back(TensorSpec{t.name, t.dtype, t.shape});
  return out;
}

namespace {

std::string lastComponent(const std::string &path) {
  size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

std::string formatDouble(double d) {
  char buf[32];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, d);
    if (std::strtod(buf, nullptr) == d)
      break;
  }
  return buf;
}

ArgRef arg(const Located<int64_t> &v) {
  return {lastComponent(v.pos.path), std::to_string(*v), v.pos, v.defaulted};
}
ArgRef arg(const Located<double> &v) {
  return {lastComponent(v.pos.path), formatDouble(*v), v.pos, v.defaulted};
}
ArgRef arg(const Located<bool> &v) {
  return {lastComponent(v.pos.path), *v ? "true" : "false", v.pos, v.defaulted};
}
ArgRef listArg(const Located<int64_t> &v) {
  // A list element: keep "io_block_channels[0]".
  std::string name = v.pos.path;
  size_t dot = name.rfind('.');
  if (dot != std::string::npos)
    name = name.substr(dot + 1);
  return {name, std::to_string(*v), v.pos, v.defaulted};
}

using Args = std::vector<ArgRef>;

/// Appends tensors with the naming and dtype conventions of one model.
class Builder {
public:
  Builder(ModelManifest &m, const Located<bool> &useFp16)
      : m_(m), useFp16_(useFp16) {}

  /// nn.Linear(in → out) at `prefix`: weight [out, in], bias [out].
  void linear(const std::string &prefix, int64_t in, int64_t out, bool fp16,
              const Args &args) {
    add(prefix + ".weight", {out, in}, TensorRole::LinearWeight, fp16, args);
    add(prefix + ".bias", {out}, TensorRole::LinearBias, fp16, args);
  }
  /// nn.Conv3d(in → out, k): weight [out, in, k, k, k].
  void conv3d(const std::string &prefix, int64_t in, int64_t out, int64_t k,
              bool fp16, const Args &args) {
    add(prefix + ".weight", {out, in, k, k, k}, TensorRole::ConvWeight, fp16,
        args);
    add(prefix + ".bias", {out}, TensorRole::ConvBias, fp16, args);
  }
  /// sp.SparseConv3d(in → out, k) at `prefix` (its spconv module is
  /// `<prefix>.conv`): weight [out, k, k, k, in].
  void sparseConv(const std::string &prefix, int64_t in, int64_t out, int64_t k,
                  bool fp16, const Args &args) {
    add(prefix + ".conv.weight", {out, k, k, k, in},
        TensorRole::SparseConvWeight, fp16, args);
    add(prefix + ".conv.bias", {out}, TensorRole::SparseConvBias, fp16, args);
  }
  /// An affine norm (LayerNorm32 / ChannelLayerNorm32 / GroupNorm32): F32.
  void norm(const std::string &prefix, int64_t c, const Args &args) {
    add(prefix + ".weight", {c}, TensorRole::NormWeight, false, args);
    add(prefix + ".bias", {c}, TensorRole::NormBias, false, args);
  }
  /// MultiHeadRMSNorm: gamma [heads, head_dim], F32.
  void rms(const std::string &prefix, int64_t heads, int64_t dim,
           const Args &args) {
    add(prefix + ".gamma", {heads, dim}, TensorRole::RmsGamma, false, args);
  }
  void buffer(const std::string &name, Shape shape, TensorRole role,
              const Args &args) {
    add(name, std::move(shape), role, false, args);
  }

private:
  void add(std::string name, Shape shape, TensorRole role, bool fp16,
           const Args &args) {
    ManifestTensor t;
    t.name = std::move(name);
    t.shape = std::move(shape);
    t.role = role;
    t.fp16Region = fp16;
    t.dtype = fp16 && *useFp16_ ? DType::F16 : DType::F32;
    t.shapeArgs = args;
    if (fp16)
      t.dtypeArg = arg(useFp16_);
    m_.tensors.push_back(std::move(t));
  }

  ModelManifest &m_;
  const Located<bool> &useFp16_;
};

Args cat(Args a, const Args &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void timestepEmbedder(Builder &b, const FlowCommonArgs &a) {
  Args c = {arg(a.modelChannels)};
  b.linear("t_embedder.mlp.0", 256, *a.modelChannels, false, c);
  b.linear("t_embedder.mlp.2", *a.modelChannels, *a.modelChannels, false, c);
}

/// ModulatedTransformerCrossBlock / ModulatedSparseTransformerCrossBlock.
void modulatedCrossBlock(Builder &b, const std::string &p,
                         const FlowCommonArgs &a, const Args &blockArg) {
  int64_t c = *a.modelChannels, h = *a.numHeads, d = a.headDim();
  Args cA = cat({arg(a.modelChannels)}, blockArg);
  Args hA = cat({arg(a.numHeads), arg(a.modelChannels)}, blockArg);
  Args ccA = cat({arg(a.modelChannels), arg(a.condChannels)}, blockArg);
  Args mlpA = cat({arg(a.modelChannels), arg(a.mlpRatio)}, blockArg);
  b.norm(p + ".norm2", c, cA);
  b.linear(p + ".self_attn.to_qkv", c, 3 * c, true, cA);
  if (*a.qkRmsNorm) {
    Args r = cat(hA, {arg(a.qkRmsNorm)});
    b.rms(p + ".self_attn.q_rms_norm", h, d, r);
    b.rms(p + ".self_attn.k_rms_norm", h, d, r);
  }
  b.linear(p + ".self_attn.to_out", c, c, true, cA);
  b.linear(p + ".cross_attn.to_q", c, c, true, cA);
  b.linear(p + ".cross_attn.to_kv", *a.condChannels, 2 * c, true, ccA);
  if (*a.qkRmsNormCross) {
    Args r = cat(hA, {arg(a.qkRmsNormCross)});
    b.rms(p + ".cross_attn.q_rms_norm", h, d, r);
    b.rms(p + ".cross_attn.k_rms_norm", h, d, r);
  }
  b.linear(p + ".cross_attn.to_out", c, c, true, cA);
  b.linear(p + ".mlp.mlp.0", c, a.mlpHidden(), true, mlpA);
  b.linear(p + ".mlp.mlp.2", a.mlpHidden(), c, true, mlpA);
  if (!*a.shareMod)
    b.linear(p + ".adaLN_modulation.1", c, 6 * c, true,
             cat(cA, {arg(a.shareMod)}));
}

void sharedModulation(Builder &b, const FlowCommonArgs &a) {
  if (*a.shareMod)
    b.linear("adaLN_modulation.1", *a.modelChannels, 6 * *a.modelChannels,
             false, {arg(a.modelChannels), arg(a.shareMod)});
}

void ssFlow(Builder &b, const SparseStructureFlowArgs &a) {
  int64_t c = *a.modelChannels, p = *a.patchSize;
  timestepEmbedder(b, a);
  sharedModulation(b, a);
  b.buffer("pos_emb", {a.numTokens(), c}, TensorRole::PositionEmbedding,
           {arg(a.resolution), arg(a.patchSize), arg(a.modelChannels)});
  b.linear("input_layer", *a.inChannels * p * p * p, c, false,
           {arg(a.inChannels), arg(a.patchSize), arg(a.modelChannels)});
  for (int64_t i = 0; i < *a.numBlocks; ++i)
    modulatedCrossBlock(b, "blocks." + std::to_string(i), a,
                        {arg(a.numBlocks)});
  b.linear("out_layer", c, *a.outChannels * p * p * p, false,
           {arg(a.modelChannels), arg(a.outChannels), arg(a.patchSize)});
}

/// SparseResBlock3d(cin → cout) of the SLat flow (spec §6.2).
void slatResBlock(Builder &b, const std::string &p, int64_t cin, int64_t cout,
                  const SLatFlowArgs &a, const Args &args) {
  b.norm(p + ".norm1", cin, args);
  b.sparseConv(p + ".conv1", cin, cout, 3, true, args);
  b.sparseConv(p + ".conv2", cout, cout, 3, true, args);
  b.linear(p + ".emb_layers.1", *a.modelChannels, 2 * cout, true,
           cat(args, {arg(a.modelChannels)}));
  if (cin != cout)
    b.linear(p + ".skip_connection", cin, cout, true, args);
}

void slatFlow(Builder &b, const SLatFlowArgs &a) {
  int64_t c = *a.modelChannels;
  timestepEmbedder(b, a);
  sharedModulation(b, a);
  const std::vector<Located<int64_t>> *io =
      a.ioBlockChannels ? &*a.ioBlockChannels : nullptr;
  Args io0 = io ? Args{listArg(io->front())} : Args{arg(a.modelChannels)};
  int64_t first = io ? *io->front() : c;
  b.linear("input_layer", *a.inChannels, first, false,
           cat({arg(a.inChannels)}, io0));
  if (io) {
    int64_t idx = 0;
    Args nio = {arg(a.numIoResBlocks)};
    for (size_t s = 0; s < io->size(); ++s) {
      const Located<int64_t> &chs = (*io)[s];
      bool last = s + 1 == io->size();
      int64_t next = last ? c : *(*io)[s + 1];
      Args nextA = {last ? arg(a.modelChannels) : listArg((*io)[s + 1])};
      for (int64_t r = 0; r + 1 < *a.numIoResBlocks; ++r)
        slatResBlock(b, "input_blocks." + std::to_string(idx++), *chs, *chs, a,
                     cat({listArg(chs)}, nio));
      slatResBlock(b, "input_blocks." + std::to_string(idx++), *chs, next, a,
                   cat(cat({listArg(chs)}, nextA), nio));
    }
  }
  for (int64_t i = 0; i < *a.numBlocks; ++i)
    modulatedCrossBlock(b, "blocks." + std::to_string(i), a,
                        {arg(a.numBlocks)});
  if (io) {
    int64_t idx = 0;
    Args nio = {arg(a.numIoResBlocks), arg(a.useSkipConnection)};
    int64_t mult = *a.useSkipConnection ? 2 : 1;
    for (size_t k = 0; k < io->size(); ++k) {
      size_t s = io->size() - 1 - k; // reversed stages
      const Located<int64_t> &chs = (*io)[s];
      bool deepest = k == 0;
      int64_t prev = deepest ? c : *(*io)[s + 1];
      Args prevA = {deepest ? arg(a.modelChannels) : listArg((*io)[s + 1])};
      slatResBlock(b, "out_blocks." + std::to_string(idx++), prev * mult, *chs,
                   a, cat(cat({listArg(chs)}, prevA), nio));
      for (int64_t r = 0; r + 1 < *a.numIoResBlocks; ++r)
        slatResBlock(b, "out_blocks." + std::to_string(idx++), *chs * mult,
                     *chs, a, cat({listArg(chs)}, nio));
    }
  }
  b.linear("out_layer", first, *a.outChannels, false,
           cat({arg(a.outChannels)}, io0));
}

/// ResBlock3d(ch) of the SS decoder (in == out: no skip conv).
void denseResBlock(Builder &b, const std::string &p, int64_t ch,
                   const Args &args) {
  b.norm(p + ".norm1", ch, args);
  b.conv3d(p + ".conv1", ch, ch, 3, true, args);
  b.norm(p + ".norm2", ch, args);
  b.conv3d(p + ".conv2", ch, ch, 3, true, args);
}

void ssDecoder(Builder &b, const SparseStructureDecoderArgs &a) {
  const Located<int64_t> &c0 = a.channels.front();
  b.conv3d("input_layer", *a.latentChannels, *c0, 3, false,
           {arg(a.latentChannels), listArg(c0)});
  for (int64_t i = 0; i < *a.numResBlocksMiddle; ++i)
    denseResBlock(b, "middle_block." + std::to_string(i), *c0,
                  {listArg(c0), arg(a.numResBlocksMiddle)});
  int64_t idx = 0;
  for (size_t s = 0; s < a.channels.size(); ++s) {
    const Located<int64_t> &ch = a.channels[s];
    for (int64_t r = 0; r < *a.numResBlocks; ++r)
      denseResBlock(b, "blocks." + std::to_string(idx++), *ch,
                    {listArg(ch), arg(a.numResBlocks)});
    if (s + 1 < a.channels.size()) {
      const Located<int64_t> &next = a.channels[s + 1];
      b.conv3d("blocks." + std::to_string(idx++) + ".conv", *ch, *next * 8, 3,
               true, {listArg(ch), listArg(next), arg(a.numResBlocks)});
    }
  }
  const Located<int64_t> &last = a.channels.back();
  b.norm("out_layer.0", *last, {listArg(last)});
  b.conv3d("out_layer.2", *last, *a.outChannels, 3, false,
           {listArg(last), arg(a.outChannels)});
}

/// SparseSubdivideBlock3d(cin → cout) of the mesh decoder.
void subdivideBlock(Builder &b, const std::string &p, int64_t cin, int64_t cout,
                    const Args &args) {
  b.norm(p + ".act_layers.0", cin, args);
  b.sparseConv(p + ".out_layers.0", cin, cout, 3, true, args);
  b.norm(p + ".out_layers.1", cout, args);
  b.sparseConv(p + ".out_layers.3", cout, cout, 3, true, args);
  if (cin != cout)
    b.sparseConv(p + ".skip_connection", cin, cout, 1, true, args);
}

void slatDecoder(Builder &b, const SLatDecoderArgs &a) {
  int64_t c = *a.modelChannels, h = *a.numHeads, d = a.headDim();
  b.linear("input_layer", *a.latentChannels, c, false,
           {arg(a.latentChannels), arg(a.modelChannels)});
  for (int64_t i = 0; i < *a.numBlocks; ++i) {
    std::string p = "blocks." + std::to_string(i);
    Args cA = {arg(a.modelChannels), arg(a.numBlocks)};
    b.linear(p + ".attn.to_qkv", c, 3 * c, true, cA);
    if (*a.qkRmsNorm) {
      Args r = {arg(a.numHeads), arg(a.modelChannels), arg(a.qkRmsNorm),
                arg(a.numBlocks)};
      b.rms(p + ".attn.q_rms_norm", h, d, r);
      b.rms(p + ".attn.k_rms_norm", h, d, r);
    }
    b.linear(p + ".attn.to_out", c, c, true, cA);
    Args mA = {arg(a.modelChannels), arg(a.mlpRatio), arg(a.numBlocks)};
    b.linear(p + ".mlp.mlp.0", c, a.mlpHidden(), true, mA);
    b.linear(p + ".mlp.mlp.2", a.mlpHidden(), c, true, mA);
  }
  if (const MeshRepresentation *m = a.mesh()) {
    Args mc = {arg(a.modelChannels)};
    subdivideBlock(b, "upsample.0", c, c / 4, mc);
    subdivideBlock(b, "upsample.1", c / 4, c / 8, mc);
    b.linear("out_layer", c / 8, a.outChannels(), false,
             {arg(a.modelChannels), arg(m->useColor)});
    return;
  }
  if (const GaussianRepresentation *g = a.gaussian()) {
    b.linear("out_layer", c, a.outChannels(), false,
             {arg(a.modelChannels), arg(g->numGaussians)});
    b.buffer("offset_perturbation", {*g->numGaussians, 3},
             TensorRole::OffsetPerturbation, {arg(g->numGaussians)});
    return;
  }
  const RadianceFieldRepresentation *rf = a.radianceField();
  b.linear("out_layer", c, a.outChannels(), false,
           {arg(a.modelChannels), arg(rf->rank), arg(rf->dim)});
}

std::string dtypeAndShape(DType dtype, const Shape &shape) {
  return std::string(dtypeName(dtype)) + " " + shapeToString(shape);
}

} // namespace

ModelManifest buildManifest(const ModelConfig &config) {
  ModelManifest m;
  m.modelClass = *config.name;
  m.kind = config.kind;
  m.sidecar = config.file;
  if (const SparseStructureFlowArgs *a = config.ssFlow()) {
    Builder b(m, a->useFp16);
    ssFlow(b, *a);
  } else if (const SparseStructureDecoderArgs *a = config.ssDecoder()) {
    Builder b(m, a->useFp16);
    if (!a->channels.empty())
      ssDecoder(b, *a);
  } else if (const SLatFlowArgs *a = config.slatFlow()) {
    Builder b(m, a->useFp16);
    slatFlow(b, *a);
  } else if (const SLatDecoderArgs *a = config.slatDecoder()) {
    Builder b(m, a->useFp16);
    slatDecoder(b, *a);
  }
  return m;
}

Result<uint64_t> safetensorsFileSize(const ModelManifest &manifest) {
  Result<SafetensorsLayout> layout = planSafetensors(manifest.specs());
  if (!layout)
    return layout.takeError();
  return layout->fileSize();
}

Result<uint64_t> safetensorsHeaderSize(const ModelManifest &manifest) {
  Result<SafetensorsLayout> layout = planSafetensors(manifest.specs());
  if (!layout)
    return layout.takeError();
  return uint64_t(layout->header.size());
}

std::string ModelDirectoryReport::render() const {
  std::string out;
  for (const ModelProblem &p : problems)
    out += p.message + "\n";
  out += std::to_string(problems.size()) +
         (problems.size() == 1 ? " problem" : " problems") + " in " +
         std::to_string(modelsChecked) + " checkpoints (" +
         std::to_string(tensorsChecked) + " tensors expected)";
  return out;
}

Status ModelDirectoryReport::status() const {
  if (ok())
    return Status::ok();
  return Error{render()};
}

ModelDirectoryReport checkModelDirectory(const PipelineConfig &pipeline) {
  ModelDirectoryReport report;
  for (const ModelRef &ref : pipeline.models) {
    if (!ref.config)
      continue;
    ++report.modelsChecked;
    ModelManifest manifest = buildManifest(*ref.config);
    report.tensorsChecked += manifest.tensors.size();
    std::string file = ref.weightsPath();
    auto problem = [&](ModelProblem::Kind kind, std::string tensor,
                       std::string message) {
      report.problems.push_back(
          {kind, ref.key, file, std::move(tensor), std::move(message)});
    };
    Result<std::shared_ptr<const SafetensorsFile>> st =
        SafetensorsFile::open(file);
    if (!st) {
      std::error_code ec;
      if (!std::filesystem::exists(file, ec))
        problem(ModelProblem::Kind::MissingWeightsFile, "",
                file + ": expected the weights of " + ref.key + " (" +
                    std::to_string(manifest.tensors.size()) +
                    " tensors for the args of " + ref.sidecarPath() +
                    "), found no such file");
      else
        problem(ModelProblem::Kind::UnreadableWeightsFile, "", st.message());
      continue;
    }
    const SafetensorsFile &sf = *st.value();
    std::unordered_map<std::string_view, const ManifestTensor *> expected;
    for (const ManifestTensor &t : manifest.tensors)
      expected.emplace(t.name, &t);
    for (const ManifestTensor &t : manifest.tensors) {
      const SafetensorsEntry *e = sf.find(t.name);
      if (!e) {
        std::string why = t.describeShapeArgs();
        problem(ModelProblem::Kind::MissingTensor, t.name,
                file + ": " + t.name + ": expected a tensor " +
                    dtypeAndShape(t.dtype, t.shape) +
                    (why.empty() ? "" : " (from " + why + ")") +
                    ", found no such tensor");
        continue;
      }
      if (e->shape != t.shape)
        problem(ModelProblem::Kind::WrongShape, t.name,
                file + ": " + t.name + ": expected shape " +
                    shapeToString(t.shape) + " (from " + t.describeShapeArgs() +
                    "), found " + shapeToString(e->shape));
      if (e->dtype != t.dtype) {
        std::string why =
            t.fp16Region
                ? "inside the fp16 region with " + t.dtypeArg.describe()
                : std::string("outside the fp16 region: TRELLIS keeps it in "
                              "float32");
        problem(ModelProblem::Kind::WrongDType, t.name,
                file + ": " + t.name + ": expected dtype " +
                    std::string(dtypeName(t.dtype)) + " (" + why + "), found " +
                    std::string(dtypeName(e->dtype)));
      }
    }
    for (const SafetensorsEntry &e : sf.entries())
      if (!expected.count(e.name))
        problem(ModelProblem::Kind::UnexpectedTensor, e.name,
                file + ": " + e.name + ": expected no such tensor in a " +
                    manifest.modelClass + " with the args of " +
                    ref.sidecarPath() + ", found " +
                    dtypeAndShape(e.dtype, e.shape));
  }
  return report;
}

Status validateModelDirectory(const std::string &path) {
  Result<PipelineConfig> pipeline = loadPipeline(path);
  if (!pipeline)
    return pipeline.takeError();
  return checkModelDirectory(pipeline.value()).status();
}

} // namespace trellis::models
