//===- SyntheticTest.cpp - The seeded weight generator of trellis-mkmodel -===//

#include "tools/trellis-mkmodel/MkModel.h"

#include "trellis/Models/Buffers.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace trellis;
using namespace trellis::mkmodel;
using models::ManifestTensor;
using models::TensorRole;

namespace {

TEST(Synthetic, NormalStreamIsStandardAndNeverZero) {
  uint64_t key = tensorKey(7, "ckpt", "w");
  const int n = 1 << 20;
  double sum = 0, sum2 = 0, maxAbs = 0, minAbs = 1e9;
  for (int i = 0; i < n; ++i) {
    double z = syntheticNormal(key, uint64_t(i));
    sum += z;
    sum2 += z * z;
    maxAbs = std::max(maxAbs, std::fabs(z));
    minAbs = std::min(minAbs, std::fabs(z));
  }
  double mean = sum / n, var = sum2 / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.005);
  EXPECT_NEAR(var, 1.0, 0.01);
  EXPECT_LE(maxAbs, 3.47);
  EXPECT_GE(minAbs, 0.01);
}

TEST(Synthetic, StreamsAreKeyedBySeedCheckpointAndName) {
  EXPECT_EQ(tensorKey(1, "a", "w"), tensorKey(1, "a", "w"));
  EXPECT_NE(tensorKey(1, "a", "w"), tensorKey(2, "a", "w"));
  EXPECT_NE(tensorKey(1, "a", "w"), tensorKey(1, "b", "w"));
  EXPECT_NE(tensorKey(1, "a", "w"), tensorKey(1, "a", "v"));
  // Element i depends only on (key, i): random access.
  uint64_t k = tensorKey(3, "c", "t");
  EXPECT_EQ(syntheticNormal(k, 12345), syntheticNormal(k, 12345));
  // Frozen values: the generator is part of the file format of synthetic
  // models (same seed, same bits, on every platform).
  EXPECT_EQ(mix64(0), 0u);
  EXPECT_EQ(mix64(1), 0x5692161d100b05e5ull);
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
}

TEST(Synthetic, ScalesFollowTheRoles) {
  PresetPlan plan = planPreset(Preset::Tiny);
  auto slat = checkpointModel(plan.checkpoints[2]); // slat flow
  ASSERT_TRUE(slat) << slat.message();
  const models::ModelManifest &m = slat->manifest;
  auto stats = [&](const std::string &name, double &mean, double &sd) {
    const ManifestTensor *t = m.find(name);
    ASSERT_TRUE(t) << name;
    std::vector<float> v =
        tensorValues(slat->config, m, *t, 5, plan.checkpoints[2].stem());
    double s = 0, s2 = 0;
    for (float x : v) {
      s += x;
      s2 += double(x) * x;
    }
    mean = s / v.size();
    sd = std::sqrt(s2 / v.size() - mean * mean);
  };
  double mean, sd;
  stats("input_blocks.1.conv2.conv.weight", mean, sd); // fan-in 27·128
  EXPECT_NEAR(sd, 1.0 / std::sqrt(27.0 * 128), 0.002);
  EXPECT_NEAR(mean, 0.0, 0.001);
  stats("blocks.0.mlp.mlp.0.weight", mean, sd); // fan-in 128
  EXPECT_NEAR(sd, 1.0 / std::sqrt(128.0), 0.003);
  stats("blocks.0.norm2.weight", mean, sd);
  EXPECT_NEAR(mean, 1.0, 0.01);
  EXPECT_NEAR(sd, 0.02, 0.005);
  stats("blocks.1.self_attn.q_rms_norm.gamma", mean, sd);
  EXPECT_NEAR(mean, 1.0, 0.01);
  stats("blocks.0.self_attn.to_qkv.bias", mean, sd);
  EXPECT_NEAR(sd, 0.02, 0.005);
}

TEST(Synthetic, NothingLearnedIsZero) {
  PresetPlan plan = planPreset(Preset::Tiny);
  for (const CheckpointPlan &c : plan.checkpoints) {
    auto model = checkpointModel(c);
    ASSERT_TRUE(model) << model.message();
    for (const ManifestTensor &t : model->manifest.tensors) {
      if (t.role == TensorRole::PositionEmbedding ||
          t.role == TensorRole::OffsetPerturbation)
        continue; // the real formulas (sin 0 = 0, atanh 0 = 0)
      std::vector<float> v =
          tensorValues(model->config, model->manifest, t, 0, c.stem());
      size_t zeros = 0;
      for (float x : v)
        zeros += x == 0.0f || !std::isfinite(x);
      EXPECT_EQ(zeros, 0u) << c.stem() << " " << t.name;
    }
  }
}

TEST(Synthetic, BuffersAreTheRealFormulas) {
  PresetPlan plan = planPreset(Preset::Tiny);
  auto ss = checkpointModel(plan.checkpoints[0]);
  ASSERT_TRUE(ss);
  const ManifestTensor *pe = ss->manifest.find("pos_emb");
  ASSERT_TRUE(pe);
  EXPECT_EQ(pe->shape, (Shape{512, 128}));
  std::vector<float> got = tensorValues(ss->config, ss->manifest, *pe, 9,
                                        plan.checkpoints[0].stem());
  std::vector<float> want(512 * 128);
  models::fillPositionEmbeddingGrid(8, 128, want.data());
  EXPECT_EQ(got, want);

  auto gs = checkpointModel(plan.checkpoints[3]);
  ASSERT_TRUE(gs);
  const ManifestTensor *op = gs->manifest.find("offset_perturbation");
  ASSERT_TRUE(op);
  std::vector<float> off = tensorValues(gs->config, gs->manifest, *op, 9,
                                        plan.checkpoints[3].stem());
  EXPECT_NEAR(off[3 * 1 + 0], -0.73317, 1e-5);
  EXPECT_NEAR(off[3 * 3 + 2], -0.57431, 1e-5);
}

/// Monte Carlo of the model the bias formula assumes: each voxel's C
/// channel-normalized features i.i.d. N(0, 1), through SiLU(γn + β) and the
/// C·27 final-conv weights (every voxel sees independent neighbours).
double simulatedOccupancy(const std::vector<float> &gamma,
                          const std::vector<float> &beta,
                          const std::vector<float> &w, double bias,
                          int voxels) {
  size_t c = gamma.size(), taps = w.size() / c;
  uint64_t key = tensorKey(99, "mc", "n");
  uint64_t idx = 0;
  int positive = 0;
  for (int v = 0; v < voxels; ++v) {
    double logit = bias;
    for (size_t ch = 0; ch < c; ++ch)
      for (size_t k = 0; k < taps; ++k) {
        double n = syntheticNormal(key, idx++);
        double x = gamma[ch] * n + beta[ch];
        logit += w[ch * taps + k] * x / (1 + std::exp(-x));
      }
    positive += logit > 0;
  }
  return double(positive) / voxels;
}

TEST(Synthetic, SSDecoderBiasGivesTheTargetOccupancyUnderItsModel) {
  for (Preset preset : {Preset::Tiny, Preset::ImageLarge}) {
    PresetPlan plan = planPreset(preset);
    auto dec = checkpointModel(plan.checkpoints[1]);
    ASSERT_TRUE(dec) << dec.message();
    ASSERT_EQ(dec->config.kind, config::ModelKind::SparseStructureDecoder);
    const auto &m = dec->manifest;
    std::string stem = plan.checkpoints[1].stem();
    auto values = [&](const char *name) {
      return tensorValues(dec->config, m, *m.find(name), 4, stem);
    };
    std::vector<float> g = values("out_layer.0.weight");
    std::vector<float> b = values("out_layer.0.bias");
    std::vector<float> w = values("out_layer.2.weight");
    std::vector<float> bias = values("out_layer.2.bias");
    ASSERT_EQ(bias.size(), 1u);
    EXPECT_FLOAT_EQ(bias[0], float(ssDecoderOutputBias(g, b, w)));
    EXPECT_LT(bias[0], 0.0f);
    double occ = simulatedOccupancy(g, b, w, bias[0], 20000);
    EXPECT_NEAR(occ, kTargetOccupancy, 0.006) << presetName(preset);
  }
}

TEST(Synthetic, CondTokensAreNormalized) {
  HostTensor cond = syntheticCond(3, "cond", 21, 128);
  ASSERT_EQ(cond.shape(), (Shape{1, 21, 128}));
  const float *d = cond.data<float>();
  for (int t = 0; t < 21; ++t) {
    double s = 0, s2 = 0;
    for (int c = 0; c < 128; ++c) {
      s += d[t * 128 + c];
      s2 += double(d[t * 128 + c]) * d[t * 128 + c];
    }
    EXPECT_NEAR(s / 128, 0.0, 1e-6);
    EXPECT_NEAR(s2 / 128 - (s / 128) * (s / 128), 1.0, 1e-5);
  }
  HostTensor other = syntheticCond(4, "cond", 21, 128);
  EXPECT_NE(other.data<float>()[0], d[0]);
}

} // namespace
