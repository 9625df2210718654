#include "trellis/Output/Gaussians.h"

#include "trellis/Format/Npy.h"

#include "test/unit/output/TestMeshes.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>

using namespace trellis;
using namespace trellis::output;
namespace fs = std::filesystem;

namespace {

std::string readAll(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

Gaussians oneGaussian(std::array<float, 3> xyz, std::array<float, 3> fdc,
                      std::array<float, 3> scaling, std::array<float, 4> rot,
                      float opacity) {
  Gaussians g;
  g.xyz = HostTensor(DType::F32, {1, 3});
  g.featuresDc = HostTensor(DType::F32, {1, 1, 3});
  g.scaling = HostTensor(DType::F32, {1, 3});
  g.rotation = HostTensor(DType::F32, {1, 4});
  g.opacity = HostTensor(DType::F32, {1, 1});
  std::memcpy(g.xyz.mutableRaw(), xyz.data(), 12);
  std::memcpy(g.featuresDc.mutableRaw(), fdc.data(), 12);
  std::memcpy(g.scaling.mutableRaw(), scaling.data(), 12);
  std::memcpy(g.rotation.mutableRaw(), rot.data(), 16);
  g.opacity.mutableData<float>()[0] = opacity;
  return g;
}

// --- An independent quaternion toolkit (Hamilton product, sandwich rotation),
// --- deliberately not using quaternionToMatrix / matrixToQuaternion.
using Q = std::array<double, 4>; // w, x, y, z
using V3 = std::array<double, 3>;

Q qmul(const Q &a, const Q &b) {
  return {a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
          a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
          a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
          a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0]};
}

Q qnormalize(const Q &q) {
  double n = std::sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  return {q[0] / n, q[1] / n, q[2] / n, q[3] / n};
}

// v' = q v q*, for a unit q.
V3 rotate(const Q &q, const V3 &v) {
  Q p = qmul(qmul(q, {0, v[0], v[1], v[2]}), {q[0], -q[1], -q[2], -q[3]});
  return {p[1], p[2], p[3]};
}

// The save_ply transform applied to a vector: (x, y, z) -> (x, -z, y).
V3 applyT(const V3 &v) { return {v[0], -v[2], v[1]}; }

} // namespace

TEST(GaussianConstants, Biases) {
  GaussianConstants c;
  EXPECT_NEAR(c.scalingBiasRaw(), -5.519460251195668, 1e-12);
  EXPECT_NEAR(c.opacityBiasRaw(), -2.197224577336219, 1e-12);
}

TEST(GaussianPly, SingleGaussianExactBytes) {
  // _xyz (0.25, 0.5, 0.75) -> position (-0.25, 0, 0.25) -> (x, -z, y) =
  // (-0.25, -0.25, 0). _scaling 0 -> softplus(s_b) = 0.004, with the 9e-4
  // filter sqrt(0.004^2 + 0.0009^2) = 0.0041, ln 0.0041 = -5.496768305271875.
  // _opacity 0 -> o_b = -2.197224577336219. _rotation 0 -> q = (1,0,0,0),
  // R = I, T itself: a +90 degree turn about x = (cos 45, sin 45, 0, 0).
  Gaussians g = oneGaussian({0.25f, 0.5f, 0.75f}, {0.1f, 0.2f, -0.3f},
                            {0, 0, 0}, {0, 0, 0, 0}, 0.0f);
  fixtures::TempDir tmp("gs1");
  const fs::path &dir = tmp.path();
  fs::path ply = dir / "g.ply";
  ASSERT_TRUE(writeGaussianPly(ply.string(), g).isOk());
  std::string bytes = readAll(ply);
  const std::string header =
      "ply\nformat binary_little_endian 1.0\nelement vertex 1\n"
      "property float x\nproperty float y\nproperty float z\n"
      "property float nx\nproperty float ny\nproperty float nz\n"
      "property float f_dc_0\nproperty float f_dc_1\nproperty float f_dc_2\n"
      "property float opacity\n"
      "property float scale_0\nproperty float scale_1\nproperty float scale_2\n"
      "property float rot_0\nproperty float rot_1\nproperty float rot_2\n"
      "property float rot_3\nend_header\n";
  ASSERT_EQ(bytes.size(), header.size() + 17 * 4);
  EXPECT_EQ(bytes.substr(0, header.size()), header);
  float v[17];
  std::memcpy(v, bytes.data() + header.size(), sizeof(v));
  const float s = -5.496768305271875f, r = 0.70710678118654752f;
  const float expected[17] = {
      -0.25f, -0.25f, 0.0f, 0, 0, 0, 0.1f, 0.2f, -0.3f, -2.197224577336219f,
      s,      s,      s,    r, r, 0, 0};
  for (int i = 0; i < 17; ++i)
    EXPECT_FLOAT_EQ(v[i], expected[i]) << kGaussianPlyProperties[i];
  // Exact where no arithmetic is involved.
  EXPECT_EQ(v[0], -0.25f);
  EXPECT_EQ(v[1], -0.25f);
  EXPECT_EQ(v[2], 0.0f);
  EXPECT_EQ(v[6], 0.1f);
  EXPECT_EQ(v[8], -0.3f);
}

TEST(GaussianPly, Activations) {
  // softplus(x + s_b) = 1 at x = ln(e - 1) - s_b; scale = ln sqrt(1 + 8.1e-7).
  const double x = std::log(std::expm1(1.0)) + 5.519460251195668;
  Gaussians g = oneGaussian({0, 1, 0.5f}, {0, 0, 0}, {float(x), 30.0f, -30.0f},
                            {0, 0, 0, 0}, 2.5f);
  auto rows = gaussianPlyRows(g);
  ASSERT_TRUE(rows.isOk()) << rows.message();
  const GaussianPlyRow &row = rows->front();
  EXPECT_FLOAT_EQ(row.x, -0.5f);
  EXPECT_FLOAT_EQ(row.y, -0.0f);
  EXPECT_FLOAT_EQ(row.z, 0.5f);
  // About 0.5 ln(1 + 8.1e-7) = 4.05e-7; exactly, for the float32 input:
  double sp = std::log1p(std::exp(double(float(x)) - 5.519460251195668));
  EXPECT_NEAR(row.scale[0], 0.5 * std::log1p(8.1e-7), 2e-7);
  EXPECT_NEAR(row.scale[0], std::log(std::sqrt(sp * sp + 8.1e-7)), 1e-12);
  // softplus(30 - 5.52) = 24.48 (PyTorch's threshold branch returns x).
  EXPECT_FLOAT_EQ(row.scale[1], float(std::log(30.0 - 5.519460251195668)));
  // Far below: softplus -> ~0, the 9e-4 filter dominates.
  EXPECT_NEAR(row.scale[2], std::log(9e-4), 1e-5);
  EXPECT_FLOAT_EQ(row.opacity, float(2.5 - 2.197224577336219));
  // logit(sigmoid(o)) is o: check against the sigmoid route.
  double p = 1.0 / (1.0 + std::exp(-(2.5 - 2.197224577336219)));
  EXPECT_NEAR(row.opacity, std::log(p / (1 - p)), 1e-6);
}

TEST(GaussianRotation, Utils3dConventions) {
  // quaternion_to_matrix normalizes first: scale does not matter.
  auto a = quaternionToMatrix({0.3, -0.2, 0.5, 0.1});
  auto b = quaternionToMatrix({3.0, -2.0, 5.0, 1.0});
  for (int i = 0; i < 9; ++i)
    EXPECT_NEAR(a[i], b[i], 1e-15);
  // q = 0 gives the identity.
  auto id = quaternionToMatrix({0, 0, 0, 0});
  for (int i = 0; i < 9; ++i)
    EXPECT_EQ(id[i], i % 4 == 0 ? 1.0 : 0.0);
  // 180 degrees about y: w = 0, sign(m02 - m20) = sign(0) = 0.
  auto q = matrixToQuaternion({-1, 0, 0, 0, 1, 0, 0, 0, -1});
  EXPECT_EQ(q, (Q{0, 0, 1, 0}));
  // 270 degrees about z: |w| = |z| (a tie, w wins and is positive), so the
  // result is -(cos 135, 0, 0, sin 135) = (0.7071, 0, 0, -0.7071).
  q = matrixToQuaternion({0, 1, 0, -1, 0, 0, 0, 0, 1});
  EXPECT_NEAR(q[0], std::sqrt(0.5), 1e-15);
  EXPECT_EQ(q[1], 0.0);
  EXPECT_EQ(q[2], 0.0);
  EXPECT_NEAR(q[3], -std::sqrt(0.5), 1e-15);
  // z largest: 170 degrees about (0.1, 0.2, 1): z positive.
  Q r = qnormalize({std::cos(85 * M_PI / 180), 0.1, 0.2, 1.0});
  q = matrixToQuaternion(quaternionToMatrix(r));
  Q rn = qnormalize(r);
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(q[i], rn[i], 1e-12);
}

TEST(GaussianRotation, MatchesIndependentComputation) {
  // For many raw rotations (unit and not, w of both signs), the PLY quaternion
  // must rotate every vector as T * R(normalize(raw + (1,0,0,0))) does, be a
  // unit quaternion with its largest-magnitude component positive, and equal
  // +-(q_T (x) q) with q_T = (cos 45, sin 45, 0, 0).
  fixtures::SplitMix rng(7);
  const Q qT = {std::sqrt(0.5), std::sqrt(0.5), 0, 0};
  const V3 probes[3] = {{1, 0, 0}, {0.3, -0.7, 0.2}, {-0.1, 0.4, 0.9}};
  for (int n = 0; n < 500; ++n) {
    std::array<float, 4> raw;
    double scale = n % 3 == 0 ? 0.2 : (n % 3 == 1 ? 1.0 : 6.0);
    for (float &c : raw)
      c = float(scale * (2 * rng.next() - 1));
    Q out = gaussianPlyRotation(raw);
    Q q = qnormalize({double(raw[0] + 1.0f), raw[1], raw[2], raw[3]});
    double norm2 = 0;
    int maxIdx = 0;
    for (int i = 0; i < 4; ++i) {
      norm2 += out[i] * out[i];
      if (std::fabs(out[i]) > std::fabs(out[maxIdx]))
        maxIdx = i;
    }
    EXPECT_NEAR(norm2, 1.0, 1e-12);
    EXPECT_GT(out[maxIdx], 0.0);
    for (const V3 &p : probes) {
      V3 want = applyT(rotate(q, p));
      V3 got = rotate(out, p);
      for (int a = 0; a < 3; ++a)
        EXPECT_NEAR(got[a], want[a], 1e-12) << "case " << n;
    }
    Q prod = qmul(qT, q);
    double dot = 0;
    for (int i = 0; i < 4; ++i)
      dot += prod[i] * out[i];
    EXPECT_NEAR(std::fabs(dot), 1.0, 1e-12) << "case " << n;
  }
}

TEST(GaussianPly, SyntheticSetSizeAndRows) {
  Gaussians g = fixtures::syntheticGaussians(257);
  fixtures::TempDir tmp("gs2");
  const fs::path &dir = tmp.path();
  ASSERT_TRUE(writeGaussianPly((dir / "g.ply").string(), g).isOk());
  std::string bytes = readAll(dir / "g.ply");
  size_t end = bytes.find("end_header\n");
  ASSERT_NE(end, std::string::npos);
  EXPECT_NE(bytes.find("element vertex 257\n"), std::string::npos);
  ASSERT_EQ(bytes.size(), end + 11 + 257 * 68);
  auto rows = gaussianPlyRows(g);
  ASSERT_TRUE(rows.isOk());
  EXPECT_EQ(std::memcmp(bytes.data() + end + 11, rows->data(), 257 * 68), 0);
  // Row 1 has _rotation = (-1, 0, 0, 0): q = 0, R = I, the quaternion of T.
  EXPECT_FLOAT_EQ((*rows)[1].rot[0], float(std::sqrt(0.5)));
  EXPECT_FLOAT_EQ((*rows)[1].rot[1], float(std::sqrt(0.5)));
}

TEST(GaussianPly, ErrorsNameFieldAndFile) {
  Gaussians g = fixtures::syntheticGaussians(3);
  g.rotation = HostTensor(DType::F32, {3, 3});
  fixtures::TempDir tmp("gs3");
  const fs::path &dir = tmp.path();
  Status s = writeGaussianPly((dir / "bad.ply").string(), g);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("bad.ply"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("'_rotation'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("[3, 4]"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("[3, 3]"), std::string::npos) << s.message();
  EXPECT_TRUE(fs::is_empty(dir));

  g = fixtures::syntheticGaussians(3);
  g.opacity = HostTensor(DType::F16, {3, 1});
  s = writeGaussianPly((dir / "bad.ply").string(), g);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("'_opacity' must be F32"), std::string::npos)
      << s.message();

  g = fixtures::syntheticGaussians(3);
  s = writeGaussianPly("/nonexistent-dir/g.ply", g);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("/nonexistent-dir/g.ply"), std::string::npos);
}

TEST(GaussianPly, EmptySet) {
  Gaussians g = fixtures::syntheticGaussians(0);
  fixtures::TempDir tmp("gs4");
  const fs::path &dir = tmp.path();
  ASSERT_TRUE(writeGaussianPly((dir / "e.ply").string(), g).isOk());
  std::string bytes = readAll(dir / "e.ply");
  EXPECT_NE(bytes.find("element vertex 0\n"), std::string::npos);
  EXPECT_EQ(bytes.substr(bytes.size() - 11), "end_header\n");
}

TEST(GaussianNpz, RoundTrip) {
  Gaussians g = fixtures::syntheticGaussians(10);
  fixtures::TempDir tmp("gs5");
  const fs::path &dir = tmp.path();
  fs::path npz = dir / "g.npz";
  ASSERT_TRUE(writeGaussianNpz(npz.string(), g).isOk());
  auto read = readNpz(npz.string());
  ASSERT_TRUE(read.isOk()) << read.message();
  const char *names[5] = {"_xyz", "_features_dc", "_scaling", "_rotation",
                          "_opacity"};
  const HostTensor *fields[5] = {&g.xyz, &g.featuresDc, &g.scaling, &g.rotation,
                                 &g.opacity};
  ASSERT_EQ(read->size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ((*read)[i].first, names[i]);
    const HostTensor &t = (*read)[i].second;
    EXPECT_EQ(t.dtype(), DType::F32);
    EXPECT_EQ(t.shape(), fields[i]->shape());
    EXPECT_EQ(std::memcmp(t.raw(), fields[i]->raw(), t.nbytes()), 0);
  }
}
