//===- PipelineConfigTest.cpp - pipeline.json, overrides, model dirs ------===//

#include "test/unit/config/ConfigFixtures.h"
#include "test/unit/config/ConfigTestUtil.h"

#include "trellis/Config/PipelineConfig.h"

#include <gtest/gtest.h>

#include <filesystem>

using namespace trellis;
using namespace trellis::config;
using namespace trellis::testutil;

namespace {

const std::string kFile = "models/x/pipeline.json";

/// Parses `text` and expects the message to contain the line
/// "<kFile>:<pos of needle>: <path>: <expected ..., found ...>".
void expectPipelineError(const std::string &text, const std::string &needle,
                         const std::string &path, const std::string &message,
                         int nth = 0) {
  auto cfg = parsePipelineConfig(text, kFile);
  ASSERT_FALSE(cfg) << "accepted:\n" << text;
  std::string line =
      kFile + ":" + lineCol(text, needle, nth) + ": " + path + ": " + message;
  EXPECT_NE(cfg.message().find(line), std::string::npos)
      << "message:\n"
      << cfg.message() << "\nexpected line:\n"
      << line;
}

TEST(PipelineConfig, ParsesTheImageLargePipeline) {
  std::vector<Diagnostic> diags;
  auto cfg = parsePipelineConfig(kPipelineJson, kFile, &diags);
  ASSERT_TRUE(cfg) << cfg.message();
  EXPECT_TRUE(diags.empty());
  EXPECT_EQ(cfg->pipelineClass, PipelineClass::ImageTo3D);
  EXPECT_EQ(cfg->dir, "models/x");
  ASSERT_EQ(cfg->models.size(), 6u);
  EXPECT_EQ(cfg->models[2].key, "slat_flow_model");
  EXPECT_EQ(*cfg->models[2].path, "ckpts/slat_flow");
  EXPECT_EQ(cfg->models[2].path.pos.location(),
            kFile + ":" + lineCol(kPipelineJson, "\"ckpts/slat_flow\""));
  EXPECT_EQ(cfg->models[2].path.pos.path, "args.models.slat_flow_model");

  const SamplerConfig &ss = cfg->sparseStructureSampler;
  EXPECT_EQ(ss.kind, SamplerKind::FlowEulerGuidanceInterval);
  EXPECT_DOUBLE_EQ(*ss.sigmaMin, 1e-5);
  EXPECT_EQ(*ss.params.steps, 25);
  EXPECT_FALSE(ss.params.steps.defaulted);
  EXPECT_EQ(ss.params.steps.pos.path,
            "args.sparse_structure_sampler.params.steps");
  EXPECT_EQ(ss.params.steps.pos.location(),
            kFile + ":" + lineCol(kPipelineJson, "25,"));
  EXPECT_DOUBLE_EQ(*ss.params.cfgStrength, 5.0);
  EXPECT_DOUBLE_EQ(ss.params.cfgInterval.value[0], 0.5);
  EXPECT_DOUBLE_EQ(ss.params.cfgInterval.value[1], 1.0);
  EXPECT_DOUBLE_EQ(*ss.params.rescaleT, 3.0);
  const SamplerConfig &sl = cfg->slatSampler;
  EXPECT_EQ(*sl.params.steps, 26);
  EXPECT_DOUBLE_EQ(sl.params.cfgInterval.value[1], 0.95);
  EXPECT_DOUBLE_EQ(*sl.params.rescaleT, 2.5);

  ASSERT_EQ(cfg->slatMean.size(), 8u);
  ASSERT_EQ(cfg->slatStd.size(), 8u);
  EXPECT_DOUBLE_EQ(*cfg->slatMean[0], -2.1687545776367188);
  EXPECT_DOUBLE_EQ(*cfg->slatStd[7], 2.684523105621338);
  EXPECT_EQ(cfg->slatStd[7].pos.path, "args.slat_normalization.std[7]");
  ASSERT_TRUE(cfg->imageCondModel);
  EXPECT_EQ(**cfg->imageCondModel, "dinov2_vitl14_reg");
  EXPECT_FALSE(cfg->textCondModel);
}

TEST(PipelineConfig, MissingParamsTakeTheSamplerDefaults) {
  std::string text = replaced(
      kPipelineJson,
      R"("params": {"steps": 26, "cfg_strength": 3.5, "cfg_interval": [0.5, 0.95], "rescale_t": 2.5})",
      R"("params": {"cfg_strength": 3.5})");
  auto cfg = parsePipelineConfig(text, kFile);
  ASSERT_TRUE(cfg) << cfg.message();
  const SamplerParams &p = cfg->slatSampler.params;
  EXPECT_EQ(*p.steps, 50);
  EXPECT_TRUE(p.steps.defaulted);
  EXPECT_EQ(p.steps.pos.path, "args.slat_sampler.params.steps");
  // A default sits at the object that would hold it.
  EXPECT_EQ(p.steps.pos.location(),
            kFile + ":" + lineCol(text, "{\"cfg_strength\": 3.5}"));
  EXPECT_DOUBLE_EQ(*p.rescaleT, 1.0);
  EXPECT_DOUBLE_EQ(p.cfgInterval.value[0], 0.0);
  EXPECT_DOUBLE_EQ(p.cfgInterval.value[1], 1.0);
  EXPECT_FALSE(p.cfgStrength.defaulted);
}

// ---- pipeline.json errors: each names file:line:col, path, expected/found.

TEST(PipelineConfigErrors, StepsAsString) {
  std::string text =
      replaced(kPipelineJson, "\"steps\": 25", "\"steps\": \"25\"");
  expectPipelineError(text, "\"25\"",
                      "args.sparse_structure_sampler.params.steps",
                      "expected a positive integer, found \"25\"");
}

TEST(PipelineConfigErrors, StepsAsFloat) {
  std::string text =
      replaced(kPipelineJson, "\"steps\": 26", "\"steps\": 26.0");
  expectPipelineError(text, "26.0", "args.slat_sampler.params.steps",
                      "expected a positive integer, found 26.0 (a float");
}

TEST(PipelineConfigErrors, StepsZero) {
  std::string text = replaced(kPipelineJson, "\"steps\": 26", "\"steps\": 0");
  expectPipelineError(text, "0, \"cfg_strength\": 3.5",
                      "args.slat_sampler.params.steps",
                      "expected a positive integer, found 0");
}

TEST(PipelineConfigErrors, CfgIntervalWithOneValue) {
  std::string text = replaced(kPipelineJson, "[0.5, 1.0]", "[0.5]");
  expectPipelineError(
      text, "[0.5]", "args.sparse_structure_sampler.params.cfg_interval",
      "expected an array of 2 numbers [low, high], found [0.5]");
}

TEST(PipelineConfigErrors, CfgIntervalReversed) {
  std::string text = replaced(kPipelineJson, "[0.5, 0.95]", "[0.95, 0.5]");
  expectPipelineError(text, "[0.95, 0.5]",
                      "args.slat_sampler.params.cfg_interval",
                      "expected [low, high] with finite low <= high, found "
                      "[0.95, 0.5]");
}

TEST(PipelineConfigErrors, CfgIntervalElementNotANumber) {
  std::string text = replaced(kPipelineJson, "[0.5, 0.95]", "[0.5, \"1\"]");
  expectPipelineError(text, "\"1\"]",
                      "args.slat_sampler.params.cfg_interval[1]",
                      "expected a number, found \"1\"");
}

TEST(PipelineConfigErrors, NegativeCfgStrength) {
  std::string text =
      replaced(kPipelineJson, "\"cfg_strength\": 5.0", "\"cfg_strength\": -1");
  expectPipelineError(text, "-1",
                      "args.sparse_structure_sampler.params.cfg_strength",
                      "expected a non-negative number, found -1");
}

TEST(PipelineConfigErrors, UnknownSampler) {
  std::string text =
      replaced(kPipelineJson,
               "\"FlowEulerGuidanceIntervalSampler\",\n      \"args\": "
               "{\"sigma_min\": 2e-05}",
               "\"FlowEulerSamplr\",\n      \"args\": {\"sigma_min\": 2e-05}");
  expectPipelineError(text, "\"FlowEulerSamplr\"", "args.slat_sampler.name",
                      "expected \"FlowEulerSampler\", \"FlowEulerCfgSampler\" "
                      "or \"FlowEulerGuidanceIntervalSampler\", found "
                      "\"FlowEulerSamplr\"");
}

TEST(PipelineConfigErrors, UnknownPipelineClass) {
  std::string text =
      replaced(kPipelineJson, "\"TrellisImageTo3DPipeline\"", "\"Trellis\"");
  expectPipelineError(text, "\"Trellis\"", "name",
                      "expected \"TrellisImageTo3DPipeline\" or "
                      "\"TrellisTextTo3DPipeline\", found \"Trellis\"");
}

TEST(PipelineConfigErrors, NonPositiveStd) {
  std::string text = replaced(kPipelineJson, "2.1748552322387695", "0");
  expectPipelineError(text, "0, 2.663944721221924",
                      "args.slat_normalization.std[3]",
                      "expected a positive number, found 0");
}

TEST(PipelineConfigErrors, StdShorterThanMean) {
  std::string text = replaced(kPipelineJson, ", 2.684523105621338]", "]");
  expectPipelineError(text, "[2.377650737762451", "args.slat_normalization.std",
                      "expected 8 values (as many as mean), found 7");
}

TEST(PipelineConfigErrors, MissingModelKey) {
  std::string text =
      replaced(kPipelineJson,
               "      \"sparse_structure_decoder\": \"ckpts/ss_dec\",\n", "");
  expectPipelineError(text, "{\n      \"sparse_structure_flow_model\"",
                      "args.models",
                      "expected key \"sparse_structure_decoder\" (a checkpoint "
                      "path), found an object without it");
}

TEST(PipelineConfigErrors, ModelPathNotAString) {
  std::string text = replaced(kPipelineJson, "\"ckpts/slat_flow\"", "3");
  expectPipelineError(text, "3,\n      \"slat_decoder_gs\"",
                      "args.models.slat_flow_model",
                      "expected a checkpoint path without extension (like "
                      "\"ckpts/ss_flow_img_dit_L_16l8_fp16\"), found 3");
}

TEST(PipelineConfigErrors, UnknownSamplerParam) {
  std::string text = replaced(kPipelineJson, "\"rescale_t\": 3.0",
                              "\"rescale_t\": 3.0, \"step\": 12");
  expectPipelineError(
      text, "\"step\"", "args.sparse_structure_sampler.params.step",
      "expected a keyword argument of "
      "FlowEulerGuidanceIntervalSampler.sample() "
      "(\"steps\", \"rescale_t\", \"cfg_strength\", \"cfg_interval\", "
      "\"verbose\"), found unknown key \"step\"");
}

TEST(PipelineConfigErrors, SigmaMinOutOfRange) {
  std::string text = replaced(kPipelineJson, "2e-05", "1.5");
  expectPipelineError(text, "1.5}", "args.slat_sampler.args.sigma_min",
                      "expected a number in [0, 1), found 1.5");
}

TEST(PipelineConfigErrors, MissingCondModel) {
  std::string text = replaced(
      kPipelineJson, ",\n    \"image_cond_model\": \"dinov2_vitl14_reg\"", "");
  expectPipelineError(text, "{\n    \"models\"", "args",
                      "expected key \"image_cond_model\" (a string), found an "
                      "object without it");
}

TEST(PipelineConfigErrors, TextPipelineNeedsTextCondModel) {
  std::string text = replaced(kPipelineJson, "TrellisImageTo3DPipeline",
                              "TrellisTextTo3DPipeline");
  expectPipelineError(text, "{\n    \"models\"", "args",
                      "expected key \"text_cond_model\" (a string), found an "
                      "object without it");
}

TEST(PipelineConfigErrors, NotAnObject) {
  expectPipelineError("[1, 2]", "[", "(top level)",
                      "expected a pipeline object {\"name\": <pipeline "
                      "class>, \"args\": {...}}, found [1, 2]");
}

TEST(PipelineConfigErrors, ReportsEveryErrorOnce) {
  std::string text = replaced(kPipelineJson, "\"steps\": 25", "\"steps\": -3");
  text = replaced(text, "2e-05", "-1");
  text = replaced(text, "2.377650737762451", "-2");
  auto cfg = parsePipelineConfig(text, kFile);
  ASSERT_FALSE(cfg);
  const std::string &m = cfg.message();
  size_t lines = 1;
  for (char c : m)
    lines += c == '\n';
  EXPECT_EQ(lines, 3u) << m;
  EXPECT_NE(m.find("args.sparse_structure_sampler.params.steps: expected a "
                   "positive integer, found -3"),
            std::string::npos);
  EXPECT_NE(m.find("args.slat_sampler.args.sigma_min"), std::string::npos);
  EXPECT_NE(m.find("args.slat_normalization.std[0]: expected a positive "
                   "number, found -2"),
            std::string::npos);
}

TEST(PipelineConfigWarnings, UnknownKeysAreWarnings) {
  std::string text = replaced(kPipelineJson, "\"image_cond_model\"",
                              "\"seed\": 3,\n    \"image_cond_model\"");
  std::vector<Diagnostic> diags;
  auto cfg = parsePipelineConfig(text, kFile, &diags);
  ASSERT_TRUE(cfg) << cfg.message();
  ASSERT_EQ(cfg->warnings.size(), 1u);
  EXPECT_EQ(
      cfg->warnings[0].render(),
      kFile + ":" + lineCol(text, "\"seed\"") +
          ": warning: args.seed: expected a pipeline argument (\"models\", "
          "\"sparse_structure_sampler\", \"slat_sampler\", "
          "\"slat_normalization\", \"image_cond_model\", "
          "\"text_cond_model\"), found unknown key \"seed\"; it is "
          "ignored");
}

// ---- run-time overrides

TEST(SamplerOverrides, MergeOnTopOfTheDefaults) {
  auto cfg = parsePipelineConfig(kPipelineJson, kFile);
  ASSERT_TRUE(cfg);
  const SamplerParams &defaults = cfg->slatSampler.params;
  SamplerOverrides o;
  o.steps = 12;
  o.cfgStrength = 7.5;
  o.origin = "command line";
  auto merged = applyOverrides(defaults, o);
  ASSERT_TRUE(merged) << merged.message();
  EXPECT_EQ(*merged->steps, 12);
  EXPECT_EQ(merged->steps.pos.file, "command line");
  EXPECT_EQ(merged->steps.pos.line, 0u);
  EXPECT_EQ(merged->steps.pos.path, "args.slat_sampler.params.steps");
  EXPECT_EQ(merged->steps.pos.location(), "command line");
  EXPECT_DOUBLE_EQ(*merged->cfgStrength, 7.5);
  // Untouched values keep their pipeline.json positions.
  EXPECT_DOUBLE_EQ(merged->cfgInterval.value[1], 0.95);
  EXPECT_EQ(merged->cfgInterval.pos.location(),
            defaults.cfgInterval.pos.location());
  EXPECT_DOUBLE_EQ(*merged->rescaleT, 2.5);
  EXPECT_EQ(merged->rescaleT.pos.file, kFile);
}

TEST(SamplerOverrides, EmptyOverridesChangeNothing) {
  auto cfg = parsePipelineConfig(kPipelineJson, kFile);
  ASSERT_TRUE(cfg);
  auto merged = applyOverrides(cfg->sparseStructureSampler.params, {});
  ASSERT_TRUE(merged);
  EXPECT_EQ(*merged->steps, 25);
  EXPECT_EQ(merged->steps.pos.location(),
            cfg->sparseStructureSampler.params.steps.pos.location());
}

TEST(SamplerOverrides, AllFourAndOverridingADefault) {
  std::string text = replaced(
      kPipelineJson,
      R"("params": {"steps": 26, "cfg_strength": 3.5, "cfg_interval": [0.5, 0.95], "rescale_t": 2.5})",
      R"("params": {})");
  auto cfg = parsePipelineConfig(text, kFile);
  ASSERT_TRUE(cfg) << cfg.message();
  SamplerOverrides o;
  o.steps = 12;
  o.cfgStrength = 3.0;
  o.cfgInterval = std::array<double, 2>{0.25, 0.75};
  o.rescaleT = 1.5;
  auto merged = applyOverrides(cfg->slatSampler.params, o);
  ASSERT_TRUE(merged) << merged.message();
  EXPECT_EQ(*merged->steps, 12);
  EXPECT_FALSE(merged->steps.defaulted);
  EXPECT_DOUBLE_EQ(*merged->cfgStrength, 3.0);
  EXPECT_DOUBLE_EQ(merged->cfgInterval.value[0], 0.25);
  EXPECT_DOUBLE_EQ(merged->cfgInterval.value[1], 0.75);
  EXPECT_DOUBLE_EQ(*merged->rescaleT, 1.5);
}

TEST(SamplerOverrides, InvalidOverridesNameOriginPathAndDefault) {
  auto cfg = parsePipelineConfig(kPipelineJson, kFile);
  ASSERT_TRUE(cfg);
  SamplerOverrides o;
  o.steps = 0;
  o.cfgInterval = std::array<double, 2>{1.0, 0.0};
  o.rescaleT = -2;
  o.origin = "trellis_run() options";
  auto merged = applyOverrides(cfg->slatSampler.params, o);
  ASSERT_FALSE(merged);
  EXPECT_NE(merged.message().find(
                "trellis_run() options: args.slat_sampler.params.steps: "
                "expected a positive integer no larger than 10000, found 0 "
                "(it replaces 26 from " +
                kFile + ":" + lineCol(kPipelineJson, "26, \"cfg") + ")"),
            std::string::npos)
      << merged.message();
  EXPECT_NE(
      merged.message().find(
          "args.slat_sampler.params.cfg_interval: expected [low, high] "
          "with finite low <= high, found [1, 0] (it replaces [0.5, 0.95]"),
      std::string::npos)
      << merged.message();
  EXPECT_NE(merged.message().find("args.slat_sampler.params.rescale_t: "
                                  "expected a positive number, found -2"),
            std::string::npos)
      << merged.message();
}

// ---- loadPipeline: sidecars, path resolution, cross-model checks

TEST(LoadPipeline, LoadsADirectoryWithAllSidecars) {
  TempDir dir("cfg-load");
  writeConfigDirectory(dir.path());
  std::vector<Diagnostic> diags;
  auto cfg = loadPipeline(dir.path(), &diags);
  ASSERT_TRUE(cfg) << cfg.message();
  EXPECT_EQ(cfg->file, dir.path() + "/pipeline.json");
  for (const ModelRef &ref : cfg->models) {
    ASSERT_TRUE(ref.config) << ref.key;
    EXPECT_EQ(ref.resolved, dir.path() + "/" + *ref.path);
    EXPECT_FALSE(ref.viaRepoFallback);
  }
  const ModelConfig &ss = *cfg->model("sparse_structure_flow_model")->config;
  ASSERT_TRUE(ss.ssFlow());
  EXPECT_EQ(*ss.ssFlow()->modelChannels, 1024);
  EXPECT_EQ(ss.ssFlow()->modelChannels.pos.location(),
            dir.path() + "/ckpts/ss_flow.json:" + lineCol(kSSFlowJson, "1024"));
  EXPECT_EQ(ss.ssFlow()->modelChannels.pos.path, "args.model_channels");
  // A constructor default: positioned at "args", path of the would-be key.
  EXPECT_FALSE(*ss.ssFlow()->qkRmsNormCross);
  EXPECT_TRUE(ss.ssFlow()->qkRmsNormCross.defaulted);
  EXPECT_EQ(ss.ssFlow()->qkRmsNormCross.pos.path, "args.qk_rms_norm_cross");
  EXPECT_EQ(ss.ssFlow()->qkRmsNormCross.pos.location(),
            dir.path() + "/ckpts/ss_flow.json:" +
                lineCol(kSSFlowJson, "{\n    \"resolution\""));
  const ModelConfig &mesh = *cfg->model("slat_decoder_mesh")->config;
  EXPECT_TRUE(mesh.elastic);
  EXPECT_EQ(mesh.kind, ModelKind::SLatMeshDecoder);
  EXPECT_EQ(mesh.slatDecoder()->outChannels(), 101);
  // Also accepts the file itself.
  EXPECT_TRUE(loadPipeline(dir / "pipeline.json"));
}

TEST(LoadPipeline, MissingSidecarNamesThePipelineEntry) {
  TempDir dir("cfg-missing");
  writeConfigDirectory(dir.path());
  std::filesystem::remove(dir / "ckpts/ss_dec.json");
  auto cfg = loadPipeline(dir.path());
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.message().find(
                dir.path() +
                "/pipeline.json:" + lineCol(kPipelineJson, "\"ckpts/ss_dec\"") +
                ": args.models.sparse_structure_decoder: expected a checkpoint "
                "sidecar at " +
                dir.path() + "/ckpts/ss_dec.json, found no such file"),
            std::string::npos)
      << cfg.message();
}

TEST(LoadPipeline, OwnerRepoPathsResolveToASiblingDirectory) {
  TempDir root("cfg-text");
  std::string text = replaced(kPipelineJson, "TrellisImageTo3DPipeline",
                              "TrellisTextTo3DPipeline");
  text = replaced(text, "\"image_cond_model\": \"dinov2_vitl14_reg\"",
                  "\"text_cond_model\": \"openai/clip-vit-large-patch14\"");
  text = replaced(text, "\"ckpts/dec_gs\"",
                  "\"microsoft/TRELLIS-image-large/ckpts/dec_gs\"");
  std::string textDir = root / "TRELLIS-text-base";
  writeConfigDirectory(textDir, text);
  std::filesystem::remove(textDir + "/ckpts/dec_gs.json");
  // Not there yet: the message names both places it looked.
  auto missing = loadPipeline(textDir);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find(
                "args.models.slat_decoder_gs: expected a checkpoint sidecar "
                "at " +
                textDir +
                "/microsoft/TRELLIS-image-large/ckpts/dec_gs.json or, reading "
                "\"microsoft/TRELLIS-image-large/ckpts/dec_gs\" as "
                "\"owner/repo/sub/path\" of a Hugging Face repo, at the "
                "sibling directory " +
                textDir +
                "/../TRELLIS-image-large/ckpts/dec_gs.json, found "
                "no such file"),
            std::string::npos)
      << missing.message();
  writeFile(root / "TRELLIS-image-large/ckpts/dec_gs.json",
            kGaussianDecoderJson);
  auto cfg = loadPipeline(textDir);
  ASSERT_TRUE(cfg) << cfg.message();
  EXPECT_EQ(cfg->pipelineClass, PipelineClass::TextTo3D);
  const ModelRef *gs = cfg->model("slat_decoder_gs");
  ASSERT_TRUE(gs && gs->config);
  EXPECT_TRUE(gs->viaRepoFallback);
  EXPECT_EQ(gs->resolved, textDir + "/../TRELLIS-image-large/ckpts/dec_gs");
  ASSERT_TRUE(cfg->textCondModel);
}

TEST(LoadPipeline, SidecarOfTheWrongFamily) {
  TempDir dir("cfg-family");
  writeConfigDirectory(dir.path());
  writeFile(dir / "ckpts/ss_dec.json", kSSFlowJson);
  auto cfg = loadPipeline(dir.path());
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.message().find(
                dir.path() + "/ckpts/ss_dec.json:" +
                lineCol(kSSFlowJson, "\"SparseStructureFlowModel\"") +
                ": name: expected a sparse structure decoder class for "
                "args.models.sparse_structure_decoder (" +
                dir.path() +
                "/pipeline.json:" + lineCol(kPipelineJson, "\"ckpts/ss_dec\"") +
                "), found \"SparseStructureFlowModel\" (a sparse structure "
                "flow model)"),
            std::string::npos)
      << cfg.message();
}

TEST(LoadPipeline, LatentChannelsMustAgree) {
  TempDir dir("cfg-cross");
  writeConfigDirectory(dir.path());
  std::string dec = replaced(kSSDecoderJson, "\"latent_channels\": 8",
                             "\"latent_channels\": 16");
  writeFile(dir / "ckpts/ss_dec.json", dec);
  auto cfg = loadPipeline(dir.path());
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.message().find(
                dir.path() + "/ckpts/ss_dec.json:" + lineCol(dec, "16") +
                ": args.latent_channels: expected 8 (out_channels of the "
                "sparse structure flow model at " +
                dir.path() + "/ckpts/ss_flow.json:" +
                lineCol(kSSFlowJson, "8,\n    \"model_channels\"") +
                "), found 16"),
            std::string::npos)
      << cfg.message();
}

TEST(LoadPipeline, ResolutionsMustAgree) {
  TempDir dir("cfg-res");
  writeConfigDirectory(dir.path());
  std::string slat =
      replaced(kSLatFlowJson, "\"resolution\": 64", "\"resolution\": 32");
  writeFile(dir / "ckpts/slat_flow.json", slat);
  auto cfg = loadPipeline(dir.path());
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.message().find(
                dir.path() + "/ckpts/slat_flow.json:" + lineCol(slat, "32") +
                ": args.resolution: expected 64 (the sparse structure "
                "decoder's output: latent resolution 16 at"),
            std::string::npos)
      << cfg.message();
  // The decoders (resolution 64) disagree with the flow model (32) too.
  EXPECT_NE(cfg.message().find(
                "/ckpts/dec_gs.json:" + lineCol(kGaussianDecoderJson, "64") +
                ": args.resolution: expected 32"),
            std::string::npos)
      << cfg.message();
}

TEST(LoadPipeline, SidecarSyntaxErrorsKeepTheirPosition) {
  TempDir dir("cfg-syntax");
  writeConfigDirectory(dir.path());
  std::string bad =
      replaced(kSLatFlowJson, "\"num_blocks\": 24,", "\"num_blocks\": 24, %");
  writeFile(dir / "ckpts/slat_flow.json", bad);
  auto cfg = loadPipeline(dir.path());
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.message().find(dir.path() +
                               "/ckpts/slat_flow.json:" + lineCol(bad, "%") +
                               ": args: expected a key in double quotes, "
                               "found '%'"),
            std::string::npos)
      << cfg.message();
}

TEST(LoadPipeline, NormalizationMatchesTheLatentChannels) {
  TempDir dir("cfg-norm");
  std::string text = replaced(kPipelineJson, ", 1.2039363384246826]", "]");
  text = replaced(text, ", 2.684523105621338]", "]");
  writeConfigDirectory(dir.path(), text);
  auto cfg = loadPipeline(dir.path());
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.message().find(
                "args.slat_normalization.mean: expected 8 values (one per "
                "latent channel: out_channels at " +
                dir.path() + "/ckpts/slat_flow.json:"),
            std::string::npos)
      << cfg.message();
}

TEST(LoadPipeline, NoSuchPath) {
  auto cfg = loadPipeline("/nonexistent/model");
  ASSERT_FALSE(cfg);
  EXPECT_EQ(cfg.message(), "/nonexistent/model: expected a pipeline.json "
                           "file, found no such file");
}

} // namespace
