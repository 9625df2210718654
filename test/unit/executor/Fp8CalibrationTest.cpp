// FP8 calibration (trellis/Runtime/Fp8Calibration.h): the key of every FP8
// linear is its weight's "<model>/<name>" (two linears of one weight share
// it, a plain linear has none), the CPU executor reports each FP8 linear's
// input amax, the calibration keeps the largest, and the scales file names
// a linear that never ran or only saw zeros instead of inventing a scale.
#include "trellis/Runtime/Fp8Calibration.h"
#include "test/unit/executor/TracedProgram.h"
#include "trellis/Runtime/CpuExecutor.h"
#include "trellis/Support/Half.h"
#include "trellis/Trace/Ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

using namespace trellis;
using namespace trellis::trace;

namespace {

/// main(x [3, 4] f16) = plain(fc(fc(x))): two FP8 linears of one weight
/// "fc.weight", then a plain linear "plain.weight".
Result<Program> buildProgram(mlir::MLIRContext &ctx) {
  Tracer t(ctx);
  t.setModel("flow", std::nullopt);
  t.setFp8Linears(true);
  t.setWeightLookup([](const std::string &,
                       const std::string &) -> std::optional<WeightInfo> {
    return WeightInfo{DType::F16, {4, 4}};
  });
  auto args = t.beginFunction("main", {t.tensorType({3, 4}, DType::F16)});
  Tensor y = args[0];
  {
    Tracer::QuantizeFp8 fp8(t);
    Tracer::Scope s(t, "fc");
    Tensor w = t.weight("weight", {4, 4}, DType::F16);
    y = linear(linear(y, w), w);
  }
  {
    Tracer::Scope s(t, "plain");
    y = linear(y, t.weight("weight", {4, 4}, DType::F16));
  }
  t.endFunction({y});
  return test::tracedProgram(t);
}

HostTensor halfTensor(const std::vector<float> &values, Shape shape) {
  HostTensor t(DType::F16, shape);
  for (size_t i = 0; i < values.size(); ++i)
    t.mutableData<uint16_t>()[i] = floatToHalf(values[i]);
  return t;
}

} // namespace

TEST(Fp8Calibration, KeysNameTheWeightOfEachFp8Linear) {
  mlir::MLIRContext ctx;
  auto program = buildProgram(ctx);
  ASSERT_TRUE(program.isOk()) << program.message();
  auto keys = fp8LinearKeys(*program);
  ASSERT_EQ(keys.size(), 2u); // the two FP8 linears, not the plain one
  for (const auto &[instr, key] : keys) {
    EXPECT_EQ(instr->op, "trellis.linear");
    EXPECT_EQ(key, "flow/fc.weight");
  }
  Fp8ProgramKind kind = fp8ProgramKind(*program);
  EXPECT_TRUE(kind.fp8);
  EXPECT_FALSE(kind.staticScales);
  EXPECT_EQ(kind.attentionOps, 0); // the traced program has no attention
  EXPECT_EQ(Fp8Calibration(*program).keys(), 1u);
}

TEST(Fp8Calibration, TheCpuExecutorReportsEachInputsAmaxAndTheLargestIsKept) {
  mlir::MLIRContext ctx;
  auto program = buildProgram(ctx);
  ASSERT_TRUE(program.isOk()) << program.message();
  // W = 2·I: the second FP8 linear's input is twice the first's.
  std::vector<float> w(16, 0.0f);
  for (int i = 0; i < 4; ++i)
    w[size_t(i * 5)] = 2.0f;
  HostTensor weight = halfTensor(w, {4, 4});
  CpuExecutor exec(*program, [&](const std::string &, const std::string &) {
    return Result<HostTensor>(weight);
  });
  Fp8Calibration calibration(*program);
  std::vector<float> seen;
  exec.setFp8Observer([&](const Instr &linear, float amax) {
    seen.push_back(amax);
    calibration.observe(linear, amax);
  });
  std::vector<float> x = {0.5f,  -3.0f, 1.0f, 0.25f, 2.0f,   0.0f,
                          -1.0f, 1.5f,  0.5f, 0.0f,  -0.75f, 1.0f};
  auto out = exec.run("main", {halfTensor(x, {3, 4})});
  ASSERT_TRUE(out.isOk()) << out.message();
  ASSERT_EQ(seen.size(), 2u); // the plain linear is not reported
  EXPECT_FLOAT_EQ(seen[0], 3.0f);
  // E4M3 keeps 2·3 = 6 exactly; the second input's amax is that of the
  // first product, rounded to f16.
  EXPECT_NEAR(seen[1], 6.0f, 6.0f * 0.07f);
  auto json = calibration.toJson({{"runs", 1}});
  ASSERT_TRUE(json.isOk()) << json.message();
  EXPECT_EQ((*json)["format"], "trellis-fp8-activation-scales");
  EXPECT_EQ((*json)["version"], 1);
  EXPECT_EQ((*json)["calibration"]["runs"], 1);
  EXPECT_FLOAT_EQ((*json)["amax"]["flow/fc.weight"].get<float>(),
                  std::max(seen[0], seen[1]));
  // A smaller amax later, and a NaN, leave the maximum as it is.
  for (const auto &[instr, key] : fp8LinearKeys(*program)) {
    calibration.observe(*instr, 0.5f);
    calibration.observe(*instr, std::nanf(""));
  }
  auto again = calibration.toJson({});
  ASSERT_TRUE(again.isOk()) << again.message();
  EXPECT_FLOAT_EQ((*again)["amax"]["flow/fc.weight"].get<float>(),
                  std::max(seen[0], seen[1]));
}

TEST(Fp8Calibration, NoScaleForALinearThatNeverRanOrSawOnlyZeros) {
  mlir::MLIRContext ctx;
  auto program = buildProgram(ctx);
  ASSERT_TRUE(program.isOk()) << program.message();
  Fp8Calibration never(*program);
  auto json = never.toJson({});
  ASSERT_FALSE(json.isOk());
  EXPECT_NE(json.message().find("'flow/fc.weight' never ran"),
            std::string::npos)
      << json.message();
  Fp8Calibration zeros(*program);
  for (const auto &[instr, key] : fp8LinearKeys(*program))
    zeros.observe(*instr, 0.0f);
  EXPECT_EQ(zeros.observed(), 1u);
  json = zeros.toJson({});
  ASSERT_FALSE(json.isOk());
  EXPECT_NE(json.message().find("was all zeros"), std::string::npos)
      << json.message();
}
