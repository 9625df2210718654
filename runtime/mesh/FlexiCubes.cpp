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

/// Integer coordinates of a lattice vertex or a cube.
struct Point3 {
  int64_t x, y, z;
};

/// The lattice state the extraction steps share: the active cubes of batch 0
/// and, per lattice vertex of an active cube, its slot and the mean sdf,
/// position and colour. Cubes are keyed (x*R + y)*R + z and vertices
/// (x*(R+1) + y)*(R+1) + z, so that key order is (x, y, z) order.
struct Lattice {
  int R = 0;
  int64_t Rv = 0;                  // vertices per axis: R + 1
  const int32_t *coords = nullptr; // [N,4] rows of (batch, x, y, z)
  const float *fields = nullptr;   // [N,kMeshHeadChannels]
  std::unordered_map<int64_t, int64_t> activeRow; // cube key -> row
  std::vector<int64_t> sortedActive;              // active cube keys, ascending
  std::unordered_map<int64_t, int32_t> vslot;     // vertex key -> slot
  std::vector<float> vsdf, vpos, vcol;            // per slot: 1, 3 and 6 values

  int64_t vertexKey(int64_t x, int64_t y, int64_t z) const {
    return (x * Rv + y) * Rv + z;
  }
  int64_t cubeKey(int64_t x, int64_t y, int64_t z) const {
    return (x * R + y) * int64_t(R) + z;
  }
  Point3 vertexAt(int64_t key) const {
    return {key / (Rv * Rv), (key / Rv) % Rv, key % Rv};
  }
  Point3 cubeAt(int64_t key) const {
    return {key / (int64_t(R) * R), (key / R) % R, key % R};
  }
  /// The slot of vertex (x, y, z), -1 when no active cube has it.
  int32_t slotOf(int64_t x, int64_t y, int64_t z) const {
    auto it = vslot.find(vertexKey(x, y, z));
    return it == vslot.end() ? -1 : it->second;
  }
  /// The mean sdf of vertex (x, y, z); 1 (outside) when no active cube has it.
  float sdfAt(int64_t x, int64_t y, int64_t z) const {
    int32_t s = slotOf(x, y, z);
    return s < 0 ? 1.0f : vsdf[size_t(s)];
  }
  /// The marching-cubes case of cube (x, y, z): bit k set when corner k is
  /// inside (sdf < 0).
  int caseAt(int64_t x, int64_t y, int64_t z) const {
    int c = 0;
    for (int k = 0; k < 8; ++k)
      if (sdfAt(x + (k & 1), y + ((k >> 1) & 1), z + ((k >> 2) & 1)) < 0.0f)
        c |= 1 << k;
    return c;
  }
};

/// Indexes the active cubes of batch 0 (other batches' rows are skipped),
/// rejecting coordinates outside the grid and repeated cubes.
Status indexActiveCubes(Lattice &lattice, int64_t N) {
  const int R = lattice.R;
  lattice.activeRow.reserve(size_t(N) * 2);
  for (int64_t i = 0; i < N; ++i) {
    const int32_t *c = lattice.coords + 4 * i;
    if (c[0] != 0)
      continue;
    for (int j = 1; j < 4; ++j)
      if (c[j] < 0 || c[j] >= R)
        return err("extractFlexiCubes: coordinate out of [0, R) at row ",
                   std::to_string(i));
    if (!lattice.activeRow.emplace(lattice.cubeKey(c[1], c[2], c[3]), i).second)
      return err("extractFlexiCubes: duplicate cube at row ",
                 std::to_string(i));
  }
  lattice.sortedActive.reserve(lattice.activeRow.size());
  for (auto &kv : lattice.activeRow)
    lattice.sortedActive.push_back(kv.first);
  std::sort(lattice.sortedActive.begin(), lattice.sortedActive.end());
  return Status::ok();
}

/// Per vertex slot: the sums of [sdf, deform(3), colour(6)] over the active
/// cubes that have the vertex (10 values a slot), and their number.
struct VertexSums {
  std::vector<double> sum;
  std::vector<int32_t> count;
};

/// Steps 1-2: gives every vertex of an active cube a slot (in ascending cube
/// order, then corner order) and sums its per-cube values in double, the sdf
/// biased by -1/R.
VertexSums accumulateVertexSums(Lattice &lattice) {
  VertexSums sums;
  lattice.vslot.reserve(lattice.activeRow.size() * 4);
  const float bias = -1.0f / float(lattice.R);
  for (int64_t key : lattice.sortedActive) {
    int64_t row = lattice.activeRow.at(key);
    const int32_t *c = lattice.coords + 4 * row;
    const float *f = lattice.fields + kMeshHeadChannels * row;
    for (int k = 0; k < 8; ++k) {
      int64_t vk = lattice.vertexKey(c[1] + (k & 1), c[2] + ((k >> 1) & 1),
                                     c[3] + ((k >> 2) & 1));
      auto [it, inserted] =
          lattice.vslot.emplace(vk, int32_t(sums.count.size()));
      if (inserted) {
        sums.count.push_back(0);
        sums.sum.resize(sums.sum.size() + 10, 0.0);
      }
      double *s = sums.sum.data() + 10 * size_t(it->second);
      s[0] += double(f[k] + bias);
      for (int j = 0; j < 3; ++j)
        s[1 + j] += double(f[8 + 3 * k + j]);
      for (int j = 0; j < 6; ++j)
        s[4 + j] += double(f[53 + 6 * k + j]);
      ++sums.count[size_t(it->second)];
    }
  }
  return sums;
}

/// From the sums: per vertex the mean sdf, the position deformed by the mean
/// deform (step 4) and the sigmoid of the mean colour.
void computeVertexMeans(Lattice &lattice, const VertexSums &sums) {
  const int R = lattice.R;
  const size_t nv = sums.count.size();
  lattice.vsdf.resize(nv);
  lattice.vpos.resize(3 * nv);
  lattice.vcol.resize(6 * nv);
  const float defScale = float((1.0 - 1e-8) / (2.0 * R));
  for (auto &kv : lattice.vslot) {
    size_t s = size_t(kv.second);
    Point3 v = lattice.vertexAt(kv.first);
    const double *m = sums.sum.data() + 10 * s;
    float inv = 1.0f / float(sums.count[s]);
    lattice.vsdf[s] = float(m[0]) * inv;
    const int64_t xyz[3] = {v.x, v.y, v.z};
    for (int j = 0; j < 3; ++j)
      lattice.vpos[3 * s + j] = float(xyz[j]) / float(R) - 0.5f +
                                defScale * std::tanh(float(m[1 + j]) * inv);
    for (int j = 0; j < 6; ++j)
      lattice.vcol[6 * s + j] = sigmoidf(float(m[4 + j]) * inv);
  }
}

/// Candidate cubes: the active cubes and their 26-neighbours inside the
/// grid, ascending, each once.
std::vector<int64_t> candidateCubes(const Lattice &lattice) {
  const int R = lattice.R;
  std::vector<int64_t> cand;
  cand.reserve(lattice.sortedActive.size() * 4);
  for (int64_t key : lattice.sortedActive) {
    auto [x, y, z] = lattice.cubeAt(key);
    for (int dx = -1; dx <= 1; ++dx)
      for (int dy = -1; dy <= 1; ++dy)
        for (int dz = -1; dz <= 1; ++dz) {
          int64_t a = x + dx, b = y + dy, c = z + dz;
          if (a < 0 || b < 0 || c < 0 || a >= R || b >= R || c >= R)
            continue;
          cand.push_back(lattice.cubeKey(a, b, c));
        }
  }
  std::sort(cand.begin(), cand.end());
  cand.erase(std::unique(cand.begin(), cand.end()), cand.end());
  return cand;
}

/// A surface cube, its (possibly resolved) case and table choice.
struct SurfCube {
  int64_t key;
  int caseId;
  bool alt;
};

/// The candidate cubes the surface crosses (neither all outside nor all
/// inside), in candidate order.
std::vector<SurfCube> surfaceCubes(const Lattice &lattice,
                                   const std::vector<int64_t> &cand) {
  std::vector<SurfCube> surf;
  for (int64_t key : cand) {
    auto [x, y, z] = lattice.cubeAt(key);
    int c = lattice.caseAt(x, y, z);
    if (c != 0 && c != 255)
      surf.push_back({key, c, false});
  }
  return surf;
}

/// Whether a surface cube groups its edges around its inside corners.
bool usesInside(const SurfCube &sc) {
  return (kPrimaryGroupsInside[sc.caseId] != 0) != sc.alt;
}

/// The index in `surf` (ascending keys) of the surface cube across face `f`
/// (axis f/2, side f%2) of cube `key`; -1 outside the grid or when that cube
/// is no surface cube.
int64_t neighbourAcross(const Lattice &lattice,
                        const std::vector<SurfCube> &surf, int64_t key, int f) {
  const int R = lattice.R;
  Point3 p = lattice.cubeAt(key);
  int64_t n[3] = {p.x, p.y, p.z};
  n[f / 2] += (f % 2) ? 1 : -1;
  if (n[f / 2] < 0 || n[f / 2] >= R)
    return -1;
  int64_t nkey = lattice.cubeKey(n[0], n[1], n[2]);
  auto it = std::lower_bound(
      surf.begin(), surf.end(), nkey,
      [](const SurfCube &sc, int64_t k) { return sc.key < k; });
  return it != surf.end() && it->key == nkey ? int64_t(it - surf.begin()) : -1;
}

/// Whether the outside-grouping cube `sc` meets, across one of its ambiguous
/// faces `amb`, an inside-grouping neighbour that pairs the face's edges the
/// other way (which would leave a hole).
bool hasIncompatibleFace(const Lattice &lattice,
                         const std::vector<SurfCube> &surf, const SurfCube &sc,
                         int amb) {
  bool flip = false;
  for (int f = 0; f < 6 && !flip; ++f) {
    if (!((amb >> f) & 1))
      continue;
    int64_t ni = neighbourAcross(lattice, surf, sc.key, f);
    if (ni < 0)
      continue;
    const SurfCube &nb = surf[size_t(ni)];
    int axis = f / 2, side = f % 2;
    flip = usesInside(nb) && facePairing(sc.caseId, sc.alt, axis, side) == 2 &&
           facePairing(nb.caseId, nb.alt, axis, 1 - side) == 1;
  }
  return flip;
}

/// Ambiguous faces: a cube grouping by its outside corners whose neighbour
/// across an ambiguous face groups by its inside corners, so that the face's
/// edges are paired around the outside corners on one side and around the
/// inside corners on the other (a hole), switches to its inside-corner
/// grouping. Switching only ever goes that way, so the propagation ends and
/// its result does not depend on the visiting order. Returns the number of
/// switches.
int64_t resolveAmbiguities(const Lattice &lattice,
                           std::vector<SurfCube> &surf) {
  int64_t resolved = 0;
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
    if (!hasIncompatibleFace(lattice, surf, sc, amb))
      continue;
    sc.alt = !sc.alt;
    ++resolved;
    for (int f = 0; f < 6; ++f) {
      if (!((amb >> f) & 1))
        continue;
      int64_t ni = neighbourAcross(lattice, surf, sc.key, f);
      if (ni >= 0 && !usesInside(surf[size_t(ni)]))
        work.push_back(ni);
    }
  }
  return resolved;
}

/// The dual vertices of the surface cubes, numbered locally (cube order, then
/// group), and the surface edges they sit on (the quads to be).
struct DualVertices {
  std::vector<float> pos, col; // 3 and 6 per local dual vertex
  std::vector<int32_t> offset; // per cube: its first local index, + the total
  std::vector<int32_t> count;  // per cube: its number of dual vertices
  std::vector<float> gamma;    // per cube: the quad split weight
  std::vector<QuadEdge> edges; // one per (group, edge)
};

/// The learned weights of one cube (zeros for a cube that is not active):
/// per edge beta, per corner alpha, and the quad split weight gamma.
struct CubeWeights {
  float beta[12], alpha[8], gamma;
};

CubeWeights cubeWeights(const Lattice &lattice, int64_t key) {
  CubeWeights cw;
  float w[21] = {};
  auto it = lattice.activeRow.find(key);
  if (it != lattice.activeRow.end())
    for (int m = 0; m < 21; ++m)
      w[m] = lattice.fields[kMeshHeadChannels * it->second + 32 + m];
  for (int e = 0; e < 12; ++e)
    cw.beta[e] = std::tanh(w[e]) * kWeightScale + 1.0f;
  for (int k = 0; k < 8; ++k)
    cw.alpha[k] = std::tanh(w[12 + k]) * kWeightScale + 1.0f;
  cw.gamma = sigmoidf(w[20]) * kWeightScale + 0.005f;
  return cw;
}

/// The 8 corners of one cube: vertex key, sdf, position and colour (a vertex
/// no active cube has is outside, undeformed and grey).
struct CubeCorners {
  float s[8], p[8][3], col[8][6];
  int64_t vk[8];
};

CubeCorners cubeCorners(const Lattice &lattice, int64_t key) {
  const int R = lattice.R;
  auto [x, y, z] = lattice.cubeAt(key);
  CubeCorners cc;
  for (int k = 0; k < 8; ++k) {
    int64_t a = x + (k & 1), b = y + ((k >> 1) & 1), c = z + ((k >> 2) & 1);
    cc.vk[k] = lattice.vertexKey(a, b, c);
    int32_t slot = lattice.slotOf(a, b, c);
    if (slot >= 0) {
      cc.s[k] = lattice.vsdf[size_t(slot)];
      for (int j = 0; j < 3; ++j)
        cc.p[k][j] = lattice.vpos[3 * size_t(slot) + size_t(j)];
      for (int j = 0; j < 6; ++j)
        cc.col[k][j] = lattice.vcol[6 * size_t(slot) + size_t(j)];
    } else {
      cc.s[k] = 1.0f;
      const int64_t abc[3] = {a, b, c};
      for (int j = 0; j < 3; ++j)
        cc.p[k][j] = float(abc[j]) / float(R) - 0.5f;
      for (int j = 0; j < 6; ++j)
        cc.col[k][j] = 0.5f;
    }
  }
  return cc;
}

/// Appends the dual vertices of surface cube `ci` (one per group of its
/// table): the beta-weighted mean of its edges' alpha-weighted zero
/// crossings, accumulated in double; and a quad edge per grouped edge.
void addCubeDualVertices(const SurfCube &sc, size_t ci, const CubeCorners &cc,
                         const CubeWeights &cw, DualVertices &dv) {
  const auto &groups =
      sc.alt ? kAltDualGroups[sc.caseId] : kDualGroups[sc.caseId];
  int num =
      sc.alt ? kAltNumDualVertices[sc.caseId] : kNumDualVertices[sc.caseId];
  dv.count[ci] = num;
  dv.offset[ci + 1] = dv.offset[ci] + num;
  for (int g = 0; g < num; ++g) {
    double accP[3] = {0, 0, 0}, accC[6] = {0, 0, 0, 0, 0, 0}, accB = 0;
    for (int j = 0; j < 7 && groups[g][j] >= 0; ++j) {
      int e = groups[g][j];
      int a = kEdges[e][0], b = kEdges[e][1];
      float wa = cc.s[a] * cw.alpha[a], wb = cc.s[b] * cw.alpha[b];
      float den = wb - wa;
      float be = cw.beta[e];
      for (int d = 0; d < 3; ++d)
        accP[d] += double(be * ((cc.p[a][d] * wb - cc.p[b][d] * wa) / den));
      for (int d = 0; d < 6; ++d)
        accC[d] += double(be * ((cc.col[a][d] * wb - cc.col[b][d] * wa) / den));
      accB += double(be);
      dv.edges.push_back({cc.vk[a], cc.vk[b], int32_t(ci), dv.offset[ci] + g});
    }
    for (int d = 0; d < 3; ++d)
      dv.pos.push_back(float(accP[d] / accB));
    for (int d = 0; d < 6; ++d)
      dv.col.push_back(float(accC[d] / accB));
  }
}

/// Dual vertices per surface cube, in cube order.
DualVertices computeDualVertices(const Lattice &lattice,
                                 const std::vector<SurfCube> &surf) {
  DualVertices dv;
  dv.offset.assign(surf.size() + 1, 0);
  dv.count.resize(surf.size());
  dv.gamma.resize(surf.size());
  dv.edges.reserve(surf.size() * 4);
  for (size_t ci = 0; ci < surf.size(); ++ci) {
    const SurfCube &sc = surf[ci];
    CubeWeights cw = cubeWeights(lattice, sc.key);
    dv.gamma[ci] = cw.gamma;
    addCubeDualVertices(sc, ci, cubeCorners(lattice, sc.key), cw, dv);
  }
  return dv;
}

/// Global numbering: by dual-vertex count, then cube order, then group.
/// Returns the global index of each local dual vertex.
Result<std::vector<int32_t>> numberDualVertices(const DualVertices &dv) {
  const size_t totalVd = size_t(dv.offset.back());
  if (totalVd > size_t(INT32_MAX))
    return Error{"extractFlexiCubes: too many vertices for I32 faces"};
  std::vector<int32_t> globalOf(totalVd);
  int32_t next = 0;
  for (int num = 1; num <= 4; ++num)
    for (size_t ci = 0; ci < dv.count.size(); ++ci)
      if (dv.count[ci] == num)
        for (int g = 0; g < num; ++g)
          globalOf[size_t(dv.offset[ci] + g)] = next++;
  return globalOf;
}

/// Writes the dual vertices' positions and colours in global order.
void writeVertices(const DualVertices &dv, const std::vector<int32_t> &globalOf,
                   MeshResult &out) {
  const size_t totalVd = globalOf.size();
  out.vertices = HostTensor(DType::F32, {int64_t(totalVd), 3});
  out.vertexAttrs = HostTensor(DType::F32, {int64_t(totalVd), 6});
  float *ov = out.vertices.mutableData<float>();
  float *oa = out.vertexAttrs.mutableData<float>();
  for (size_t i = 0; i < totalVd; ++i) {
    size_t g = size_t(globalOf[i]);
    for (int d = 0; d < 3; ++d)
      ov[3 * g + size_t(d)] = dv.pos[3 * i + size_t(d)];
    for (int d = 0; d < 6; ++d)
      oa[6 * g + size_t(d)] = dv.col[6 * i + size_t(d)];
  }
}

/// Quads: the lattice edges shared by exactly 4 surface cubes, in edge order,
/// each split by the gamma rule into 2 triangles (6 global vertex indices).
/// Sorts `dv.edges`.
std::vector<int32_t> triangulateQuads(const Lattice &lattice, DualVertices &dv,
                                      const std::vector<int32_t> &globalOf) {
  std::vector<QuadEdge> &qedges = dv.edges;
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
      auto [fx, fy, fz] = lattice.vertexAt(qedges[i].first);
      bool outsideFirst = lattice.sdfAt(fx, fy, fz) > 0.0f;
      static constexpr int kOrderPos[4] = {0, 1, 3, 2};
      static constexpr int kOrderNeg[4] = {2, 3, 1, 0};
      const int *order = outsideFirst ? kOrderPos : kOrderNeg;
      int32_t q[4];
      float gm[4];
      for (int k = 0; k < 4; ++k) {
        const QuadEdge &qe = qedges[i + size_t(order[k])];
        q[k] = globalOf[size_t(qe.localVd)];
        gm[k] = dv.gamma[size_t(qe.cube)];
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
  return faces;
}

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

  Lattice lattice;
  lattice.R = R;
  lattice.Rv = int64_t(R) + 1;
  lattice.coords = coords.data<int32_t>();
  lattice.fields = fields.data<float>();
  TRELLIS_RETURN_IF_ERROR(indexActiveCubes(lattice, coords.dim(0)));
  computeVertexMeans(lattice, accumulateVertexSums(lattice));

  std::vector<int64_t> cand = candidateCubes(lattice);
  MeshResult out;
  out.candidateCubes = int64_t(cand.size());
  std::vector<SurfCube> surf = surfaceCubes(lattice, cand);
  out.resolvedAmbiguities = resolveAmbiguities(lattice, surf);
  out.surfaceCubes = int64_t(surf.size());

  DualVertices dv = computeDualVertices(lattice, surf);
  TRELLIS_ASSIGN_OR_RETURN(std::vector<int32_t> globalOf,
                           numberDualVertices(dv));
  writeVertices(dv, globalOf, out);
  std::vector<int32_t> faces = triangulateQuads(lattice, dv, globalOf);
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
