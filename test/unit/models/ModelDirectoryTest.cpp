//===- ModelDirectoryTest.cpp - trellis-mkmodel output, checked -----------===//
//
// Writes the tiny preset to a temporary directory, loads and checks it as
// trellisc does, then corrupts copies of it one way at a time: each
// corruption must be reported with its own message, and all problems of a
// directory at once.
//
//===----------------------------------------------------------------------===//

#include "test/unit/config/ConfigTestUtil.h"

#include "tools/trellis-mkmodel/MkModel.h"
#include "trellis/Config/PipelineConfig.h"
#include "trellis/Format/Npy.h"
#include "trellis/Format/Safetensors.h"
#include "trellis/Models/Manifest.h"
#include "trellis/Support/Half.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

using namespace trellis;
using namespace trellis::config;
using namespace trellis::models;
using namespace trellis::testutil;
namespace fs = std::filesystem;

namespace {

Result<std::vector<mkmodel::WrittenFile>>
writeTiny(const std::string &dir, uint64_t seed = 1, bool force = false) {
  mkmodel::Options o;
  o.preset = mkmodel::Preset::Tiny;
  o.seed = seed;
  o.outDir = dir;
  o.force = force;
  return mkmodel::writeModelDirectory(o);
}

TEST(TinyPreset, IsStructurallyComplete) {
  mkmodel::PresetPlan plan = mkmodel::planPreset(mkmodel::Preset::Tiny);
  ASSERT_EQ(plan.checkpoints.size(), 6u);
  std::map<std::string, ModelManifest> m;
  for (const auto &c : plan.checkpoints) {
    auto model = mkmodel::checkpointModel(c);
    ASSERT_TRUE(model) << model.message();
    m[c.key] = model->manifest;
    // Head dim 64 everywhere (the GPU attention kernels' d).
    if (auto *a = model->config.ssFlow()) {
      EXPECT_EQ(a->headDim(), 64);
    }
    if (auto *a = model->config.slatFlow()) {
      EXPECT_EQ(a->headDim(), 64);
    }
    if (auto *a = model->config.slatDecoder()) {
      EXPECT_EQ(a->headDim(), 64);
      EXPECT_EQ(*a->numBlocks, 2); // a Swin even and an odd block
      EXPECT_EQ(*a->attnMode, AttnMode::Swin);
      EXPECT_GT(*a->resolution, *a->windowSize); // several windows per axis
    }
  }
  const ModelManifest &ss = m["sparse_structure_flow_model"];
  EXPECT_TRUE(ss.find("blocks.1.cross_attn.to_kv.weight"));
  EXPECT_TRUE(ss.find("blocks.1.self_attn.k_rms_norm.gamma"));
  const ModelManifest &dec = m["sparse_structure_decoder"];
  EXPECT_TRUE(dec.find("middle_block.0.conv2.weight"));
  EXPECT_TRUE(dec.find("blocks.1.conv.weight")); // first upsample
  EXPECT_TRUE(dec.find("blocks.3.conv.weight")); // second upsample
  const ModelManifest &slat = m["slat_flow_model"];
  EXPECT_TRUE(slat.find("input_blocks.1.skip_connection.weight")); // down
  EXPECT_TRUE(slat.find("out_blocks.0.skip_connection.weight"));   // up
  EXPECT_EQ(slat.find("out_blocks.0.norm1.weight")->shape, (Shape{256}));
  EXPECT_TRUE(m["slat_decoder_gs"].find("offset_perturbation"));
  EXPECT_TRUE(m["slat_decoder_rf"].find("out_layer.weight"));
  const ModelManifest &mesh = m["slat_decoder_mesh"];
  for (const char *gn :
       {"upsample.0.act_layers.0.weight", "upsample.0.out_layers.1.weight",
        "upsample.1.act_layers.0.weight", "upsample.1.out_layers.1.weight"})
    EXPECT_EQ(mesh.find(gn)->shape[0] % 32, 0) << gn; // GroupNorm(32)
  EXPECT_EQ(mesh.find("upsample.1.skip_connection.conv.weight")->shape,
            (Shape{32, 1, 1, 1, 64}));
  EXPECT_EQ(mesh.find("out_layer.weight")->shape, (Shape{101, 32}));
}

TEST(TinyPreset, WritesLoadsAndChecksClean) {
  TempDir dir("mk-tiny");
  auto written = writeTiny(dir.path());
  ASSERT_TRUE(written) << written.message();
  // 6 × (json, safetensors), the image-conditioning model's config.json and
  // model.safetensors, pipeline, cond.
  EXPECT_EQ(written->size(), 16u);
  EXPECT_TRUE(std::filesystem::exists(dir.path() +
                                      "/image_cond_model/model.safetensors"));

  auto cfg = loadPipeline(dir.path());
  ASSERT_TRUE(cfg) << cfg.message();
  EXPECT_TRUE(cfg->warnings.empty());
  ModelDirectoryReport report = checkModelDirectory(cfg.value());
  EXPECT_TRUE(report.ok()) << report.render();
  EXPECT_EQ(report.modelsChecked, 6u);
  EXPECT_EQ(report.tensorsChecked, 49u + 42u + 86u + 21u + 20u + 40u);
  EXPECT_TRUE(validateModelDirectory(dir.path()));

  uint64_t total = 0;
  for (const ModelRef &ref : cfg->models) {
    ModelManifest manifest = buildManifest(*ref.config);
    auto size = safetensorsFileSize(manifest);
    ASSERT_TRUE(size);
    EXPECT_EQ(fs::file_size(ref.weightsPath()), *size) << ref.key;
    total += *size;
    // The bytes are the generator's values.
    auto file = SafetensorsFile::open(ref.weightsPath());
    ASSERT_TRUE(file) << file.message();
    const ManifestTensor &t = manifest.tensors.back();
    HostTensor stored = (*file)->tensor(*(*file)->find(t.name));
    std::string stem = fs::path(ref.resolved).filename().string();
    std::vector<float> want =
        mkmodel::tensorValues(*ref.config, manifest, t, 1, stem);
    HostTensor f32 = stored.toFloat32();
    ASSERT_EQ(size_t(f32.numel()), want.size());
    EXPECT_EQ(std::memcmp(f32.raw(), want.data(), want.size() * 4), 0)
        << t.name;
  }
  EXPECT_LT(total, 12u << 20); // "a few MB" for CI

  auto cond = readNpy(dir / "cond.npy");
  ASSERT_TRUE(cond) << cond.message();
  EXPECT_EQ(cond->shape(), (Shape{1, 21, 128}));
  EXPECT_EQ(cond->dtype(), DType::F32);
}

TEST(TinyPreset, IsReproducibleAndRefusesToOverwrite) {
  TempDir a("mk-a"), b("mk-b"), c("mk-c");
  ASSERT_TRUE(writeTiny(a.path(), 42));
  ASSERT_TRUE(writeTiny(b.path(), 42));
  ASSERT_TRUE(writeTiny(c.path(), 43));
  for (const char *f : {"ckpts/slat_flow_tiny.safetensors", "cond.npy",
                        "pipeline.json", "ckpts/ss_dec_tiny.json"}) {
    EXPECT_EQ(readFile(a / f), readFile(b / f)) << f;
  }
  EXPECT_NE(readFile(a / "ckpts/slat_flow_tiny.safetensors"),
            readFile(c / "ckpts/slat_flow_tiny.safetensors"));
  EXPECT_EQ(readFile(a / "pipeline.json"), readFile(c / "pipeline.json"));

  auto again = writeTiny(a.path(), 42);
  ASSERT_FALSE(again);
  EXPECT_NE(again.message().find("the file exists; pass --force to overwrite"),
            std::string::npos)
      << again.message();
  EXPECT_TRUE(writeTiny(a.path(), 43, /*force=*/true));
  EXPECT_EQ(readFile(a / "ckpts/slat_flow_tiny.safetensors"),
            readFile(c / "ckpts/slat_flow_tiny.safetensors"));
}

TEST(TextBasePreset, LaysDecodersOutInTheImageRepoSibling) {
  mkmodel::PresetPlan plan = mkmodel::planPreset(mkmodel::Preset::TextBase);
  auto pipeline = parsePipelineConfig(plan.pipelineJson, "pipeline.json");
  ASSERT_TRUE(pipeline) << pipeline.message();
  EXPECT_EQ(pipeline->pipelineClass, PipelineClass::TextTo3D);
  EXPECT_DOUBLE_EQ(*pipeline->slatSampler.params.cfgStrength, 7.5);
  EXPECT_EQ(plan.condTokens, 77);
  EXPECT_EQ(plan.condChannels, 768);
  EXPECT_TRUE(plan.writeNegCond);
  for (const mkmodel::CheckpointPlan &c : plan.checkpoints) {
    bool flow =
        c.key == "sparse_structure_flow_model" || c.key == "slat_flow_model";
    if (flow) {
      EXPECT_EQ(c.modelPath.rfind("ckpts/", 0), 0u) << c.key;
    } else {
      EXPECT_EQ(c.modelPath.rfind("microsoft/TRELLIS-image-large/ckpts/", 0),
                0u)
          << c.key;
      EXPECT_EQ(c.relativeBase.rfind("../TRELLIS-image-large/ckpts/", 0), 0u)
          << c.key;
    }
  }
}

//===----------------------------------------------------------------------===//
// Corruptions
//===----------------------------------------------------------------------===//

struct StoredTensor {
  TensorSpec spec;
  std::vector<uint8_t> bytes;
};

std::vector<StoredTensor> readAll(const std::string &path) {
  std::vector<StoredTensor> out;
  auto file = SafetensorsFile::open(path);
  EXPECT_TRUE(file) << file.message();
  if (!file)
    return out;
  for (const SafetensorsEntry &e : (*file)->entries()) {
    HostTensor t = (*file)->tensor(e);
    const uint8_t *p = static_cast<const uint8_t *>(t.raw());
    out.push_back({{e.name, e.dtype, e.shape}, {p, p + t.nbytes()}});
  }
  return out;
}

void writeAll(const std::string &path, const std::vector<StoredTensor> &ts) {
  std::vector<TensorSpec> specs;
  for (const StoredTensor &t : ts)
    specs.push_back(t.spec);
  Status s = writeSafetensors(path, specs, [&](size_t i, void *dst) {
    std::memcpy(dst, ts[i].bytes.data(), ts[i].bytes.size());
  });
  ASSERT_TRUE(s) << s.message();
}

StoredTensor *findStored(std::vector<StoredTensor> &ts, const std::string &n) {
  for (StoredTensor &t : ts)
    if (t.spec.name == n)
      return &t;
  ADD_FAILURE() << "no tensor " << n;
  return nullptr;
}

class Corruption : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    pristine_ = new TempDir("mk-pristine");
    auto w = writeTiny(pristine_->path(), 5);
    ASSERT_TRUE(w) << w.message();
  }
  static void TearDownTestSuite() {
    delete pristine_;
    pristine_ = nullptr;
  }
  void SetUp() override {
    dir_ = std::make_unique<TempDir>("mk-corrupt");
    fs::copy(pristine_->path(), dir_->path(),
             fs::copy_options::recursive |
                 fs::copy_options::overwrite_existing);
  }
  std::string path(const std::string &rel) const { return *dir_ / rel; }
  std::string ssFlow() const { return path("ckpts/ss_flow_tiny.safetensors"); }

  ModelDirectoryReport check() {
    auto cfg = loadPipeline(dir_->path());
    EXPECT_TRUE(cfg) << cfg.message();
    if (!cfg)
      return {};
    return checkModelDirectory(cfg.value());
  }

  static TempDir *pristine_;
  std::unique_ptr<TempDir> dir_;
};
TempDir *Corruption::pristine_ = nullptr;

TEST_F(Corruption, MissingTensor) {
  auto ts = readAll(ssFlow());
  ts.erase(ts.begin() + 3);
  std::string removed = readAll(ssFlow())[3].spec.name;
  writeAll(ssFlow(), ts);
  ModelDirectoryReport r = check();
  ASSERT_EQ(r.problems.size(), 1u) << r.render();
  EXPECT_EQ(r.problems[0].kind, ModelProblem::Kind::MissingTensor);
  EXPECT_EQ(r.problems[0].tensor, removed);
  EXPECT_EQ(r.problems[0].modelKey, "sparse_structure_flow_model");
  EXPECT_EQ(r.problems[0].message.rfind(
                ssFlow() + ": " + removed + ": expected a tensor ", 0),
            0u)
      << r.problems[0].message;
  EXPECT_NE(r.problems[0].message.find(", found no such tensor"),
            std::string::npos);
}

TEST_F(Corruption, MissingTensorNamesTheArgsThatImplyIt) {
  auto ts = readAll(ssFlow());
  ts.erase(std::remove_if(ts.begin(), ts.end(),
                          [](const StoredTensor &t) {
                            return t.spec.name == "blocks.1.mlp.mlp.2.bias";
                          }),
           ts.end());
  writeAll(ssFlow(), ts);
  ModelDirectoryReport r = check();
  ASSERT_EQ(r.problems.size(), 1u) << r.render();
  std::string sidecar = path("ckpts/ss_flow_tiny.json");
  std::string text = readFile(sidecar);
  EXPECT_EQ(r.problems[0].message,
            ssFlow() +
                ": blocks.1.mlp.mlp.2.bias: expected a tensor F16 [128] (from "
                "model_channels = 128 (" +
                sidecar + ":" + lineCol(text, "128") + "), mlp_ratio = 2 (" +
                sidecar + ":" + lineCol(text, "2,\n    \"patch_size\"") +
                "), num_blocks = 2 (" + sidecar + ":" +
                lineCol(text, "2,\n    \"num_heads\"") +
                ")), found no such tensor");
}

TEST_F(Corruption, UnexpectedTensor) {
  auto ts = readAll(ssFlow());
  StoredTensor extra{{"blocks.0.extra.weight", DType::F32, {3}},
                     std::vector<uint8_t>(12, 0)};
  ts.push_back(extra);
  writeAll(ssFlow(), ts);
  ModelDirectoryReport r = check();
  ASSERT_EQ(r.problems.size(), 1u) << r.render();
  EXPECT_EQ(r.problems[0].kind, ModelProblem::Kind::UnexpectedTensor);
  EXPECT_EQ(r.problems[0].message,
            ssFlow() +
                ": blocks.0.extra.weight: expected no such tensor in a "
                "SparseStructureFlowModel with the args of " +
                path("ckpts/ss_flow_tiny.json") + ", found F32 [3]");
}

TEST_F(Corruption, WrongShape) {
  auto ts = readAll(ssFlow());
  StoredTensor *t = findStored(ts, "input_layer.weight");
  ASSERT_TRUE(t);
  t->spec.shape = {128, 4};
  t->bytes.resize(128 * 4 * 4);
  writeAll(ssFlow(), ts);
  ModelDirectoryReport r = check();
  ASSERT_EQ(r.problems.size(), 1u) << r.render();
  EXPECT_EQ(r.problems[0].kind, ModelProblem::Kind::WrongShape);
  EXPECT_EQ(r.problems[0].message.rfind(
                ssFlow() + ": input_layer.weight: expected shape [128, 8] "
                           "(from in_channels = 8 (",
                0),
            0u)
      << r.problems[0].message;
  EXPECT_NE(r.problems[0].message.find("), found [128, 4]"), std::string::npos);
}

TEST_F(Corruption, WrongDType) {
  auto ts = readAll(ssFlow());
  StoredTensor *w = findStored(ts, "blocks.0.mlp.mlp.0.weight");
  ASSERT_TRUE(w);
  std::vector<uint8_t> wide(w->bytes.size() * 2);
  for (size_t i = 0; i < w->bytes.size() / 2; ++i) {
    uint16_t h;
    std::memcpy(&h, &w->bytes[2 * i], 2);
    float f = halfToFloat(h);
    std::memcpy(&wide[4 * i], &f, 4);
  }
  w->bytes = wide;
  w->spec.dtype = DType::F32;
  StoredTensor *n = findStored(ts, "blocks.1.norm2.bias");
  ASSERT_TRUE(n);
  n->bytes.resize(n->bytes.size() / 2);
  n->spec.dtype = DType::F16;
  writeAll(ssFlow(), ts);
  ModelDirectoryReport r = check();
  ASSERT_EQ(r.problems.size(), 2u) << r.render();
  std::string sidecar = path("ckpts/ss_flow_tiny.json");
  std::string text = readFile(sidecar);
  // Manifest order: blocks.0 before blocks.1.
  EXPECT_EQ(r.problems[0].kind, ModelProblem::Kind::WrongDType);
  EXPECT_EQ(r.problems[0].message,
            ssFlow() +
                ": blocks.0.mlp.mlp.0.weight: expected dtype F16 "
                "(inside the fp16 region with use_fp16 = true (" +
                sidecar + ":" + lineCol(text, "true\n  }") + ")), found F32");
  EXPECT_EQ(r.problems[1].message,
            ssFlow() + ": blocks.1.norm2.bias: expected dtype F32 (outside "
                       "the fp16 region: TRELLIS keeps it in float32), found "
                       "F16");
}

TEST_F(Corruption, MissingSidecar) {
  fs::remove(path("ckpts/ss_dec_tiny.json"));
  auto cfg = loadPipeline(dir_->path());
  ASSERT_FALSE(cfg);
  std::string pipeline = readFile(path("pipeline.json"));
  EXPECT_EQ(cfg.message(),
            path("pipeline.json") + ":" +
                lineCol(pipeline, "\"ckpts/ss_dec_tiny\"") +
                ": args.models.sparse_structure_decoder: expected a "
                "checkpoint sidecar at " +
                path("ckpts/ss_dec_tiny.json") + ", found no such file");
  Status s = validateModelDirectory(dir_->path());
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message(), cfg.message());
}

TEST_F(Corruption, SidecarArgInconsistentWithWeights) {
  // num_heads 2 -> 4: the head dim becomes 32, so every RMS gamma [2, 64]
  // of the checkpoint disagrees with the [4, 32] the sidecar implies.
  std::string sidecar = path("ckpts/ss_flow_tiny.json");
  std::string text =
      replaced(readFile(sidecar), "\"num_heads\": 2", "\"num_heads\": 4");
  writeFile(sidecar, text);
  ModelDirectoryReport r = check();
  ASSERT_EQ(r.problems.size(), 4u) << r.render(); // q, k × 2 blocks
  for (const ModelProblem &p : r.problems) {
    EXPECT_EQ(p.kind, ModelProblem::Kind::WrongShape);
    EXPECT_NE(p.message.find("expected shape [4, 32] (from num_heads = 4 (" +
                             sidecar + ":" + lineCol(text, "4,\n") + ")"),
              std::string::npos)
        << p.message;
    EXPECT_NE(p.message.find("found [2, 64]"), std::string::npos);
  }
  EXPECT_EQ(r.problems[0].tensor, "blocks.0.self_attn.q_rms_norm.gamma");
}

TEST_F(Corruption, SidecarClaimsMoreBlocksThanStored) {
  std::string sidecar = path("ckpts/slat_dec_gs_tiny.json");
  std::string text =
      replaced(readFile(sidecar), "\"num_blocks\": 2", "\"num_blocks\": 3");
  writeFile(sidecar, text);
  ModelDirectoryReport r = check();
  ASSERT_EQ(r.problems.size(), 8u) << r.render(); // blocks.2.*: 8 tensors
  for (const ModelProblem &p : r.problems) {
    EXPECT_EQ(p.kind, ModelProblem::Kind::MissingTensor);
    EXPECT_EQ(p.tensor.rfind("blocks.2.", 0), 0u);
    EXPECT_NE(p.message.find("num_blocks = 3 (" + sidecar + ":" +
                             lineCol(text, "3,") + ")"),
              std::string::npos)
        << p.message;
  }
}

TEST_F(Corruption, MissingAndUnreadableWeightsFiles) {
  fs::remove(path("ckpts/slat_dec_rf_tiny.safetensors"));
  writeFile(path("ckpts/slat_dec_mesh_tiny.safetensors"),
            "not a safetensors file");
  ModelDirectoryReport r = check();
  ASSERT_EQ(r.problems.size(), 2u) << r.render();
  EXPECT_EQ(r.problems[0].kind, ModelProblem::Kind::MissingWeightsFile);
  EXPECT_EQ(r.problems[0].message,
            path("ckpts/slat_dec_rf_tiny.safetensors") +
                ": expected the weights of slat_decoder_rf (20 tensors for the "
                "args of " +
                path("ckpts/slat_dec_rf_tiny.json") + "), found no such file");
  EXPECT_EQ(r.problems[1].kind, ModelProblem::Kind::UnreadableWeightsFile);
  EXPECT_NE(
      r.problems[1].message.find(path("ckpts/slat_dec_mesh_tiny.safetensors")),
      std::string::npos)
      << r.problems[1].message;
}

TEST_F(Corruption, EveryProblemAtOnce) {
  auto ts = readAll(ssFlow());
  ts.erase(std::remove_if(ts.begin(), ts.end(),
                          [](const StoredTensor &t) {
                            return t.spec.name == "out_layer.bias";
                          }),
           ts.end());
  findStored(ts, "pos_emb")->spec.shape = {256, 256};
  ts.push_back({{"zzz", DType::I32, {1}}, std::vector<uint8_t>(4, 0)});
  writeAll(ssFlow(), ts);
  fs::remove(path("ckpts/slat_dec_gs_tiny.safetensors"));
  ModelDirectoryReport r = check();
  ASSERT_EQ(r.problems.size(), 4u) << r.render();
  EXPECT_EQ(r.problems[0].kind, ModelProblem::Kind::WrongShape); // pos_emb
  EXPECT_EQ(r.problems[1].kind,
            ModelProblem::Kind::MissingTensor); // out_layer.bias
  EXPECT_EQ(r.problems[2].kind, ModelProblem::Kind::UnexpectedTensor); // zzz
  EXPECT_EQ(r.problems[3].kind, ModelProblem::Kind::MissingWeightsFile);
  Status s = r.status();
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("4 problems in 6 checkpoints"), std::string::npos)
      << s.message();
}

} // namespace
