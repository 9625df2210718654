//===- ImageCondModel.cpp - Synthetic image-conditioning models -----------===//
//
// The image-conditioning model of an image preset in Hugging Face's
// dinov2-with-registers layout (image conditioning spec §3.2):
// <out>/image_cond_model/config.json and model.safetensors, f32 tensors with
// the names and shapes the real files have. Weights are seeded normals
// scaled like a trained ViT's (0.02, LayerNorm gains about 1, LayerScale
// 0.1), so 24 blocks keep the residual stream in range.
//
//===----------------------------------------------------------------------===//
#include "tools/trellis-mkmodel/MkModel.h"

#include "trellis/Config/ImageCondConfig.h"
#include "trellis/Format/Safetensors.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace trellis::mkmodel {

namespace {

/// How a tensor's values are drawn: offset + scale · N(0, 1).
struct Init {
  double offset, scale;
};

Init initFor(const std::string &name) {
  auto ends = [&](const char *s) {
    size_t n = std::strlen(s);
    return name.size() >= n && name.compare(name.size() - n, n, s) == 0;
  };
  if (name.find("norm") != std::string::npos && ends(".weight"))
    return {1.0, 0.05};
  if (ends("lambda1"))
    return {0.1, 0.01};
  if (ends(".bias"))
    return {0.0, 0.01};
  return {0.0, 0.02};
}

} // namespace

ImageCondModelPlan imageCondModelPlan(Preset preset) {
  ImageCondModelPlan p;
  if (preset == Preset::ImageLarge)
    p = {1024, 24, 16};
  else if (preset == Preset::Tiny)
    p = {128, 2, 2}; // head dim 64, as the GPU's attention kernels take
  return p;
}

std::string imageCondConfigJson(const ImageCondModelPlan &p) {
  nlohmann::ordered_json j = {{"architectures", {"Dinov2WithRegistersModel"}},
                              {"model_type", "dinov2_with_registers"},
                              {"hidden_size", p.hiddenSize},
                              {"num_hidden_layers", p.layers},
                              {"num_attention_heads", p.heads},
                              {"mlp_ratio", 4},
                              {"hidden_act", "gelu"},
                              {"layer_norm_eps", 1e-6},
                              {"image_size", 518},
                              {"patch_size", 14},
                              {"num_channels", 3},
                              {"num_register_tokens", 4},
                              {"qkv_bias", true},
                              {"use_swiglu_ffn", false},
                              {"layerscale_value", 1.0},
                              {"torch_dtype", "float32"}};
  return j.dump(2) + "\n";
}

std::vector<TensorSpec> imageCondTensors(const ImageCondModelPlan &p) {
  const int64_t c = p.hiddenSize, grid = 518 / 14, hidden = 4 * c;
  std::vector<TensorSpec> t = {
      {"embeddings.cls_token", DType::F32, {1, 1, c}},
      {"embeddings.mask_token", DType::F32, {1, c}},
      {"embeddings.register_tokens", DType::F32, {1, 4, c}},
      {"embeddings.position_embeddings", DType::F32, {1, 1 + grid * grid, c}},
      {"embeddings.patch_embeddings.projection.weight",
       DType::F32,
       {c, 3, 14, 14}},
      {"embeddings.patch_embeddings.projection.bias", DType::F32, {c}}};
  for (int64_t i = 0; i < p.layers; ++i) {
    std::string l = "encoder.layer." + std::to_string(i) + ".";
    for (const char *n : {"norm1", "norm2"}) {
      t.push_back({l + n + ".weight", DType::F32, {c}});
      t.push_back({l + n + ".bias", DType::F32, {c}});
    }
    for (const char *n : {"query", "key", "value"}) {
      t.push_back(
          {l + "attention.attention." + n + ".weight", DType::F32, {c, c}});
      t.push_back({l + "attention.attention." + n + ".bias", DType::F32, {c}});
    }
    t.push_back({l + "attention.output.dense.weight", DType::F32, {c, c}});
    t.push_back({l + "attention.output.dense.bias", DType::F32, {c}});
    t.push_back({l + "layer_scale1.lambda1", DType::F32, {c}});
    t.push_back({l + "layer_scale2.lambda1", DType::F32, {c}});
    t.push_back({l + "mlp.fc1.weight", DType::F32, {hidden, c}});
    t.push_back({l + "mlp.fc1.bias", DType::F32, {hidden}});
    t.push_back({l + "mlp.fc2.weight", DType::F32, {c, hidden}});
    t.push_back({l + "mlp.fc2.bias", DType::F32, {c}});
  }
  t.push_back({"layernorm.weight", DType::F32, {c}});
  t.push_back({"layernorm.bias", DType::F32, {c}});
  return t;
}

Result<std::vector<WrittenFile>>
writeImageCondModel(const std::string &dir, const ImageCondModelPlan &p,
                    uint64_t seed, bool layoutOnly) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return Error{dir + ": cannot create the directory: " + ec.message()};
  std::vector<WrittenFile> written;
  std::string cfg = dir + "/config.json";
  {
    std::ofstream f(cfg, std::ios::binary | std::ios::trunc);
    f << imageCondConfigJson(p);
    if (!f)
      return Error{cfg + ": cannot write"};
  }
  written.push_back({cfg, uint64_t(std::filesystem::file_size(cfg, ec))});
  std::vector<TensorSpec> specs = imageCondTensors(p);
  std::string path = dir + "/model.safetensors";
  if (layoutOnly) {
    TRELLIS_RETURN_IF_ERROR(writeSafetensorsLayout(path, specs));
    written.push_back({path, uint64_t(std::filesystem::file_size(path, ec))});
    return written;
  }
  TRELLIS_RETURN_IF_ERROR(
      writeSafetensors(path, specs, [&](size_t index, void *dst) {
        const TensorSpec &s = specs[index];
        Init init = initFor(s.name);
        uint64_t key = tensorKey(seed, config::kImageCondModelDir, s.name);
        int64_t n = 1;
        for (int64_t d : s.shape)
          n *= d;
        float *out = static_cast<float *>(dst);
        for (int64_t i = 0; i < n; ++i)
          out[i] = float(init.offset +
                         init.scale * syntheticNormal(key, uint64_t(i)));
      }));
  written.push_back({path, uint64_t(std::filesystem::file_size(path, ec))});
  return written;
}

} // namespace trellis::mkmodel
