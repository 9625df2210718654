// FP8 calibration (trellis/Runtime/Fp8Calibration.h): the key of every FP8
// linear is its weight's "<model>/<name>" (two linears of one weight share
// it, a plain linear has none), of every FP8 attention its q_gamma's; the
// CPU executor reports each FP8 linear's input amax and each FP8
// attention's per-head v amax, the calibration keeps the largest, and the
// scales file names an op that never ran or only saw zeros instead of
// inventing a scale.
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

/// main(x [1, 8, 2, 64] f16) = the FP8 self-attention of x with the head
/// norms "attn.q_gamma" / "attn.k_gamma" ([2, 64] f32).
Result<Program> buildAttentionProgram(mlir::MLIRContext &ctx) {
  Tracer t(ctx);
  t.setModel("flow", std::nullopt);
  t.setFp8Linears(true);
  t.setWeightLookup([](const std::string &,
                       const std::string &) -> std::optional<WeightInfo> {
    return WeightInfo{DType::F32, {2, 64}};
  });
  auto args =
      t.beginFunction("main", {t.tensorType({1, 8, 2, 64}, DType::F16)});
  Tensor y;
  {
    Tracer::QuantizeFp8 fp8(t);
    Tracer::Scope s(t, "attn");
    HeadNorms norms{t.weight("q_gamma", {2, 64}, DType::F32),
                    t.weight("k_gamma", {2, 64}, DType::F32)};
    y = attention(args[0], args[0], args[0], 0.125, &norms);
  }
  t.endFunction({y});
  return test::tracedProgram(t);
}

/// One value, as an FP8 linear reports it.
std::span<const float> one(const float &amax) { return {&amax, 1}; }

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
  exec.setFp8Observer([&](const Instr &linear, std::span<const float> amax) {
    ASSERT_EQ(amax.size(), 1u);
    seen.push_back(amax[0]);
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
    calibration.observe(*instr, one(0.5f));
    calibration.observe(*instr, one(std::nanf("")));
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
    zeros.observe(*instr, one(0.0f));
  EXPECT_EQ(zeros.observed(), 1u);
  json = zeros.toJson({});
  ASSERT_FALSE(json.isOk());
  EXPECT_NE(json.message().find("was all zeros"), std::string::npos)
      << json.message();
}

TEST(Fp8Calibration, AttentionReportsTheLargestVOfEachHeadUnderItsQGamma) {
  mlir::MLIRContext ctx;
  auto program = buildAttentionProgram(ctx);
  ASSERT_TRUE(program.isOk()) << program.message();
  auto keys = fp8AttentionKeys(*program);
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys.begin()->second, "flow/attn.q_gamma");
  EXPECT_EQ(fp8ProgramKind(*program).attentionOps, 1);
  // v = x: head 0 holds 0.5 everywhere but one 3.0, head 1 holds -0.25 and
  // one -7.0.
  std::vector<float> x(8 * 2 * 64);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = (i / 64) % 2 == 0 ? 0.5f : -0.25f;
  x[3 * 128 + 5] = 3.0f;
  x[6 * 128 + 64 + 9] = -7.0f;
  HostTensor gamma(DType::F32, {2, 64});
  for (int64_t i = 0; i < 128; ++i)
    gamma.mutableData<float>()[i] = 1.0f;
  CpuExecutor exec(*program, [&](const std::string &, const std::string &) {
    return Result<HostTensor>(gamma);
  });
  Fp8Calibration calibration(*program);
  std::vector<std::vector<float>> seen;
  exec.setFp8Observer([&](const Instr &op, std::span<const float> amax) {
    seen.emplace_back(amax.begin(), amax.end());
    calibration.observe(op, amax);
  });
  auto out = exec.run("main", {halfTensor(x, {1, 8, 2, 64})});
  ASSERT_TRUE(out.isOk()) << out.message();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::vector<float>{3.0f, 7.0f}));
  // A smaller value later leaves each head's maximum.
  const float later[2] = {4.0f, 1.0f};
  calibration.observe(*keys.begin()->first, later);
  auto json = calibration.toJson({});
  ASSERT_TRUE(json.isOk()) << json.message();
  EXPECT_EQ((*json)["v_amax"]["flow/attn.q_gamma"],
            nlohmann::json({4.0f, 7.0f}));
  // A head whose v was all zeros has no scale.
  Fp8Calibration zeros(*program);
  const float zero[2] = {1.0f, 0.0f};
  zeros.observe(*keys.begin()->first, zero);
  json = zeros.toJson({});
  ASSERT_FALSE(json.isOk());
  EXPECT_NE(json.message().find("v of head 1 of the attention whose q_gamma "
                                "is 'flow/attn.q_gamma' was all zeros"),
            std::string::npos)
      << json.message();
}
