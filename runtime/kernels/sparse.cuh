// The sparse stages' index-building and reduction kernels
// (docs/design/gpu-backend.md, "Sparse stages"): the occupancy compaction,
// neighbour maps (a dense index volume, then a k³ lookup), Swin window
// partitions (a stable counting sort by window id) and the group norm's
// statistics. Every feature gather / scatter (the conv's neighbour rows and
// tap sum, resampling, subdivide, the window attention's rows) and the group
// norm's normalization are generated kernels (lib/Codegen). Compiled into the
// same modules as the attention kernels (every family), launched by
// runtime/cuda/SparseCommands.cpp with 256-thread blocks.
//
// T is __half or float; sums are f32 and every result is rounded once, as the
// CPU reference (runtime/reference/Sparse.cpp) does.
#pragma once

#include <cuda_fp16.h>
#include <stdint.h>

namespace trellis_sparse {

__device__ __forceinline__ float toF32(float x) { return x; }
__device__ __forceinline__ float toF32(__half x) { return __half2float(x); }
template <typename T> __device__ __forceinline__ T fromF32(float x);
template <> __device__ __forceinline__ float fromF32<float>(float x) {
  return x;
}
template <> __device__ __forceinline__ __half fromF32<__half>(float x) {
  return __float2half_rn(x);
}

__device__ __forceinline__ int64_t globalThread() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}

// Neighbour maps on the device (trellis.sparse.neighbor_map, spec §6.4): the
// rows of a coordinate set are scattered into a dense index volume of the
// batch × R³ grid (cleared to -1 bytes, i.e. -1), then every row looks up its
// k³ neighbours: entry a·k² + β·k + γ of row p is the row of (b, x+a−k/2,
// y+β−k/2, z+γ−k/2), or -1 if inactive or off the grid.
__device__ void gridScatter(const int32_t *coords, int32_t *grid, int64_t rows,
                            int32_t res) {
  const int64_t r = globalThread();
  if (r >= rows)
    return;
  const int32_t *c = coords + 4 * r;
  grid[((int64_t(c[0]) * res + c[1]) * res + c[2]) * res + c[3]] = int32_t(r);
}

__device__ void neighborLookup(const int32_t *coords, const int32_t *grid,
                               int32_t *nbr, int64_t rows, int32_t res,
                               int32_t k) {
  const int32_t kvol = k * k * k;
  const int64_t t = globalThread();
  if (t >= rows * kvol)
    return;
  const int64_t r = t / kvol;
  const int32_t o = int32_t(t % kvol), half = k / 2;
  const int32_t *c = coords + 4 * r;
  const int32_t x = c[1] + o / (k * k) - half, y = c[2] + (o / k) % k - half,
                z = c[3] + o % k - half;
  int32_t found = -1;
  if (x >= 0 && x < res && y >= 0 && y < res && z >= 0 && z < res)
    found = grid[((int64_t(c[0]) * res + x) * res + y) * res + z];
  nbr[t] = found;
}

// trellis.sparse.parent_neighbor_map: every active entry of a fine set's
// neighbour map replaced by its parent's coarse row (parent: int32 [N_fine]).
__device__ void parentNeighbors(const int32_t *nbr, const int32_t *parent,
                                int32_t *out, int64_t entries) {
  const int64_t t = globalThread();
  if (t >= entries)
    return;
  const int32_t q = nbr[t];
  out[t] = q < 0 ? -1 : parent[q];
}

// Swin-3D window partition on the device (trellis.sparse.window_segments,
// spec §7.1), as a stable counting sort of the rows by window id: the ids,
// per-(window, 256-row block) counts in window-major order, their exclusive
// scan (the first position of every block's rows of every window), then each
// row's position = that base + its rank among the earlier rows of its block
// with the same window. Rows stay in ascending order inside a window, as in
// the CPU reference; empty windows are empty segments.
constexpr int kWindowBlock = 256;

__device__ void windowIds(const int32_t *coords, int64_t rows, int32_t window,
                          int32_t shift, int32_t nx, int32_t ny, int32_t nz,
                          int32_t *ids) {
  const int64_t r = globalThread();
  if (r >= rows)
    return;
  const int32_t *c = coords + 4 * r;
  const int32_t wx = (c[1] + shift) / window, wy = (c[2] + shift) / window,
                wz = (c[3] + shift) / window;
  ids[r] = ((c[0] * nx + wx) * ny + wy) * nz + wz;
}

// counts[id · blocks + block] += 1 per row (counts cleared before).
__device__ void windowCounts(const int32_t *ids, int64_t rows, int32_t blocks,
                             int32_t *counts) {
  const int64_t r = int64_t(blockIdx.x) * kWindowBlock + threadIdx.x;
  if (r < rows)
    atomicAdd(counts + int64_t(ids[r]) * blocks + blockIdx.x, 1);
}

// Exclusive prefix sum of n int32 in place, by one block of 1024 threads (a
// contiguous range per thread, then a scan of the 1024 range totals).
__device__ void exclusiveScan(int32_t *data, int64_t n) {
  __shared__ int32_t totals[1024];
  const int t = threadIdx.x;
  const int64_t chunk = (n + 1023) / 1024;
  const int64_t begin = min(n, t * chunk), end = min(n, begin + chunk);
  int32_t sum = 0;
  for (int64_t i = begin; i < end; ++i)
    sum += data[i];
  totals[t] = sum;
  __syncthreads();
  if (t == 0) {
    int32_t run = 0;
    for (int i = 0; i < 1024; ++i) {
      const int32_t v = totals[i];
      totals[i] = run;
      run += v;
    }
  }
  __syncthreads();
  int32_t run = totals[t];
  for (int64_t i = begin; i < end; ++i) {
    const int32_t v = data[i];
    data[i] = run;
    run += v;
  }
}

// out_rows[base[id · blocks + block] + rank] = row, rank = the rows of this
// block before this one with the same window.
__device__ void windowScatter(const int32_t *ids, int64_t rows, int32_t blocks,
                              const int32_t *base, int32_t *outRows) {
  __shared__ int32_t blockIds[kWindowBlock];
  const int t = threadIdx.x;
  const int64_t r = int64_t(blockIdx.x) * kWindowBlock + t;
  blockIds[t] = r < rows ? ids[r] : -1;
  __syncthreads();
  if (r >= rows)
    return;
  const int32_t id = blockIds[t];
  int32_t rank = 0;
  for (int j = 0; j < t; ++j)
    rank += blockIds[j] == id;
  outRows[base[int64_t(id) * blocks + blockIdx.x] + rank] = int32_t(r);
}

// offsets[w] = the first position of window w (its block 0 base), and
// offsets[segments] = rows.
__device__ void windowOffsets(const int32_t *base, int32_t blocks,
                              int64_t segments, int64_t rows,
                              int32_t *offsets) {
  const int64_t w = globalThread();
  if (w < segments)
    offsets[w] = base[w * blocks];
  else if (w == segments)
    offsets[w] = int32_t(rows);
}

// Occupancy to coordinates (spec §5.3): the cells with logit > 0 (strictly;
// NaN is empty) of f32 logits [B, 1, D, H, W] as int32 rows (b, x, y, z) in
// ascending flat order, by an ordered compaction in three launches: per-block
// counts of kOccupancyCells cells, one block's exclusive scan of those counts
// (the total is the one value the host reads back), then every block writes
// its rows at its offset.
constexpr int kOccupancyThreads = 256, kOccupancyPerThread = 4;
constexpr int kOccupancyCells = kOccupancyThreads * kOccupancyPerThread;

__device__ int occupancyFlags(const float *logits, int64_t n, int64_t first,
                              bool flags[kOccupancyPerThread]) {
  int count = 0;
  for (int i = 0; i < kOccupancyPerThread; ++i) {
    const int64_t cell = first + i;
    flags[i] = cell < n && logits[cell] > 0.f;
    count += flags[i];
  }
  return count;
}

/// Exclusive prefix sum of `v` over the block's threads; `total` gets the sum.
__device__ int blockExclusiveScan(int v, int &total) {
  __shared__ int warpSums[kOccupancyThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  int inclusive = v;
  for (int d = 1; d < 32; d <<= 1) {
    const int up = __shfl_up_sync(0xffffffffu, inclusive, d);
    if (lane >= d)
      inclusive += up;
  }
  if (lane == 31)
    warpSums[warp] = inclusive;
  __syncthreads();
  int before = 0;
  total = 0;
  for (int w = 0; w < kOccupancyThreads / 32; ++w) {
    if (w < warp)
      before += warpSums[w];
    total += warpSums[w];
  }
  __syncthreads();
  return before + inclusive - v;
}

__device__ void occupancyCount(const float *logits, int64_t n,
                               int32_t *blockCounts) {
  bool flags[kOccupancyPerThread];
  const int64_t first = int64_t(blockIdx.x) * kOccupancyCells +
                        int64_t(threadIdx.x) * kOccupancyPerThread;
  int total = 0;
  blockExclusiveScan(occupancyFlags(logits, n, first, flags), total);
  if (threadIdx.x == 0)
    blockCounts[blockIdx.x] = total;
}

/// One block: blockCounts becomes its exclusive prefix sum; *total the sum.
__device__ void occupancyScan(int32_t *blockCounts, int32_t blocks,
                              int32_t *total) {
  int carry = 0;
  for (int32_t base = 0; base < blocks; base += kOccupancyThreads) {
    const int32_t i = base + int32_t(threadIdx.x);
    const int v = i < blocks ? blockCounts[i] : 0;
    int sum = 0;
    const int before = blockExclusiveScan(v, sum);
    if (i < blocks)
      blockCounts[i] = carry + before;
    carry += sum;
  }
  if (threadIdx.x == 0)
    *total = carry;
}

__device__ void occupancyWrite(const float *logits, int64_t n,
                               const int32_t *blockOffsets, int32_t d,
                               int32_t h, int32_t w, int32_t *coords) {
  bool flags[kOccupancyPerThread];
  const int64_t first = int64_t(blockIdx.x) * kOccupancyCells +
                        int64_t(threadIdx.x) * kOccupancyPerThread;
  int total = 0;
  int row = blockOffsets[blockIdx.x] +
            blockExclusiveScan(occupancyFlags(logits, n, first, flags), total);
  for (int i = 0; i < kOccupancyPerThread; ++i) {
    if (!flags[i])
      continue;
    const int64_t cell = first + i;
    int32_t *c = coords + 4 * int64_t(row++);
    c[0] = int32_t(cell / (int64_t(d) * h * w));
    c[1] = int32_t(cell / (int64_t(h) * w) % d);
    c[2] = int32_t(cell / w % h);
    c[3] = int32_t(cell % w);
  }
}

// Group norm statistics (spec §7.4), deterministic and coalesced in two
// passes over x. chunks [K, 3] = (sample, first row, end row), each chunk
// inside one sample. Pass 1: per (chunk, channel) the sum of x (thread =
// channel, rows in order) into partial [K, C]; groupNormReduce turns the
// partials of each (sample, group) into its mean (chunks and channels in
// order). Pass 2: the same with (x − mean)², reduced into 1/sqrt(var + eps).
// stats[2·(b·G + g)] = mean, [.. + 1] = rstd; the normalization itself is a
// generated kernel (lib/Codegen emitGroupNormApplyKernel).
template <typename T>
__device__ void groupNormPartial(const T *x, const int32_t *chunks,
                                 const float *stats, float *partial, int32_t c,
                                 int32_t groups, int32_t centered) {
  const int k = blockIdx.x;
  const int32_t b = chunks[3 * k], r0 = chunks[3 * k + 1],
                r1 = chunks[3 * k + 2];
  for (int32_t ch = threadIdx.x; ch < c; ch += blockDim.x) {
    const float mean =
        centered ? stats[2 * (b * groups + ch / (c / groups))] : 0.f;
    float sum = 0.f;
    for (int32_t r = r0; r < r1; ++r) {
      const float v = toF32(x[int64_t(r) * c + ch]) - mean;
      sum += centered ? v * v : v;
    }
    partial[int64_t(k) * c + ch] = sum;
  }
}

/// One block per (sample, group): thread t sums the group's channels of the
/// sample's chunks t, t + blockDim, ... (in order), then a fixed tree adds the
/// threads' sums (deterministic). centered = 0: the mean; 1: rstd.
__device__ void groupNormReduce(const int32_t *chunks, int32_t numChunks,
                                const int32_t *rowOffsets, const float *partial,
                                float *stats, int32_t c, int32_t groups,
                                float eps, int32_t centered) {
  __shared__ float sums[256];
  const int item = blockIdx.x;
  const int32_t b = item / groups, g = item % groups, cg = c / groups;
  float sum = 0.f;
  for (int32_t k = threadIdx.x; k < numChunks; k += blockDim.x) {
    if (chunks[3 * k] != b)
      continue;
    for (int32_t ch = g * cg; ch < (g + 1) * cg; ++ch)
      sum += partial[int64_t(k) * c + ch];
  }
  sums[threadIdx.x] = sum;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half)
      sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x != 0)
    return;
  const float n = float(int64_t(rowOffsets[b + 1] - rowOffsets[b]) * cg);
  const float mean = n > 0 ? sums[0] / n : 0.f;
  if (!centered)
    stats[2 * item] = mean;
  else
    stats[2 * item + 1] = rsqrtf(mean + eps);
}

} // namespace trellis_sparse

extern "C" __global__ void
trellis_sparse_group_norm_reduce(const int32_t *chunks, int32_t numChunks,
                                 const int32_t *rowOffsets,
                                 const float *partial, float *stats, int32_t c,
                                 int32_t groups, float eps, int32_t centered) {
  trellis_sparse::groupNormReduce(chunks, numChunks, rowOffsets, partial, stats,
                                  c, groups, eps, centered);
}
extern "C" __global__ void trellis_occupancy_count(const float *logits,
                                                   int64_t n,
                                                   int32_t *blockCounts) {
  trellis_sparse::occupancyCount(logits, n, blockCounts);
}
extern "C" __global__ void trellis_occupancy_scan(int32_t *blockCounts,
                                                  int32_t blocks,
                                                  int32_t *total) {
  trellis_sparse::occupancyScan(blockCounts, blocks, total);
}
extern "C" __global__ void
trellis_occupancy_write(const float *logits, int64_t n,
                        const int32_t *blockOffsets, int32_t d, int32_t h,
                        int32_t w, int32_t *coords) {
  trellis_sparse::occupancyWrite(logits, n, blockOffsets, d, h, w, coords);
}
extern "C" __global__ void trellis_sparse_grid_scatter(const int32_t *coords,
                                                       int32_t *grid,
                                                       int64_t rows,
                                                       int32_t res) {
  trellis_sparse::gridScatter(coords, grid, rows, res);
}
extern "C" __global__ void
trellis_sparse_neighbor_lookup(const int32_t *coords, const int32_t *grid,
                               int32_t *nbr, int64_t rows, int32_t res,
                               int32_t k) {
  trellis_sparse::neighborLookup(coords, grid, nbr, rows, res, k);
}

extern "C" __global__ void
trellis_sparse_parent_neighbors(const int32_t *nbr, const int32_t *parent,
                                int32_t *out, int64_t entries) {
  trellis_sparse::parentNeighbors(nbr, parent, out, entries);
}

extern "C" __global__ void trellis_window_ids(const int32_t *coords,
                                              int64_t rows, int32_t window,
                                              int32_t shift, int32_t nx,
                                              int32_t ny, int32_t nz,
                                              int32_t *ids) {
  trellis_sparse::windowIds(coords, rows, window, shift, nx, ny, nz, ids);
}
extern "C" __global__ void trellis_window_counts(const int32_t *ids,
                                                 int64_t rows, int32_t blocks,
                                                 int32_t *counts) {
  trellis_sparse::windowCounts(ids, rows, blocks, counts);
}
extern "C" __global__ void trellis_exclusive_scan_i32(int32_t *data,
                                                      int64_t n) {
  trellis_sparse::exclusiveScan(data, n);
}
extern "C" __global__ void trellis_window_scatter(const int32_t *ids,
                                                  int64_t rows, int32_t blocks,
                                                  const int32_t *base,
                                                  int32_t *out_rows) {
  trellis_sparse::windowScatter(ids, rows, blocks, base, out_rows);
}
extern "C" __global__ void
trellis_window_offsets(const int32_t *base, int32_t blocks, int64_t segments,
                       int64_t rows, int32_t *offsets) {
  trellis_sparse::windowOffsets(base, blocks, segments, rows, offsets);
}

// Entry points, one per element type (f16, f32).
#define TRELLIS_SPARSE_ENTRIES(T, S)                                           \
  extern "C" __global__ void trellis_sparse_group_norm_partial_##S(            \
      const T *x, const int32_t *chunks, const float *stats, float *partial,   \
      int32_t c, int32_t groups, int32_t centered) {                           \
    trellis_sparse::groupNormPartial<T>(x, chunks, stats, partial, c, groups,  \
                                        centered);                             \
  }

TRELLIS_SPARSE_ENTRIES(__half, f16)
TRELLIS_SPARSE_ENTRIES(float, f32)
