// The C++ tracing API: ops build verified trellis IR, every op carries its
// origin (module path, config position, builder line), and broken rules
// become TraceErrors that name all three.
#include "trellis/Trace/Ops.h"

#include "dialect/TrellisOps.h"

#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace trellis;
using namespace trellis::trace;

namespace {

std::string printLoc(mlir::Location loc) {
  std::string s;
  llvm::raw_string_ostream os(s);
  loc.print(os);
  return s;
}

WeightLookup fakeCheckpoint() {
  return [](const std::string &model,
            const std::string &name) -> std::optional<WeightInfo> {
    if (model != "slat_decoder_gs")
      return std::nullopt;
    if (name == "blocks.0.mlp.mlp.0.weight")
      return WeightInfo{DType::F16, {32, 16}};
    if (name == "blocks.0.mlp.mlp.0.bias")
      return WeightInfo{DType::F16, {32}};
    return std::nullopt;
  };
}

ConfigPos sidecarPos() {
  return ConfigPos{"ckpts/dec.json", 3, 14, "args.model_channels"};
}

} // namespace

TEST(Tracer, BuildsVerifiedIRWithOrigins) {
  mlir::MLIRContext ctx;
  Tracer t(ctx);
  t.setWeightLookup(fakeCheckpoint());
  t.setModel("slat_decoder_gs", sidecarPos());
  auto xType =
      t.tensorType({mlir::ShapedType::kDynamic, 16}, DType::F16, {4096});
  auto args = t.beginFunction("ffn", {xType});
  Tensor y;
  {
    Tracer::Scope block(t, "blocks.0");
    Tracer::Scope mlp(t, "mlp.mlp.0");
    Tensor w = t.weight("weight", {32, 16}, DType::F16);
    Tensor b = t.weight("bias", {32}, DType::F16);
    y = silu(linear(args[0], w, b));
  }
  t.endFunction({y});
  ASSERT_FALSE(t.hasErrors()) << t.errors().front().render();
  ASSERT_TRUE(mlir::succeeded(mlir::verify(t.module())));
  EXPECT_EQ(y.dim(1), 32);
  EXPECT_TRUE(mlir::ShapedType::isDynamic(y.dim(0)));

  // The linear op's location names module path, config value and builder.
  mlir::Operation *linearOp =
      y.value().getDefiningOp()->getOperand(0).getDefiningOp();
  ASSERT_TRUE(mlir::isa<mlir::trellis::LinearOp>(linearOp));
  std::string loc = printLoc(linearOp->getLoc());
  EXPECT_NE(loc.find("\"slat_decoder_gs/blocks.0.mlp.mlp.0\""),
            std::string::npos)
      << loc;
  EXPECT_NE(loc.find("\"config\"(\"ckpts/dec.json\":3:14)"), std::string::npos)
      << loc;
  EXPECT_NE(loc.find("\"builder\"(\"test/unit/trace/TracerTest.cpp\""),
            std::string::npos)
      << loc;

  // The weight op refers to the checkpoint tensor by its full name.
  auto weightOp = mlir::cast<mlir::trellis::WeightOp>(
      linearOp->getOperand(1).getDefiningOp());
  EXPECT_EQ(weightOp.getName(), "blocks.0.mlp.mlp.0.weight");
  EXPECT_EQ(weightOp.getModel(), "slat_decoder_gs");
}

TEST(Tracer, ShapeErrorNamesModuleConfigAndBuilderLine) {
  mlir::MLIRContext ctx;
  Tracer t(ctx);
  t.setWeightLookup(fakeCheckpoint());
  t.setModel("slat_decoder_gs", sidecarPos());
  auto args = t.beginFunction("f", {t.tensorType({4, 8}, DType::F16)});
  Tensor y;
  {
    Tracer::Scope block(t, "blocks.0");
    Tracer::Scope mlp(t, "mlp.mlp.0");
    Tensor w = t.weight("weight", {32, 16}, DType::F16);
    y = linear(args[0], w); // 8 features into a weight expecting 16
    // The failure propagates as an absent tensor without further errors.
    EXPECT_FALSE(silu(y));
  }
  ASSERT_EQ(t.errors().size(), 1u);
  const TraceError &e = t.errors().front();
  EXPECT_NE(e.message.find("input has 8 features but the weight expects 16"),
            std::string::npos)
      << e.message;
  EXPECT_EQ(e.modulePath, "slat_decoder_gs/blocks.0.mlp.mlp.0");
  std::string text = e.render();
  EXPECT_NE(text.find("ckpts/dec.json:3:14: error:"), std::string::npos)
      << text;
  EXPECT_NE(text.find("args.model_channels"), std::string::npos) << text;
  EXPECT_NE(text.find("TracerTest.cpp:"), std::string::npos) << text;
}

TEST(Tracer, WeightProblemsAreReportedAllAtOnce) {
  mlir::MLIRContext ctx;
  Tracer t(ctx);
  t.setWeightLookup(fakeCheckpoint());
  t.setModel("slat_decoder_gs", sidecarPos());
  t.beginFunction("f", {});
  {
    Tracer::Scope block(t, "blocks.0");
    Tracer::Scope mlp(t, "mlp.mlp.0");
    Tensor wrong = t.weight("weight", {32, 8}, DType::F16);
    Tensor missing = t.weight("scale", {32}, DType::F32);
    // Placeholders keep the trace typed so later rules still check.
    EXPECT_TRUE(wrong);
    EXPECT_TRUE(missing);
  }
  ASSERT_EQ(t.errors().size(), 2u);
  EXPECT_NE(t.errors()[0].message.find("is [32, 16] F16 in the checkpoint, but "
                                       "the config implies [32, 8] F16"),
            std::string::npos)
      << t.errors()[0].message;
  EXPECT_NE(t.errors()[1].message.find(
                "'blocks.0.mlp.mlp.0.scale' (expected [32] F32) is missing"),
            std::string::npos)
      << t.errors()[1].message;
}
