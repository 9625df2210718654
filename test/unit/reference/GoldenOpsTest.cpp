//===- GoldenOpsTest.cpp - Every reference kernel against NumPy goldens ---===//
//
// The expected values come from test/golden/generate.py: NumPy code written
// from the spec text, in float64, rounded once to the output dtype.
//
// Tolerances. Our kernels compute in f32 and round once, the goldens in
// float64 and round once. So:
//  * f16 outputs: both are the fp16 rounding of nearly the same real number;
//    they differ only when the f32 error (~1e-6 relative, far below the fp16
//    spacing of 2^-11) straddles a rounding boundary: at most 1 fp16 ulp, in
//    a few elements (the fraction bound is also checked).
//  * f32 outputs of elementwise formulas: a few f32 ulps, rtol 1e-6 plus
//    atol 1e-6·max|expected| for results that are small by cancellation
//    (GELU's 1 + tanh at x < 0, (1+w)vc − w·vu).
//  * f32 outputs of K-term sums (linear, conv, attention): the f32
//    accumulation error is bounded by ~K·2^-24·Σ|terms|; with K ≤ 135 and
//    |terms| ~ |result| this stays below 4e-6·max|expected|.
//  * data movement, integer ops and index computations: exact.
//
//===----------------------------------------------------------------------===//
#include "test/unit/reference/TestUtil.h"

#include "trellis/Reference/Kernels.h"

#include <cmath>

using namespace trellis;
using namespace trellis::ref;
using namespace trellis::reftest;

namespace {

/// Elementwise f32 formula tolerance (see the file comment).
::testing::AssertionResult f32Elementwise(const HostTensor &a,
                                          const HostTensor &e) {
  return allClose(a, e, 1e-6 * maxAbs(e), 1e-6);
}

/// f32 sums of at most ~135 terms (see the file comment).
::testing::AssertionResult f32Sum(const HostTensor &a, const HostTensor &e) {
  return allClose(a, e, 4e-6 * maxAbs(e), 1e-6);
}

/// f16 results of f32 math: within 1 ulp, and at most 2% of elements off.
::testing::AssertionResult f16Result(const HostTensor &a, const HostTensor &e) {
  return halfUlpClose(a, e, 1, 0.02);
}

::testing::AssertionResult resultClose(const HostTensor &a,
                                       const HostTensor &e) {
  return e.dtype() == DType::F16 ? f16Result(a, e) : f32Sum(a, e);
}

} // namespace

//===----------------------------------------------------------------------===//
// Dense
//===----------------------------------------------------------------------===//

TEST(GoldenOps, Linear) {
  for (const char *c : {"linear_f32", "linear_f16"}) {
    SCOPED_TRACE(c);
    HostTensor b = golden(c, "b");
    HostTensor y = ok(linear(golden(c, "x"), golden(c, "w"), &b));
    EXPECT_TRUE(resultClose(y, golden(c, "expected")));
  }
  HostTensor y = ok(linear(golden("linear_nobias_f32", "x"),
                           golden("linear_nobias_f32", "w")));
  EXPECT_TRUE(f32Sum(y, golden("linear_nobias_f32", "expected")));
}

TEST(GoldenOps, MatmulBroadcastsBatch) {
  for (const char *c : {"matmul_f32", "matmul_f16"}) {
    SCOPED_TRACE(c);
    HostTensor y = ok(matmul(golden(c, "a"), golden(c, "b")));
    EXPECT_TRUE(resultClose(y, golden(c, "expected")));
  }
}

TEST(GoldenOps, BinaryFloat) {
  const std::pair<const char *, BinaryKind> ops[] = {
      {"add", BinaryKind::Add},
      {"sub", BinaryKind::Sub},
      {"mul", BinaryKind::Mul},
      {"div", BinaryKind::Div},
      {"maximum", BinaryKind::Maximum}};
  for (const char *c : {"binary_f32", "binary_f16"})
    for (auto [name, kind] : ops) {
      SCOPED_TRACE(std::string(c) + " " + name);
      std::string n = name;
      HostTensor y = ok(binary(kind, golden(c, "a_" + n), golden(c, "b_" + n)));
      HostTensor e = golden(c, "expected_" + n);
      // A single correctly rounded f32 operation: exact for f32 (NumPy rounds
      // the exact result once too); for f16, f32 then f16 is within 1 ulp.
      if (e.dtype() == DType::F32)
        EXPECT_TRUE(sameTensor(y, e));
      else
        EXPECT_TRUE(f16Result(y, e));
    }
}

TEST(GoldenOps, BinaryInt) {
  const std::pair<const char *, BinaryKind> ops[] = {
      {"add", BinaryKind::Add},
      {"sub", BinaryKind::Sub},
      {"mul", BinaryKind::Mul},
      {"maximum", BinaryKind::Maximum}};
  for (const char *c : {"binary_int_i32", "binary_int_i64"})
    for (auto [name, kind] : ops) {
      SCOPED_TRACE(std::string(c) + " " + name);
      HostTensor y = ok(binary(kind, golden(c, "a"), golden(c, "b")));
      EXPECT_TRUE(sameTensor(y, golden(c, std::string("expected_") + name)));
    }
}

TEST(GoldenOps, Unary) {
  const std::pair<const char *, UnaryKind> ops[] = {
      {"silu", UnaryKind::Silu},
      {"gelu", UnaryKind::Gelu},
      {"sigmoid", UnaryKind::Sigmoid},
      {"tanh", UnaryKind::Tanh},
      {"softplus", UnaryKind::Softplus},
      {"atanh", UnaryKind::Atanh},
      {"exp", UnaryKind::Exp},
      {"log", UnaryKind::Log},
      {"sin", UnaryKind::Sin},
      {"cos", UnaryKind::Cos},
      {"neg", UnaryKind::Neg},
      {"sqrt", UnaryKind::Sqrt},
      {"abs", UnaryKind::Abs}};
  for (const char *c : {"unary_f32", "unary_f16"})
    for (auto [name, kind] : ops) {
      SCOPED_TRACE(std::string(c) + " " + name);
      std::string n = name;
      HostTensor y = ok(unary(kind, golden(c, "x_" + n)));
      HostTensor e = golden(c, "expected_" + n);
      if (e.dtype() == DType::F32)
        EXPECT_TRUE(f32Elementwise(y, e));
      else if (kind != UnaryKind::Gelu)
        EXPECT_TRUE(f16Result(y, e));
      else
        // GELU at x < −4: 1 + tanh(u) cancels in f32 (as in PyTorch's f32
        // kernel): absolute error <= 0.5·|x|·1.5·2^-24 <= 2.7e-7 for |x| <= 6,
        // which is several fp16 subnormal ulps (6e-8). Elsewhere 1 ulp.
        EXPECT_TRUE(halfUlpClose(y, e, 1, 0.02, 2.7e-7));
    }
}

TEST(GoldenOps, Cast) {
  // Exact: NumPy's float32 -> float16 is round-to-nearest-even too.
  EXPECT_TRUE(sameTensor(ok(cast(golden("cast", "f32"), DType::F16)),
                         golden("cast", "expected_f16")));
  EXPECT_TRUE(sameTensor(ok(cast(golden("cast", "f16"), DType::F32)),
                         golden("cast", "expected_f32")));
  EXPECT_TRUE(sameTensor(ok(cast(golden("cast", "i32"), DType::F32)),
                         golden("cast", "expected_i32_f32")));
}

TEST(GoldenOps, LayerNorm) {
  {
    const char *c = "layer_norm_last_f16";
    HostTensor g = golden(c, "gamma"), b = golden(c, "beta");
    HostTensor y = ok(
        layerNorm(golden(c, "x"), -1, float(goldenScalar(c, "eps")), &g, &b));
    EXPECT_TRUE(f16Result(y, golden(c, "expected")));
  }
  {
    const char *c = "layer_norm_last_f32";
    HostTensor y =
        ok(layerNorm(golden(c, "x"), -1, float(goldenScalar(c, "eps"))));
    EXPECT_TRUE(f32Sum(y, golden(c, "expected")));
  }
  {
    const char *c = "layer_norm_channel_f16"; // ChannelLN over NCDHW
    HostTensor g = golden(c, "gamma"), b = golden(c, "beta");
    HostTensor y =
        ok(layerNorm(golden(c, "x"), 1, float(goldenScalar(c, "eps")), &g, &b));
    EXPECT_TRUE(f16Result(y, golden(c, "expected")));
  }
}

TEST(GoldenOps, HeadRmsNorm) {
  const char *c = "head_rms_norm_f16";
  HostTensor y = ok(headRmsNorm(golden(c, "x"), golden(c, "gamma")));
  EXPECT_TRUE(f16Result(y, golden(c, "expected")));
}

TEST(GoldenOps, Softmax) {
  for (const char *c : {"softmax_f32", "softmax_f16"}) {
    SCOPED_TRACE(c);
    HostTensor y = ok(softmax(golden(c, "x"), int(goldenScalar(c, "axis"))));
    EXPECT_TRUE(resultClose(y, golden(c, "expected")));
  }
}

TEST(GoldenOps, Attention) {
  for (const char *c : {"attention_f32", "attention_f16"}) {
    SCOPED_TRACE(c);
    HostTensor y = ok(attention(golden(c, "q"), golden(c, "k"), golden(c, "v"),
                                float(goldenScalar(c, "scale"))));
    EXPECT_TRUE(resultClose(y, golden(c, "expected")));
  }
}

TEST(GoldenOps, ModulateAndGatedResidual) {
  HostTensor y =
      ok(modulate(golden("modulate_f16", "x"), golden("modulate_f16", "shift"),
                  golden("modulate_f16", "scale")));
  EXPECT_TRUE(f16Result(y, golden("modulate_f16", "expected")));
  y = ok(modulate(golden("modulate_rows_f32", "x"),
                  golden("modulate_rows_f32", "shift"),
                  golden("modulate_rows_f32", "scale")));
  EXPECT_TRUE(f32Elementwise(y, golden("modulate_rows_f32", "expected")));
  y = ok(gatedResidual(golden("gated_residual_f16", "x"),
                       golden("gated_residual_f16", "h"),
                       golden("gated_residual_f16", "gate")));
  EXPECT_TRUE(f16Result(y, golden("gated_residual_f16", "expected")));
}

TEST(GoldenOps, TimestepEmbedding) {
  // The f32 arguments τ·f_j are formed identically on both sides, so only
  // the final cos/sin rounding can differ: 1 f32 ulp (values in [-1, 1]).
  HostTensor y = ok(timestepEmbedding(golden("timestep_embedding", "tau")));
  EXPECT_TRUE(allClose(y, golden("timestep_embedding", "expected"), 6e-8, 0));
}

TEST(GoldenOps, Ape) {
  for (const char *c : {"ape_1024", "ape_768"}) {
    SCOPED_TRACE(c);
    HostTensor y =
        ok(ape(golden(c, "pos"), int64_t(goldenScalar(c, "channels"))));
    EXPECT_TRUE(allClose(y, golden(c, "expected"), 6e-8, 0));
  }
}

TEST(GoldenOps, Conv3d) {
  for (const char *c : {"conv3d_f32", "conv3d_f16"}) {
    SCOPED_TRACE(c);
    HostTensor b = golden(c, "b");
    HostTensor y = ok(conv3d(golden(c, "x"), golden(c, "w"), &b));
    EXPECT_TRUE(resultClose(y, golden(c, "expected")));
  }
}

TEST(GoldenOps, PixelShuffle3d) {
  HostTensor y = ok(pixelShuffle3d(golden("pixel_shuffle_3d", "x"), 2));
  EXPECT_TRUE(sameTensor(y, golden("pixel_shuffle_3d", "expected")));
}

TEST(GoldenOps, ShapeOps) {
  const char *c = "shape_ops";
  HostTensor x = golden(c, "x");
  EXPECT_TRUE(sameTensor(ok(permute(x, {0, 2, 3, 1})),
                         golden(c, "expected_permute_0231")));
  EXPECT_TRUE(sameTensor(ok(concat({x, golden(c, "y")}, 2)),
                         golden(c, "expected_concat_axis2")));
  std::vector<HostTensor> parts = ok(split(x, 1, {1, 2}));
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_TRUE(sameTensor(parts[0], golden(c, "expected_split_axis1_0")));
  EXPECT_TRUE(sameTensor(parts[1], golden(c, "expected_split_axis1_1")));
  EXPECT_TRUE(
      sameTensor(ok(reshape(x, {6, -1})), golden(c, "expected_reshape_6x20")));
}

TEST(GoldenOps, Occupancy) {
  HostTensor y = ok(occupancy(golden("occupancy", "logits")));
  EXPECT_TRUE(sameTensor(y, golden("occupancy", "expected")));
}

TEST(GoldenOps, Sampler) {
  const char *c = "sampler";
  // The grid is float64 on both sides with NumPy's formulas: bit-exact.
  std::vector<double> grid = timeGrid(25, 3.0);
  HostTensor g(DType::F64, {int64_t(grid.size())});
  std::copy(grid.begin(), grid.end(), g.mutableData<double>());
  EXPECT_TRUE(sameTensor(g, golden(c, "expected_grid_25_r3")));
  std::vector<double> grid12 = timeGrid(12, 3.0);
  HostTensor g12(DType::F64, {int64_t(grid12.size())});
  std::copy(grid12.begin(), grid12.end(), g12.mutableData<double>());
  EXPECT_TRUE(sameTensor(g12, golden(c, "expected_grid_12_r3")));

  HostTensor tau(DType::F32, {26});
  for (int i = 0; i < 26; ++i)
    tau.mutableData<float>()[i] = modelTime(grid[size_t(i)]);
  EXPECT_TRUE(sameTensor(tau, golden(c, "expected_tau_25")));

  std::vector<int64_t> guided;
  for (int i = 0; i < 25; ++i)
    if (isGuidedStep(grid[size_t(i)], 0.5, 1.0))
      guided.push_back(i);
  EXPECT_TRUE(sameTensor(tensorI64({int64_t(guided.size())}, guided),
                         golden(c, "expected_guided_25")));

  HostTensor cfg =
      ok(cfgCombine(golden(c, "vc"), golden(c, "vu"), goldenScalar(c, "w")));
  EXPECT_TRUE(f32Elementwise(cfg, golden(c, "expected_cfg")));
  HostTensor x =
      ok(eulerUpdate(golden(c, "x"), golden(c, "vc"), goldenScalar(c, "dt")));
  EXPECT_TRUE(f32Elementwise(x, golden(c, "expected_euler")));
}

//===----------------------------------------------------------------------===//
// Sparse
//===----------------------------------------------------------------------===//

TEST(GoldenOps, NeighborMapAndSparseConv) {
  const char *c = "sparse_conv";
  CoordSet set = ok(CoordSet::create(golden(c, "coords"),
                                     int64_t(goldenScalar(c, "resolution"))));
  HostTensor nb = ok(neighborMap(set, 3));
  EXPECT_TRUE(sameTensor(nb, golden(c, "expected_nbmap3")));
  HostTensor b32 = golden(c, "b_f32"), b16 = golden(c, "b_f16");
  // The golden is a dense conv on the densified grid (spec App. C.4).
  EXPECT_TRUE(f32Sum(
      ok(sparseConv3d(golden(c, "feats_f32"), nb, golden(c, "w_f32"), &b32)),
      golden(c, "expected_f32")));
  EXPECT_TRUE(f16Result(
      ok(sparseConv3d(golden(c, "feats_f16"), nb, golden(c, "w_f16"), &b16)),
      golden(c, "expected_f16")));
}

TEST(GoldenOps, SparseConvKernel1UsesSpconvReinterpretation) {
  const char *c = "sparse_conv";
  CoordSet set = ok(CoordSet::create(golden(c, "coords"),
                                     int64_t(goldenScalar(c, "resolution"))));
  HostTensor b1 = golden(c, "b1");
  HostTensor y = ok(sparseConv3d(
      golden(c, "feats_f16"), ok(neighborMap(set, 1)), golden(c, "w1"), &b1));
  EXPECT_TRUE(f16Result(y, golden(c, "expected_k1")));
  // ... and not the naive x·W[:, 0, 0, 0, :]ᵀ (§6.4 quirk).
  EXPECT_GT(maxAbs(ok(sub(y, golden(c, "naive_k1")))), 0.1);
}

TEST(GoldenOps, CoarsenDownsampleUpsampleSubdivide) {
  const char *c = "sparse_resample";
  CoordSet set = ok(CoordSet::create(golden(c, "coords"),
                                     int64_t(goldenScalar(c, "resolution"))));
  CoordSet coarse = ok(coarsen(set));
  EXPECT_TRUE(sameTensor(coarse.coords, golden(c, "expected_coarse")));
  EXPECT_TRUE(
      sameTensor(ok(parentRows(set, coarse)), golden(c, "expected_idx")));
  EXPECT_EQ(coarse.resolution, set.resolution / 2);
  EXPECT_EQ(coarse.batchSize(), set.batchSize());
  HostTensor down = ok(sparseDownsample(golden(c, "feats"), set, coarse));
  EXPECT_TRUE(f16Result(down, golden(c, "expected_down")));
  // Upsample is a copy: exact from the same coarse values.
  EXPECT_TRUE(
      sameTensor(ok(sparseUpsample(golden(c, "expected_down"), coarse, set)),
                 golden(c, "expected_up")));
  CoordSet sub = ok(subdivideCoords(set));
  EXPECT_TRUE(sameTensor(sub.coords, golden(c, "expected_sub_coords")));
  EXPECT_EQ(sub.resolution, 2 * set.resolution);
  EXPECT_TRUE(ok(CoordSet::create(sub.coords, sub.resolution)).offsets ==
              sub.offsets);
  EXPECT_TRUE(sameTensor(ok(subdivideFeats(golden(c, "feats"))),
                         golden(c, "expected_sub_feats")));
}

TEST(GoldenOps, SparseGroupNormBroadcastXyz) {
  const char *c = "sparse_group_norm";
  CoordSet set = ok(CoordSet::create(
      golden(c, "coords"), int64_t(goldenScalar(c, "resolution")), 3));
  ASSERT_EQ(set.batchSize(), 3);
  EXPECT_EQ(set.offsets[1], set.offsets[2]); // sample 1 is empty
  HostTensor g = golden(c, "gamma"), b = golden(c, "beta");
  HostTensor y =
      ok(sparseGroupNorm(golden(c, "feats"), set, 32, 1e-5f, &g, &b));
  EXPECT_TRUE(f16Result(y, golden(c, "expected")));
  EXPECT_TRUE(sameTensor(ok(batchBroadcast(golden(c, "vec"), set)),
                         golden(c, "expected_broadcast")));
  EXPECT_TRUE(sameTensor(xyz(set), golden(c, "expected_xyz")));
}

TEST(GoldenOps, WindowSegmentsAndSparseAttention) {
  const char *c = "sparse_windows";
  CoordSet set = ok(CoordSet::create(golden(c, "coords"),
                                     int64_t(goldenScalar(c, "resolution"))));
  for (int shift : {0, 4}) {
    SCOPED_TRACE(shift);
    Segments seg = ok(windowSegments(set, 8, shift));
    std::string s = std::to_string(shift);
    EXPECT_TRUE(sameTensor(seg.rows, golden(c, "expected_rows_shift" + s)));
    EXPECT_TRUE(
        sameTensor(seg.offsets, golden(c, "expected_offsets_shift" + s)));
  }
  HostTensor q = golden(c, "q"), k = golden(c, "k"), v = golden(c, "v");
  float scale = float(goldenScalar(c, "scale"));
  EXPECT_TRUE(f16Result(
      ok(sparseAttention(q, k, v, ok(windowSegments(set, 8, 4)), scale)),
      golden(c, "expected_attn_shift4")));
  EXPECT_TRUE(f16Result(ok(sparseAttention(q, k, v, batchSegments(set), scale)),
                        golden(c, "expected_attn_batch")));
  EXPECT_TRUE(
      f16Result(ok(sparseCrossAttention(q, golden(c, "ctx_k"),
                                        golden(c, "ctx_v"), set, scale)),
                golden(c, "expected_cross")));
}

TEST(GoldenOps, UniqueMean) {
  UniqueMean um = ok(uniqueMean(golden("unique_mean", "keys"),
                                golden("unique_mean", "values")));
  EXPECT_TRUE(sameTensor(um.keys, golden("unique_mean", "expected_keys")));
  EXPECT_TRUE(f32Sum(um.means, golden("unique_mean", "expected_means")));
}
