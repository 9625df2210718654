//===- ModelConfigTest.cpp - Checkpoint sidecars --------------------------===//

#include "test/unit/config/ConfigFixtures.h"
#include "test/unit/config/ConfigTestUtil.h"

#include "trellis/Config/ModelConfig.h"

#include <gtest/gtest.h>

using namespace trellis;
using namespace trellis::config;
using namespace trellis::testutil;

namespace {

const std::string kFile = "ckpts/model.json";

void expectSidecarError(const std::string &text, const std::string &needle,
                        const std::string &path, const std::string &message) {
  auto cfg = parseModelConfig(text, kFile);
  ASSERT_FALSE(cfg) << "accepted:\n" << text;
  std::string line =
      kFile + ":" + lineCol(text, needle) + ": " + path + ": " + message;
  EXPECT_NE(cfg.message().find(line), std::string::npos)
      << "message:\n"
      << cfg.message() << "\nexpected line:\n"
      << line;
}

TEST(ModelConfig, ParsesEveryImageLargeSidecar) {
  for (const auto &[rel, text] : imageLargeSidecars()) {
    std::vector<Diagnostic> diags;
    auto cfg = parseModelConfig(text, rel + ".json", &diags);
    ASSERT_TRUE(cfg) << rel << ": " << cfg.message();
    EXPECT_TRUE(diags.empty()) << rel;
  }
}

TEST(ModelConfig, SparseStructureFlowArgs) {
  auto cfg = parseModelConfig(kSSFlowJson, kFile);
  ASSERT_TRUE(cfg) << cfg.message();
  EXPECT_EQ(cfg->kind, ModelKind::SparseStructureFlow);
  EXPECT_FALSE(cfg->elastic);
  const SparseStructureFlowArgs *a = cfg->ssFlow();
  ASSERT_TRUE(a);
  EXPECT_EQ(*a->resolution, 16);
  EXPECT_EQ(*a->numHeads, 16);
  EXPECT_EQ(a->headDim(), 64);
  EXPECT_EQ(a->mlpHidden(), 4096);
  EXPECT_EQ(a->numTokens(), 4096);
  EXPECT_TRUE(*a->qkRmsNorm);
  EXPECT_FALSE(*a->shareMod);
  EXPECT_TRUE(a->shareMod.defaulted);
  EXPECT_EQ(*a->numHeadChannels, 64);
  EXPECT_EQ(a->resolution.pos.location(),
            kFile + ":" + lineCol(kSSFlowJson, "16"));
}

TEST(ModelConfig, SLatFlowAndDecoderArgs) {
  auto slat = parseModelConfig(kSLatFlowJson, kFile);
  ASSERT_TRUE(slat) << slat.message();
  EXPECT_TRUE(slat->elastic);
  ASSERT_TRUE(slat->slatFlow()->ioBlockChannels);
  EXPECT_EQ(*slat->slatFlow()->ioBlockChannels->at(0), 128);
  EXPECT_EQ(slat->slatFlow()->ioBlockChannels->at(0).pos.path,
            "args.io_block_channels[0]");
  EXPECT_TRUE(*slat->slatFlow()->useSkipConnection);

  auto gs = parseModelConfig(kGaussianDecoderJson, kFile);
  ASSERT_TRUE(gs) << gs.message();
  const SLatDecoderArgs *d = gs->slatDecoder();
  ASSERT_TRUE(d && d->gaussian());
  EXPECT_EQ(d->outChannels(), 448);
  EXPECT_EQ(*d->attnMode, AttnMode::Swin);
  EXPECT_DOUBLE_EQ(*d->gaussian()->lrRotation, 0.1);
  EXPECT_DOUBLE_EQ(*d->gaussian()->filter3dKernelSize, 0.0009);
  EXPECT_EQ(*d->gaussian()->scalingActivation, ScalingActivation::Softplus);
  EXPECT_EQ(d->gaussian()->voxelSize.pos.path,
            "args.representation_config.voxel_size");

  auto rf = parseModelConfig(kRadianceFieldDecoderJson, kFile);
  ASSERT_TRUE(rf);
  EXPECT_EQ(rf->slatDecoder()->outChannels(), 448);
  auto mesh = parseModelConfig(kMeshDecoderJson, kFile);
  ASSERT_TRUE(mesh);
  EXPECT_EQ(mesh->slatDecoder()->outChannels(), 101);
  auto noColor = parseModelConfig(
      replaced(kMeshDecoderJson, R"({"use_color": true})", "{}"), kFile);
  ASSERT_TRUE(noColor) << noColor.message();
  EXPECT_EQ(noColor->slatDecoder()->outChannels(), 53);
  EXPECT_TRUE(noColor->slatDecoder()->mesh()->useColor.defaulted);

  auto dec = parseModelConfig(kSSDecoderJson, kFile);
  ASSERT_TRUE(dec);
  EXPECT_EQ(dec->ssDecoder()->outputResolution(16), 64);
  EXPECT_EQ(*dec->ssDecoder()->normType, NormType::Layer);
  EXPECT_TRUE(dec->ssDecoder()->normType.defaulted);
}

TEST(ModelConfig, NullNumHeadsDefaultsFromHeadChannels) {
  std::string text =
      replaced(kSSFlowJson, "\"num_heads\": 16", "\"num_heads\": null");
  auto cfg = parseModelConfig(text, kFile);
  ASSERT_TRUE(cfg) << cfg.message();
  EXPECT_EQ(*cfg->ssFlow()->numHeads, 16); // 1024 // 64
  EXPECT_TRUE(cfg->ssFlow()->numHeads.defaulted);
  EXPECT_EQ(cfg->ssFlow()->numHeads.pos.location(),
            kFile + ":" + lineCol(text, "null"));
}

// ---- sidecar errors

TEST(ModelConfigErrors, HeadsMustDivideTheWidth) {
  std::string text =
      replaced(kSSFlowJson, "\"num_heads\": 16", "\"num_heads\": 15");
  expectSidecarError(text, "15", "args.num_heads",
                     "expected a divisor of model_channels 1024 (" + kFile +
                         ":" + lineCol(text, "1024") +
                         "): every head gets model_channels / num_heads "
                         "channels, found 15");
}

TEST(ModelConfigErrors, EncoderClass) {
  std::string text =
      replaced(kSLatFlowJson, "\"ElasticSLatFlowModel\"", "\"SLatEncoder\"");
  expectSidecarError(
      text, "\"SLatEncoder\"", "name",
      "expected a TRELLIS model class used by inference "
      "(SparseStructureFlowModel, SparseStructureDecoder, "
      "SLatFlowModel, ElasticSLatFlowModel, SLatGaussianDecoder, "
      "ElasticSLatGaussianDecoder, SLatRadianceFieldDecoder, "
      "ElasticSLatRadianceFieldDecoder, SLatMeshDecoder, "
      "ElasticSLatMeshDecoder), found \"SLatEncoder\" (an "
      "encoder: inference does not use it)");
}

TEST(ModelConfigErrors, RopeIsNotCompiled) {
  std::string text = replaced(kSSFlowJson, "\"ape\"", "\"rope\"");
  expectSidecarError(text, "\"rope\"", "args.pe_mode",
                     "expected \"ape\", found \"rope\" (rotary position "
                     "embeddings are a TRELLIS option");
}

TEST(ModelConfigErrors, IoStagesMustMatchThePatchSize) {
  std::string text = replaced(kSLatFlowJson, "[128]", "[128, 256]");
  expectSidecarError(text, "[128, 256]", "args.io_block_channels",
                     "expected 1 entry (one per 2x downsample: log2 of "
                     "patch_size 2 at " +
                         kFile + ":" + lineCol(text, "2,\n    \"num_io") +
                         "), found 2");
}

TEST(ModelConfigErrors, PatchSizeMustBeAPowerOfTwo) {
  std::string text =
      replaced(kSLatFlowJson, "\"patch_size\": 2", "\"patch_size\": 3");
  expectSidecarError(text, "3,\n    \"num_io", "args.patch_size",
                     "expected a power of two (each io_block_channels stage "
                     "halves the resolution), found 3");
}

TEST(ModelConfigErrors, GroupNormNeedsMultiplesOf32) {
  std::string text =
      replaced(kSSDecoderJson, "[512, 128, 32]", "[512, 128, 48]");
  text = replaced(text, "\"use_fp16\": true",
                  "\"norm_type\": \"group\",\n    \"use_fp16\": true");
  expectSidecarError(text, "48]", "args.channels[2]",
                     "expected a multiple of 32 (norm_type \"group\" at " +
                         kFile + ":" + lineCol(text, "\"group\"") +
                         " is GroupNorm with 32 groups), found 48");
}

TEST(ModelConfigErrors, MeshDecoderWidth) {
  std::string text = replaced(kMeshDecoderJson, "\"model_channels\": 768",
                              "\"model_channels\": 384");
  expectSidecarError(text, "384", "args.model_channels",
                     "expected a multiple of 256 (the mesh decoder's "
                     "GroupNorm(32) runs on model_channels, model_channels/4 "
                     "and model_channels/8 channels), found 384");
}

TEST(ModelConfigErrors, UnknownArgIsAnError) {
  std::string text = replaced(kSSFlowJson, "\"num_blocks\"", "\"num_block\"");
  auto cfg = parseModelConfig(text, kFile);
  ASSERT_FALSE(cfg);
  // Both the missing arg and the unknown one are reported.
  EXPECT_NE(cfg.message().find(kFile + ":" +
                               lineCol(text, "{\n    \"resolution\"") +
                               ": args: expected key \"num_blocks\" (a "
                               "positive integer), found an object without "
                               "it"),
            std::string::npos)
      << cfg.message();
  EXPECT_NE(cfg.message().find(kFile + ":" + lineCol(text, "\"num_block\"") +
                               ": args.num_block: expected an argument of "
                               "SparseStructureFlowModel (\"resolution\", "),
            std::string::npos)
      << cfg.message();
  EXPECT_NE(cfg.message().find("found unknown key \"num_block\""),
            std::string::npos);
}

TEST(ModelConfigErrors, VoxelSizeMustExceedOne) {
  std::string text = replaced(kGaussianDecoderJson, "\"voxel_size\": 1.5",
                              "\"voxel_size\": 1.0");
  expectSidecarError(text, "1.0,\n      \"num_gaussians\"",
                     "args.representation_config.voxel_size",
                     "expected a number greater than 1 (offset_perturbation "
                     "= atanh((2h - 1) / voxel_size) with |2h - 1| up to 1), "
                     "found 1.0");
}

TEST(ModelConfigErrors, WrongTypes) {
  std::string text =
      replaced(kSSFlowJson, "\"in_channels\": 8", "\"in_channels\": true");
  text = replaced(text, "\"mlp_ratio\": 4", "\"mlp_ratio\": 0");
  text = replaced(text, "\"qk_rms_norm\": true", "\"qk_rms_norm\": 1");
  expectSidecarError(text, "true", "args.in_channels",
                     "expected a positive integer, found true");
  expectSidecarError(text, "0,\n    \"patch_size\"", "args.mlp_ratio",
                     "expected a positive number, found 0");
  expectSidecarError(text, "1,\n    \"use_fp16\"", "args.qk_rms_norm",
                     "expected true or false, found 1");
}

TEST(ModelConfigErrors, SerializedAttentionIsNotCompiled) {
  std::string text =
      replaced(kRadianceFieldDecoderJson, "\"swin\"", "\"shift_window\"");
  expectSidecarError(text, "\"shift_window\"", "args.attn_mode",
                     "expected \"swin\" or \"full\", found \"shift_window\" "
                     "(serialized attention is a TRELLIS option");
}

TEST(ModelConfigErrors, PatchMustDivideResolution) {
  std::string text =
      replaced(kSSFlowJson, "\"patch_size\": 1", "\"patch_size\": 3");
  expectSidecarError(text, "3,\n    \"pe_mode\"", "args.patch_size",
                     "expected a divisor of resolution 16 (" + kFile + ":" +
                         lineCol(text, "16") +
                         "): patchify splits each axis into patches, found 3");
}

TEST(ModelConfigErrors, LimitsKeepSizesSane) {
  std::string text =
      replaced(kSSFlowJson, "\"num_blocks\": 24", "\"num_blocks\": 100000");
  expectSidecarError(text, "100000", "args.num_blocks",
                     "expected a positive integer no larger than 1024, found "
                     "100000");
}

TEST(ModelConfigErrors, MissingRepresentationConfig) {
  std::string text = replaced(
      kGaussianDecoderJson,
      ",\n    \"representation_config\": " + kGaussianRepresentation, "");
  expectSidecarError(text, "{\n    \"resolution\"", "args",
                     "expected key \"representation_config\" (an object), "
                     "found an object without it");
}

TEST(ModelConfigWarnings, UnknownRepresentationKeysAreWarnings) {
  std::string text = replaced(kMeshDecoderJson, R"({"use_color": true})",
                              R"({"use_color": true, "foo": 1})");
  std::vector<Diagnostic> diags;
  auto cfg = parseModelConfig(text, kFile, &diags);
  ASSERT_TRUE(cfg) << cfg.message();
  ASSERT_EQ(cfg->warnings.size(), 1u);
  EXPECT_EQ(cfg->warnings[0].render(),
            kFile + ":" + lineCol(text, "\"foo\"") +
                ": warning: args.representation_config.foo: expected a "
                "representation_config key of ElasticSLatMeshDecoder "
                "(\"use_color\"), found unknown key \"foo\"; it is ignored");
}

} // namespace
