//===- ManifestTest.cpp - Tensor manifests vs spec Appendix A and §1.5 ----===//

#include "test/unit/config/ConfigFixtures.h"
#include "test/unit/config/ConfigTestUtil.h"

#include "tools/trellis-mkmodel/MkModel.h"
#include "trellis/Models/Manifest.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <sstream>

using namespace trellis;
using namespace trellis::config;
using namespace trellis::models;
using namespace trellis::testutil;

namespace {

struct Expected {
  std::string name;
  Shape shape;
  std::string dtype;
};

/// Appendix A, with blocks.{i} expanded: section stem -> tensors in order.
std::map<std::string, std::vector<Expected>> appendixA() {
  std::string text = readFile(std::string(TRELLIS_SOURCE_DIR) +
                              "/test/unit/models/AppendixA.txt");
  EXPECT_FALSE(text.empty());
  std::map<std::string, std::vector<Expected>> out;
  std::istringstream in(text);
  std::string line, section;
  int blocks = 0;
  std::vector<Expected> run; // consecutive {i} lines
  std::regex sectionRe(R"(^### (\S+) \()");
  std::regex countRe(R"(for i = 0\.\.(\d+))");
  std::regex entryRe(R"(^\s+(\S+)\s+\[([0-9, ]*)\]\s+(F16|F32)\s*$)");
  auto flush = [&]() {
    for (int i = 0; i < blocks && !run.empty(); ++i)
      for (const Expected &e : run) {
        Expected x = e;
        x.name.replace(x.name.find("{i}"), 3, std::to_string(i));
        out[section].push_back(x);
      }
    run.clear();
  };
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, sectionRe)) {
      flush();
      section = m[1];
      blocks = 0;
      continue;
    }
    if (std::regex_search(line, m, countRe))
      blocks = std::stoi(m[1]) + 1;
    if (!std::regex_match(line, m, entryRe)) {
      continue;
    }
    Expected e;
    e.name = m[1];
    std::string dims = m[2];
    std::istringstream ds(dims);
    std::string d;
    while (std::getline(ds, d, ','))
      e.shape.push_back(std::stoll(d));
    e.dtype = m[3];
    if (e.name.find("{i}") != std::string::npos) {
      run.push_back(e);
    } else {
      flush();
      out[section].push_back(e);
    }
  }
  flush();
  return out;
}

ModelConfig parse(const std::string &text) {
  auto cfg = parseModelConfig(text, "ckpts/model.json");
  EXPECT_TRUE(cfg) << cfg.message();
  return cfg ? std::move(cfg.value()) : ModelConfig{};
}

struct Published {
  const char *stem;
  size_t tensors;
  int64_t elements;
  uint64_t bytes;
};

// spec §1.5
const Published kPublished[] = {
    {"ss_flow_img_dit_L_16l8_fp16", 489, 559737864, 1130770840},
    {"slat_flow_img_dit_L_64l8p2_fp16", 526, 600432520, 1203755136},
    {"ss_dec_conv3d_16l8_fp16", 74, 73671201, 147591972},
    {"slat_dec_gs_swin8_B_64l8gs32_fp16", 101, 85369120, 171450952},
    {"slat_dec_rf_swin8_B_64l8r16_fp16", 100, 85369024, 171450488},
    {"slat_dec_mesh_swin8_B_64l8m256c_fp16", 120, 90926693, 181903412},
};

std::map<std::string, std::string> fixtureSidecars() {
  return {{"ss_flow_img_dit_L_16l8_fp16", kSSFlowJson},
          {"slat_flow_img_dit_L_64l8p2_fp16", kSLatFlowJson},
          {"ss_dec_conv3d_16l8_fp16", kSSDecoderJson},
          {"slat_dec_gs_swin8_B_64l8gs32_fp16", kGaussianDecoderJson},
          {"slat_dec_rf_swin8_B_64l8r16_fp16", kRadianceFieldDecoderJson},
          {"slat_dec_mesh_swin8_B_64l8m256c_fp16", kMeshDecoderJson}};
}

TEST(Manifest, MatchesAppendixAEntryByEntry) {
  auto appendix = appendixA();
  ASSERT_EQ(appendix.size(), 6u);
  for (const auto &[stem, sidecar] : fixtureSidecars()) {
    SCOPED_TRACE(stem);
    ModelManifest m = buildManifest(parse(sidecar));
    const std::vector<Expected> &want = appendix[stem];
    ASSERT_EQ(m.tensors.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(m.tensors[i].name, want[i].name) << "entry " << i;
      EXPECT_EQ(m.tensors[i].shape, want[i].shape) << want[i].name;
      EXPECT_EQ(std::string(dtypeName(m.tensors[i].dtype)), want[i].dtype)
          << want[i].name;
    }
  }
}

TEST(Manifest, CountsElementsAndPublishedFileSizes) {
  auto sidecars = fixtureSidecars();
  for (const Published &p : kPublished) {
    SCOPED_TRACE(p.stem);
    ModelManifest m = buildManifest(parse(sidecars[p.stem]));
    EXPECT_EQ(m.tensors.size(), p.tensors);
    EXPECT_EQ(m.numElements(), p.elements);
    auto size = safetensorsFileSize(m);
    ASSERT_TRUE(size) << size.message();
    EXPECT_EQ(*size, p.bytes);
  }
}

TEST(Manifest, ImageLargePresetHasThePublishedSizes) {
  // The trellis-mkmodel preset, computed from the specs alone (no 3 GB
  // written): the header lengths and file sizes of spec §1.5.
  mkmodel::PresetPlan plan = mkmodel::planPreset(mkmodel::Preset::ImageLarge);
  ASSERT_EQ(plan.checkpoints.size(), 6u);
  uint64_t total = 0;
  for (const mkmodel::CheckpointPlan &c : plan.checkpoints) {
    SCOPED_TRACE(c.stem());
    auto model = mkmodel::checkpointModel(c);
    ASSERT_TRUE(model) << model.message();
    const Published *p = nullptr;
    for (const Published &q : kPublished)
      if (c.stem() == q.stem)
        p = &q;
    ASSERT_TRUE(p);
    EXPECT_EQ(model->manifest.tensors.size(), p->tensors);
    EXPECT_EQ(model->manifest.numElements(), p->elements);
    auto size = safetensorsFileSize(model->manifest);
    auto header = safetensorsHeaderSize(model->manifest);
    ASSERT_TRUE(size && header);
    EXPECT_EQ(*size, p->bytes);
    EXPECT_EQ(*size, 8 + *header + model->manifest.dataBytes());
    EXPECT_EQ(*header % 8, 0u);
    total += *size;
  }
  EXPECT_EQ(total, 3006922800u);
}

TEST(Manifest, DtypeRuleFollowsTheFp16Regions) {
  ModelManifest ss = buildManifest(parse(kSSFlowJson));
  EXPECT_EQ(ss.find("pos_emb")->dtype, DType::F32);
  EXPECT_EQ(ss.find("pos_emb")->role, TensorRole::PositionEmbedding);
  EXPECT_EQ(ss.find("blocks.7.norm2.weight")->dtype, DType::F32);
  EXPECT_EQ(ss.find("blocks.7.self_attn.q_rms_norm.gamma")->dtype, DType::F32);
  EXPECT_EQ(ss.find("blocks.7.self_attn.to_qkv.bias")->dtype, DType::F16);
  EXPECT_EQ(ss.find("out_layer.weight")->dtype, DType::F32);
  // use_fp16 false: everything F32.
  ModelManifest f32 = buildManifest(parse(
      replaced(kSSFlowJson, "\"use_fp16\": true", "\"use_fp16\": false")));
  for (const ManifestTensor &t : f32.tensors)
    EXPECT_EQ(t.dtype, DType::F32) << t.name;
  ModelManifest mesh = buildManifest(parse(kMeshDecoderJson));
  EXPECT_EQ(mesh.find("upsample.1.skip_connection.conv.weight")->dtype,
            DType::F16);
  EXPECT_EQ(mesh.find("upsample.1.skip_connection.conv.weight")->shape,
            (Shape{96, 1, 1, 1, 192}));
  EXPECT_EQ(mesh.find("upsample.0.out_layers.1.weight")->dtype, DType::F32);
}

TEST(Manifest, RolesAndFanIn) {
  ModelManifest slat = buildManifest(parse(kSLatFlowJson));
  const ManifestTensor *conv = slat.find("out_blocks.0.conv1.conv.weight");
  ASSERT_TRUE(conv);
  EXPECT_EQ(conv->role, TensorRole::SparseConvWeight);
  EXPECT_EQ(conv->fanIn(), 27 * 2048);
  const ManifestTensor *lin =
      slat.find("input_blocks.1.skip_connection.weight");
  ASSERT_TRUE(lin);
  EXPECT_EQ(lin->role, TensorRole::LinearWeight);
  EXPECT_EQ(lin->fanIn(), 128);
  ModelManifest dec = buildManifest(parse(kSSDecoderJson));
  EXPECT_EQ(dec.find("blocks.2.conv.weight")->role, TensorRole::ConvWeight);
  EXPECT_EQ(dec.find("blocks.2.conv.weight")->fanIn(), 512 * 27);
  EXPECT_EQ(dec.find("out_layer.0.bias")->role, TensorRole::NormBias);
  ModelManifest gs = buildManifest(parse(kGaussianDecoderJson));
  EXPECT_EQ(gs.find("offset_perturbation")->role,
            TensorRole::OffsetPerturbation);
}

TEST(Manifest, ShapeArgsNameTheSidecarPositions) {
  ModelConfig cfg = parse(kSSFlowJson);
  ModelManifest m = buildManifest(cfg);
  const ManifestTensor *g = m.find("blocks.3.self_attn.k_rms_norm.gamma");
  ASSERT_TRUE(g);
  std::string why = g->describeShapeArgs();
  EXPECT_NE(why.find("num_heads = 16 (ckpts/model.json:" +
                     lineCol(kSSFlowJson, "16,\n    \"mlp_ratio\"") + ")"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("model_channels = 1024 (ckpts/model.json:" +
                     lineCol(kSSFlowJson, "1024") + ")"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("num_blocks = 24"), std::string::npos) << why;
  EXPECT_EQ(g->dtypeArg.name, "");
  const ManifestTensor *w = m.find("blocks.3.mlp.mlp.0.weight");
  EXPECT_EQ(w->dtypeArg.describe(), "use_fp16 = true (ckpts/model.json:" +
                                        lineCol(kSSFlowJson, "true\n  }") +
                                        ")");
}

TEST(Manifest, ShareModMovesTheModulationToTheTop) {
  ModelManifest m =
      buildManifest(parse(replaced(kSSFlowJson, "\"use_fp16\": true",
                                   "\"share_mod\": true, \"use_fp16\": true")));
  EXPECT_EQ(m.tensors.size(), 489u - 48u + 2u);
  const ManifestTensor *t = m.find("adaLN_modulation.1.weight");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->shape, (Shape{6144, 1024}));
  EXPECT_EQ(t->dtype, DType::F32);
  EXPECT_FALSE(m.find("blocks.0.adaLN_modulation.1.weight"));
}

TEST(Manifest, CrossRmsNormAndDecoderRmsNorm) {
  // TRELLIS-text-xlarge style: qk_rms_norm_cross (spec §1.4).
  ModelManifest m = buildManifest(
      parse(replaced(kSSFlowJson, "\"qk_rms_norm\": true",
                     "\"qk_rms_norm\": true, \"qk_rms_norm_cross\": true")));
  EXPECT_EQ(m.tensors.size(), 489u + 48u);
  EXPECT_EQ(m.find("blocks.23.cross_attn.k_rms_norm.gamma")->shape,
            (Shape{16, 64}));
  ModelManifest d = buildManifest(
      parse(replaced(kRadianceFieldDecoderJson, "\"use_fp16\": true",
                     "\"use_fp16\": true, \"qk_rms_norm\": true")));
  EXPECT_EQ(d.tensors.size(), 100u + 24u);
  EXPECT_EQ(d.find("blocks.11.attn.q_rms_norm.gamma")->shape, (Shape{12, 64}));
}

TEST(Manifest, SLatFlowIoStages) {
  // Two stages (patch 4), three res blocks per stage, no skip connections.
  std::string text =
      replaced(kSLatFlowJson, "\"patch_size\": 2", "\"patch_size\": 4");
  text = replaced(text, "[128]", "[64, 128]");
  text = replaced(text, "\"num_io_res_blocks\": 2", "\"num_io_res_blocks\": 3");
  text = replaced(text, "\"use_fp16\": true",
                  "\"use_fp16\": true, \"use_skip_connection\": false");
  ModelManifest m = buildManifest(parse(text));
  // input: 64→64 ×2, 64→128 down, 128→128 ×2, 128→1024 down
  EXPECT_EQ(m.find("input_blocks.2.conv1.conv.weight")->shape,
            (Shape{128, 3, 3, 3, 64}));
  EXPECT_EQ(m.find("input_blocks.5.conv1.conv.weight")->shape,
            (Shape{1024, 3, 3, 3, 128}));
  EXPECT_FALSE(m.find("input_blocks.6.norm1.weight"));
  // output: 1024→128 up, 128→128 ×2, 128→64 up, 64→64 ×2 (no skip concat)
  EXPECT_EQ(m.find("out_blocks.0.conv1.conv.weight")->shape,
            (Shape{128, 3, 3, 3, 1024}));
  EXPECT_FALSE(m.find("out_blocks.1.skip_connection.weight"));
  EXPECT_EQ(m.find("out_blocks.3.skip_connection.weight")->shape,
            (Shape{64, 128}));
  EXPECT_EQ(m.find("input_layer.weight")->shape, (Shape{64, 8}));
  EXPECT_EQ(m.find("out_layer.weight")->shape, (Shape{8, 64}));
  // No io blocks at all.
  std::string none = replaced(kSLatFlowJson, "[128]", "null");
  ModelManifest n = buildManifest(parse(none));
  EXPECT_FALSE(n.find("input_blocks.0.norm1.weight"));
  EXPECT_EQ(n.find("input_layer.weight")->shape, (Shape{1024, 8}));
  EXPECT_EQ(n.tensors.size(), 4u + 2u + 24u * 20u + 2u);
}

TEST(Manifest, TextBaseFlowModels) {
  mkmodel::PresetPlan plan = mkmodel::planPreset(mkmodel::Preset::TextBase);
  auto ss = mkmodel::checkpointModel(plan.checkpoints[0]);
  ASSERT_TRUE(ss) << ss.message();
  EXPECT_EQ(plan.checkpoints[0].stem(), "ss_flow_txt_dit_B_16l8_fp16");
  EXPECT_EQ(ss->manifest.tensors.size(), 4u + 1u + 2u + 12u * 20u + 2u);
  EXPECT_EQ(ss->manifest.find("pos_emb")->shape, (Shape{4096, 768}));
  EXPECT_EQ(ss->manifest.find("blocks.11.cross_attn.to_kv.weight")->shape,
            (Shape{1536, 768}));
  auto slat = mkmodel::checkpointModel(plan.checkpoints[2]);
  ASSERT_TRUE(slat);
  EXPECT_EQ(slat->manifest.tensors.size(),
            4u + 2u + 18u + 12u * 20u + 20u + 2u);
  EXPECT_EQ(slat->manifest.find("out_blocks.0.conv1.conv.weight")->shape,
            (Shape{128, 3, 3, 3, 1536}));
}

} // namespace
