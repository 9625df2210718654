//===- WeightProviderTest.cpp - Weights from a model directory ------------===//
//
// modelDirectoryWeights, the provider trellis.exe and libtrellis_rt.so bind
// `trellis.weight` ops with: a checkpoint truncated after the run opened it
// is an error naming the file and the tensor (was SIGBUS in the kernel that
// touched the mapping).
//
//===----------------------------------------------------------------------===//
#include "trellis/Format/Safetensors.h"
#include "trellis/Runtime/Runner.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <unistd.h>

using namespace trellis;
namespace fs = std::filesystem;

namespace {

/// A model directory with ckpts/m.safetensors: w = F32[128, 128] of 1.5.
fs::path makeModelDir(const std::string &tag) {
  fs::path dir = fs::temp_directory_path() /
                 ("trellis-weights-" + tag + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "ckpts");
  std::vector<TensorSpec> specs = {{"w", DType::F32, {128, 128}}};
  EXPECT_TRUE(writeSafetensors((dir / "ckpts/m.safetensors").string(), specs,
                               [](size_t, void *dst) {
                                 auto *p = static_cast<float *>(dst);
                                 for (int i = 0; i < 128 * 128; ++i)
                                   p[i] = 1.5f;
                               })
                  .isOk());
  return dir;
}

} // namespace

TEST(ModelDirectoryWeights, ReadsOwnedCopies) {
  fs::path dir = makeModelDir("ok");
  WeightProvider weights = modelDirectoryWeights(
      nlohmann::json{{"m", "ckpts/m.safetensors"}}, dir.string());
  auto w = weights("m", "w");
  ASSERT_TRUE(w.isOk()) << w.message();
  EXPECT_EQ(w->shape(), (Shape{128, 128}));
  EXPECT_EQ(w->data<float>()[128 * 128 - 1], 1.5f);
  auto missing = weights("m", "nope");
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(missing.message().find("tensor 'nope' is missing from"),
            std::string::npos)
      << missing.message();
  fs::remove_all(dir);
}

TEST(ModelDirectoryWeights, ShapesComeFromTheSameFilesUnread) {
  // The shapes provider (Engine::create's weight check) hands out views:
  // dtype and shape without a byte read, from the files the run reads.
  fs::path dir = makeModelDir("shapes");
  std::string path = (dir / "ckpts/m.safetensors").string();
  WeightProvider shapes;
  WeightProvider weights = modelDirectoryWeights(
      nlohmann::json{{"m", "ckpts/m.safetensors"}}, dir.string(), &shapes);
  ASSERT_TRUE(shapes);
  auto view = shapes("m", "w");
  ASSERT_TRUE(view.isOk()) << view.message();
  EXPECT_EQ(view->shape(), (Shape{128, 128}));
  EXPECT_TRUE(view->isReadOnly()); // a view into the mapping
  // The file opened for the check is the one the run reads: changed since,
  // it is refused.
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  auto w = weights("m", "w");
  ASSERT_FALSE(w.isOk());
  EXPECT_NE(w.message().find("changed while in use"), std::string::npos)
      << w.message();
  fs::remove_all(dir);
}

TEST(ModelDirectoryWeights, CheckpointTruncatedDuringTheRun) {
  fs::path dir = makeModelDir("trunc");
  std::string path = (dir / "ckpts/m.safetensors").string();
  WeightProvider weights = modelDirectoryWeights(
      nlohmann::json{{"m", "ckpts/m.safetensors"}}, dir.string());
  ASSERT_TRUE(weights("m", "w").isOk()); // opened (and mapped) here
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  auto w = weights("m", "w"); // the second step's read
  ASSERT_FALSE(w.isOk());
  EXPECT_NE(w.message().find("'" + path + "' changed while in use"),
            std::string::npos)
      << w.message();
  EXPECT_NE(w.message().find("it is 4096 bytes now"), std::string::npos)
      << w.message();
  EXPECT_NE(w.message().find("cannot read tensor 'w'"), std::string::npos)
      << w.message();
  fs::remove_all(dir);
}
