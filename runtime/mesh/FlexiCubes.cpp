//===- FlexiCubes.cpp - Sparse FlexiCubes mesh extraction (CPU) -----------===//
//
// Spec §7.4 steps 1-6, run over the candidate cubes only. Ordering follows the
// dense formulation as far as it is known:
//  * dual vertices are numbered per dual-vertex count (all 1-vertex cubes
//    first, then 2, 3, 4), each in ascending cube flat index, then in group
//    order (FlexiCubes' loop over the distinct dual-vertex counts);
//  * quads in ascending (first lattice vertex, second lattice vertex) order of
//    their edge, the 4 cubes of a quad in ascending flat index, reordered to
//    (0,1,3,2) when sdf(first) > 0, else (2,3,1,0); split by the gamma rule
//    into 2 triangles stored one after the other.
//
// Ambiguity (our own rule, the tables being derived rather than copied): the
// primary groups come from the smaller corner part (complement-symmetric). On
// an ambiguous face, a cube grouping by its outside corners and a neighbour
// grouping by its inside corners can pair the face's 4 surface edges
// incompatibly (one around the outside corners only, the other around the
// inside corners only), which would leave a hole. The outside-grouping cube
// then switches to its inside-corner grouping (the alternative table), and the
// switch propagates. Every face ends up compatible, so the mesh has no
// boundary edges inside the grid.
//
//===----------------------------------------------------------------------===//
#include "trellis/Mesh/FlexiCubes.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <string>
#include <unordered_map>
#include <vector>

namespace trellis::mesh {

namespace {
#include "runtime/mesh/FlexiCubesTables.inc"

constexpr int kEdges[12][2] = {{0, 1}, {1, 5}, {4, 5}, {0, 4}, {2, 3}, {3, 7},
                               {6, 7}, {2, 6}, {2, 0}, {3, 1}, {7, 5}, {6, 4}};
constexpr float kWeightScale = 0.99f;

/// Group index of each of the 12 edges for a case (primary or alternative).
std::array<int8_t, 12> edgeGroups(int caseId, bool alt) {
  std::array<int8_t, 12> g;
  g.fill(-1);
  const auto &groups = alt ? kAltDualGroups[caseId] : kDualGroups[caseId];
  int n = alt ? kAltNumDualVertices[caseId] : kNumDualVertices[caseId];
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < 7 && groups[i][j] >= 0; ++j)
      g[size_t(groups[i][j])] = int8_t(i);
  return g;
}

/// How a case groups the 4 surface edges of its ambiguous face (axis, side):
/// bit 0: the two face edges at each inside corner share a group; bit 1: the
/// same at each outside corner.
int facePairing(int caseId, bool alt, int axis, int side) {
  auto g = edgeGroups(caseId, alt);
  bool in = true, out = true;
  for (int c = 0; c < 8; ++c) {
    if (((c >> axis) & 1) != side)
      continue;
    int found[2], n = 0;
    for (int e = 0; e < 12; ++e) {
      int a = kEdges[e][0], b = kEdges[e][1];
      if (((a >> axis) & 1) != side || ((b >> axis) & 1) != side)
        continue;
      if (a == c || b == c)
        found[n++] = g[size_t(e)];
    }
    bool same = n == 2 && found[0] >= 0 && found[0] == found[1];
    if ((caseId >> c) & 1)
      in = in && same;
    else
      out = out && same;
  }
  return (in ? 1 : 0) | (out ? 2 : 0);
}

Error err(std::string msg, const std::string &detail) {
  msg += detail;
  return Error{std::move(msg)};
}

float sigmoidf(float x) { return 1.0f / (1.0f + std::exp(-x)); }

struct QuadEdge {
  int64_t first, second; // lattice vertex flat ids (first per the edge table)
  int32_t cube;          // surface cube ordinal (ascending flat index)
  int32_t localVd;       // dual vertex index in the per-cube-order list
};

} // namespace

namespace tables {
int numDualVertices(int c) { return kNumDualVertices[c]; }
int dualGroupEdge(int c, int g, int i) { return kDualGroups[c][g][i]; }
int altNumDualVertices(int c) { return kAltNumDualVertices[c]; }
int altDualGroupEdge(int c, int g, int i) { return kAltDualGroups[c][g][i]; }
int ambiguousFaces(int c) { return kAmbiguousFaces[c]; }
int edgeCorner(int e, int end) { return kEdges[e][end]; }
} // namespace tables

Status checkFlexiCubesInput(const HostTensor &coords, const HostTensor &fields,
                            int R) {
  if (R <= 0 || R > 1024)
    return err("extractFlexiCubes: resolution must be in [1, 1024], got ",
               std::to_string(R));
  if (coords.dtype() != DType::I32 || coords.rank() != 2 || coords.dim(1) != 4)
    return err("extractFlexiCubes: coords must be I32 [N,4], got ",
               shapeToString(coords.shape()));
  if (fields.dtype() != DType::F32 || fields.rank() != 2 ||
      fields.dim(1) != kMeshHeadChannels || fields.dim(0) != coords.dim(0))
    return err("extractFlexiCubes: fields must be F32 [N,101] matching "
               "coords, got ",
               shapeToString(fields.shape()));
  return Status::ok();
}

Result<MeshResult> extractFlexiCubes(const HostTensor &coords,
                                     const HostTensor &fields, int R) {
  TRELLIS_RETURN_IF_ERROR(checkFlexiCubesInput(coords, fields, R));

  const int64_t N = coords.dim(0);
  const int32_t *cd = coords.data<int32_t>();
  const float *fd = fields.data<float>();
  const int64_t Rv = int64_t(R) + 1;
  auto vkey = [Rv](int64_t x, int64_t y, int64_t z) {
    return (x * Rv + y) * Rv + z;
  };
  auto ckey = [R](int64_t x, int64_t y, int64_t z) {
    return (x * R + y) * int64_t(R) + z;
  };

  // Active cubes of batch 0 (flat cube id -> row).
  std::unordered_map<int64_t, int64_t> activeRow;
  activeRow.reserve(size_t(N) * 2);
  for (int64_t i = 0; i < N; ++i) {
    const int32_t *c = cd + 4 * i;
    if (c[0] != 0)
      continue;
    for (int j = 1; j < 4; ++j)
      if (c[j] < 0 || c[j] >= R)
        return err("extractFlexiCubes: coordinate out of [0, R) at row ",
                   std::to_string(i));
    if (!activeRow.emplace(ckey(c[1], c[2], c[3]), i).second)
      return err("extractFlexiCubes: duplicate cube at row ",
                 std::to_string(i));
  }

  // Step 1-2: per-vertex true mean of [sdf, deform(3), color(6)].
  std::unordered_map<int64_t, int32_t> vslot;
  vslot.reserve(activeRow.size() * 4);
  std::vector<double> vsum;
  std::vector<int32_t> vcount;
  std::vector<int64_t> sortedActive;
  sortedActive.reserve(activeRow.size());
  for (auto &kv : activeRow)
    sortedActive.push_back(kv.first);
  std::sort(sortedActive.begin(), sortedActive.end());
  const float bias = -1.0f / float(R);
  for (int64_t key : sortedActive) {
    int64_t row = activeRow[key];
    const int32_t *c = cd + 4 * row;
    const float *f = fd + kMeshHeadChannels * row;
    for (int k = 0; k < 8; ++k) {
      int64_t vk =
          vkey(c[1] + (k & 1), c[2] + ((k >> 1) & 1), c[3] + ((k >> 2) & 1));
      auto [it, inserted] = vslot.emplace(vk, int32_t(vcount.size()));
      if (inserted) {
        vcount.push_back(0);
        vsum.resize(vsum.size() + 10, 0.0);
      }
      double *s = vsum.data() + 10 * size_t(it->second);
      s[0] += double(f[k] + bias);
      for (int j = 0; j < 3; ++j)
        s[1 + j] += double(f[8 + 3 * k + j]);
      for (int j = 0; j < 6; ++j)
        s[4 + j] += double(f[53 + 6 * k + j]);
      ++vcount[size_t(it->second)];
    }
  }
  const size_t nv = vcount.size();
  // Per vertex: sdf, position (step 4), sigmoid colour.
  std::vector<float> vsdf(nv), vpos(3 * nv), vcol(6 * nv);
  const float defScale = float((1.0 - 1e-8) / (2.0 * R));
  for (auto &kv : vslot) {
    size_t s = size_t(kv.second);
    int64_t key = kv.first;
    int64_t z = key % Rv, y = (key / Rv) % Rv, x = key / (Rv * Rv);
    const double *m = vsum.data() + 10 * s;
    float inv = 1.0f / float(vcount[s]);
    vsdf[s] = float(m[0]) * inv;
    const int64_t xyz[3] = {x, y, z};
    for (int j = 0; j < 3; ++j)
      vpos[3 * s + j] = float(xyz[j]) / float(R) - 0.5f +
                        defScale * std::tanh(float(m[1 + j]) * inv);
    for (int j = 0; j < 6; ++j)
      vcol[6 * s + j] = sigmoidf(float(m[4 + j]) * inv);
  }
  auto slotOf = [&](int64_t x, int64_t y, int64_t z) -> int32_t {
    auto it = vslot.find(vkey(x, y, z));
    return it == vslot.end() ? -1 : it->second;
  };
  auto sdfAt = [&](int64_t x, int64_t y, int64_t z) -> float {
    int32_t s = slotOf(x, y, z);
    return s < 0 ? 1.0f : vsdf[size_t(s)];
  };
  auto caseAt = [&](int64_t x, int64_t y, int64_t z) {
    int c = 0;
    for (int k = 0; k < 8; ++k)
      if (sdfAt(x + (k & 1), y + ((k >> 1) & 1), z + ((k >> 2) & 1)) < 0.0f)
        c |= 1 << k;
    return c;
  };

  // Candidate cubes: active cubes and their 26-neighbours, ascending.
  std::vector<int64_t> cand;
  cand.reserve(sortedActive.size() * 4);
  for (int64_t key : sortedActive) {
    int64_t z = key % R, y = (key / R) % R, x = key / (int64_t(R) * R);
    for (int dx = -1; dx <= 1; ++dx)
      for (int dy = -1; dy <= 1; ++dy)
        for (int dz = -1; dz <= 1; ++dz) {
          int64_t a = x + dx, b = y + dy, c = z + dz;
          if (a < 0 || b < 0 || c < 0 || a >= R || b >= R || c >= R)
            continue;
          cand.push_back(ckey(a, b, c));
        }
  }
  std::sort(cand.begin(), cand.end());
  cand.erase(std::unique(cand.begin(), cand.end()), cand.end());

  MeshResult out;
  out.candidateCubes = int64_t(cand.size());

  // Surface cubes, their (possibly resolved) case and table choice.
  struct SurfCube {
    int64_t key;
    int caseId;
    bool alt;
  };
  std::vector<SurfCube> surf;
  for (int64_t key : cand) {
    int64_t z = key % R, y = (key / R) % R, x = key / (int64_t(R) * R);
    int c = caseAt(x, y, z);
    if (c != 0 && c != 255)
      surf.push_back({key, c, false});
  }

  // Ambiguous faces: a cube grouping by its outside corners whose neighbour
  // across an ambiguous face groups by its inside corners, so that the face's
  // edges are paired around the outside corners on one side and around the
  // inside corners on the other (a hole), switches to its inside-corner
  // grouping. Switching only ever goes that way, so the propagation ends and
  // its result does not depend on the visiting order.
  auto surfIndex = [&](int64_t key) -> int64_t {
    auto it = std::lower_bound(
        surf.begin(), surf.end(), key,
        [](const SurfCube &sc, int64_t k) { return sc.key < k; });
    return it != surf.end() && it->key == key ? int64_t(it - surf.begin()) : -1;
  };
  auto usesInside = [&](const SurfCube &sc) {
    return (kPrimaryGroupsInside[sc.caseId] != 0) != sc.alt;
  };
  auto neighbourAcross = [&](int64_t key, int f) -> int64_t {
    int64_t n[3] = {key / (int64_t(R) * R), (key / R) % R, key % R};
    n[f / 2] += (f % 2) ? 1 : -1;
    if (n[f / 2] < 0 || n[f / 2] >= R)
      return -1;
    return surfIndex(ckey(n[0], n[1], n[2]));
  };
  std::vector<int64_t> work;
  for (size_t i = 0; i < surf.size(); ++i)
    if (kAmbiguousFaces[surf[i].caseId] && !usesInside(surf[i]))
      work.push_back(int64_t(i));
  while (!work.empty()) {
    SurfCube &sc = surf[size_t(work.back())];
    work.pop_back();
    int amb = kAmbiguousFaces[sc.caseId];
    if (usesInside(sc))
      continue;
    bool flip = false;
    for (int f = 0; f < 6 && !flip; ++f) {
      if (!((amb >> f) & 1))
        continue;
      int64_t ni = neighbourAcross(sc.key, f);
      if (ni < 0)
        continue;
      const SurfCube &nb = surf[size_t(ni)];
      int axis = f / 2, side = f % 2;
      flip = usesInside(nb) &&
             facePairing(sc.caseId, sc.alt, axis, side) == 2 &&
             facePairing(nb.caseId, nb.alt, axis, 1 - side) == 1;
    }
    if (!flip)
      continue;
    sc.alt = !sc.alt;
    ++out.resolvedAmbiguities;
    for (int f = 0; f < 6; ++f) {
      if (!((amb >> f) & 1))
        continue;
      int64_t ni = neighbourAcross(sc.key, f);
      if (ni >= 0 && !usesInside(surf[size_t(ni)]))
        work.push_back(ni);
    }
  }
  out.surfaceCubes = int64_t(surf.size());

  // Dual vertices per surface cube, in cube order.
  std::vector<float> dpos, dcol; // per local dual vertex
  std::vector<int32_t> dOffset(surf.size() + 1, 0), dNum(surf.size());
  std::vector<float> cubeGamma(surf.size());
  std::vector<QuadEdge> qedges;
  qedges.reserve(surf.size() * 4);
  for (size_t ci = 0; ci < surf.size(); ++ci) {
    const SurfCube &sc = surf[ci];
    int64_t z = sc.key % R, y = (sc.key / R) % R, x = sc.key / (int64_t(R) * R);
    float w[21] = {};
    auto it = activeRow.find(sc.key);
    if (it != activeRow.end())
      for (int m = 0; m < 21; ++m)
        w[m] = fd[kMeshHeadChannels * it->second + 32 + m];
    float beta[12], alpha[8];
    for (int e = 0; e < 12; ++e)
      beta[e] = std::tanh(w[e]) * kWeightScale + 1.0f;
    for (int k = 0; k < 8; ++k)
      alpha[k] = std::tanh(w[12 + k]) * kWeightScale + 1.0f;
    cubeGamma[ci] = sigmoidf(w[20]) * kWeightScale + 0.005f;

    float s[8], p[8][3], col[8][6];
    int64_t vk[8];
    for (int k = 0; k < 8; ++k) {
      int64_t a = x + (k & 1), b = y + ((k >> 1) & 1), c = z + ((k >> 2) & 1);
      vk[k] = vkey(a, b, c);
      int32_t slot = slotOf(a, b, c);
      if (slot >= 0) {
        s[k] = vsdf[size_t(slot)];
        for (int j = 0; j < 3; ++j)
          p[k][j] = vpos[3 * size_t(slot) + size_t(j)];
        for (int j = 0; j < 6; ++j)
          col[k][j] = vcol[6 * size_t(slot) + size_t(j)];
      } else {
        s[k] = 1.0f;
        const int64_t abc[3] = {a, b, c};
        for (int j = 0; j < 3; ++j)
          p[k][j] = float(abc[j]) / float(R) - 0.5f;
        for (int j = 0; j < 6; ++j)
          col[k][j] = 0.5f;
      }
    }
    const auto &groups =
        sc.alt ? kAltDualGroups[sc.caseId] : kDualGroups[sc.caseId];
    int num =
        sc.alt ? kAltNumDualVertices[sc.caseId] : kNumDualVertices[sc.caseId];
    dNum[ci] = num;
    dOffset[ci + 1] = dOffset[ci] + num;
    for (int g = 0; g < num; ++g) {
      double accP[3] = {0, 0, 0}, accC[6] = {0, 0, 0, 0, 0, 0}, accB = 0;
      for (int j = 0; j < 7 && groups[g][j] >= 0; ++j) {
        int e = groups[g][j];
        int a = kEdges[e][0], b = kEdges[e][1];
        float wa = s[a] * alpha[a], wb = s[b] * alpha[b];
        float den = wb - wa;
        float be = beta[e];
        for (int d = 0; d < 3; ++d)
          accP[d] += double(be * ((p[a][d] * wb - p[b][d] * wa) / den));
        for (int d = 0; d < 6; ++d)
          accC[d] += double(be * ((col[a][d] * wb - col[b][d] * wa) / den));
        accB += double(be);
        qedges.push_back({vk[a], vk[b], int32_t(ci), dOffset[ci] + g});
      }
      for (int d = 0; d < 3; ++d)
        dpos.push_back(float(accP[d] / accB));
      for (int d = 0; d < 6; ++d)
        dcol.push_back(float(accC[d] / accB));
    }
  }

  // Global numbering: by dual-vertex count, then cube order, then group.
  const size_t totalVd = size_t(dOffset.back());
  if (totalVd > size_t(INT32_MAX))
    return Error{"extractFlexiCubes: too many vertices for I32 faces"};
  std::vector<int32_t> globalOf(totalVd);
  {
    int32_t next = 0;
    for (int num = 1; num <= 4; ++num)
      for (size_t ci = 0; ci < surf.size(); ++ci)
        if (dNum[ci] == num)
          for (int g = 0; g < num; ++g)
            globalOf[size_t(dOffset[ci] + g)] = next++;
  }
  out.vertices = HostTensor(DType::F32, {int64_t(totalVd), 3});
  out.vertexAttrs = HostTensor(DType::F32, {int64_t(totalVd), 6});
  float *ov = out.vertices.mutableData<float>();
  float *oa = out.vertexAttrs.mutableData<float>();
  for (size_t i = 0; i < totalVd; ++i) {
    size_t g = size_t(globalOf[i]);
    for (int d = 0; d < 3; ++d)
      ov[3 * g + size_t(d)] = dpos[3 * i + size_t(d)];
    for (int d = 0; d < 6; ++d)
      oa[6 * g + size_t(d)] = dcol[6 * i + size_t(d)];
  }

  // Quads: edges shared by exactly 4 surface cubes.
  std::stable_sort(
      qedges.begin(), qedges.end(), [](const QuadEdge &l, const QuadEdge &r) {
        return l.first != r.first ? l.first < r.first : l.second < r.second;
      });
  std::vector<int32_t> faces;
  faces.reserve(qedges.size() * 3 / 2);
  for (size_t i = 0; i < qedges.size();) {
    size_t j = i;
    while (j < qedges.size() && qedges[j].first == qedges[i].first &&
           qedges[j].second == qedges[i].second)
      ++j;
    if (j - i == 4) {
      int64_t fz = qedges[i].first % Rv, fy = (qedges[i].first / Rv) % Rv,
              fx = qedges[i].first / (Rv * Rv);
      bool outsideFirst = sdfAt(fx, fy, fz) > 0.0f;
      static constexpr int kOrderPos[4] = {0, 1, 3, 2};
      static constexpr int kOrderNeg[4] = {2, 3, 1, 0};
      const int *order = outsideFirst ? kOrderPos : kOrderNeg;
      int32_t q[4];
      float gm[4];
      for (int k = 0; k < 4; ++k) {
        const QuadEdge &qe = qedges[i + size_t(order[k])];
        q[k] = globalOf[size_t(qe.localVd)];
        gm[k] = cubeGamma[size_t(qe.cube)];
      }
      if (gm[0] * gm[2] > gm[1] * gm[3]) {
        const int32_t t[6] = {q[0], q[1], q[2], q[0], q[2], q[3]};
        faces.insert(faces.end(), t, t + 6);
      } else {
        const int32_t t[6] = {q[0], q[1], q[3], q[3], q[1], q[2]};
        faces.insert(faces.end(), t, t + 6);
      }
    }
    i = j;
  }
  out.faces = HostTensor(DType::I32, {int64_t(faces.size() / 3), 3});
  if (!faces.empty())
    std::copy(faces.begin(), faces.end(), out.faces.mutableData<int32_t>());
  if (out.faces.numel() == 0) {
    out.vertices = HostTensor(DType::F32, {0, 3});
    out.vertexAttrs = HostTensor(DType::F32, {0, 6});
  }
  return out;
}

} // namespace trellis::mesh
