//===- MemoryBudgetTest.cpp - The memory planner's choices ----------------===//
//
// parseByteSize (--memory-budget's argument), chooseMemoryForm on plans of
// known sizes (the fastest that fits; the error names the stage) and the
// surface-like voxel set the sparse stages are planned for. The plans of
// image-large itself are checked in test/python/test_memory_budget.py.
//
//===----------------------------------------------------------------------===//
#include "trellis/Runtime/MemoryBudget.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace trellis;

namespace {

constexpr size_t MiB = size_t(1) << 20;

TEST(MemoryBudget, ParsesSizesInBinaryUnits) {
  EXPECT_EQ(parseByteSize("6G").value(), size_t(6) << 30);
  EXPECT_EQ(parseByteSize("6GiB").value(), size_t(6) << 30);
  EXPECT_EQ(parseByteSize("6gb").value(), size_t(6) << 30);
  EXPECT_EQ(parseByteSize("4096M").value(), size_t(4) << 30);
  EXPECT_EQ(parseByteSize("1.5G").value(), size_t(3) << 29);
  EXPECT_EQ(parseByteSize("512k").value(), size_t(512) << 10);
  EXPECT_EQ(parseByteSize("123").value(), size_t(123));
}

TEST(MemoryBudget, RefusesMalformedSizes) {
  for (const char *bad : {"", "G", "6X", "-1G", "6 G", "1.2.3G", "0", "0.1"}) {
    auto r = parseByteSize(bad);
    EXPECT_FALSE(r.isOk()) << bad;
    if (!r.isOk()) {
      EXPECT_NE(r.message().find(bad), std::string::npos) << r.message();
    }
  }
}

PipelineMemoryPlan plan(const char *form, size_t peakMiB,
                        std::vector<std::pair<const char *, size_t>> stages) {
  PipelineMemoryPlan p;
  p.form = form;
  p.lowMemory = std::string(form) == "low-memory";
  p.workspaces = 64 * MiB;
  p.peak = peakMiB * MiB;
  p.voxels = 32768;
  for (auto [name, mib] : stages) {
    StageMemory s;
    s.function = name;
    s.weights = mib * MiB;
    s.voxels = 32768;
    p.stages.push_back(s);
  }
  return p;
}

std::vector<PipelineMemoryPlan> threeForms() {
  return {
      plan("default", 9000, {{"ss_stage", 1700}, {"decode_mesh", 3000}}),
      plan("sequential-branches", 8700,
           {{"ss_stage", 1700}, {"decode_mesh", 3000}}),
      plan("low-memory", 3064, {{"ss_stage", 1700}, {"decode_mesh", 3000}})};
}

TEST(MemoryBudget, TakesTheFastestFormThatFits) {
  auto plans = threeForms();
  EXPECT_EQ(chooseMemoryForm(plans, 80000 * MiB).value().form, "default");
  EXPECT_EQ(chooseMemoryForm(plans, 9000 * MiB).value().form, "default");
  EXPECT_EQ(chooseMemoryForm(plans, 8999 * MiB).value().form,
            "sequential-branches");
  EXPECT_EQ(chooseMemoryForm(plans, 6144 * MiB).value().form, "low-memory");
  EXPECT_EQ(chooseMemoryForm(plans, 3064 * MiB).value().form, "low-memory");
}

TEST(MemoryBudget, NamesTheStageThatDoesNotFit) {
  auto r = chooseMemoryForm(threeForms(), 2048 * MiB);
  ASSERT_FALSE(r.isOk());
  const std::string &m = r.message();
  EXPECT_NE(m.find("budget of 2048 MiB"), std::string::npos) << m;
  EXPECT_NE(m.find("'decode_mesh' needs 3000 MiB"), std::string::npos) << m;
  EXPECT_NE(m.find("3064 MiB in all"), std::string::npos) << m;
  EXPECT_NE(m.find("32768 voxels"), std::string::npos) << m;
}

TEST(MemoryBudget, SurfaceCoordsAreAShellSortedLikeTheBenchScript) {
  HostTensor c = surfaceCoords(20000, 64);
  ASSERT_EQ(c.dim(0), 20000);
  ASSERT_EQ(c.dim(1), 4);
  const int32_t *v = c.data<int32_t>();
  int64_t previous = -1;
  for (int64_t i = 0; i < 20000; ++i) {
    EXPECT_EQ(v[4 * i], 0);
    int64_t flat =
        (int64_t(v[4 * i + 1]) * 64 + v[4 * i + 2]) * 64 + v[4 * i + 3];
    ASSERT_GT(flat, previous) << "not sorted at row " << i;
    previous = flat;
    // Within the shell: about two voxels either side of radius 0.44 * 64.
    double x = v[4 * i + 1] - 31.5, y = v[4 * i + 2] - 31.5,
           z = v[4 * i + 3] - 31.5;
    EXPECT_LT(std::abs(std::sqrt(x * x + y * y + z * z) - 28.16), 2.5);
  }
  EXPECT_EQ(surfaceCoords(0, 64).dim(0), 0);
  EXPECT_EQ(surfaceCoords(int64_t(1) << 20, 8).dim(0), 512); // the whole grid
}

} // namespace
