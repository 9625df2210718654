// FlexiCubes mesh extraction on the GPU (spec §7.4), the same mesh as the CPU
// reference runtime/mesh/FlexiCubes.cpp: same vertex and face order, the
// same float operations in the same order (explicit _rn intrinsics, so that
// nvcc contracts nothing into FMAs the CPU does not have), double sums where
// the CPU sums in double. Orchestrated by runtime/cuda/FlexiCubesGpu.cpp.
//
// Sets of cubes and lattice vertices are bitmaps over the dense grid, one row
// of 32-bit words per (x, y) (cubes: W = ceil(R/32) words, lattice vertices:
// Wv = ceil((R+1)/32)), so that word order is flat-index order. An exclusive
// scan of the words' popcounts gives every set element its rank, i.e. its
// index in the ascending flat-index order the CPU uses:
//   active   the decoder's cubes (batch 0)
//   vert     lattice vertices of active cubes (the CPU's vertex slots)
//   cand     active cubes and their 26-neighbours
//   surf     candidate cubes with a mixed case
//   quad x/y/z   lattice vertices that are the first vertex of a quad edge
//            along that axis (the CPU sorts quads by (first, second); for one
//            first vertex the y edge (second = v - y) comes before the z edge
//            (v + 1) before the x edge (v + Rv^2)).
// Kernels over bitmaps run one thread per bit (a warp per word).
#pragma once

#include <stdint.h>

// Shared with the host (FlexiCubesGpu.cpp builds it from the generated tables).
struct TrellisFcTables {
  int8_t edgeGroup[2][256][12]; // [alt][case][edge]: dual vertex, -1 none
  int8_t groups[2][256][4][7];  // [alt][case][group]: edges, -1 ends
  int8_t numDual[2][256];
  uint8_t ambiguousFaces[256];    // bit 2*axis+side
  uint8_t primaryInside[256];     // primary groups pair the inside corners
  uint8_t facePairing[2][256][6]; // [alt][case][2*axis+side], bits as CPU
};

#ifdef __CUDACC__

namespace trellis_fc {

constexpr int kScanThreads = 256, kScanItems = 8;
constexpr int kScanTile = kScanThreads * kScanItems;

__device__ __forceinline__ uint4 operator+(uint4 a, uint4 b) {
  return make_uint4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}
__device__ __forceinline__ uint32_t shflUp(uint32_t v, int d) {
  return __shfl_up_sync(0xffffffffu, v, d);
}
__device__ __forceinline__ uint4 shflUp(uint4 v, int d) {
  return make_uint4(shflUp(v.x, d), shflUp(v.y, d), shflUp(v.z, d),
                    shflUp(v.w, d));
}
__device__ __forceinline__ uint32_t shfl(uint32_t v, int l) {
  return __shfl_sync(0xffffffffu, v, l);
}
__device__ __forceinline__ uint4 shfl(uint4 v, int l) {
  return make_uint4(shfl(v.x, l), shfl(v.y, l), shfl(v.z, l), shfl(v.w, l));
}

// Exclusive scan over the block (blockDim a multiple of 32, at most 1024);
// `total` gets the block's sum. Every thread of the block must call it.
template <typename T> __device__ T blockExclusiveScan(T v, T &total) {
  __shared__ T warpSums[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  T incl = v;
  for (int d = 1; d < 32; d <<= 1) {
    T o = shflUp(incl, d);
    if (lane >= d)
      incl = incl + o;
  }
  if (lane == 31)
    warpSums[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    T s = lane < warps ? warpSums[lane] : T{};
    T si = s;
    for (int d = 1; d < 32; d <<= 1) {
      T o = shflUp(si, d);
      if (lane >= d)
        si = si + o;
    }
    if (lane < warps)
      warpSums[lane] = si; // inclusive over warps
  }
  __syncthreads();
  T excl = shflUp(incl, 1);
  if (lane == 0)
    excl = T{};
  if (warp > 0)
    excl = excl + warpSums[warp - 1];
  total = warpSums[warps - 1];
  __syncthreads(); // warpSums is reused by the next call
  return excl;
}

// Scan inputs: 32-bit values or their popcounts, or per-surface-cube dual
// vertex counts as the indicator vector (n==1, n==2, n==3, n==4).
struct LoadU32 {
  const uint32_t *in;
  int popc;
  __device__ uint32_t operator()(int64_t i) const {
    return popc ? uint32_t(__popc(in[i])) : in[i];
  }
};
struct LoadClass {
  const uint8_t *num;
  __device__ uint4 operator()(int64_t i) const {
    uint8_t n = num[i];
    return make_uint4(n == 1, n == 2, n == 3, n == 4);
  }
};

template <typename T, typename L>
__device__ void scanReduce(L load, int64_t n, T *blockSums) {
  const int64_t base =
      int64_t(blockIdx.x) * kScanTile + threadIdx.x * kScanItems;
  T s{};
  for (int i = 0; i < kScanItems; ++i)
    if (base + i < n)
      s = s + load(base + i);
  T total;
  blockExclusiveScan(s, total);
  if (threadIdx.x == 0)
    blockSums[blockIdx.x] = total;
}

// One block: exclusive scan of the tile sums in place, the total at [nb].
template <typename T> __device__ void scanBlocks(T *sums, int64_t nb) {
  T carry{};
  for (int64_t b = 0; b < nb; b += blockDim.x) {
    int64_t i = b + threadIdx.x;
    T v = i < nb ? sums[i] : T{};
    T total;
    T e = blockExclusiveScan(v, total);
    if (i < nb)
      sums[i] = carry + e;
    carry = carry + total;
  }
  if (threadIdx.x == 0)
    sums[nb] = carry;
}

template <typename T, typename L>
__device__ void scanDown(L load, int64_t n, const T *blockSums, T *out) {
  const int64_t base =
      int64_t(blockIdx.x) * kScanTile + threadIdx.x * kScanItems;
  T v[kScanItems];
  T s{};
  for (int i = 0; i < kScanItems; ++i) {
    v[i] = base + i < n ? load(base + i) : T{};
    s = s + v[i];
  }
  T total;
  T run = blockSums[blockIdx.x] + blockExclusiveScan(s, total);
  for (int i = 0; i < kScanItems; ++i)
    if (base + i < n) {
      out[base + i] = run;
      run = run + v[i];
    }
}

// -- Geometry helpers ---------------------------------------------------------

struct Grid {
  int32_t R, W, Wv; // cubes per axis, words per cube row, per vertex row
  __device__ int64_t cubeWord(int x, int y, int z) const {
    return (int64_t(x) * R + y) * W + (z >> 5);
  }
  __device__ int64_t vertWord(int x, int y, int z) const {
    return (int64_t(x) * (R + 1) + y) * Wv + (z >> 5);
  }
};

// Rank of a set bit (its index in ascending order), or -1 when not set.
__device__ __forceinline__ int64_t rankOf(const uint32_t *bits,
                                          const uint32_t *prefix, int64_t w,
                                          int z) {
  uint32_t word = bits[w], b = 1u << (z & 31);
  if (!(word & b))
    return -1;
  return int64_t(prefix[w]) + __popc(word & (b - 1));
}

__device__ __forceinline__ float tanhCpu(float x) {
  return float(tanh(double(x)));
}
// 1 / (1 + exp(-x)) in float, as the CPU's sigmoidf.
__device__ __forceinline__ float sigmoidCpu(float x) {
  return __fdiv_rn(1.0f, __fadd_rn(1.0f, float(exp(-double(x)))));
}

__constant__ const int kEdges[12][2] = {{0, 1}, {1, 5}, {4, 5}, {0, 4},
                                        {2, 3}, {3, 7}, {6, 7}, {2, 6},
                                        {2, 0}, {3, 1}, {7, 5}, {6, 4}};
constexpr int kChannels = 101;
constexpr float kWeightScale = 0.99f;

struct VertexData {
  const uint32_t *bits, *prefix;
  const float *sdf, *pos, *col;
};

// -- Kernels ------------------------------------------------------------------

// Active bitmap from the batch-0 rows; flags[0]: a coordinate out of range,
// flags[1]: a duplicate cube (the host then reports the CPU's message).
__device__ void mark(const int32_t *coords, int64_t n, Grid g, uint32_t *active,
                     int32_t *flags) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  const int32_t *c = coords + 4 * i;
  if (c[0] != 0)
    return;
  int x = c[1], y = c[2], z = c[3];
  if (x < 0 || y < 0 || z < 0 || x >= g.R || y >= g.R || z >= g.R) {
    flags[0] = 1;
    return;
  }
  uint32_t b = 1u << (z & 31);
  if (atomicOr(active + g.cubeWord(x, y, z), b) & b)
    flags[1] = 1;
}

__device__ void rows(const int32_t *coords, int64_t n, Grid g,
                     const uint32_t *active, const uint32_t *activePrefix,
                     int32_t *rowOf) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  const int32_t *c = coords + 4 * i;
  if (c[0] != 0 || c[1] < 0 || c[2] < 0 || c[3] < 0 || c[1] >= g.R ||
      c[2] >= g.R || c[3] >= g.R)
    return;
  int64_t r = rankOf(active, activePrefix, g.cubeWord(c[1], c[2], c[3]), c[3]);
  rowOf[r] = int32_t(i);
}

// One thread per lattice-vertex word (x, y in [0, R], w < Wv): the vertex
// word (OR of the active rows (x-dx, y-dy), dx, dy in {0, 1}, shifted by
// 0 or 1 in z) and, for x, y < R and w < W, the candidate word (3x3 rows,
// shifted by -1, 0, 1).
__device__ void dilate(const uint32_t *active, Grid g, uint32_t *vert,
                       uint32_t *cand) {
  int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int Rv = g.R + 1;
  if (t >= int64_t(Rv) * Rv * g.Wv)
    return;
  int w = int(t % g.Wv);
  int64_t row = t / g.Wv;
  int x = int(row / Rv), y = int(row % Rv);
  auto A = [&](int ax, int ay, int aw) -> uint32_t {
    if (ax < 0 || ay < 0 || ax >= g.R || ay >= g.R || aw < 0 || aw >= g.W)
      return 0u;
    return active[(int64_t(ax) * g.R + ay) * g.W + aw];
  };
  uint32_t v = 0;
  for (int dx = 0; dx < 2; ++dx)
    for (int dy = 0; dy < 2; ++dy) {
      uint32_t a = A(x - dx, y - dy, w), p = A(x - dx, y - dy, w - 1);
      v |= a | (a << 1) | (p >> 31);
    }
  vert[t] = v;
  if (x >= g.R || y >= g.R || w >= g.W)
    return;
  uint32_t c = 0;
  for (int dx = -1; dx <= 1; ++dx)
    for (int dy = -1; dy <= 1; ++dy) {
      uint32_t a = A(x + dx, y + dy, w), p = A(x + dx, y + dy, w - 1),
               q = A(x + dx, y + dy, w + 1);
      c |= a | (a << 1) | (a >> 1) | (p >> 31) | (q << 31);
    }
  if (w == g.W - 1 && (g.R & 31))
    c &= (1u << (g.R & 31)) - 1;
  cand[(int64_t(x) * g.R + y) * g.W + w] = c;
}

// Per lattice vertex (one thread per bit): the mean of [sdf + bias, deform,
// colour] over its active cubes, summed in double in ascending cube order as
// the CPU does; then the sdf, the deformed position and the sigmoid colour.
__device__ void vertices(Grid g, const uint32_t *vertBits,
                         const uint32_t *vertPrefix, const uint32_t *active,
                         const uint32_t *activePrefix, const int32_t *rowOf,
                         const float *fields, float bias, float defScale,
                         float *vsdf, float *vpos, float *vcol) {
  int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int Rv = g.R + 1;
  int64_t w = t >> 5;
  if (w >= int64_t(Rv) * Rv * g.Wv)
    return;
  int lane = int(t & 31);
  uint32_t word = vertBits[w];
  if (!((word >> lane) & 1))
    return;
  int64_t slot = int64_t(vertPrefix[w]) + __popc(word & ((1u << lane) - 1));
  int64_t row = w / g.Wv;
  int x = int(row / Rv), y = int(row % Rv), z = int(w % g.Wv) * 32 + lane;
  double m[10] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  int count = 0;
  // Corner k of cube v - offset(k); ascending cube flat index.
  constexpr int kOrder[8] = {7, 3, 5, 1, 6, 2, 4, 0};
  for (int i = 0; i < 8; ++i) {
    int k = kOrder[i];
    int cx = x - (k & 1), cy = y - ((k >> 1) & 1), cz = z - ((k >> 2) & 1);
    if (cx < 0 || cy < 0 || cz < 0 || cx >= g.R || cy >= g.R || cz >= g.R)
      continue;
    int64_t r = rankOf(active, activePrefix, g.cubeWord(cx, cy, cz), cz);
    if (r < 0)
      continue;
    const float *f = fields + int64_t(kChannels) * rowOf[r];
    m[0] += double(__fadd_rn(f[k], bias));
    for (int j = 0; j < 3; ++j)
      m[1 + j] += double(f[8 + 3 * k + j]);
    for (int j = 0; j < 6; ++j)
      m[4 + j] += double(f[53 + 6 * k + j]);
    ++count;
  }
  float inv = __fdiv_rn(1.0f, float(count));
  vsdf[slot] = __fmul_rn(float(m[0]), inv);
  const int xyz[3] = {x, y, z};
  for (int j = 0; j < 3; ++j)
    vpos[3 * slot + j] = __fadd_rn(
        __fsub_rn(__fdiv_rn(float(xyz[j]), float(g.R)), 0.5f),
        __fmul_rn(defScale, tanhCpu(__fmul_rn(float(m[1 + j]), inv))));
  for (int j = 0; j < 6; ++j)
    vcol[6 * slot + j] = sigmoidCpu(__fmul_rn(float(m[4 + j]), inv));
}

__device__ __forceinline__ float sdfAt(const VertexData &v, Grid g, int x,
                                       int y, int z) {
  int64_t s = rankOf(v.bits, v.prefix, g.vertWord(x, y, z), z);
  return s < 0 ? 1.0f : v.sdf[s];
}

__device__ __forceinline__ int caseAt(const VertexData &v, Grid g, int x, int y,
                                      int z) {
  int c = 0;
  for (int k = 0; k < 8; ++k)
    if (sdfAt(v, g, x + (k & 1), y + ((k >> 1) & 1), z + ((k >> 2) & 1)) < 0.0f)
      c |= 1 << k;
  return c;
}

// One thread per candidate-bitmap bit (a warp per word): the case of every
// candidate cube; surface bits by ballot, the case kept densely by cube.
__device__ void cases(Grid g, const uint32_t *cand, VertexData v,
                      uint32_t *surf, uint8_t *caseDense, uint32_t *candCount) {
  int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t w = t >> 5;
  if (w >= int64_t(g.R) * g.R * g.W)
    return; // whole warps
  int lane = int(t & 31);
  uint32_t word = cand[w];
  bool isSurf = false;
  int64_t row = w / g.W;
  int x = int(row / g.R), y = int(row % g.R), z = int(w % g.W) * 32 + lane;
  if ((word >> lane) & 1) {
    int c = caseAt(v, g, x, y, z);
    isSurf = c != 0 && c != 255;
    if (isSurf)
      caseDense[(int64_t(x) * g.R + y) * g.R + z] = uint8_t(c);
  }
  uint32_t s = __ballot_sync(0xffffffffu, isSurf);
  if (lane == 0) {
    surf[w] = s;
    if (word)
      atomicAdd(candCount, uint32_t(__popc(word)));
  }
}

// One thread per surface bit: the compact surface-cube arrays (ascending),
// and the quad-edge bits of the three edges this cube owns (it is the lowest
// of the 4 cubes around them): edge 6 (x, first vertex c+(0,1,1)), edge 5
// (z, c+(1,1,0)), edge 10 (y, c+(1,1,1) downwards).
__device__ void surface(Grid g, const uint32_t *surf,
                        const uint32_t *surfPrefix, const uint8_t *caseDense,
                        int32_t *surfKey, uint8_t *surfCase, uint8_t *surfAlt,
                        uint32_t *quadX, uint32_t *quadY, uint32_t *quadZ) {
  int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t w = t >> 5;
  if (w >= int64_t(g.R) * g.R * g.W)
    return;
  int lane = int(t & 31);
  uint32_t word = surf[w];
  if (!((word >> lane) & 1))
    return;
  int64_t si = int64_t(surfPrefix[w]) + __popc(word & ((1u << lane) - 1));
  int64_t row = w / g.W;
  int x = int(row / g.R), y = int(row % g.R), z = int(w % g.W) * 32 + lane;
  int64_t key = (int64_t(x) * g.R + y) * g.R + z;
  int c = caseDense[key];
  surfKey[si] = int32_t(key);
  surfCase[si] = uint8_t(c);
  surfAlt[si] = 0;
  auto crosses = [c](int e) {
    return (((c >> kEdges[e][0]) ^ (c >> kEdges[e][1])) & 1) != 0;
  };
  if (crosses(6) && y + 1 < g.R && z + 1 < g.R)
    atomicOr(quadX + g.vertWord(x, y + 1, z + 1), 1u << ((z + 1) & 31));
  if (crosses(5) && x + 1 < g.R && y + 1 < g.R)
    atomicOr(quadZ + g.vertWord(x + 1, y + 1, z), 1u << (z & 31));
  if (crosses(10) && x + 1 < g.R && z + 1 < g.R)
    atomicOr(quadY + g.vertWord(x + 1, y + 1, z + 1), 1u << ((z + 1) & 31));
}

__device__ __forceinline__ bool usesInside(const TrellisFcTables *tb, int c,
                                           int alt) {
  return (tb->primaryInside[c] != 0) != (alt != 0);
}

// One pass of the ambiguous-face resolution (the CPU's worklist, run to its
// fixed point by repeating passes until none flips: flips only go from the
// outside- to the inside-corner grouping, so the result is the same).
__device__ void ambiguity(Grid g, int64_t nSurf, const int32_t *surfKey,
                          const uint8_t *surfCase, uint8_t *surfAlt,
                          const uint32_t *surf, const uint32_t *surfPrefix,
                          const TrellisFcTables *tb, int32_t *changed) {
  int64_t si = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (si >= nSurf)
    return;
  int c = surfCase[si];
  int amb = tb->ambiguousFaces[c];
  if (!amb)
    return;
  volatile uint8_t *alts = surfAlt;
  int alt = alts[si];
  if (usesInside(tb, c, alt))
    return;
  int64_t key = surfKey[si];
  int p[3] = {int(key / (int64_t(g.R) * g.R)), int((key / g.R) % g.R),
              int(key % g.R)};
  for (int f = 0; f < 6; ++f) {
    if (!((amb >> f) & 1))
      continue;
    int axis = f / 2, side = f % 2;
    int n[3] = {p[0], p[1], p[2]};
    n[axis] += side ? 1 : -1;
    if (n[axis] < 0 || n[axis] >= g.R)
      continue;
    int64_t ni = rankOf(surf, surfPrefix, g.cubeWord(n[0], n[1], n[2]), n[2]);
    if (ni < 0)
      continue;
    int nc = surfCase[ni], nalt = alts[ni];
    if (usesInside(tb, nc, nalt) && tb->facePairing[alt][c][f] == 2 &&
        tb->facePairing[nalt][nc][2 * axis + (1 - side)] == 1) {
      alts[si] = uint8_t(!alt);
      changed[0] = 1;
      atomicAdd(changed + 1, 1);
      return;
    }
  }
}

__device__ void classes(int64_t nSurf, const uint8_t *surfCase,
                        const uint8_t *surfAlt, const TrellisFcTables *tb,
                        uint8_t *surfNum) {
  int64_t si = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (si < nSurf)
    surfNum[si] = uint8_t(tb->numDual[surfAlt[si]][surfCase[si]]);
}

__device__ void quadCounts(int64_t words, const uint32_t *qx,
                           const uint32_t *qy, const uint32_t *qz,
                           uint32_t *count) {
  int64_t w = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (w < words)
    count[w] = __popc(qx[w]) + __popc(qy[w]) + __popc(qz[w]);
}

// Per surface cube: its dual vertices at their global numbers (by dual-vertex
// count n, then cube order, then group: classTotal holds the counts of cubes
// per n), with the CPU's arithmetic; its first global vertex and gamma.
__device__ void dual(Grid g, int64_t nSurf, const int32_t *surfKey,
                     const uint8_t *surfCase, const uint8_t *surfAlt,
                     const uint4 *classPrefix, const uint4 *classTotal,
                     const TrellisFcTables *tb, const uint32_t *active,
                     const uint32_t *activePrefix, const int32_t *rowOf,
                     const float *fields, VertexData v, float *outV,
                     float *outA, int32_t *base, float *gamma) {
  int64_t si = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (si >= nSurf)
    return;
  const int c = surfCase[si], alt = surfAlt[si];
  const int num = tb->numDual[alt][c];
  uint4 tot = *classTotal, rk = classPrefix[si];
  uint32_t counts[4] = {tot.x, tot.y, tot.z, tot.w};
  uint32_t ranks[4] = {rk.x, rk.y, rk.z, rk.w};
  int64_t first = 0;
  for (int m = 1; m < num; ++m)
    first += int64_t(m) * counts[m - 1];
  first += int64_t(num) * ranks[num - 1];
  base[si] = int32_t(first);

  int64_t key = surfKey[si];
  int x = int(key / (int64_t(g.R) * g.R)), y = int((key / g.R) % g.R),
      z = int(key % g.R);
  float w[21];
  int64_t ar = rankOf(active, activePrefix, g.cubeWord(x, y, z), z);
  const float *f =
      ar >= 0 ? fields + int64_t(kChannels) * rowOf[ar] + 32 : nullptr;
  for (int i = 0; i < 21; ++i)
    w[i] = f ? f[i] : 0.0f;
  float beta[12], alpha[8];
  for (int e = 0; e < 12; ++e)
    beta[e] = __fadd_rn(__fmul_rn(tanhCpu(w[e]), kWeightScale), 1.0f);
  for (int k = 0; k < 8; ++k)
    alpha[k] = __fadd_rn(__fmul_rn(tanhCpu(w[12 + k]), kWeightScale), 1.0f);
  gamma[si] = __fadd_rn(__fmul_rn(sigmoidCpu(w[20]), kWeightScale), 0.005f);

  float s[8], p[8][3], col[8][6];
  for (int k = 0; k < 8; ++k) {
    int a = x + (k & 1), b = y + ((k >> 1) & 1), cc = z + ((k >> 2) & 1);
    int64_t slot = rankOf(v.bits, v.prefix, g.vertWord(a, b, cc), cc);
    if (slot >= 0) {
      s[k] = v.sdf[slot];
      for (int j = 0; j < 3; ++j)
        p[k][j] = v.pos[3 * slot + j];
      for (int j = 0; j < 6; ++j)
        col[k][j] = v.col[6 * slot + j];
    } else {
      s[k] = 1.0f;
      const int abc[3] = {a, b, cc};
      for (int j = 0; j < 3; ++j)
        p[k][j] = __fsub_rn(__fdiv_rn(float(abc[j]), float(g.R)), 0.5f);
      for (int j = 0; j < 6; ++j)
        col[k][j] = 0.5f;
    }
  }
  for (int gi = 0; gi < num; ++gi) {
    double accP[3] = {0, 0, 0}, accC[6] = {0, 0, 0, 0, 0, 0}, accB = 0;
    // The group's edges in the table's order, as the CPU sums them.
    for (int j = 0; j < 7 && tb->groups[alt][c][gi][j] >= 0; ++j) {
      int e = tb->groups[alt][c][gi][j];
      int a = kEdges[e][0], b = kEdges[e][1];
      float wa = __fmul_rn(s[a], alpha[a]), wb = __fmul_rn(s[b], alpha[b]);
      float den = __fsub_rn(wb, wa);
      float be = beta[e];
      for (int d = 0; d < 3; ++d)
        accP[d] +=
            double(__fmul_rn(be, __fdiv_rn(__fsub_rn(__fmul_rn(p[a][d], wb),
                                                     __fmul_rn(p[b][d], wa)),
                                           den)));
      for (int d = 0; d < 6; ++d)
        accC[d] +=
            double(__fmul_rn(be, __fdiv_rn(__fsub_rn(__fmul_rn(col[a][d], wb),
                                                     __fmul_rn(col[b][d], wa)),
                                           den)));
      accB += double(be);
    }
    int64_t o = first + gi;
    for (int d = 0; d < 3; ++d)
      outV[3 * o + d] = float(accP[d] / accB);
    for (int d = 0; d < 6; ++d)
      outA[6 * o + d] = float(accC[d] / accB);
  }
}

// Per surface cube: the quads of the edges it owns (see surface()), at their
// rank in (first vertex, axis y < z < x) order; 4 cubes in ascending flat
// index, wound by the sign of the first vertex, split by the gamma rule.
__device__ void quads(Grid g, int64_t nSurf, const int32_t *surfKey,
                      const uint8_t *surfCase, const uint8_t *surfAlt,
                      const int32_t *base, const float *gamma,
                      const uint32_t *surf, const uint32_t *surfPrefix,
                      const uint32_t *quadX, const uint32_t *quadY,
                      const uint32_t *quadZ, const uint32_t *quadPrefix,
                      VertexData v, const TrellisFcTables *tb, int32_t *faces) {
  int64_t si = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (si >= nSurf)
    return;
  int64_t key = surfKey[si];
  int x = int(key / (int64_t(g.R) * g.R)), y = int((key / g.R) % g.R),
      z = int(key % g.R);
  // type 0: y edge (owner edge 10), 1: z edge (5), 2: x edge (6). Cube
  // offsets from the owner and the edge's index in each of the 4 cubes.
  struct Kind {
    int edge, first[3], cube[4][3], e[4];
  };
  constexpr Kind kKinds[3] = {{10,
                               {1, 1, 1},
                               {{0, 0, 0}, {0, 0, 1}, {1, 0, 0}, {1, 0, 1}},
                               {10, 9, 11, 8}},
                              {5,
                               {1, 1, 0},
                               {{0, 0, 0}, {0, 1, 0}, {1, 0, 0}, {1, 1, 0}},
                               {5, 1, 7, 3}},
                              {6,
                               {0, 1, 1},
                               {{0, 0, 0}, {0, 0, 1}, {0, 1, 0}, {0, 1, 1}},
                               {6, 4, 2, 0}}};
  const uint32_t *qbits[3] = {quadY, quadZ, quadX};
  for (int t = 0; t < 3; ++t) {
    const Kind &kd = kKinds[t];
    int fx = x + kd.first[0], fy = y + kd.first[1], fz = z + kd.first[2];
    int64_t w = g.vertWord(fx, fy, fz);
    uint32_t b = 1u << (fz & 31);
    if (!(qbits[t][w] & b))
      continue;
    uint32_t lo = b - 1;
    int64_t qi = int64_t(quadPrefix[w]) + __popc(quadY[w] & lo) +
                 __popc(quadZ[w] & lo) + __popc(quadX[w] & lo);
    if (t >= 1)
      qi += (quadY[w] & b) ? 1 : 0;
    if (t >= 2)
      qi += (quadZ[w] & b) ? 1 : 0;
    int32_t vq[4];
    float gm[4];
    for (int k = 0; k < 4; ++k) {
      int cx = x + kd.cube[k][0], cy = y + kd.cube[k][1],
          cz = z + kd.cube[k][2];
      int64_t ni = rankOf(surf, surfPrefix, g.cubeWord(cx, cy, cz), cz);
      vq[k] = base[ni] + tb->edgeGroup[surfAlt[ni]][surfCase[ni]][kd.e[k]];
      gm[k] = gamma[ni];
    }
    bool outsideFirst = sdfAt(v, g, fx, fy, fz) > 0.0f;
    const int pos[4] = {0, 1, 3, 2}, neg[4] = {2, 3, 1, 0};
    const int *order = outsideFirst ? pos : neg;
    int32_t q[4];
    float gq[4];
    for (int k = 0; k < 4; ++k) {
      q[k] = vq[order[k]];
      gq[k] = gm[order[k]];
    }
    int32_t *o = faces + 6 * qi;
    if (__fmul_rn(gq[0], gq[2]) > __fmul_rn(gq[1], gq[3])) {
      o[0] = q[0], o[1] = q[1], o[2] = q[2], o[3] = q[0], o[4] = q[2],
      o[5] = q[3];
    } else {
      o[0] = q[0], o[1] = q[1], o[2] = q[3], o[3] = q[3], o[4] = q[1],
      o[5] = q[2];
    }
  }
}

} // namespace trellis_fc

// Entry points (launched by runtime/cuda/FlexiCubesGpu.cpp).
#define TRELLIS_FC_GRID const int32_t R, const int32_t W, const int32_t Wv
#define TRELLIS_FC_G (trellis_fc::Grid{R, W, Wv})

extern "C" __global__ void trellis_fc_scan_reduce_u32(const uint32_t *in,
                                                      int64_t n, int32_t popc,
                                                      uint32_t *sums) {
  trellis_fc::scanReduce<uint32_t>(trellis_fc::LoadU32{in, popc}, n, sums);
}
extern "C" __global__ void trellis_fc_scan_blocks_u32(uint32_t *sums,
                                                      int64_t nb) {
  trellis_fc::scanBlocks<uint32_t>(sums, nb);
}
extern "C" __global__ void trellis_fc_scan_down_u32(const uint32_t *in,
                                                    int64_t n, int32_t popc,
                                                    const uint32_t *sums,
                                                    uint32_t *out) {
  trellis_fc::scanDown<uint32_t>(trellis_fc::LoadU32{in, popc}, n, sums, out);
}
extern "C" __global__ void trellis_fc_scan_reduce_cls(const uint8_t *num,
                                                      int64_t n, uint4 *sums) {
  trellis_fc::scanReduce<uint4>(trellis_fc::LoadClass{num}, n, sums);
}
extern "C" __global__ void trellis_fc_scan_blocks_cls(uint4 *sums, int64_t nb) {
  trellis_fc::scanBlocks<uint4>(sums, nb);
}
extern "C" __global__ void trellis_fc_scan_down_cls(const uint8_t *num,
                                                    int64_t n,
                                                    const uint4 *sums,
                                                    uint4 *out) {
  trellis_fc::scanDown<uint4>(trellis_fc::LoadClass{num}, n, sums, out);
}
extern "C" __global__ void trellis_fc_mark(const int32_t *coords, int64_t n,
                                           TRELLIS_FC_GRID, uint32_t *active,
                                           int32_t *flags) {
  trellis_fc::mark(coords, n, TRELLIS_FC_G, active, flags);
}
extern "C" __global__ void trellis_fc_rows(const int32_t *coords, int64_t n,
                                           TRELLIS_FC_GRID,
                                           const uint32_t *active,
                                           const uint32_t *activePrefix,
                                           int32_t *rowOf) {
  trellis_fc::rows(coords, n, TRELLIS_FC_G, active, activePrefix, rowOf);
}
extern "C" __global__ void trellis_fc_dilate(const uint32_t *active,
                                             TRELLIS_FC_GRID, uint32_t *vert,
                                             uint32_t *cand) {
  trellis_fc::dilate(active, TRELLIS_FC_G, vert, cand);
}
extern "C" __global__ void
trellis_fc_vertices(TRELLIS_FC_GRID, const uint32_t *vertBits,
                    const uint32_t *vertPrefix, const uint32_t *active,
                    const uint32_t *activePrefix, const int32_t *rowOf,
                    const float *fields, float bias, float defScale,
                    float *vsdf, float *vpos, float *vcol) {
  trellis_fc::vertices(TRELLIS_FC_G, vertBits, vertPrefix, active, activePrefix,
                       rowOf, fields, bias, defScale, vsdf, vpos, vcol);
}
extern "C" __global__ void
trellis_fc_cases(TRELLIS_FC_GRID, const uint32_t *cand,
                 const uint32_t *vertBits, const uint32_t *vertPrefix,
                 const float *vsdf, uint32_t *surf, uint8_t *caseDense,
                 uint32_t *candCount) {
  trellis_fc::VertexData v{vertBits, vertPrefix, vsdf, nullptr, nullptr};
  trellis_fc::cases(TRELLIS_FC_G, cand, v, surf, caseDense, candCount);
}
extern "C" __global__ void
trellis_fc_surface(TRELLIS_FC_GRID, const uint32_t *surf,
                   const uint32_t *surfPrefix, const uint8_t *caseDense,
                   int32_t *surfKey, uint8_t *surfCase, uint8_t *surfAlt,
                   uint32_t *quadX, uint32_t *quadY, uint32_t *quadZ) {
  trellis_fc::surface(TRELLIS_FC_G, surf, surfPrefix, caseDense, surfKey,
                      surfCase, surfAlt, quadX, quadY, quadZ);
}
extern "C" __global__ void
trellis_fc_ambiguity(TRELLIS_FC_GRID, int64_t nSurf, const int32_t *surfKey,
                     const uint8_t *surfCase, uint8_t *surfAlt,
                     const uint32_t *surf, const uint32_t *surfPrefix,
                     const TrellisFcTables *tables, int32_t *changed) {
  trellis_fc::ambiguity(TRELLIS_FC_G, nSurf, surfKey, surfCase, surfAlt, surf,
                        surfPrefix, tables, changed);
}
extern "C" __global__ void trellis_fc_classes(int64_t nSurf,
                                              const uint8_t *surfCase,
                                              const uint8_t *surfAlt,
                                              const TrellisFcTables *tables,
                                              uint8_t *surfNum) {
  trellis_fc::classes(nSurf, surfCase, surfAlt, tables, surfNum);
}
extern "C" __global__ void
trellis_fc_quad_counts(int64_t words, const uint32_t *qx, const uint32_t *qy,
                       const uint32_t *qz, uint32_t *count) {
  trellis_fc::quadCounts(words, qx, qy, qz, count);
}
extern "C" __global__ void trellis_fc_dual(
    TRELLIS_FC_GRID, int64_t nSurf, const int32_t *surfKey,
    const uint8_t *surfCase, const uint8_t *surfAlt, const uint4 *classPrefix,
    const uint4 *classTotal, const TrellisFcTables *tables,
    const uint32_t *active, const uint32_t *activePrefix, const int32_t *rowOf,
    const float *fields, const uint32_t *vertBits, const uint32_t *vertPrefix,
    const float *vsdf, const float *vpos, const float *vcol, float *outV,
    float *outA, int32_t *base, float *gamma) {
  trellis_fc::VertexData v{vertBits, vertPrefix, vsdf, vpos, vcol};
  trellis_fc::dual(TRELLIS_FC_G, nSurf, surfKey, surfCase, surfAlt, classPrefix,
                   classTotal, tables, active, activePrefix, rowOf, fields, v,
                   outV, outA, base, gamma);
}
extern "C" __global__ void
trellis_fc_quads(TRELLIS_FC_GRID, int64_t nSurf, const int32_t *surfKey,
                 const uint8_t *surfCase, const uint8_t *surfAlt,
                 const int32_t *base, const float *gamma, const uint32_t *surf,
                 const uint32_t *surfPrefix, const uint32_t *quadX,
                 const uint32_t *quadY, const uint32_t *quadZ,
                 const uint32_t *quadPrefix, const uint32_t *vertBits,
                 const uint32_t *vertPrefix, const float *vsdf,
                 const TrellisFcTables *tables, int32_t *faces) {
  trellis_fc::VertexData v{vertBits, vertPrefix, vsdf, nullptr, nullptr};
  trellis_fc::quads(TRELLIS_FC_G, nSurf, surfKey, surfCase, surfAlt, base,
                    gamma, surf, surfPrefix, quadX, quadY, quadZ, quadPrefix, v,
                    tables, faces);
}

#undef TRELLIS_FC_GRID
#undef TRELLIS_FC_G

#endif // __CUDACC__
