//===- ImageCondConfig.cpp - The image-conditioning model's config --------===//
//
// Hugging Face's config.json of dinov2-with-registers (image conditioning
// spec §3.2): the sizes are read and range-checked; the keys that would
// change the math (activation, SwiGLU, qkv bias, channels) must hold the
// values TRELLIS's model has; training-only keys are ignored.
//
//===----------------------------------------------------------------------===//
#include "trellis/Config/ImageCondConfig.h"

#include "lib/Config/Reader.h"

namespace trellis::config {

using namespace detail;

namespace {

/// Keys of Hugging Face's config that inference does not read.
constexpr const char *kIgnoredKeys[] = {"architectures",
                                        "model_type",
                                        "torch_dtype",
                                        "transformers_version",
                                        "initializer_range",
                                        "hidden_dropout_prob",
                                        "attention_probs_dropout_prob",
                                        "drop_path_rate",
                                        "layerscale_value",
                                        "out_features",
                                        "out_indices",
                                        "stage_names",
                                        "apply_layernorm",
                                        "reshape_hidden_states",
                                        "_name_or_path",
                                        "interpolate_antialias",
                                        "interpolate_offset"};

} // namespace

Result<ImageCondArgs>
parseImageCondConfig(const JsonDocument &doc,
                     std::vector<Diagnostic> *diagnostics) {
  Diagnostics diags;
  ImageCondArgs a;
  a.file = doc.file;
  auto done = [&]() -> Result<ImageCondArgs> {
    if (diagnostics)
      *diagnostics = diags.all();
    if (diags.hasErrors())
      return diags.toError();
    return std::move(a);
  };
  if (!doc.root.isObject()) {
    diags.error(posOf(doc.file, doc.root, "(top level)"),
                "expected Hugging Face's config.json object of "
                "dinov2-with-registers, found " +
                    doc.root.describe());
    return done();
  }
  ObjectReader r(diags, doc.file, doc.root, "");
  a.hiddenSize = r.integer("hidden_size", positiveInt(kMaxChannels), 1024);
  a.numLayers = r.integer("num_hidden_layers", positiveInt(kMaxBlocks), 24);
  a.numHeads = r.integer("num_attention_heads", positiveInt(1024), 16);
  a.patchSize = r.integer("patch_size", positiveInt(1024), 14);
  a.imageSize = r.integer("image_size", positiveInt(kMaxResolution), 518);
  a.numRegisterTokens =
      r.integer("num_register_tokens", nonNegativeInt(1024), 4);
  a.numChannels = r.integer("num_channels", positiveInt(3), 3);
  a.layerNormEps = r.number("layer_norm_eps", positiveNumber(), 1e-6);
  a.mlpRatio = r.number("mlp_ratio", positiveNumber(), 4.0);
  Located<std::string> act = r.string("hidden_act", std::string("gelu"));
  Located<bool> swiglu = r.boolean("use_swiglu_ffn", false);
  Located<bool> qkvBias = r.boolean("qkv_bias", true);
  for (const char *key : kIgnoredKeys)
    r.take(key);
  r.finish(false, "a dinov2-with-registers config key");

  if (r.good({"hidden_act"}) && *act != "gelu")
    diags.error(act.pos, "expected \"gelu\" (the exact erf form TRELLIS's "
                         "DINOv2 uses), found \"" +
                             *act + "\"");
  if (r.good({"use_swiglu_ffn"}) && *swiglu)
    diags.error(swiglu.pos, "expected false (ViT-L/14 has a GELU MLP; "
                            "SwiGLU is the giant variants'), found true");
  if (r.good({"qkv_bias"}) && !*qkvBias)
    diags.error(qkvBias.pos, "expected true (the q/k/v projections have "
                             "biases), found false");
  if (r.good({"num_channels"}) && *a.numChannels != 3)
    diags.error(a.numChannels.pos,
                "expected 3 (RGB), found " + std::to_string(*a.numChannels));
  if (r.good({"hidden_size", "num_attention_heads"}) &&
      *a.hiddenSize % *a.numHeads != 0)
    diags.error(a.numHeads.pos, "expected a divisor of hidden_size " +
                                    std::to_string(*a.hiddenSize) + ", found " +
                                    std::to_string(*a.numHeads));
  if (r.good({"image_size", "patch_size"}) && *a.imageSize % *a.patchSize != 0)
    diags.error(a.patchSize.pos,
                "expected a divisor of image_size " +
                    std::to_string(*a.imageSize) + " (TRELLIS feeds " +
                    std::to_string(*a.imageSize) + "² images), found " +
                    std::to_string(*a.patchSize));
  return done();
}

Result<ImageCondArgs>
readImageCondConfig(const std::string &path,
                    std::vector<Diagnostic> *diagnostics) {
  Result<JsonDocument> doc = readJsonFile(path);
  if (!doc)
    return doc.takeError();
  return parseImageCondConfig(doc.value(), diagnostics);
}

} // namespace trellis::config
