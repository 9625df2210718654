//===- SemanticsTest.cpp - The tricky semantics, on hand-made examples ----===//
//
// Each test pins one place where a naive reading of TRELLIS goes wrong (spec
// §12) with values computed by hand here, independently of the goldens.
//
//===----------------------------------------------------------------------===//
#include "test/unit/reference/TestUtil.h"

#include "trellis/Reference/Kernels.h"
#include "trellis/Reference/Parallel.h"

#include <cmath>
#include <set>

using namespace trellis;
using namespace trellis::ref;
using namespace trellis::reftest;

//===----------------------------------------------------------------------===//
// Embeddings: timestep [cos, sin] vs APE [sin, cos] with padding (§12.4)
//===----------------------------------------------------------------------===//

TEST(Semantics, TimestepEmbeddingIsCosineFirst) {
  HostTensor e = ok(timestepEmbedding(tensorF32({2}, {0.0f, 1000.0f})));
  ASSERT_EQ(e.shape(), (Shape{2, 256}));
  std::vector<float> v = values(e);
  for (int j = 0; j < 128; ++j) {
    EXPECT_EQ(v[size_t(j)], 1.0f) << j;       // cos(0)
    EXPECT_EQ(v[size_t(128 + j)], 0.0f) << j; // sin(0)
  }
  // f_0 = 1: τ = 1000 gives cos(1000) then, 128 later, sin(1000).
  EXPECT_NEAR(v[256 + 0], std::cos(1000.0), 1e-6);
  EXPECT_NEAR(v[256 + 128], std::sin(1000.0), 1e-6);
  // f_j = exp(−ln(10000)·j/128): the last frequency is 10000^(-127/128).
  double f127 = std::exp(-std::log(10000.0) * 127 / 128);
  EXPECT_NEAR(v[256 + 127], std::cos(1000.0 * f127), 1e-5);
  EXPECT_NEAR(v[256 + 255], std::sin(1000.0 * f127), 1e-5);
  // Odd dimensions get a zero column at the end.
  HostTensor odd = ok(timestepEmbedding(tensorF32({1}, {3.0f}), 7));
  EXPECT_EQ(odd.shape(), (Shape{1, 7}));
  EXPECT_EQ(values(odd)[6], 0.0f);
  EXPECT_NEAR(values(odd)[0], std::cos(3.0), 1e-6);
}

TEST(Semantics, ApeIsSineFirstPerAxisWithZeroPadding) {
  HostTensor e = ok(ape(tensorI32({2, 3}, {0, 0, 0, 5, 1, 2}), 1024));
  ASSERT_EQ(e.shape(), (Shape{2, 1024}));
  std::vector<float> v = values(e);
  const int F = 170; // ⌊1024/6⌋: 1020 values + 4 zeros
  for (int axis = 0; axis < 3; ++axis)
    for (int j = 0; j < F; ++j) {
      EXPECT_EQ(v[size_t(axis * 2 * F + j)], 0.0f);     // sin(0)
      EXPECT_EQ(v[size_t(axis * 2 * F + F + j)], 1.0f); // cos(0)
    }
  const float *r = v.data() + 1024;
  const int pos[3] = {5, 1, 2};
  for (int axis = 0; axis < 3; ++axis)
    for (int j : {0, 1, 77, F - 1}) {
      double w = std::pow(10000.0, -double(j) / F);
      EXPECT_NEAR(r[axis * 2 * F + j], std::sin(pos[axis] * w), 2e-6);
      EXPECT_NEAR(r[axis * 2 * F + F + j], std::cos(pos[axis] * w), 2e-6);
    }
  for (int c = 1020; c < 1024; ++c)
    EXPECT_EQ(r[c], 0.0f) << c; // the padding stays zero for any position
  // C = 768: F = 128, no padding; C = 1280: F = 213, 2 zeros (App. B).
  HostTensor e768 = ok(ape(tensorI32({1, 3}, {3, 4, 5}), 768));
  EXPECT_NEAR(values(e768)[767], std::cos(5 * std::pow(10000.0, -127.0 / 128)),
              2e-6);
  HostTensor e1280 = ok(ape(tensorI32({1, 3}, {3, 4, 5}), 1280));
  EXPECT_NE(values(e1280)[1277], 0.0f);
  EXPECT_EQ(values(e1280)[1278], 0.0f);
  EXPECT_EQ(values(e1280)[1279], 0.0f);
}

//===----------------------------------------------------------------------===//
// Head RMS norm = L2 normalization · γ · √d (§12.5)
//===----------------------------------------------------------------------===//

TEST(Semantics, HeadRmsNormIsL2NormalizeTimesGammaSqrtD) {
  // x [1, H=2, d=4]. Head 0: u = (3, 4, 0, 0), γ = 1 → u/5·2.
  // Head 1: a tiny vector, γ = (1, 2, 3, 4): no mean-square eps, so it is
  // normalized to unit length like any other (an RMS norm with eps 1e-6
  // would give about 0.01·u/‖u‖·√d instead).
  HostTensor x = tensorF32({1, 2, 4}, {3, 4, 0, 0, 1e-4f, 1e-4f, 1e-4f, 1e-4f});
  HostTensor g = tensorF32({2, 4}, {1, 1, 1, 1, 1, 2, 3, 4});
  std::vector<float> y = values(ok(headRmsNorm(x, g)));
  EXPECT_FLOAT_EQ(y[0], 3.0f / 5 * 2);
  EXPECT_FLOAT_EQ(y[1], 4.0f / 5 * 2);
  EXPECT_EQ(y[2], 0.0f);
  for (int j = 0; j < 4; ++j)
    EXPECT_FLOAT_EQ(y[size_t(4 + j)], 0.5f * float(j + 1) * 2.0f) << j;
  // A zero vector stays zero (the 1e-12 clamp on the norm).
  std::vector<float> z = values(ok(headRmsNorm(
      tensorF32({1, 1, 4}, {0, 0, 0, 0}), tensorF32({1, 4}, {1, 1, 1, 1}))));
  for (float v : z)
    EXPECT_EQ(v, 0.0f);
  // fp16 in, fp16 out.
  HostTensor h = ok(headRmsNorm(ok(cast(x, DType::F16)), g));
  EXPECT_EQ(h.dtype(), DType::F16);
  EXPECT_EQ(values(h)[0], roundToHalf(1.2f));
}

//===----------------------------------------------------------------------===//
// Sparse downsample divides by n + 1 (§6.3, §12.3)
//===----------------------------------------------------------------------===//

TEST(Semantics, DownsampleMeanCountsTheZero) {
  // Three children of coarse voxel (0,0,0,0) holding 1, 2, 3 and one child
  // of (0,2,2,2) holding 10: the spec's example gives 1.5 and 5.0.
  HostTensor coords =
      tensorI32({4, 4}, {0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 0, 0, 4, 5, 4});
  CoordSet set = ok(CoordSet::create(coords, 8));
  CoordSet coarse = ok(coarsen(set));
  ASSERT_EQ(coarse.size(), 2);
  for (DType dt : {DType::F32, DType::F16}) {
    HostTensor feats = ok(cast(tensorF32({4, 1}, {1, 2, 3, 10}), dt));
    std::vector<float> d = values(ok(sparseDownsample(feats, set, coarse)));
    EXPECT_EQ(d, (std::vector<float>{1.5f, 5.0f}));
  }
  // The upsample copies the parent back to every child, in fine order.
  std::vector<float> up =
      values(ok(sparseUpsample(tensorF32({2, 1}, {1.5f, 5.0f}), coarse, set)));
  EXPECT_EQ(up, (std::vector<float>{1.5f, 1.5f, 1.5f, 5.0f}));
  // A coarse set that is not the coarsening of the fine one is an error.
  CoordSet other = ok(CoordSet::create(tensorI32({1, 4}, {0, 0, 0, 0}), 4));
  EXPECT_FALSE(sparseDownsample(
      ok(cast(tensorF32({4, 1}, {1, 2, 3, 10}), DType::F32)), set, other));
}

TEST(Semantics, CoarsenSortsByKeyAcrossTheWholeBatch) {
  // Fine rows in batch order but not in coarse-key order.
  HostTensor coords =
      tensorI32({4, 4}, {0, 6, 0, 0, 0, 0, 0, 3, 1, 1, 1, 1, 1, 0, 7, 0});
  CoordSet fine = ok(CoordSet::create(coords, 8));
  CoordSet coarse = ok(coarsen(fine));
  EXPECT_TRUE(sameTensor(
      coarse.coords,
      tensorI32({4, 4}, {0, 0, 0, 1, 0, 3, 0, 0, 1, 0, 0, 0, 1, 0, 3, 0})));
  EXPECT_TRUE(
      sameTensor(ok(parentRows(fine, coarse)), tensorI32({4}, {1, 0, 2, 3})));
  EXPECT_EQ(coarse.offsets, (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(coarse.resolution, 4);
  EXPECT_FALSE(coarsen(ok(CoordSet::create(coords, 9)))); // 2 ∤ 9
}

//===----------------------------------------------------------------------===//
// Swin-3D window partition (§7.1, App. C.6)
//===----------------------------------------------------------------------===//

namespace {

/// Deterministic pseudo-random unique voxels, batch-contiguous and sorted.
HostTensor lcgCoords(int batch, int res, int perSample, uint32_t seed) {
  std::set<std::vector<int32_t>> rows;
  uint32_t s = seed;
  auto next = [&] {
    s = s * 1664525u + 1013904223u;
    return s >> 8;
  };
  for (int b = 0; b < batch; ++b) {
    int have = 0;
    while (have < perSample)
      if (rows.insert({b, int32_t(next() % res), int32_t(next() % res),
                       int32_t(next() % res)})
              .second)
        ++have;
  }
  std::vector<int32_t> flat;
  for (const auto &r : rows)
    flat.insert(flat.end(), r.begin(), r.end());
  return tensorI32({int64_t(rows.size()), 4}, flat);
}

} // namespace

TEST(Semantics, WindowPartitionWithShift) {
  CoordSet set = ok(CoordSet::create(lcgCoords(2, 30, 400, 7), 30));
  std::set<std::vector<int32_t>> partitions[2];
  for (int shift : {0, 4}) {
    SCOPED_TRACE(shift);
    Segments seg = ok(windowSegments(set, 8, shift));
    const int32_t *rows = seg.rows.data<int32_t>();
    const int32_t *off = seg.offsets.data<int32_t>();
    std::vector<int> seen(size_t(set.size()), 0);
    int64_t lastKey = -1;
    for (int64_t s = 0; s < seg.numSegments(); ++s) {
      ASSERT_LT(off[s], off[s + 1]) << "empty windows are skipped";
      const int32_t *first = set.row(rows[off[s]]);
      std::vector<int32_t> members;
      for (int32_t p = off[s]; p < off[s + 1]; ++p) {
        const int32_t *r = set.row(rows[p]);
        ++seen[size_t(rows[p])];
        members.push_back(rows[p]);
        EXPECT_EQ(r[0], first[0]) << "a window never spans two samples";
        for (int a = 1; a < 4; ++a) // one window: same ⌊(c + s)/8⌋ per axis
          EXPECT_EQ((r[a] + shift) / 8, (first[a] + shift) / 8);
      }
      // Windows come in ascending (b, Wx, Wy, Wz) order, i.e. ascending id.
      int64_t key = ((int64_t(first[0]) * 64 + (first[1] + shift) / 8) * 64 +
                     (first[2] + shift) / 8) *
                        64 +
                    (first[3] + shift) / 8;
      EXPECT_GT(key, lastKey);
      lastKey = key;
      partitions[shift / 4].insert(members);
    }
    for (int count : seen)
      EXPECT_EQ(count, 1) << "every voxel exactly once";
  }
  EXPECT_NE(partitions[0], partitions[1]) << "even and odd partitions differ";
}

TEST(Semantics, WindowCountUsesTheMaximumOverAllRows) {
  // Sample 0 reaches x = 15 (2 windows along x with shift 0), sample 1 only
  // x = 0. n_x comes from the whole batch, so both samples' ids use n_x = 2:
  // sample 1's window (0,0,0) has id 1·(2·1·1) = 2 > sample 0's ids 0 and 1.
  HostTensor coords = tensorI32({3, 4}, {0, 0, 0, 0, 0, 15, 0, 0, 1, 0, 0, 0});
  Segments seg = ok(windowSegments(ok(CoordSet::create(coords, 16)), 8, 0));
  EXPECT_TRUE(sameTensor(seg.rows, tensorI32({3}, {0, 1, 2})));
  EXPECT_TRUE(sameTensor(seg.offsets, tensorI32({4}, {0, 1, 2, 3})));
  // Shift 4 moves x = 0 and x = 15 to windows 0 and 2 (c' = 4, 19).
  Segments s4 = ok(windowSegments(ok(CoordSet::create(coords, 16)), 8, 4));
  EXPECT_EQ(s4.numSegments(), 3);
  // Voxels 3 and 4 share the shift-0 window but not the shift-4 one.
  HostTensor pair = tensorI32({2, 4}, {0, 3, 0, 0, 0, 4, 0, 0});
  EXPECT_EQ(
      ok(windowSegments(ok(CoordSet::create(pair, 8)), 8, 0)).numSegments(), 1);
  EXPECT_EQ(
      ok(windowSegments(ok(CoordSet::create(pair, 8)), 8, 4)).numSegments(), 2);
}

//===----------------------------------------------------------------------===//
// PixelShuffle3D channel order (§5.1)
//===----------------------------------------------------------------------===//

TEST(Semantics, PixelShuffle3dChannelOrder) {
  // in[0, 8c + 4s1 + 2s2 + s3, 0, 0, 0] = 100c + 4s1 + 2s2 + s3.
  std::vector<float> in(16);
  for (int c = 0; c < 2; ++c)
    for (int s = 0; s < 8; ++s)
      in[size_t(8 * c + s)] = float(100 * c + s);
  HostTensor y = ok(pixelShuffle3d(tensorF32({1, 16, 1, 1, 1}, in), 2));
  ASSERT_EQ(y.shape(), (Shape{1, 2, 2, 2, 2}));
  std::vector<float> v = values(y);
  for (int c = 0; c < 2; ++c)
    for (int s1 = 0; s1 < 2; ++s1)
      for (int s2 = 0; s2 < 2; ++s2)
        for (int s3 = 0; s3 < 2; ++s3)
          EXPECT_EQ(v[size_t(((c * 2 + s1) * 2 + s2) * 2 + s3)],
                    float(100 * c + 4 * s1 + 2 * s2 + s3));
}

//===----------------------------------------------------------------------===//
// spconv: KRSC layout and the k = 1 reinterpretation (§6.4, §12.16)
//===----------------------------------------------------------------------===//

TEST(Semantics, SparseConvWeightIsKrsc) {
  // One-hot weight W[o=1, a=2, β=1, γ=0, i=1] = 1: out[p][1] = in[q][1] with
  // q = p + (a−1, β−1, γ−1) = p + (1, 0, −1).
  HostTensor coords = tensorI32({3, 4}, {0, 1, 1, 1, 0, 2, 1, 0, 0, 2, 2, 2});
  CoordSet set = ok(CoordSet::create(coords, 4));
  HostTensor nb = ok(neighborMap(set, 3));
  // Offset index a·9 + β·3 + γ; rows see their own voxel at offset 13.
  EXPECT_EQ(nb.data<int32_t>()[0 * 27 + 2 * 9 + 1 * 3 + 0], 1);
  EXPECT_EQ(nb.data<int32_t>()[1 * 27 + 13], 1);
  EXPECT_EQ(nb.data<int32_t>()[1 * 27 + 0 * 9 + 1 * 3 + 2], 0);
  std::vector<float> w(2 * 27 * 2, 0.0f);
  w[size_t((1 * 27 + 2 * 9 + 1 * 3 + 0) * 2 + 1)] = 1.0f;
  HostTensor feats = tensorF32({3, 2}, {10, 11, 20, 21, 30, 31});
  std::vector<float> y =
      values(ok(sparseConv3d(feats, nb, tensorF32({2, 3, 3, 3, 2}, w))));
  EXPECT_EQ(y, (std::vector<float>{0, 21, 0, 0, 0, 0}));
}

TEST(Semantics, SparseConvMatchesDenseConvOnTheDensifiedGrid) {
  // App. C.4 with our own dense conv3d: weight [O,k,k,k,I] → [O,I,k,k,k].
  const int R = 5, I = 3, O = 4;
  CoordSet set = ok(CoordSet::create(lcgCoords(1, R, 40, 3), R));
  std::vector<float> f(size_t(set.size() * I)), w(size_t(O * 27 * I));
  for (size_t i = 0; i < f.size(); ++i)
    f[i] = std::sin(float(i) * 0.7f);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = std::cos(float(i) * 0.3f);
  HostTensor feats = tensorF32({set.size(), I}, f);
  HostTensor wk = tensorF32({O, 3, 3, 3, I}, w);
  HostTensor sparse = ok(sparseConv3d(feats, ok(neighborMap(set, 3)), wk));
  HostTensor dense(DType::F32, {1, I, R, R, R});
  for (int64_t n = 0; n < set.size(); ++n)
    for (int i = 0; i < I; ++i)
      dense.mutableData<float>()[((i * R + set.row(n)[1]) * R + set.row(n)[2]) *
                                     R +
                                 set.row(n)[3]] = f[size_t(n * I + i)];
  HostTensor out = ok(conv3d(dense, ok(permute(wk, {0, 4, 1, 2, 3}))));
  std::vector<float> s = values(sparse), d = values(out);
  for (int64_t n = 0; n < set.size(); ++n)
    for (int o = 0; o < O; ++o)
      EXPECT_NEAR(s[size_t(n * O + o)],
                  d[size_t(((o * R + set.row(n)[1]) * R + set.row(n)[2]) * R +
                           set.row(n)[3])],
                  1e-4);
}

TEST(Semantics, ConvOfUpsampleReadsTheParentsThroughTheParentMap) {
  // trellis-sink-upsample's identity: conv3d(upsample(h)) equals the conv of
  // the coarse rows through parent_neighbor_map, bit for bit.
  const int R = 8, I = 5, O = 3;
  CoordSet fine = ok(CoordSet::create(lcgCoords(2, R, 120, 3), R));
  CoordSet coarse = ok(coarsen(fine));
  ASSERT_LT(coarse.size(), fine.size());
  std::vector<float> h(size_t(coarse.size() * I)), w(size_t(O * 27 * I));
  for (size_t i = 0; i < h.size(); ++i)
    h[i] = std::sin(float(i) * 0.37f);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = std::cos(float(i) * 0.21f);
  HostTensor hc = tensorF32({coarse.size(), I}, h);
  HostTensor wk = tensorF32({O, 3, 3, 3, I}, w);
  HostTensor nb = ok(neighborMap(fine, 3));
  HostTensor pm = ok(parentNeighborMap(nb, coarse, fine));
  HostTensor parents = ok(parentRows(fine, coarse));
  for (int64_t i = 0; i < nb.numel(); ++i) {
    int32_t q = nb.data<int32_t>()[i];
    EXPECT_EQ(pm.data<int32_t>()[i], q < 0 ? -1 : parents.data<int32_t>()[q]);
  }
  HostTensor viaUpsample =
      ok(sparseConv3d(ok(sparseUpsample(hc, coarse, fine)), nb, wk));
  HostTensor viaParents = ok(sparseConv3d(hc, pm, wk));
  EXPECT_EQ(viaParents.shape(), (Shape{fine.size(), O}));
  EXPECT_EQ(values(viaParents), values(viaUpsample));
  // The map must be the fine set's.
  EXPECT_FALSE(parentNeighborMap(ok(neighborMap(coarse, 3)), coarse, fine));
}

TEST(Semantics, SparseConv1x1ReinterpretsTheWeightBuffer) {
  // weight [O=3, 1, 1, 1, I=2] with flat values 0..5. spconv's 1x1 path
  // uses M = flat viewed as [I, O]: M = [[0,1,2],[3,4,5]], so x = (1, 0)
  // gives (0, 1, 2), where x·Wᵀ would give (0, 2, 4).
  HostTensor w = tensorF32({3, 1, 1, 1, 2}, {0, 1, 2, 3, 4, 5});
  HostTensor b = tensorF32({3}, {0.5f, 0.25f, 0.125f});
  HostTensor x = tensorF32({2, 2}, {1, 0, 0, 1});
  std::vector<float> y = values(ok(sparseConv1x1(x, w, &b)));
  EXPECT_EQ(y, (std::vector<float>{0.5f, 1.25f, 2.125f, 3.5f, 4.25f, 5.125f}));
  CoordSet set =
      ok(CoordSet::create(tensorI32({2, 4}, {0, 0, 0, 0, 0, 0, 0, 1}), 2));
  EXPECT_TRUE(sameTensor(ok(sparseConv3d(x, ok(neighborMap(set, 1)), w, &b)),
                         ok(sparseConv1x1(x, w, &b))));
}

//===----------------------------------------------------------------------===//
// Sampler (§3.2, §3.3)
//===----------------------------------------------------------------------===//

TEST(Semantics, TimeGridMatchesTheSpec) {
  const double printed[26] = {
      1.0,     0.98630, 0.97183, 0.95652, 0.94030, 0.92308, 0.90476,
      0.88525, 0.86441, 0.84211, 0.81818, 0.79245, 0.76471, 0.73469,
      0.70213, 0.66667, 0.62791, 0.58537, 0.53846, 0.48649, 0.42857,
      0.36364, 0.29032, 0.20690, 0.11111, 0.0};
  std::vector<double> t = timeGrid(25, 3.0);
  ASSERT_EQ(t.size(), 26u);
  for (int i = 0; i < 26; ++i)
    EXPECT_NEAR(t[size_t(i)], printed[i], 5e-6) << i;
  EXPECT_EQ(t.front(), 1.0);
  EXPECT_EQ(t.back(), 0.0);
  EXPECT_EQ(modelTime(t[0]), 1000.0f);
  EXPECT_EQ(modelTime(t[1]), float(1000.0 * t[1]));
}

TEST(Semantics, GuidanceIntervalCounts) {
  auto guided = [](int steps, double lo, double hi) {
    std::vector<double> t = timeGrid(steps, 3.0);
    std::vector<int> g;
    for (int i = 0; i < steps; ++i)
      if (isGuidedStep(t[size_t(i)], lo, hi))
        g.push_back(i);
    return g;
  };
  std::vector<int> g = guided(25, 0.5, 1.0);
  ASSERT_EQ(g.size(), 19u); // 19 guided + 6 unguided = 44 forwards
  for (int i = 0; i < 19; ++i)
    EXPECT_EQ(g[size_t(i)], i);
  EXPECT_EQ(guided(25, 0.5, 0.95).size(), 15u);
  EXPECT_EQ(guided(12, 0.5, 1.0).size(), 10u);
  EXPECT_EQ(guided(50, 0.5, 1.0).size(), 38u);
  // Inclusive at both ends.
  EXPECT_TRUE(isGuidedStep(1.0, 0.5, 1.0));
  EXPECT_TRUE(isGuidedStep(0.5, 0.5, 1.0));
}

TEST(Semantics, CfgAndEuler) {
  HostTensor vc = tensorF32({2}, {1.0f, -2.0f}),
             vu = tensorF32({2}, {0.5f, 3.0f});
  EXPECT_EQ(values(ok(cfgCombine(vc, vu, 5.0))),
            (std::vector<float>{6 * 1.0f - 5 * 0.5f, 6 * -2.0f - 5 * 3.0f}));
  EXPECT_EQ(values(ok(eulerUpdate(vc, vu, 0.25))),
            (std::vector<float>{1.0f - 0.125f, -2.0f - 0.75f}));
}

//===----------------------------------------------------------------------===//
// Small semantics of single ops
//===----------------------------------------------------------------------===//

TEST(Semantics, GeluIsTanhApproximationAndSoftplusThreshold) {
  EXPECT_NEAR(unaryScalar(UnaryKind::Gelu, 1.0f), 0.84119201f, 1e-7);
  EXPECT_GT(std::fabs(unaryScalar(UnaryKind::Gelu, 1.0f) - 0.84134471f), 1e-4);
  EXPECT_EQ(unaryScalar(UnaryKind::Softplus, 25.0f), 25.0f);
  EXPECT_EQ(unaryScalar(UnaryKind::Softplus, 20.5f), 20.5f);
  EXPECT_EQ(unaryScalar(UnaryKind::Softplus, 19.0f),
            std::log1p(std::exp(19.0f)));
  EXPECT_NEAR(unaryScalar(UnaryKind::Silu, 2.0f), 2.0 / (1 + std::exp(-2.0)),
              1e-6);
}

TEST(Semantics, OccupancyIsStrictlyPositiveInArgwhereOrder) {
  std::vector<float> l(2 * 8, -1.0f);
  l[3] = 0.0f;      // zero: empty
  l[5] = 0.25f;     // b0 (1,0,1)
  l[8 + 0] = 1e-3f; // b1 (0,0,0)
  l[8 + 6] = -0.0f; // negative zero: empty
  l[8 + 7] = 2.0f;  // b1 (1,1,1)
  HostTensor c = ok(occupancy(tensorF16({2, 1, 2, 2, 2}, l)));
  EXPECT_TRUE(
      sameTensor(c, tensorI32({3, 4}, {0, 1, 0, 1, 1, 0, 0, 0, 1, 1, 1, 1})));
}

TEST(Semantics, SubdivideIsParentMajorZFastest) {
  CoordSet set =
      ok(CoordSet::create(tensorI32({2, 4}, {0, 1, 2, 3, 1, 0, 0, 0}), 4));
  CoordSet sub = ok(subdivideCoords(set));
  ASSERT_EQ(sub.size(), 16);
  const int expect[8][3] = {{0, 0, 0}, {0, 0, 1}, {0, 1, 0}, {0, 1, 1},
                            {1, 0, 0}, {1, 0, 1}, {1, 1, 0}, {1, 1, 1}};
  for (int c = 0; c < 8; ++c) {
    EXPECT_EQ(sub.row(c)[1], 2 + expect[c][0]);
    EXPECT_EQ(sub.row(c)[2], 4 + expect[c][1]);
    EXPECT_EQ(sub.row(c)[3], 6 + expect[c][2]);
    EXPECT_EQ(sub.row(8 + c)[0], 1);
  }
  EXPECT_EQ(sub.resolution, 8);
  EXPECT_EQ(sub.offsets, (std::vector<int64_t>{0, 8, 16}));
  std::vector<float> f =
      values(ok(subdivideFeats(tensorF32({2, 2}, {1, 2, 3, 4}))));
  EXPECT_EQ(f.size(), 32u);
  EXPECT_EQ(f[14], 1.0f);
  EXPECT_EQ(f[16], 3.0f);
}

TEST(Semantics, SparseCrossAttentionStaysInTheSample) {
  // Values are constant per sample: every row must get its own sample's.
  CoordSet set = ok(CoordSet::create(
      tensorI32({3, 4}, {0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0}), 2));
  HostTensor q = tensorF32({3, 1, 2}, {1, 0, 0, 1, 1, 1});
  HostTensor k = tensorF32({2, 2, 1, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  HostTensor v = tensorF32({2, 2, 1, 1}, {7, 7, -3, -3});
  std::vector<float> y = values(ok(sparseCrossAttention(q, k, v, set, 0.5f)));
  EXPECT_FLOAT_EQ(y[0], 7.0f);
  EXPECT_FLOAT_EQ(y[1], -3.0f);
  EXPECT_FLOAT_EQ(y[2], -3.0f);
}

TEST(Semantics, UniqueMeanIsTheTrueMean) {
  UniqueMean u = ok(uniqueMean(tensorI64({4}, {5, 3, 5, 5}),
                               tensorF32({4, 1}, {1, 2, 3, 5})));
  EXPECT_TRUE(sameTensor(u.keys, tensorI64({2}, {3, 5})));
  EXPECT_EQ(values(u.means), (std::vector<float>{2.0f, 3.0f}));
}

TEST(Semantics, ModulateBroadcastEqualsExplicitRows) {
  HostTensor x =
      tensorF16({2, 2, 3}, {1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6});
  HostTensor shift = tensorF16({2, 3}, {0.5f, 0, -0.5f, 1, 1, 1});
  HostTensor scale = tensorF16({2, 3}, {0, 1, 2, -1, 0.5f, 0.25f});
  HostTensor rowsShift = ok(concat(
      {ok(reshape(shift, {2, 1, 3})), ok(reshape(shift, {2, 1, 3}))}, 1));
  HostTensor rowsScale = ok(concat(
      {ok(reshape(scale, {2, 1, 3})), ok(reshape(scale, {2, 1, 3}))}, 1));
  EXPECT_TRUE(sameTensor(ok(modulate(x, shift, scale)),
                         ok(modulate(x, rowsShift, rowsScale))));
  std::vector<float> y = values(ok(modulate(x, shift, scale)));
  EXPECT_EQ(y[0], 1.0f * 1 + 0.5f);
  EXPECT_EQ(y[2], 3.0f * 3 - 0.5f);
  EXPECT_EQ(y[6], -1.0f * 0 + 1);
  std::vector<float> g = values(ok(gatedResidual(x, x, scale)));
  EXPECT_EQ(g[5], 6.0f + 2 * 6.0f);
}

//===----------------------------------------------------------------------===//
// Validation and errors
//===----------------------------------------------------------------------===//

TEST(Semantics, CoordSetValidation) {
  auto msg = [](Result<CoordSet> r) { return r ? std::string() : r.message(); };
  EXPECT_NE(
      msg(CoordSet::create(tensorI32({2, 4}, {0, 1, 1, 1, 0, 1, 1, 1}), 4))
          .find("repeats voxel"),
      std::string::npos);
  // A duplicate after rows out of (x, y, z) order, and one far from its twin
  // once the order broke: both found (the ascending fast path does not
  // build the hash set until the first row out of order).
  EXPECT_NE(msg(CoordSet::create(
                    tensorI32({3, 4}, {0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0}), 4))
                .find("row 2 repeats voxel (0, 1, 0, 0)"),
            std::string::npos);
  EXPECT_NE(msg(CoordSet::create(tensorI32({4, 4}, {0, 0, 0, 1, 0, 3, 0, 0, 0,
                                                    2, 0, 0, 0, 0, 0, 1}),
                                 4))
                .find("row 3 repeats voxel (0, 0, 0, 1)"),
            std::string::npos);
  // Rows out of order but distinct are valid (and kept in their order).
  CoordSet unsorted = ok(CoordSet::create(
      tensorI32({3, 4}, {0, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0}), 4));
  EXPECT_EQ(unsorted.size(), 3);
  EXPECT_EQ(unsorted.row(1)[1], 1);
  EXPECT_NE(
      msg(CoordSet::create(tensorI32({2, 4}, {1, 1, 1, 1, 0, 1, 1, 2}), 4))
          .find("ascending"),
      std::string::npos);
  EXPECT_NE(msg(CoordSet::create(tensorI32({1, 4}, {0, 4, 0, 0}), 4))
                .find("outside [0, 4)"),
            std::string::npos);
  EXPECT_NE(msg(CoordSet::create(tensorI32({1, 4}, {2, 0, 0, 0}), 4, 2))
                .find("batch size"),
            std::string::npos);
  EXPECT_FALSE(CoordSet::create(tensorF32({1, 4}, {0, 0, 0, 0}), 4));
  CoordSet empty = ok(CoordSet::create(HostTensor(DType::I32, {0, 4}), 4, 2));
  EXPECT_EQ(empty.offsets, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(ok(windowSegments(empty, 8, 4)).numSegments(), 0);
  EXPECT_EQ(ok(coarsen(empty)).size(), 0);
}

TEST(Semantics, ShapeErrorsNameTheOp) {
  Result<HostTensor> r =
      linear(HostTensor(DType::F32, {2, 3}), HostTensor(DType::F32, {4, 5}));
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("trellis.linear"), std::string::npos)
      << r.message();
  EXPECT_FALSE(
      add(HostTensor(DType::F32, {2, 3}), HostTensor(DType::F16, {2, 3})));
  EXPECT_FALSE(
      add(HostTensor(DType::F32, {2, 3}), HostTensor(DType::F32, {2, 4})));
  EXPECT_FALSE(div(HostTensor(DType::I32, {2}), HostTensor(DType::I32, {2})));
  EXPECT_FALSE(modulate(HostTensor(DType::F16, {2, 4, 3}),
                        HostTensor(DType::F16, {3, 3}),
                        HostTensor(DType::F16, {2, 3})));
  EXPECT_FALSE(split(HostTensor(DType::F32, {2, 3}), 1, {1, 1}));
  EXPECT_FALSE(reshape(HostTensor(DType::F32, {2, 3}), {4, -1}));
  Segments bad;
  bad.rows = tensorI32({2}, {0, 0});
  bad.offsets = tensorI32({2}, {0, 2});
  HostTensor q(DType::F32, {2, 1, 2});
  EXPECT_FALSE(sparseAttention(q, q, q, bad, 1.0f));
}

//===----------------------------------------------------------------------===//
// Determinism across thread counts
//===----------------------------------------------------------------------===//

TEST(Semantics, ResultsDoNotDependOnTheThreadCount) {
  CoordSet set = ok(CoordSet::create(lcgCoords(2, 12, 320, 11), 12));
  const int64_t N = set.size(), C = 64;
  std::vector<float> f(size_t(N * C)), w(size_t(32 * 27 * C)),
      lw(size_t(96 * C));
  for (size_t i = 0; i < f.size(); ++i)
    f[i] = std::sin(float(i) * 0.37f);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = std::cos(float(i) * 0.11f) * 0.05f;
  for (size_t i = 0; i < lw.size(); ++i)
    lw[i] = std::sin(float(i) * 0.05f) * 0.1f;
  HostTensor feats = tensorF16({N, C}, f);
  HostTensor weight = tensorF16({32, 3, 3, 3, C}, w);
  HostTensor lin = tensorF16({96, C}, lw);
  auto run = [&] {
    std::vector<HostTensor> out;
    HostTensor qkv = ok(reshape(ok(linear(feats, lin)), {N, 3, 2, 16}));
    std::vector<HostTensor> p = ok(split(qkv, 1, {1, 1, 1}));
    for (HostTensor &t : p)
      t = ok(reshape(t, {N, 2, 16}));
    out.push_back(ok(sparseConv3d(feats, ok(neighborMap(set, 3)), weight)));
    out.push_back(ok(sparseGroupNorm(feats, set, 32, 1e-5f)));
    out.push_back(ok(layerNorm(feats, -1, 1e-6f)));
    out.push_back(ok(sparseAttention(p[0], p[1], p[2],
                                     ok(windowSegments(set, 8, 4)), 0.25f)));
    out.push_back(ok(conv3d(
        ok(reshape(feats, {1, C, N / 16, 4, 4})),
        ok(permute(ok(reshape(weight, {32, 3, 3, 3, C})), {0, 4, 1, 2, 3})))));
    return out;
  };
  ASSERT_EQ(N % 16, 0) << "the conv3d reshape needs N divisible by 16";
  setNumThreads(1);
  std::vector<HostTensor> one = run();
  for (int threads : {2, 3, 7}) {
    setNumThreads(threads);
    std::vector<HostTensor> many = run();
    for (size_t i = 0; i < one.size(); ++i)
      EXPECT_TRUE(sameTensor(many[i], one[i]))
          << "output " << i << ", " << threads << " threads";
  }
  setNumThreads(0);
}
