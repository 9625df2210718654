//===- TestMeshes.h - Small known meshes and Gaussians for output tests ---===//
//
// Shared by the unit tests and trellis-output-tool (the pytest helper).
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_TEST_UNIT_OUTPUT_TESTMESHES_H
#define TRELLIS_TEST_UNIT_OUTPUT_TESTMESHES_H

#include "trellis/Output/Gaussians.h"
#include "trellis/Output/Mesh.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

namespace trellis::output::fixtures {

/// A fresh directory under the system temp dir, unique per process (several
/// build trees may run these tests at once), removed with its contents when
/// it goes out of scope.
class TempDir {
public:
  explicit TempDir(const std::string &name)
      : path_(std::filesystem::temp_directory_path() /
              ("trellis-output-test-" + name + "-" +
               std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  const std::filesystem::path &path() const { return path_; }

private:
  std::filesystem::path path_;
};

inline Mesh makeMesh(const std::vector<std::array<float, 3>> &v,
                     const std::vector<std::array<int32_t, 3>> &f,
                     bool colors = false) {
  Mesh m;
  m.vertices = HostTensor(DType::F32, {int64_t(v.size()), 3});
  m.faces = HostTensor(DType::I32, {int64_t(f.size()), 3});
  if (!v.empty())
    std::memcpy(m.vertices.mutableRaw(), v.data(), v.size() * 12);
  if (!f.empty())
    std::memcpy(m.faces.mutableRaw(), f.data(), f.size() * 12);
  if (colors) {
    // colour = position mapped from [-0.5, 0.5] to [0, 1]
    m.vertexColors = HostTensor(DType::F32, {int64_t(v.size()), 3});
    float *c = m.vertexColors.mutableData<float>();
    for (size_t i = 0; i < v.size(); ++i)
      for (int a = 0; a < 3; ++a)
        c[i * 3 + a] = std::fmin(1.0f, std::fmax(0.0f, v[i][a] + 0.5f));
  }
  return m;
}

/// The unit cube [-0.5, 0.5]^3, 12 triangles wound counter-clockwise seen
/// from outside (outward normals).
inline std::vector<std::array<float, 3>> cubeVertices(float dx = 0.0f) {
  std::vector<std::array<float, 3>> v;
  for (int i = 0; i < 8; ++i)
    v.push_back({(i & 1 ? 0.5f : -0.5f) + dx, (i & 2 ? 0.5f : -0.5f),
                 (i & 4 ? 0.5f : -0.5f)});
  return v;
}
inline std::vector<std::array<int32_t, 3>> cubeFaces(int32_t base = 0) {
  std::vector<std::array<int32_t, 3>> f = {
      {0, 2, 1}, {1, 2, 3}, // z = -0.5 (normal -z)
      {4, 5, 6}, {5, 7, 6}, // z = +0.5 (normal +z)
      {0, 1, 4}, {1, 5, 4}, // y = -0.5
      {2, 6, 3}, {3, 6, 7}, // y = +0.5
      {0, 4, 2}, {2, 4, 6}, // x = -0.5
      {1, 3, 5}, {3, 7, 5}, // x = +0.5
  };
  for (auto &t : f)
    for (int32_t &i : t)
      i += base;
  return f;
}

/// An icosphere of radius 0.5: 20 * 4^subdiv faces, 10 * 4^subdiv + 2
/// vertices, closed and consistently oriented outward.
inline Mesh icosphere(int subdiv, bool colors = true) {
  const float t = (1.0f + std::sqrt(5.0f)) / 2.0f;
  std::vector<std::array<float, 3>> v = {{-1, t, 0},  {1, t, 0},   {-1, -t, 0},
                                         {1, -t, 0},  {0, -1, t},  {0, 1, t},
                                         {0, -1, -t}, {0, 1, -t},  {t, 0, -1},
                                         {t, 0, 1},   {-t, 0, -1}, {-t, 0, 1}};
  std::vector<std::array<int32_t, 3>> f = {
      {0, 11, 5}, {0, 5, 1},  {0, 1, 7},   {0, 7, 10}, {0, 10, 11},
      {1, 5, 9},  {5, 11, 4}, {11, 10, 2}, {10, 7, 6}, {7, 1, 8},
      {3, 9, 4},  {3, 4, 2},  {3, 2, 6},   {3, 6, 8},  {3, 8, 9},
      {4, 9, 5},  {2, 4, 11}, {6, 2, 10},  {8, 6, 7},  {9, 8, 1}};
  auto normalize = [](std::array<float, 3> p) {
    float n = std::sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]);
    return std::array<float, 3>{0.5f * p[0] / n, 0.5f * p[1] / n,
                                0.5f * p[2] / n};
  };
  for (auto &p : v)
    p = normalize(p);
  for (int s = 0; s < subdiv; ++s) {
    std::map<std::pair<int32_t, int32_t>, int32_t> mid;
    auto midpoint = [&](int32_t a, int32_t b) {
      auto key = std::minmax(a, b);
      auto it = mid.find(key);
      if (it != mid.end())
        return it->second;
      std::array<float, 3> p = {v[a][0] + v[b][0], v[a][1] + v[b][1],
                                v[a][2] + v[b][2]};
      v.push_back(normalize(p));
      return mid[key] = int32_t(v.size() - 1);
    };
    std::vector<std::array<int32_t, 3>> g;
    for (auto &tri : f) {
      int32_t a = midpoint(tri[0], tri[1]), b = midpoint(tri[1], tri[2]),
              c = midpoint(tri[2], tri[0]);
      g.push_back({tri[0], a, c});
      g.push_back({tri[1], b, a});
      g.push_back({tri[2], c, b});
      g.push_back({a, b, c});
    }
    f = std::move(g);
  }
  return makeMesh(v, f, colors);
}

/// splitmix64: a deterministic stream of doubles in [0, 1).
struct SplitMix {
  uint64_t s;
  explicit SplitMix(uint64_t seed) : s(seed) {}
  double next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return double(z >> 11) * 0x1.0p-53;
  }
  float uniform(double lo, double hi) { return float(lo + (hi - lo) * next()); }
};

/// A deterministic synthetic Gaussian set of M Gaussians with values in the
/// ranges the decoder produces. The first rows are special cases: identity
/// rotation, q = 0 (_rotation = (-1,0,0,0)), a rotation with w < 0, and a
/// large un-normalized quaternion.
inline Gaussians syntheticGaussians(int64_t m, uint64_t seed = 1) {
  Gaussians g;
  g.xyz = HostTensor(DType::F32, {m, 3});
  g.featuresDc = HostTensor(DType::F32, {m, 1, 3});
  g.scaling = HostTensor(DType::F32, {m, 3});
  g.rotation = HostTensor(DType::F32, {m, 4});
  g.opacity = HostTensor(DType::F32, {m, 1});
  SplitMix rng(seed);
  float *xyz = g.xyz.mutableData<float>(),
        *fdc = g.featuresDc.mutableData<float>();
  float *sc = g.scaling.mutableData<float>(),
        *rot = g.rotation.mutableData<float>();
  float *op = g.opacity.mutableData<float>();
  for (int64_t i = 0; i < m; ++i) {
    for (int a = 0; a < 3; ++a) {
      xyz[i * 3 + a] = rng.uniform(0.0, 1.0);
      fdc[i * 3 + a] = rng.uniform(-2.0, 2.0);
      sc[i * 3 + a] = rng.uniform(-3.0, 3.0);
    }
    for (int c = 0; c < 4; ++c)
      rot[i * 4 + c] = rng.uniform(-1.5, 1.5);
    op[i] = rng.uniform(-6.0, 6.0);
  }
  const float special[4][4] = {
      {0, 0, 0, 0}, {-1, 0, 0, 0}, {-1.8f, 0.3f, -0.2f, 0.1f}, {9, -7, 5, 3}};
  for (int64_t i = 0; i < std::min<int64_t>(m, 4); ++i)
    for (int c = 0; c < 4; ++c)
      rot[i * 4 + c] = special[i][c];
  return g;
}

} // namespace trellis::output::fixtures

#endif // TRELLIS_TEST_UNIT_OUTPUT_TESTMESHES_H
