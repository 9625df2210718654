// Mesh-decoder-format inputs for FlexiCubes (spec §7.4 head layout), shared
// by the unit tests (FlexiCubesTest.cpp) and the GPU parity/timing bench
// (bench/mesh_gpu): analytic fields (every cube with a corner whose sdf <
// 1.5/R is active, corner sdf = analytic + 1/R, so that the extractor's -1/R
// bias puts the surface back on the analytic one), a random field, and a
// decoder-like shell of 4^3 blocks with noisy deform/weight/colour channels.
#ifndef TRELLIS_TEST_UNIT_MESH_FLEXICUBESFIELDS_H
#define TRELLIS_TEST_UNIT_MESH_FLEXICUBESFIELDS_H

#include "trellis/Mesh/FlexiCubes.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

namespace trellis::meshfields {

using Sdf = std::function<double(double, double, double)>;

struct FieldInput {
  HostTensor coords, fields;
};

inline FieldInput toTensors(const std::vector<int32_t> &c,
                            const std::vector<float> &f) {
  FieldInput in;
  int64_t n = int64_t(c.size() / 4);
  in.coords = HostTensor(DType::I32, {n, 4});
  in.fields = HostTensor(DType::F32, {n, mesh::kMeshHeadChannels});
  std::copy(c.begin(), c.end(), in.coords.mutableData<int32_t>());
  std::copy(f.begin(), f.end(), in.fields.mutableData<float>());
  return in;
}

/// An analytic signed distance sampled at the lattice vertices of R^3 cubes.
inline FieldInput analyticInput(const Sdf &sdf, int R) {
  std::vector<int32_t> c;
  std::vector<float> f;
  auto world = [R](int v) { return double(v) / R - 0.5; };
  for (int x = 0; x < R; ++x)
    for (int y = 0; y < R; ++y)
      for (int z = 0; z < R; ++z) {
        double s[8];
        double mn = 1e30;
        for (int k = 0; k < 8; ++k) {
          s[k] = sdf(world(x + (k & 1)), world(y + ((k >> 1) & 1)),
                     world(z + ((k >> 2) & 1)));
          mn = std::min(mn, s[k]);
        }
        if (mn >= 1.5 / R)
          continue;
        c.insert(c.end(), {0, x, y, z});
        size_t base = f.size();
        f.resize(base + mesh::kMeshHeadChannels, 0.0f);
        for (int k = 0; k < 8; ++k)
          f[base + size_t(k)] = float(s[k] + 1.0 / R);
      }
  return toTensors(c, f);
}

inline Sdf sphereSdf(double r0) {
  return [r0](double x, double y, double z) {
    return std::sqrt(x * x + y * y + z * z) - r0;
  };
}

/// A box of half extents h (world units) centred slightly off the origin.
inline Sdf boxSdfWorld(double h0, double h1, double h2) {
  const double ctr[3] = {0.013, -0.021, 0.007};
  return [h0, h1, h2, ctr](double x, double y, double z) {
    double q[3] = {std::fabs(x - ctr[0]) - h0, std::fabs(y - ctr[1]) - h1,
                   std::fabs(z - ctr[2]) - h2};
    double o = 0, in = std::max(q[0], std::max(q[1], q[2]));
    for (double d : q)
      o += std::max(d, 0.0) * std::max(d, 0.0);
    return std::sqrt(o) + std::min(in, 0.0);
  };
}

/// A box with faces off the lattice: half extents 12.3, 9.6, 15.45 cells.
inline Sdf boxSdf(int R) { return boxSdfWorld(12.3 / R, 9.6 / R, 15.45 / R); }

/// Deterministic uniforms in [-1, 1).
class Lcg {
public:
  explicit Lcg(uint64_t seed) : state_(seed) {}
  double operator()() {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return double((state_ >> 11) * (1.0 / 9007199254740992.0)) * 2.0 - 1.0;
  }

private:
  uint64_t state_;
};

/// A random field: every cube of an R^3 grid active, a
/// random sdf per lattice vertex (outside on the border), random
/// deform/weights/colours per cube. With `keep` < 1 only that fraction of the
/// cubes is kept (random holes: sparse boundaries everywhere).
inline FieldInput randomInput(int R, uint64_t seed, double keep = 1.0) {
  const int Rv = R + 1;
  Lcg rnd(seed);
  std::vector<float> vs(size_t(Rv) * Rv * Rv);
  for (int x = 0; x < Rv; ++x)
    for (int y = 0; y < Rv; ++y)
      for (int z = 0; z < Rv; ++z) {
        bool border = x == 0 || y == 0 || z == 0 || x == R || y == R || z == R;
        vs[(size_t(x) * Rv + y) * Rv + z] = border ? 1.0f : float(rnd() + 0.1);
      }
  std::vector<int32_t> c;
  std::vector<float> f;
  for (int x = 0; x < R; ++x)
    for (int y = 0; y < R; ++y)
      for (int z = 0; z < R; ++z) {
        if (keep < 1.0 && (rnd() + 1.0) * 0.5 >= keep)
          continue;
        c.insert(c.end(), {0, x, y, z});
        size_t base = f.size();
        f.resize(base + mesh::kMeshHeadChannels);
        float *row = f.data() + base;
        for (int k = 0; k < 8; ++k)
          row[k] = vs[(size_t(x + (k & 1)) * Rv + y + ((k >> 1) & 1)) * Rv + z +
                      ((k >> 2) & 1)] +
                   1.0f / R;
        for (int j = 8; j < mesh::kMeshHeadChannels; ++j)
          row[j] = float(2.0 * rnd());
      }
  return toTensors(c, f);
}

/// A mesh-decoder-like output at R = 4 * S: the S^3 voxels whose centre lies
/// within `halfWidth` voxels of a sphere of radius r0 (world), each
/// subdivided into 4^3 cubes (in voxel order, as the decoder emits them),
/// corner sdf from the sphere (world units) and noise of amplitude `noise`
/// in the deform, weight and colour channels. Returns the voxel count too.
inline FieldInput shellInput(int S, double r0, double halfWidth, double noise,
                             uint64_t seed, int64_t *voxels = nullptr) {
  const int R = 4 * S;
  Lcg rnd(seed);
  std::vector<int32_t> c;
  std::vector<float> f;
  int64_t nvox = 0;
  auto world = [R](int v) { return double(v) / R - 0.5; };
  for (int x = 0; x < S; ++x)
    for (int y = 0; y < S; ++y)
      for (int z = 0; z < S; ++z) {
        double px = (x + 0.5) / S - 0.5, py = (y + 0.5) / S - 0.5,
               pz = (z + 0.5) / S - 0.5;
        double d = std::sqrt(px * px + py * py + pz * pz) - r0;
        if (std::fabs(d) * S > halfWidth)
          continue;
        ++nvox;
        for (int i = 0; i < 64; ++i) {
          int cx = 4 * x + (i >> 4), cy = 4 * y + ((i >> 2) & 3),
              cz = 4 * z + (i & 3);
          c.insert(c.end(), {0, cx, cy, cz});
          size_t base = f.size();
          f.resize(base + mesh::kMeshHeadChannels);
          float *row = f.data() + base;
          for (int k = 0; k < 8; ++k) {
            double wx = world(cx + (k & 1)), wy = world(cy + ((k >> 1) & 1)),
                   wz = world(cz + ((k >> 2) & 1));
            row[k] = float(std::sqrt(wx * wx + wy * wy + wz * wz) - r0);
          }
          for (int j = 8; j < mesh::kMeshHeadChannels; ++j)
            row[j] = float(noise * rnd());
        }
      }
  if (voxels)
    *voxels = nvox;
  return toTensors(c, f);
}

} // namespace trellis::meshfields

#endif // TRELLIS_TEST_UNIT_MESH_FLEXICUBESFIELDS_H
