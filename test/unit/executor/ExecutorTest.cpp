// The CPU executor runs traced IR (serialized as a host program) with the
// reference kernels: the flow sampler of spec §3.2–3.3 in its three
// multi-image modes, checked against a direct computation of the same
// recurrence, and errors that name the op's origin.
#include "lib/Target/HostProgram.h"
#include "test/unit/executor/TracedProgram.h"
#include "trellis/Runtime/CpuExecutor.h"
#include "trellis/Trace/Ops.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>

using namespace trellis;
using namespace trellis::trace;

namespace {

/// Program: main(noise [1,2], cond [I,1,2]) = flow_sample with velocity
/// v = x + c (c reshaped to [1,2]); neg_cond = zeros [1,1,2].
Result<Program> buildProgram(mlir::MLIRContext &ctx, int64_t images,
                             const std::string &mode, int64_t steps) {
  Tracer t(ctx);
  t.setModel("test", std::nullopt);
  auto args =
      t.beginFunction("main", {t.tensorType({1, 2}, DType::F32),
                               t.tensorType({images, 1, 2}, DType::F32)});
  SamplerSettings s;
  s.steps = steps;
  s.cfgStrength = 2.0;
  s.multiImage = mode;
  Tensor neg = constant(t, HostTensor(DType::F32, {1, 1, 2}));
  Tensor x = flowSample(args[0], args[1], neg, s, 1,
                        [&](const Tensor &x, const Tensor &, const Tensor &c) {
                          return add(x, reshape(c, {1, 2}));
                        });
  t.endFunction({x});
  return test::tracedProgram(t);
}

/// The same recurrence written directly (spec §3.2, §3.3, §2.3).
std::vector<float> expected(std::vector<float> x,
                            const std::vector<std::vector<float>> &conds,
                            const std::string &mode, int64_t steps) {
  std::vector<double> grid = ref::timeGrid(int(steps), 3.0);
  for (int64_t i = 0; i < steps; ++i) {
    double t = grid[i], dt = grid[i] - grid[i + 1];
    std::vector<float> vc(2, 0.0f);
    for (int j = 0; j < 2; ++j) {
      if (mode == "multidiffusion") {
        float sum = 0;
        for (const auto &c : conds)
          sum += x[j] + c[j];
        vc[j] = sum * (1.0f / float(conds.size()));
      } else {
        const auto &c = conds[mode == "stochastic" ? i % conds.size() : 0];
        vc[j] = x[j] + c[j];
      }
    }
    for (int j = 0; j < 2; ++j) {
      float v = vc[j];
      if (t >= 0.5 && t <= 1.0) // guided: vu = x + 0 (zero neg_cond)
        v = (1.0f + 2.0f) * vc[j] - 2.0f * x[j];
      x[j] = x[j] - float(dt) * v;
    }
  }
  return x;
}

void checkMode(const std::string &mode, int64_t images) {
  mlir::MLIRContext ctx;
  int64_t steps = 7;
  Result<Program> program = buildProgram(ctx, images, mode, steps);
  ASSERT_TRUE(program.isOk()) << program.message();
  CpuExecutor exec(*program, [](const std::string &, const std::string &) {
    return Result<HostTensor>(Error{"no weights"});
  });
  int64_t calls = 0;
  exec.setStepCallback([&](const std::string &, int64_t, int64_t) {
    ++calls;
    return Status::ok();
  });
  HostTensor noise(DType::F32, {1, 2});
  noise.mutableData<float>()[0] = 0.5f;
  noise.mutableData<float>()[1] = -1.25f;
  HostTensor cond(DType::F32, {images, 1, 2});
  std::vector<std::vector<float>> conds;
  for (int64_t i = 0; i < images; ++i) {
    float a = 0.1f * float(i + 1), b = -0.3f * float(i + 2);
    cond.mutableData<float>()[2 * i] = a;
    cond.mutableData<float>()[2 * i + 1] = b;
    conds.push_back({a, b});
  }
  auto out = exec.run("main", {noise, cond});
  ASSERT_TRUE(out.isOk()) << out.message();
  const HostTensor &x = std::get<HostTensor>((*out)[0]);
  std::vector<float> want = expected({0.5f, -1.25f}, conds, mode, steps);
  for (int j = 0; j < 2; ++j)
    EXPECT_NEAR(x.data<float>()[j], want[j], 1e-5f * (1 + std::abs(want[j])))
        << mode << " element " << j;
  EXPECT_EQ(calls, steps);
}

} // namespace

TEST(CpuExecutor, FlowSampleNoMultiImage) { checkMode("none", 1); }
TEST(CpuExecutor, FlowSampleStochastic) { checkMode("stochastic", 3); }
TEST(CpuExecutor, FlowSampleMultidiffusion) { checkMode("multidiffusion", 3); }

TEST(CpuExecutor, ArgumentShapeErrorsNameTheFunction) {
  mlir::MLIRContext ctx;
  Result<Program> program = buildProgram(ctx, 1, "none", 3);
  ASSERT_TRUE(program.isOk()) << program.message();
  CpuExecutor exec(*program, nullptr);
  auto out = exec.run("main", {HostTensor(DType::F32, {1, 3}),
                               HostTensor(DType::F32, {1, 1, 2})});
  ASSERT_FALSE(out.isOk());
  EXPECT_NE(out.message().find("argument 0 of 'main'"), std::string::npos)
      << out.message();
}

TEST(CpuExecutor, KernelErrorsNameTheOpAndItsOrigin) {
  mlir::MLIRContext ctx;
  Tracer t(ctx);
  t.setModel("test_model", std::nullopt);
  t.setWeightLookup([](const std::string &,
                       const std::string &) -> std::optional<WeightInfo> {
    return WeightInfo{DType::F32, {4, 2}};
  });
  auto args = t.beginFunction("main", {t.tensorType({3, 2}, DType::F32)});
  Tensor y;
  {
    Tracer::Scope s(t, "proj");
    y = linear(args[0], t.weight("weight", {4, 2}, DType::F32));
  }
  t.endFunction({y});
  ASSERT_FALSE(t.hasErrors());
  auto serialized = serializeHostProgram(t.module(), {"main"});
  ASSERT_TRUE(mlir::succeeded(serialized));
  auto program =
      Program::parse(serialized->program, serialized->locations, "test");
  ASSERT_TRUE(program.isOk()) << program.message();
  // The checkpoint lacks the tensor at run time.
  CpuExecutor exec(*program, [](const std::string &m, const std::string &n) {
    return Result<HostTensor>(
        Error{"tensor '" + n + "' of " + m + " is missing"});
  });
  auto out = exec.run("main", {HostTensor(DType::F32, {3, 2})});
  ASSERT_FALSE(out.isOk());
  EXPECT_NE(out.message().find("error in 'trellis.weight' in test_model/proj"),
            std::string::npos)
      << out.message();
  EXPECT_NE(out.message().find("ExecutorTest.cpp:"), std::string::npos)
      << out.message();
  EXPECT_NE(out.message().find("tensor 'proj.weight' of test_model is missing"),
            std::string::npos)
      << out.message();
}

// The host program carries each op's class (from its traits), which the GPU
// runtime decides by instead of op names; an unknown class is refused.
TEST(HostProgram, WritesEachOpsClass) {
  mlir::MLIRContext ctx;
  Result<Program> program = buildProgram(ctx, 1, "none", 3);
  ASSERT_TRUE(program.isOk()) << program.message();
  std::map<std::string, OpClass> classes;
  std::function<void(const std::vector<Instr> &)> visit =
      [&](const std::vector<Instr> &body) {
        for (const Instr &instr : body) {
          classes[instr.op] = instr.opClass;
          for (const Region &r : instr.regions)
            visit(r.body);
        }
      };
  for (const Function &f : program->functions())
    visit(f.body);
  EXPECT_EQ(classes.at("trellis.constant"), OpClass::Storage);
  EXPECT_EQ(classes.at("trellis.reshape"), OpClass::Storage);
  EXPECT_EQ(classes.at("trellis.flow_sample"), OpClass::Region);
  EXPECT_EQ(classes.at("trellis.add"), OpClass::Kernel);

  auto serialized = [&] {
    Tracer t(ctx);
    t.setModel("test", std::nullopt);
    auto args = t.beginFunction("main", {t.tensorType({2, 2}, DType::F32)});
    t.endFunction({add(matmul(args[0], args[0]), args[0])});
    return serializeHostProgram(t.module(), {"main"});
  }();
  ASSERT_TRUE(mlir::succeeded(serialized));
  std::string text = serialized->program;
  EXPECT_NE(text.find("\"class\":\"library\""), std::string::npos) << text;
  size_t at = text.find("\"class\":\"kernel\"");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 16, "\"class\":\"gpu\"");
  auto bad = Program::parse(text, serialized->locations, "test.bundle");
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.message().find("has an unknown op class \"gpu\""),
            std::string::npos)
      << bad.message();
}
