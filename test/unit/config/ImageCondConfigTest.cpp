//===- ImageCondConfigTest.cpp - Hugging Face's dinov2 config.json --------===//
//
// The image-conditioning model's config.json (image conditioning spec §3.2):
// the real file's sizes, unknown-but-known Hugging Face keys ignored, and the
// values that would change the math refused at their line.
//
//===----------------------------------------------------------------------===//
#include "trellis/Config/ImageCondConfig.h"

#include <gtest/gtest.h>

using namespace trellis::config;

namespace {

// facebook/dinov2-with-registers-large's config.json, abridged keys kept.
const char *kLarge = R"({
  "apply_layernorm": true,
  "architectures": ["Dinov2WithRegistersModel"],
  "attention_probs_dropout_prob": 0.0,
  "drop_path_rate": 0.0,
  "hidden_act": "gelu",
  "hidden_dropout_prob": 0.0,
  "hidden_size": 1024,
  "image_size": 518,
  "initializer_range": 0.02,
  "layer_norm_eps": 1e-06,
  "layerscale_value": 1.0,
  "mlp_ratio": 4,
  "model_type": "dinov2_with_registers",
  "num_attention_heads": 16,
  "num_channels": 3,
  "num_hidden_layers": 24,
  "num_register_tokens": 4,
  "out_features": ["stage24"],
  "out_indices": [24],
  "patch_size": 14,
  "qkv_bias": true,
  "reshape_hidden_states": true,
  "torch_dtype": "float32",
  "transformers_version": "4.48.0.dev0",
  "use_swiglu_ffn": false
})";

trellis::Result<ImageCondArgs> parse(const std::string &text) {
  auto doc = parseJson(text, "config.json");
  if (!doc)
    return doc.takeError();
  return parseImageCondConfig(*doc);
}

TEST(ImageCondConfig, TheLargeModel) {
  auto a = parse(kLarge);
  ASSERT_TRUE(a.isOk()) << a.message();
  EXPECT_EQ(*a->hiddenSize, 1024);
  EXPECT_EQ(*a->numLayers, 24);
  EXPECT_EQ(a->headDim(), 64);
  EXPECT_EQ(a->mlpHidden(), 4096);
  EXPECT_EQ(a->gridSize(), 37);
  EXPECT_EQ(a->tokens(), 1374);
  EXPECT_DOUBLE_EQ(*a->layerNormEps, 1e-6);
}

TEST(ImageCondConfig, WhatWouldChangeTheMathIsRefusedAtItsLine) {
  auto swap = [](std::string text, const std::string &from,
                 const std::string &to) {
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  struct Case {
    std::string from, to, message;
  } cases[] = {
      {"\"hidden_act\": \"gelu\"", "\"hidden_act\": \"gelu_pytorch_tanh\"",
       "config.json:6:17: hidden_act: expected \"gelu\""},
      {"\"use_swiglu_ffn\": false", "\"use_swiglu_ffn\": true",
       "use_swiglu_ffn: expected false"},
      {"\"qkv_bias\": true", "\"qkv_bias\": false", "qkv_bias: expected true"},
      {"\"num_attention_heads\": 16", "\"num_attention_heads\": 15",
       "expected a divisor of hidden_size 1024, found 15"},
      {"\"patch_size\": 14", "\"patch_size\": 15",
       "expected a divisor of image_size 518"},
      {"\"hidden_size\": 1024", "\"hidden_size\": -4",
       "hidden_size: expected a positive integer"},
  };
  for (const Case &c : cases) {
    auto a = parse(swap(kLarge, c.from, c.to));
    ASSERT_FALSE(a.isOk()) << c.to;
    EXPECT_NE(a.message().find(c.message), std::string::npos) << c.to << "\n"
                                                              << a.message();
  }
  auto notObject = parse("[1, 2]");
  ASSERT_FALSE(notObject.isOk());
  EXPECT_NE(notObject.message().find("expected Hugging Face's config.json"),
            std::string::npos)
      << notObject.message();
}

} // namespace
