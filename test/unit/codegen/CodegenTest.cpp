//===- CodegenTest.cpp - generateKernels end to end, PTX through ptxas ----===//
#include "trellis/Codegen/Codegen.h"

#include "dialect/TrellisDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>

using namespace mlir;

namespace {

// A slice of the SS flow and decoder at small sizes: every kernel family.
constexpr const char *kModule = R"mlir(
func.func @block(%x: tensor<1x64x128xf16>, %ada: tensor<1x768xf16>, %w: tensor<128xf32>,
                 %q: tensor<1x64x2x64xf16>, %g: tensor<2x64xf32>, %t: tensor<1xf32>,
                 %c: tensor<1x16x8x8x8xf16>, %cw: tensor<16x16x3x3x3xf16>, %cg: tensor<16xf32>,
                 %p: tensor<1x128x4x4x4xf16>, %pos: tensor<64x128xf16>)
    attributes {trellis.device = "cuda"} {
  %s:6 = trellis.split %ada {axis = 1 : i64, sizes = array<i64: 128, 128, 128, 128, 128, 128>} : (tensor<1x768xf16>) -> (tensor<1x128xf16>, tensor<1x128xf16>, tensor<1x128xf16>, tensor<1x128xf16>, tensor<1x128xf16>, tensor<1x128xf16>)
  %a = trellis.add %x, %pos : (tensor<1x64x128xf16>, tensor<64x128xf16>) -> tensor<1x64x128xf16>
  %n = trellis.layer_norm %a, %w, %w {eps = 1.0e-06 : f64} : (tensor<1x64x128xf16>, tensor<128xf32>, tensor<128xf32>) -> tensor<1x64x128xf16>
  %m = trellis.layer_norm_modulate %n, %s#0, %s#1 {eps = 1.0e-06 : f64} : (tensor<1x64x128xf16>, tensor<1x128xf16>, tensor<1x128xf16>) -> tensor<1x64x128xf16>
  %h = trellis.gelu %m : tensor<1x64x128xf16>
  %r = trellis.gated_residual %a, %h, %s#2 : (tensor<1x64x128xf16>, tensor<1x64x128xf16>, tensor<1x128xf16>) -> tensor<1x64x128xf16>
  %k = trellis.head_rms_norm %q, %g : (tensor<1x64x2x64xf16>, tensor<2x64xf32>) -> tensor<1x64x2x64xf16>
  %e = trellis.timestep_embedding %t : (tensor<1xf32>) -> tensor<1x256xf32>
  %f = trellis.cast %e : (tensor<1x256xf32>) -> tensor<1x256xf16>
  %l = trellis.layer_norm %c, %cg, %cg {axis = 1 : i64, eps = 1.0e-05 : f64} : (tensor<1x16x8x8x8xf16>, tensor<16xf32>, tensor<16xf32>) -> tensor<1x16x8x8x8xf16>
  %v = trellis.conv3d %l, %cw : (tensor<1x16x8x8x8xf16>, tensor<16x16x3x3x3xf16>) -> tensor<1x16x8x8x8xf16>
  %u = trellis.pixel_shuffle_3d %p : (tensor<1x128x4x4x4xf16>) -> tensor<1x16x8x8x8xf16>
  %o = trellis.permute %x {perm = array<i64: 0, 2, 1>} : (tensor<1x64x128xf16>) -> tensor<1x128x64xf16>
  %z = trellis.concat %x, %x {axis = 2 : i64} : (tensor<1x64x128xf16>, tensor<1x64x128xf16>) -> tensor<1x64x256xf16>
  return
}
func.func @velocity(%x: tensor<1x8x4x4x4xf32>, %t: tensor<1xf32>, %c: tensor<1x4x16xf32>) -> tensor<1x8x4x4x4xf32>
    attributes {trellis.device = "cuda"} {
  %s = trellis.silu %x : tensor<1x8x4x4x4xf32>
  return %s : tensor<1x8x4x4x4xf32>
}
func.func @sampler(%noise: tensor<1x8x4x4x4xf32>, %cond: tensor<1x4x16xf32>) -> tensor<1x8x4x4x4xf32>
    attributes {trellis.device = "cuda"} {
  %0 = trellis.flow_sample %noise, %cond, %cond {cfg_interval = array<f64: 5.000000e-01, 1.000000e+00>, cfg_strength = 7.500000e+00 : f64, rescale_t = 3.000000e+00 : f64, steps = 25 : i64} : (tensor<1x8x4x4x4xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x8x4x4x4xf32> {
  ^bb0(%x: tensor<1x8x4x4x4xf32>, %t: tensor<1xf32>, %c: tensor<1x4x16xf32>):
    %v = func.call @velocity(%x, %t, %c) : (tensor<1x8x4x4x4xf32>, tensor<1xf32>, tensor<1x4x16xf32>) -> tensor<1x8x4x4x4xf32>
    trellis.yield %v : tensor<1x8x4x4x4xf32>
  }
  return %0 : tensor<1x8x4x4x4xf32>
}
)mlir";

// The sparse stages' ops with dynamic rows (bound 4096): every family that
// takes `i64 rows` (elementwise with static broadcasts, casts, the
// modulations, row norms in registers and looping over long rows, split /
// concat along axis 1, the sampler update, a 3×3×3 sparse conv's gather and
// tap sum, subdivide_features, the group norm's normalization), plus
// host-evaluated and library ops that get no kernel.
constexpr const char *kDynamicModule = R"mlir(
func.func @rows(%x: tensor<?x128xf16, #trellis.bounds<[4096]>>, %b: tensor<128xf16>, %r: tensor<1x128xf16>,
                %f: tensor<?x128xf32, #trellis.bounds<[4096]>>, %long: tensor<?x16384xf32, #trellis.bounds<[4096]>>,
                %q: tensor<?x2x64xf16, #trellis.bounds<[4096]>>, %g: tensor<2x64xf32>, %w: tensor<128xf32>,
                %ct: tensor<?x4xi32, #trellis.bounds<[4096]>>, %o: tensor<?x32x3xf32, #trellis.bounds<[4096]>>,
                %wc: tensor<128x3x3x3x128xf16>)
    attributes {trellis.device = "cuda"} {
  %half = trellis.constant dense<5.000000e-01> : tensor<1xf32>
  %a = trellis.add %x, %b : (tensor<?x128xf16, #trellis.bounds<[4096]>>, tensor<128xf16>) -> tensor<?x128xf16, #trellis.bounds<[4096]>>
  %m = trellis.mul %a, %r : (tensor<?x128xf16, #trellis.bounds<[4096]>>, tensor<1x128xf16>) -> tensor<?x128xf16, #trellis.bounds<[4096]>>
  %c = trellis.cast %f : (tensor<?x128xf32, #trellis.bounds<[4096]>>) -> tensor<?x128xf16, #trellis.bounds<[4096]>>
  %s = trellis.silu %c : tensor<?x128xf16, #trellis.bounds<[4096]>>
  %n = trellis.layer_norm %s, %w, %w {eps = 1.0e-06 : f64} : (tensor<?x128xf16, #trellis.bounds<[4096]>>, tensor<128xf32>, tensor<128xf32>) -> tensor<?x128xf16, #trellis.bounds<[4096]>>
  %ln = trellis.layer_norm %long {eps = 1.0e-05 : f64} : (tensor<?x16384xf32, #trellis.bounds<[4096]>>) -> tensor<?x16384xf32, #trellis.bounds<[4096]>>
  %l = trellis.layer_norm_modulate %n, %a, %m {eps = 1.0e-06 : f64} : (tensor<?x128xf16, #trellis.bounds<[4096]>>, tensor<?x128xf16, #trellis.bounds<[4096]>>, tensor<?x128xf16, #trellis.bounds<[4096]>>) -> tensor<?x128xf16, #trellis.bounds<[4096]>>
  %h = trellis.head_rms_norm %q, %g : (tensor<?x2x64xf16, #trellis.bounds<[4096]>>, tensor<2x64xf32>) -> tensor<?x2x64xf16, #trellis.bounds<[4096]>>
  %e = trellis.gated_residual %l, %a, %m : (tensor<?x128xf16, #trellis.bounds<[4096]>>, tensor<?x128xf16, #trellis.bounds<[4096]>>, tensor<?x128xf16, #trellis.bounds<[4096]>>) -> tensor<?x128xf16, #trellis.bounds<[4096]>>
  %k = trellis.concat %e, %l {axis = 1 : i64} : (tensor<?x128xf16, #trellis.bounds<[4096]>>, tensor<?x128xf16, #trellis.bounds<[4096]>>) -> tensor<?x256xf16, #trellis.bounds<[4096]>>
  %sp:2 = trellis.split %k {axis = 1 : i64, sizes = array<i64: 64, 192>} : (tensor<?x256xf16, #trellis.bounds<[4096]>>) -> (tensor<?x64xf16, #trellis.bounds<[4096]>>, tensor<?x192xf16, #trellis.bounds<[4096]>>)
  %co = trellis.sparse.from_tensor %ct {resolution = 16 : i64} : (tensor<?x4xi32, #trellis.bounds<[4096]>>) -> !trellis.coords<resolution = 16, bound = 4096>
  %xyz = trellis.sparse.xyz %co : (!trellis.coords<resolution = 16, bound = 4096>) -> tensor<?x3xi32, #trellis.bounds<[4096]>>
  %xf = trellis.cast %xyz : (tensor<?x3xi32, #trellis.bounds<[4096]>>) -> tensor<?x3xf32, #trellis.bounds<[4096]>>
  %xh = trellis.add %xf, %half : (tensor<?x3xf32, #trellis.bounds<[4096]>>, tensor<1xf32>) -> tensor<?x3xf32, #trellis.bounds<[4096]>>
  %xr = trellis.reshape %xh : (tensor<?x3xf32, #trellis.bounds<[4096]>>) -> tensor<?x1x3xf32, #trellis.bounds<[4096]>>
  %pos = trellis.add %xr, %o : (tensor<?x1x3xf32, #trellis.bounds<[4096]>>, tensor<?x32x3xf32, #trellis.bounds<[4096]>>) -> tensor<?x32x3xf32, #trellis.bounds<[4096]>>
  %bi = trellis.sparse.batch_index %co : (!trellis.coords<resolution = 16, bound = 4096>) -> tensor<?xi32, #trellis.bounds<[4096]>>
  %bb = trellis.gather_rows %r, %bi : (tensor<1x128xf16>, tensor<?xi32, #trellis.bounds<[4096]>>) -> tensor<?x128xf16, #trellis.bounds<[4096]>>
  %nb = trellis.sparse.neighbor_map %co {kernel = 3 : i64} : (!trellis.coords<resolution = 16, bound = 4096>) -> !trellis.neighbor_map<kernel = 3, bound = 4096>
  %cv = trellis.sparse.conv3d %x, %wc, %b neighbors %nb : (tensor<?x128xf16, #trellis.bounds<[4096]>>, tensor<128x3x3x3x128xf16>, tensor<128xf16>, !trellis.neighbor_map<kernel = 3, bound = 4096>) -> tensor<?x128xf16, #trellis.bounds<[4096]>>
  %fine = trellis.sparse.subdivide_features %cv : (tensor<?x128xf16, #trellis.bounds<[4096]>>) -> tensor<?x128xf16, #trellis.bounds<[32768]>>
  %gn = trellis.sparse.group_norm %cv, %co, %w, %w {eps = 1.000000e-05 : f64, groups = 32 : i64} : (tensor<?x128xf16, #trellis.bounds<[4096]>>, !trellis.coords<resolution = 16, bound = 4096>, tensor<128xf32>, tensor<128xf32>) -> tensor<?x128xf16, #trellis.bounds<[4096]>>
  return
}
func.func @sampler(%noise: tensor<?x8xf32, #trellis.bounds<[4096]>>, %cond: tensor<1x4x16xf32>) -> tensor<?x8xf32, #trellis.bounds<[4096]>>
    attributes {trellis.device = "cuda"} {
  %0 = trellis.flow_sample %noise, %cond, %cond {cfg_interval = array<f64: 5.000000e-01, 1.000000e+00>, cfg_strength = 7.500000e+00 : f64, rescale_t = 3.000000e+00 : f64, steps = 25 : i64} : (tensor<?x8xf32, #trellis.bounds<[4096]>>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<?x8xf32, #trellis.bounds<[4096]>> {
  ^bb0(%x: tensor<?x8xf32, #trellis.bounds<[4096]>>, %t: tensor<1xf32>, %c: tensor<1x4x16xf32>):
    trellis.yield %x : tensor<?x8xf32, #trellis.bounds<[4096]>>
  }
  return %0 : tensor<?x8xf32, #trellis.bounds<[4096]>>
}
)mlir";

/// The parameter list of kernel `name` in `ptx` (empty if not defined).
std::string entryParams(const std::string &ptx, const std::string &name) {
  size_t at = ptx.find(".entry " + name + "(");
  if (at == std::string::npos)
    return "";
  size_t end = ptx.find(')', at);
  return ptx.substr(at, end - at);
}

class CodegenTest : public ::testing::Test {
protected:
  CodegenTest() {
    context.loadDialect<mlir::trellis::TrellisDialect, func::FuncDialect,
                        arith::ArithDialect>();
  }
  OwningOpRef<ModuleOp> parse(const char *text) {
    return parseSourceString<ModuleOp>(text, &context);
  }
  MLIRContext context;
};

/// ptxas's complaint about `ptx` for `arch` (empty when it assembles).
std::string ptxasErrors(const std::string &ptx, const char *arch) {
  return ::trellis::codegen::assembleWithPtxas(ptx, arch).error;
}

TEST_F(CodegenTest, AnnotatesAndLowersEveryFamily) {
  OwningOpRef<ModuleOp> module = parse(kModule);
  ASSERT_TRUE(module);
  FailureOr<::trellis::codegen::GeneratedKernels> k =
      ::trellis::codegen::generateKernels(*module, {});
  ASSERT_TRUE(succeeded(k));
  // split, add, 2 layer_norm, layer_norm_modulate, gelu, gated_residual,
  // head_rms_norm, timestep_embedding, cast, im2col, pixel_shuffle, permute,
  // concat, silu, flow update.
  EXPECT_EQ(k->numKernels, 16);
  EXPECT_NE(k->ptxSm90a.find(".target sm_90a"), std::string::npos);
  EXPECT_NE(k->ptxCompute75.find(".target sm_75"), std::string::npos);
  EXPECT_EQ(k->ptxSm90a.find(".extern"), std::string::npos);

  int launches = 0, updates = 0, scratch = 0;
  module->walk([&](Operation *op) {
    if (auto l = op->getAttrOfType<DictionaryAttr>("trellis.launch")) {
      ++launches;
      auto name = l.getAs<StringAttr>("kernel");
      ASSERT_TRUE(name);
      // Both PTX modules define every annotated kernel.
      EXPECT_NE(k->ptxSm90a.find(".entry " + name.str() + "("),
                std::string::npos)
          << name.str();
      EXPECT_NE(k->ptxCompute75.find(".entry " + name.str() + "("),
                std::string::npos)
          << name.str();
      auto grid = l.getAs<DenseI64ArrayAttr>("grid");
      auto block = l.getAs<DenseI64ArrayAttr>("block");
      ASSERT_TRUE(grid && block);
      EXPECT_EQ(grid.size(), 3);
      EXPECT_EQ(block.asArrayRef()[0], 256);
      EXPECT_GE(grid.asArrayRef()[0], 1);
    }
    if (op->hasAttr("trellis.update"))
      ++updates;
    if (auto s = op->getAttrOfType<IntegerAttr>("trellis.scratch_bytes")) {
      ++scratch;
      // col [16·27, 8·8·8] f16.
      EXPECT_EQ(s.getInt(), 16 * 27 * 512 * 2);
    }
  });
  EXPECT_EQ(launches, 15); // every generated op and the conv
  EXPECT_EQ(updates, 1);
  EXPECT_EQ(scratch, 1);

  if (!::trellis::codegen::assembleWithPtxas("", "sm_90a").found)
    GTEST_SKIP() << "the CUDA toolkit has no ptxas";
  // generateKernels assembled the sm_90a PTX itself (the bundle's cubin).
  EXPECT_FALSE(k->cubinSm90a.empty());
  EXPECT_EQ(ptxasErrors(k->ptxSm90a, "sm_90a"), "");
  EXPECT_EQ(ptxasErrors(k->ptxCompute75, "sm_75"), "");
}

TEST_F(CodegenTest, DynamicRowKernelsTakeRowsAndLower) {
  OwningOpRef<ModuleOp> module = parse(kDynamicModule);
  ASSERT_TRUE(module);
  FailureOr<::trellis::codegen::GeneratedKernels> k =
      ::trellis::codegen::generateKernels(*module, {});
  ASSERT_TRUE(succeeded(k));
  // add, mul, cast, silu, 2 layer_norm, layer_norm_modulate, head_rms_norm,
  // gated_residual, concat, split, the add of the host-derived positions,
  // the gather of the per-sample row by batch_index (trellis-partition-cuda's
  // batch_broadcast), the conv's gather and tap sum, subdivide_features,
  // the group norm, flow update (the xyz cast / add are evaluated on the
  // host).
  EXPECT_EQ(k->numKernels, 18);
  int dynamic = 0;
  auto check = [&](Operation *op, DictionaryAttr l, unsigned expected,
                   int64_t rows) {
    ++dynamic;
    std::string name = l.getAs<StringAttr>("kernel").str();
    auto tpr = l.getAs<IntegerAttr>("threads_per_row");
    ASSERT_TRUE(tpr) << name;
    EXPECT_GE(tpr.getInt(), 1) << name;
    // The launch for the bound covers bound · T threads.
    auto grid = l.getAs<DenseI64ArrayAttr>("grid").asArrayRef();
    EXPECT_EQ(grid[0], (rows * tpr.getInt() + 255) / 256) << name;
    for (const std::string *ptx : {&k->ptxSm90a, &k->ptxCompute75}) {
      std::string params = entryParams(*ptx, name);
      ASSERT_FALSE(params.empty()) << name;
      std::regex param(R"(\.param\s+\.(\w+))");
      std::vector<std::string> types;
      for (std::sregex_iterator it(params.begin(), params.end(), param), e;
           it != e; ++it)
        types.push_back((*it)[1]);
      ASSERT_EQ(types.size(), expected) << name << "\n" << params;
      EXPECT_EQ(types.back(), "u64") << name;
    }
  };
  module->walk([&](Operation *op) {
    StringRef n = op->getName().getStringRef();
    if (auto l = op->getAttrOfType<DictionaryAttr>("trellis.update")) {
      // 4 pointers, strength, dt, guided, rows.
      check(op, l, 8, 4096);
    } else if (n == "trellis.sparse.conv3d") {
      // Gather: x, neighbours, col, row0, rows (the chunk: the whole bound
      // here); tap sum: y, neighbours, bias, out, rows, rowsIn.
      check(op, op->getAttrOfType<DictionaryAttr>("trellis.launch"), 5, 4096);
      check(op, op->getAttrOfType<DictionaryAttr>("trellis.tap_sum"), 6, 4096);
    } else if (n == "trellis.sparse.group_norm") {
      // x, coords, γ, β, out, the statistics, rows.
      check(op, op->getAttrOfType<DictionaryAttr>("trellis.launch"), 7, 4096);
    } else if (auto l = op->getAttrOfType<DictionaryAttr>("trellis.launch")) {
      // One pointer per operand and result, then `rows` (the result's).
      int64_t rows = n == "trellis.sparse.subdivide_features" ? 8 * 4096 : 4096;
      check(op, l, op->getNumOperands() + op->getNumResults() + 1, rows);
    }
  });
  EXPECT_EQ(dynamic, 18);
  // Ops the runtime runs itself carry no annotation.
  module->walk([&](Operation *op) {
    StringRef n = op->getName().getStringRef();
    if ((n.starts_with("trellis.sparse.") && n != "trellis.sparse.conv3d" &&
         n != "trellis.sparse.subdivide_features" &&
         n != "trellis.sparse.group_norm") ||
        (n == "trellis.cast" &&
         cast<RankedTensorType>(op->getOperand(0).getType())
             .getElementType()
             .isInteger(32))) {
      EXPECT_FALSE(op->hasAttr("trellis.launch")) << n.str();
    }
  });

  if (!::trellis::codegen::assembleWithPtxas("", "sm_90a").found)
    GTEST_SKIP() << "the CUDA toolkit has no ptxas";
  // generateKernels assembled the sm_90a PTX itself (the bundle's cubin).
  EXPECT_FALSE(k->cubinSm90a.empty());
  EXPECT_EQ(ptxasErrors(k->ptxSm90a, "sm_90a"), "");
  EXPECT_EQ(ptxasErrors(k->ptxCompute75, "sm_75"), "");
}

TEST_F(CodegenTest, OnlyCudaFunctionsAndNoPortablePtx) {
  OwningOpRef<ModuleOp> module = parse(R"mlir(
func.func @cpu(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = trellis.silu %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func @gpu(%x: tensor<4xf32>) -> tensor<4xf32> attributes {trellis.device = "cuda"} {
  %0 = trellis.silu %x : tensor<4xf32>
  %1 = trellis.silu %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}
)mlir");
  ASSERT_TRUE(module);
  ::trellis::codegen::CodegenOptions options;
  options.portablePtx = false;
  auto k = ::trellis::codegen::generateKernels(*module, options);
  ASSERT_TRUE(succeeded(k));
  EXPECT_EQ(k->numKernels, 1); // deduplicated
  EXPECT_TRUE(k->ptxCompute75.empty());
  auto cpu = module->lookupSymbol<func::FuncOp>("cpu");
  cpu.walk([](Operation *op) { EXPECT_FALSE(op->hasAttr("trellis.launch")); });
}

TEST_F(CodegenTest, FailsAtTheOpWithoutGpuImplementation) {
  OwningOpRef<ModuleOp> module = parse(R"mlir(
func.func @f(%p: tensor<16xf32>) -> tensor<16xf32> attributes {trellis.device = "cuda"} {
  %0 = arith.addf %p, %p : tensor<16xf32> loc("addf.mlir":7:3)
  return %0 : tensor<16xf32>
}
)mlir");
  ASSERT_TRUE(module);
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    llvm::raw_string_ostream os(message);
    os << d.getLocation() << ": " << d.str();
    return success();
  });
  EXPECT_TRUE(failed(::trellis::codegen::generateKernels(*module, {})));
  EXPECT_NE(message.find("addf.mlir\":7:3"), std::string::npos) << message;
  EXPECT_NE(message.find("'arith.addf' has no GPU implementation"),
            std::string::npos)
      << message;
}

} // namespace
