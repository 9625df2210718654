//===- Presets.cpp - The model directories trellis-mkmodel can write ------===//
//
// image-large: TRELLIS-image-large exactly (spec §1.2, §1.3): six
//   checkpoints whose files have the published byte sizes (spec §1.5).
// text-base:   TRELLIS-text-base (spec §1.4): the two text flow models
//   (C = 768, 12 blocks, 12 heads, cond_channels 768) in <out>/ckpts, and the
//   decoders referenced as "microsoft/TRELLIS-image-large/ckpts/...", written
//   where trellisc resolves that form: <out>/../TRELLIS-image-large/ckpts.
// tiny:        every model and every op kind of the image pipeline at toy
//   sizes (a few MB) for CI; see the table in tools/trellis-mkmodel/README.md.
//
//===----------------------------------------------------------------------===//

#include "tools/trellis-mkmodel/MkModel.h"

#include <nlohmann/json.hpp>

namespace trellis::mkmodel {

using json = nlohmann::ordered_json;

std::optional<Preset> parsePreset(std::string_view name) {
  if (name == "image-large")
    return Preset::ImageLarge;
  if (name == "text-base")
    return Preset::TextBase;
  if (name == "tiny")
    return Preset::Tiny;
  return std::nullopt;
}

std::string_view presetName(Preset p) {
  switch (p) {
  case Preset::ImageLarge:
    return "image-large";
  case Preset::TextBase:
    return "text-base";
  case Preset::Tiny:
    return "tiny";
  }
  return "";
}

std::string CheckpointPlan::stem() const {
  size_t slash = relativeBase.rfind('/');
  return slash == std::string::npos ? relativeBase
                                    : relativeBase.substr(slash + 1);
}

namespace {

// spec §1.2 (configs/generation/slat_flow_img_dit_L_64l8p2_fp16.json; the
// text configs use the same values).
const std::vector<double> kSlatMean = {
    -2.1687545776367188,  -0.004347046371549368, -0.13352349400520325,
    -0.08418072760105133, -0.5271206498146057,   0.7238689064979553,
    -1.1414450407028198,  1.2039363384246826};
const std::vector<double> kSlatStd = {2.377650737762451,  2.386378288269043,
                                      2.124418020248413,  2.1748552322387695,
                                      2.663944721221924,  2.371192216873169,
                                      2.6217446327209473, 2.684523105621338};

struct FlowSize {
  int64_t resolution, modelChannels, condChannels, numBlocks, numHeads;
  int64_t mlpRatio;
};

json sidecar(const char *name, json args) {
  json j;
  j["name"] = name;
  j["args"] = std::move(args);
  return j;
}

json ssFlow(const FlowSize &s) {
  return sidecar("SparseStructureFlowModel",
                 {{"resolution", s.resolution},
                  {"in_channels", 8},
                  {"out_channels", 8},
                  {"model_channels", s.modelChannels},
                  {"cond_channels", s.condChannels},
                  {"num_blocks", s.numBlocks},
                  {"num_heads", s.numHeads},
                  {"mlp_ratio", s.mlpRatio},
                  {"patch_size", 1},
                  {"pe_mode", "ape"},
                  {"qk_rms_norm", true},
                  {"use_fp16", true}});
}

json slatFlow(const FlowSize &s, int64_t ioChannels) {
  return sidecar("ElasticSLatFlowModel",
                 {{"resolution", s.resolution},
                  {"in_channels", 8},
                  {"out_channels", 8},
                  {"model_channels", s.modelChannels},
                  {"cond_channels", s.condChannels},
                  {"num_blocks", s.numBlocks},
                  {"num_heads", s.numHeads},
                  {"mlp_ratio", s.mlpRatio},
                  {"patch_size", 2},
                  {"num_io_res_blocks", 2},
                  {"io_block_channels", json::array({ioChannels})},
                  {"pe_mode", "ape"},
                  {"qk_rms_norm", true},
                  {"use_fp16", true}});
}

json ssDecoder(int64_t numResBlocks, int64_t numResBlocksMiddle,
               std::vector<int64_t> channels) {
  return sidecar("SparseStructureDecoder",
                 {{"out_channels", 1},
                  {"latent_channels", 8},
                  {"num_res_blocks", numResBlocks},
                  {"num_res_blocks_middle", numResBlocksMiddle},
                  {"channels", channels},
                  {"use_fp16", true}});
}

struct DecoderSize {
  int64_t resolution, modelChannels, numBlocks, numHeads;
  int64_t mlpRatio;
};

json decoderArgs(const DecoderSize &s, json representation) {
  return {{"resolution", s.resolution},
          {"model_channels", s.modelChannels},
          {"latent_channels", 8},
          {"num_blocks", s.numBlocks},
          {"num_heads", s.numHeads},
          {"mlp_ratio", s.mlpRatio},
          {"attn_mode", "swin"},
          {"window_size", 8},
          {"use_fp16", true},
          {"representation_config", std::move(representation)}};
}

// configs/vae/slat_vae_enc_dec_gs_swin8_B_64l8_fp16.json
json gaussianRepresentation() {
  return {{"lr",
           {{"_xyz", 1.0},
            {"_features_dc", 1.0},
            {"_opacity", 1.0},
            {"_scaling", 1.0},
            {"_rotation", 0.1}}},
          {"perturb_offset", true},
          {"voxel_size", 1.5},
          {"num_gaussians", 32},
          {"2d_filter_kernel_size", 0.1},
          {"3d_filter_kernel_size", 9e-4},
          {"scaling_bias", 4e-3},
          {"opacity_bias", 0.1},
          {"scaling_activation", "softplus"}};
}

json sampler(double cfgStrength, double intervalHigh) {
  return {{"name", "FlowEulerGuidanceIntervalSampler"},
          {"args", {{"sigma_min", 1e-5}}},
          {"params",
           {{"steps", 25},
            {"cfg_strength", cfgStrength},
            {"cfg_interval", json::array({0.5, intervalHigh})},
            {"rescale_t", 3.0}}}};
}

std::string dump(const json &j) { return j.dump(2) + "\n"; }

struct Layout {
  std::string ssFlow, ssDec, slatFlow, gs, rf, mesh;
};

json pipelineJson(bool text, const std::vector<CheckpointPlan> &ckpts,
                  double cfgStrength, double intervalHigh) {
  json models = json::object();
  for (const CheckpointPlan &c : ckpts)
    models[c.key] = c.modelPath;
  json args;
  args["models"] = models;
  args["sparse_structure_sampler"] = sampler(cfgStrength, intervalHigh);
  args["slat_sampler"] = sampler(cfgStrength, intervalHigh);
  args["slat_normalization"] = {{"mean", kSlatMean}, {"std", kSlatStd}};
  if (text)
    args["text_cond_model"] = "openai/clip-vit-large-patch14";
  else
    args["image_cond_model"] = "dinov2_vitl14_reg";
  json j;
  j["name"] = text ? "TrellisTextTo3DPipeline" : "TrellisImageTo3DPipeline";
  j["args"] = args;
  return j;
}

/// The six image-large decoders' sidecars (shared by image-large and the
/// text presets, which reference them).
std::vector<std::pair<std::string, json>> imageLargeDecoders() {
  DecoderSize d{64, 768, 12, 12, 4};
  return {
      {"ss_dec_conv3d_16l8_fp16", ssDecoder(2, 2, {512, 128, 32})},
      {"slat_dec_gs_swin8_B_64l8gs32_fp16",
       sidecar("ElasticSLatGaussianDecoder",
               decoderArgs(d, gaussianRepresentation()))},
      {"slat_dec_rf_swin8_B_64l8r16_fp16",
       sidecar("ElasticSLatRadianceFieldDecoder",
               decoderArgs(d, {{"rank", 16}, {"dim", 8}}))},
      {"slat_dec_mesh_swin8_B_64l8m256c_fp16",
       sidecar("ElasticSLatMeshDecoder",
               decoderArgs(d, {{"use_color", true}}))},
  };
}

} // namespace

PresetPlan planPreset(Preset preset) {
  PresetPlan plan;
  plan.preset = preset;
  auto add = [&](std::string key, std::string modelPath,
                 std::string relativeBase, const json &j) {
    plan.checkpoints.push_back({std::move(key), std::move(modelPath),
                                std::move(relativeBase), dump(j)});
  };
  switch (preset) {
  case Preset::ImageLarge: {
    auto decs = imageLargeDecoders();
    FlowSize f{16, 1024, 1024, 24, 16, 4};
    FlowSize s{64, 1024, 1024, 24, 16, 4};
    add("sparse_structure_flow_model", "ckpts/ss_flow_img_dit_L_16l8_fp16",
        "ckpts/ss_flow_img_dit_L_16l8_fp16", ssFlow(f));
    add("sparse_structure_decoder", "ckpts/" + decs[0].first,
        "ckpts/" + decs[0].first, decs[0].second);
    add("slat_flow_model", "ckpts/slat_flow_img_dit_L_64l8p2_fp16",
        "ckpts/slat_flow_img_dit_L_64l8p2_fp16", slatFlow(s, 128));
    const char *keys[] = {"slat_decoder_gs", "slat_decoder_rf",
                          "slat_decoder_mesh"};
    for (int i = 0; i < 3; ++i)
      add(keys[i], "ckpts/" + decs[size_t(i) + 1].first,
          "ckpts/" + decs[size_t(i) + 1].first, decs[size_t(i) + 1].second);
    plan.pipelineJson = dump(pipelineJson(false, plan.checkpoints, 5.0, 1.0));
    plan.condTokens = 1374;
    plan.condChannels = 1024;
    break;
  }
  case Preset::TextBase: {
    auto decs = imageLargeDecoders();
    FlowSize f{16, 768, 768, 12, 12, 4};
    FlowSize s{64, 768, 768, 12, 12, 4};
    const std::string repo = "microsoft/TRELLIS-image-large/ckpts/";
    const std::string sibling = "../TRELLIS-image-large/ckpts/";
    add("sparse_structure_flow_model", "ckpts/ss_flow_txt_dit_B_16l8_fp16",
        "ckpts/ss_flow_txt_dit_B_16l8_fp16", ssFlow(f));
    add("sparse_structure_decoder", repo + decs[0].first,
        sibling + decs[0].first, decs[0].second);
    add("slat_flow_model", "ckpts/slat_flow_txt_dit_B_64l8p2_fp16",
        "ckpts/slat_flow_txt_dit_B_64l8p2_fp16", slatFlow(s, 128));
    const char *keys[] = {"slat_decoder_gs", "slat_decoder_rf",
                          "slat_decoder_mesh"};
    for (int i = 0; i < 3; ++i)
      add(keys[i], repo + decs[size_t(i) + 1].first,
          sibling + decs[size_t(i) + 1].first, decs[size_t(i) + 1].second);
    // Text sampler defaults: spec §1.4 ([3rd-party], unverified).
    plan.pipelineJson = dump(pipelineJson(true, plan.checkpoints, 7.5, 0.95));
    plan.condTokens = 77;
    plan.condChannels = 768;
    plan.writeNegCond = true;
    break;
  }
  case Preset::Tiny: {
    FlowSize f{8, 128, 128, 2, 2, 2};
    FlowSize s{32, 128, 128, 2, 2, 2};
    DecoderSize small{32, 128, 2, 2, 2};
    DecoderSize mesh{32, 256, 2, 4, 2};
    add("sparse_structure_flow_model", "ckpts/ss_flow_tiny",
        "ckpts/ss_flow_tiny", ssFlow(f));
    add("sparse_structure_decoder", "ckpts/ss_dec_tiny", "ckpts/ss_dec_tiny",
        ssDecoder(1, 1, {32, 32, 16}));
    add("slat_flow_model", "ckpts/slat_flow_tiny", "ckpts/slat_flow_tiny",
        slatFlow(s, 32));
    add("slat_decoder_gs", "ckpts/slat_dec_gs_tiny", "ckpts/slat_dec_gs_tiny",
        sidecar("ElasticSLatGaussianDecoder",
                decoderArgs(small, gaussianRepresentation())));
    add("slat_decoder_rf", "ckpts/slat_dec_rf_tiny", "ckpts/slat_dec_rf_tiny",
        sidecar("ElasticSLatRadianceFieldDecoder",
                decoderArgs(small, {{"rank", 16}, {"dim", 8}})));
    add("slat_decoder_mesh", "ckpts/slat_dec_mesh_tiny",
        "ckpts/slat_dec_mesh_tiny",
        sidecar("ElasticSLatMeshDecoder",
                decoderArgs(mesh, {{"use_color", true}})));
    plan.pipelineJson = dump(pipelineJson(false, plan.checkpoints, 5.0, 1.0));
    plan.condTokens = 21; // 1 CLS + 4 registers + 4x4 patches
    plan.condChannels = 128;
    break;
  }
  }
  return plan;
}

Result<CheckpointModel> checkpointModel(const CheckpointPlan &plan) {
  Result<config::ModelConfig> cfg =
      config::parseModelConfig(plan.sidecarJson, plan.relativeBase + ".json");
  if (!cfg)
    return Error{"internal error: the preset's sidecar does not parse:\n" +
                 cfg.message()};
  models::ModelManifest manifest = models::buildManifest(cfg.value());
  return CheckpointModel{std::move(cfg.value()), std::move(manifest)};
}

} // namespace trellis::mkmodel
