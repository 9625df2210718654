// Sparse FlexiCubes extraction on analytic fields written in the mesh
// decoder's head layout (spec §7.4): deform = 0, weights = 0, colour = 0.
#include "trellis/Mesh/FlexiCubes.h"

#include "test/unit/mesh/FlexiCubesFields.h"
#include "trellis/Output/Mesh.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

using namespace trellis;
using namespace trellis::mesh;

namespace {

using meshfields::analyticInput;
using meshfields::Sdf;
using Input = meshfields::FieldInput;

struct Measures {
  double area = 0, volume = 0;
};

Measures measure(const MeshResult &m) {
  Measures r;
  const float *v = m.vertices.data<float>();
  const int32_t *f = m.faces.data<int32_t>();
  for (int64_t i = 0; i < m.faces.dim(0); ++i) {
    const float *a = v + 3 * f[3 * i], *b = v + 3 * f[3 * i + 1],
                *c = v + 3 * f[3 * i + 2];
    double u[3], w[3];
    for (int d = 0; d < 3; ++d) {
      u[d] = double(b[d]) - a[d];
      w[d] = double(c[d]) - a[d];
    }
    double n[3] = {u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2],
                   u[0] * w[1] - u[1] * w[0]};
    r.area += 0.5 * std::sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
    r.volume += (double(a[0]) * (double(b[1]) * c[2] - double(b[2]) * c[1]) -
                 double(a[1]) * (double(b[0]) * c[2] - double(b[2]) * c[0]) +
                 double(a[2]) * (double(b[0]) * c[1] - double(b[1]) * c[0])) /
                6.0;
  }
  return r;
}

output::MeshReport checkClosed(const MeshResult &m) {
  auto mesh = output::meshFromExtractResult(m.vertices, m.faces, m.vertexAttrs);
  EXPECT_TRUE(mesh.isOk()) << (mesh.isOk() ? "" : mesh.message());
  if (!mesh.isOk())
    return {};
  auto rep = output::analyzeMesh(mesh.value());
  EXPECT_TRUE(rep.isOk());
  if (!rep.isOk())
    return {};
  std::printf("  %s\n", output::formatMeshReport(rep.value()).c_str());
  EXPECT_TRUE(rep->watertight);
  EXPECT_TRUE(rep->manifold);
  EXPECT_TRUE(rep->consistentlyOriented);
  EXPECT_EQ(rep->degenerateFaces, 0);
  EXPECT_EQ(rep->unreferencedVertices, 0);
  EXPECT_EQ(rep->components, 1);
  EXPECT_EQ(rep->eulerCharacteristic, 2);
  return rep.value();
}

MeshResult extractTimed(const Input &in, int R, const char *what) {
  auto t0 = std::chrono::steady_clock::now();
  auto r = extractFlexiCubes(in.coords, in.fields, R);
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - t0)
                  .count();
  EXPECT_TRUE(r.isOk()) << (r.isOk() ? "" : r.message());
  if (!r.isOk())
    return {};
  std::printf("  %s R=%d: N=%lld candidates=%lld surface=%lld V=%lld F=%lld "
              "resolved=%lld: %.1f ms\n",
              what, R, (long long)in.coords.dim(0),
              (long long)r->candidateCubes, (long long)r->surfaceCubes,
              (long long)r->vertices.dim(0), (long long)r->faces.dim(0),
              (long long)r->resolvedAmbiguities, ms);
  return std::move(r).value();
}

void checkColours(const MeshResult &m) {
  // Colour channels are 0 everywhere: sigmoid(0) = 0.5 after interpolation.
  const float *a = m.vertexAttrs.data<float>();
  for (int64_t i = 0; i < m.vertexAttrs.numel(); ++i)
    ASSERT_NEAR(a[i], 0.5f, 1e-5f) << i;
}

double boxArea(const double h[3]) {
  return 8 * (h[0] * h[1] + h[1] * h[2] + h[0] * h[2]);
}
double boxVolume(const double h[3]) { return 8 * h[0] * h[1] * h[2]; }

/// How far a mesh is from an analytic surface: the largest |sdf| at a vertex
/// (world units) and area / volume over the exact ones. Printed.
struct SurfaceFit {
  double maxDev, area, volume;
};
SurfaceFit fitToSurface(const MeshResult &m, const Sdf &sdf, double area,
                        double volume, const char *what, int R) {
  const float *v = m.vertices.data<float>();
  double maxDev = 0;
  for (int64_t i = 0; i < m.vertices.dim(0); ++i)
    maxDev =
        std::max(maxDev, std::fabs(sdf(v[3 * i], v[3 * i + 1], v[3 * i + 2])));
  Measures ms = measure(m);
  SurfaceFit fit{maxDev, ms.area / area, ms.volume / volume};
  std::printf("  %s R=%d: max |sdf(v)| = %.3g cells (%.3g world), area err "
              "%.3f%%, volume err %.3f%%\n",
              what, R, maxDev * R, maxDev, 100 * (fit.area - 1),
              100 * (fit.volume - 1));
  return fit;
}

void sphereTest(int R) {
  const double r0 = 0.3;
  Sdf sdf = meshfields::sphereSdf(r0);
  Input in = analyticInput(sdf, R);
  MeshResult m = extractTimed(in, R, "sphere");
  ASSERT_TRUE(m.success());
  checkClosed(m);
  checkColours(m);
  SurfaceFit fit = fitToSurface(m, sdf, 4 * M_PI * r0 * r0,
                                4.0 / 3.0 * M_PI * r0 * r0 * r0, "sphere", R);
  EXPECT_LT(fit.maxDev, 1.0 / R);
  EXPECT_GT(fit.volume, 0.0) << "faces should wind outward";
  EXPECT_NEAR(fit.area, 1.0, 0.01);
  EXPECT_NEAR(fit.volume, 1.0, 0.01);
}

} // namespace

TEST(FlexiCubes, RejectsBadInput) {
  HostTensor c(DType::I32, {2, 3}), f(DType::F32, {2, kMeshHeadChannels});
  EXPECT_FALSE(extractFlexiCubes(c, f, 8).isOk());
  HostTensor c2(DType::I32, {2, 4});
  HostTensor f2(DType::F32, {2, 100});
  EXPECT_FALSE(extractFlexiCubes(c2, f2, 8).isOk());
  // Duplicate cube (both rows are (0,0,0,0)).
  EXPECT_FALSE(extractFlexiCubes(c2, f, 8).isOk());
  c2.mutableData<int32_t>()[5] = 9; // x of row 1 out of range at R = 8
  EXPECT_FALSE(extractFlexiCubes(c2, f, 8).isOk());
}

TEST(FlexiCubes, NoSurfaceGivesEmptyMesh) {
  HostTensor c(DType::I32, {1, 4}), f(DType::F32, {1, kMeshHeadChannels});
  int32_t *cd = c.mutableData<int32_t>();
  cd[1] = cd[2] = cd[3] = 3;
  for (int k = 0; k < 8; ++k)
    f.mutableData<float>()[k] = 0.5f; // all outside
  auto r = extractFlexiCubes(c, f, 8);
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r->vertices.dim(0), 0);
  EXPECT_EQ(r->faces.dim(0), 0);
  EXPECT_FALSE(r->success());
}

TEST(FlexiCubes, SingleInsideVertexGivesClosedOctahedron) {
  // One lattice vertex inside, all its 8 cubes active: 6 surface edges, 8
  // cubes with one dual vertex each -> 6 quads -> 12 triangles, closed.
  const int R = 8;
  std::vector<int32_t> c;
  for (int k = 0; k < 8; ++k)
    c.insert(c.end(), {0, 3 + (k & 1), 3 + ((k >> 1) & 1), 3 + ((k >> 2) & 1)});
  HostTensor coords(DType::I32, {8, 4}),
      fields(DType::F32, {8, kMeshHeadChannels});
  std::copy(c.begin(), c.end(), coords.mutableData<int32_t>());
  float *f = fields.mutableData<float>();
  for (int i = 0; i < 8; ++i)
    for (int k = 0; k < 8; ++k) {
      int vx = c[4 * i + 1] + (k & 1), vy = c[4 * i + 2] + ((k >> 1) & 1),
          vz = c[4 * i + 3] + ((k >> 2) & 1);
      f[kMeshHeadChannels * i + k] =
          (vx == 4 && vy == 4 && vz == 4) ? -1.0f : 1.0f;
    }
  auto r = extractFlexiCubes(coords, fields, R);
  ASSERT_TRUE(r.isOk()) << r.message();
  EXPECT_EQ(r->vertices.dim(0), 8);
  EXPECT_EQ(r->faces.dim(0), 12);
  checkClosed(r.value());
  EXPECT_GT(measure(r.value()).volume, 0.0);
}

TEST(FlexiCubes, SphereR64) { sphereTest(64); }

TEST(FlexiCubes, SphereR128) { sphereTest(128); }

TEST(FlexiCubes, BoxR64) {
  const int R = 64;
  // meshfields::boxSdf: faces off the lattice, half extents in cells 12.3,
  // 9.6, 15.45.
  const double h[3] = {12.3 / R, 9.6 / R, 15.45 / R};
  const double ctr[3] = {0.013, -0.021, 0.007};
  Sdf sdf = meshfields::boxSdf(R);
  Input in = analyticInput(sdf, R);
  MeshResult m = extractTimed(in, R, "box");
  ASSERT_TRUE(m.success());
  checkClosed(m);
  checkColours(m);
  SurfaceFit fit = fitToSurface(m, sdf, boxArea(h), boxVolume(h), "box", R);
  EXPECT_LT(fit.maxDev, 1.0 / R);
  EXPECT_GT(fit.volume, 0.0);
  const float *v = m.vertices.data<float>();
  // Away from the box's edges every dual vertex lies exactly on a face.
  for (int64_t i = 0; i < m.vertices.dim(0); ++i) {
    int nearFaces = 0;
    const double p[3] = {v[3 * i], v[3 * i + 1], v[3 * i + 2]};
    for (int d = 0; d < 3; ++d)
      nearFaces += std::fabs(std::fabs(p[d] - ctr[d]) - h[d]) < 1.5 / R;
    if (nearFaces == 1) {
      EXPECT_LT(std::fabs(sdf(p[0], p[1], p[2])), 1e-5) << i;
    }
  }
  // Without sharp-feature weights (weights = 0) the dual vertices chamfer the
  // box's edges and corners over about one cell: the area is low by about
  // 0.6 cell x edge length (-3.7% here) and the volume a little low (-0.7%).
  EXPECT_NEAR(fit.area, 1.0, 0.05);
  EXPECT_NEAR(fit.volume, 1.0, 0.01);
}

// The issue-7 bounds at the mesh decoder's resolution (256^3), for an
// object-sized box (faces off the lattice: 79.36, 69.12, 89.6 cells):
// vertices within 1/256 (world) of the surface, area and volume within 1%.
// The chamfer along the edges costs about 0.6 cell x edge length of area, so
// a smaller box is further off: -1.02% for BoxR64's box at 256^3 (half
// extents 0.19, 0.15, 0.24), -3.7% at 64^3.
TEST(FlexiCubes, BoxR256WithinOneCellAndOnePercent) {
  const int R = 256;
  const double h[3] = {0.31, 0.27, 0.35};
  Sdf sdf = meshfields::boxSdfWorld(h[0], h[1], h[2]);
  Input in = analyticInput(sdf, R);
  MeshResult m = extractTimed(in, R, "box");
  ASSERT_TRUE(m.success());
  checkClosed(m);
  SurfaceFit fit = fitToSurface(m, sdf, boxArea(h), boxVolume(h), "box", R);
  EXPECT_LT(fit.maxDev, 1.0 / 256);
  EXPECT_NEAR(fit.area, 1.0, 0.01);
  EXPECT_NEAR(fit.volume, 1.0, 0.01);
}

TEST(FlexiCubes, RandomFieldWithWeightsAndDeformIsClosed) {
  // Every cube of a 16^3 grid active, a random sdf per lattice vertex (the
  // outermost lattice layer outside), random deform/weights per cube: exercises
  // all cases, the ambiguous-face resolution, alpha/beta/gamma and the
  // per-vertex means of the deformation.
  const int R = 16;
  Input in = meshfields::randomInput(R, 12345);
  MeshResult m = extractTimed(in, R, "random");
  ASSERT_TRUE(m.success());
  auto mesh = output::meshFromExtractResult(m.vertices, m.faces, m.vertexAttrs);
  ASSERT_TRUE(mesh.isOk());
  auto rep = output::analyzeMesh(mesh.value());
  ASSERT_TRUE(rep.isOk());
  std::printf("  %s\n", output::formatMeshReport(rep.value()).c_str());
  EXPECT_EQ(rep->boundaryEdges, 0);
  EXPECT_EQ(rep->nonManifoldEdges, 0);
  EXPECT_EQ(rep->inconsistentEdges, 0);
  EXPECT_TRUE(rep->watertight);
  EXPECT_TRUE(rep->consistentlyOriented);
  EXPECT_EQ(rep->degenerateFaces, 0);
  // Without the ambiguous-face switch this field leaves ~650 boundary edges.
  EXPECT_GT(m.resolvedAmbiguities, 0);
  const float *a = m.vertexAttrs.data<float>();
  for (int64_t j = 0; j < m.vertexAttrs.numel(); ++j)
    ASSERT_TRUE(a[j] > 0.0f && a[j] < 1.0f);
}

// Timing only (about 0.9 GB of input): run with
// --gtest_also_run_disabled_tests --gtest_filter='*R256*'.
TEST(FlexiCubes, DISABLED_SphereR256) { sphereTest(256); }
