//===- Sparse.cpp - coordinate sets and the sparse (voxel list) ops -------===//
//
// A sparse tensor is a CoordSet (int32 rows (b, x, y, z), batch-contiguous,
// spec §5.4) plus a feature tensor [N, C] in the same row order.
//
//===----------------------------------------------------------------------===//
#include "runtime/reference/Common.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

namespace trellis::ref {
using namespace detail;

namespace {

/// Coordinates and batch indices are below 2^16 (checked by CoordSet), so a
/// row packs into one 64-bit hash key.
uint64_t packRow(int64_t b, int64_t x, int64_t y, int64_t z) {
  return uint64_t(b) << 48 | uint64_t(x) << 32 | uint64_t(y) << 16 |
         uint64_t(z);
}

constexpr int64_t kMaxCoord = 1 << 16;

Status checkFeats(const char *op, const HostTensor &feats, int64_t rows) {
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "feats", feats));
  if (feats.rank() != 2 || feats.dim(0) != rows)
    return opError(op, "feats must be [N, C] with N = " + std::to_string(rows) +
                           ", got " + describe(feats));
  return Status::ok();
}

/// Copies whole rows: out row n = in row src[n] (any dtype).
HostTensor gatherRows(const HostTensor &in, const std::vector<int64_t> &src) {
  Shape shape = in.shape();
  shape[0] = int64_t(src.size());
  HostTensor out(in.dtype(), shape);
  const size_t rowBytes =
      size_t(in.dim(0) ? in.numel() / in.dim(0) : 0) * dtypeSize(in.dtype());
  if (rowBytes == 0)
    return out;
  const auto *s = static_cast<const uint8_t *>(in.raw());
  auto *d = static_cast<uint8_t *>(out.mutableRaw());
  for (size_t n = 0; n < src.size(); ++n)
    std::memcpy(d + n * rowBytes, s + size_t(src[n]) * rowBytes, rowBytes);
  return out;
}

} // namespace

//===----------------------------------------------------------------------===//
// CoordSet
//===----------------------------------------------------------------------===//

Result<CoordSet> CoordSet::create(const HostTensor &coords, int64_t resolution,
                                  int64_t batchSize) {
  const char *op = "coords";
  if (coords.dtype() != DType::I32 || coords.rank() != 2 || coords.dim(1) != 4)
    return opError(op, "coordinates must be int32 [N, 4] rows (b, x, y, z), "
                       "got " +
                           describe(coords));
  if (resolution < 1 || resolution > kMaxCoord)
    return opError(op, "resolution " + std::to_string(resolution) +
                           " is outside 1.." + std::to_string(kMaxCoord));
  const int64_t N = coords.dim(0);
  const int32_t *c = coords.data<int32_t>();
  int64_t lastB = -1;
  // Rows in strictly ascending (b, x, y, z) order (argwhere's, as every
  // occupancy comes) are distinct by construction: the hash set of the
  // duplicate check is only built for rows in another order (it costs ~2 ms
  // at 16k voxels, in every run of the sparse-structure stage).
  bool ascending = true;
  uint64_t previous = 0;
  std::unordered_set<uint64_t> seen;
  for (int64_t n = 0; n < N; ++n) {
    const int32_t *r = c + 4 * n;
    // §5.4: rows of one sample are contiguous, samples in ascending order
    // (the layout comes from bincount of the batch column).
    if (r[0] < 0 || r[0] < lastB || r[0] >= kMaxCoord)
      return opError(op, "row " + std::to_string(n) + " has batch index " +
                             std::to_string(r[0]) +
                             ": batch indices must be >= 0 and ascending");
    lastB = r[0];
    for (int a = 1; a < 4; ++a)
      if (r[a] < 0 || r[a] >= resolution)
        return opError(op, "row " + std::to_string(n) + " has coordinate " +
                               std::to_string(r[a]) + " outside [0, " +
                               std::to_string(resolution) + ")");
    const uint64_t key = packRow(r[0], r[1], r[2], r[3]);
    if (ascending && (n == 0 || key > previous)) {
      previous = key;
      continue;
    }
    if (ascending) { // the first row out of order: check the rows so far
      ascending = false;
      seen.reserve(static_cast<size_t>(N));
      for (int64_t m = 0; m < n; ++m)
        seen.insert(
            packRow(c[4 * m], c[4 * m + 1], c[4 * m + 2], c[4 * m + 3]));
    }
    if (!seen.insert(key).second)
      return opError(
          op, "row " + std::to_string(n) + " repeats voxel (" +
                  std::to_string(r[0]) + ", " + std::to_string(r[1]) + ", " +
                  std::to_string(r[2]) + ", " + std::to_string(r[3]) + ")");
  }
  int64_t B = batchSize < 0 ? lastB + 1 : batchSize;
  if (lastB >= B)
    return opError(op, "batch index " + std::to_string(lastB) +
                           " is not below the batch size " + std::to_string(B));
  CoordSet set;
  set.coords = coords;
  set.resolution = resolution;
  set.offsets.assign(size_t(B + 1), 0);
  for (int64_t n = 0; n < N; ++n)
    ++set.offsets[size_t(c[4 * n]) + 1];
  for (int64_t b = 0; b < B; ++b)
    set.offsets[size_t(b + 1)] += set.offsets[size_t(b)];
  return set;
}

//===----------------------------------------------------------------------===//
// Neighbour map and submanifold convolution (§6.4)
//===----------------------------------------------------------------------===//

Result<HostTensor> neighborMap(const CoordSet &coords, int64_t kernel) {
  if (kernel < 1)
    return opError("sparse.neighbor_map", "kernel must be >= 1");
  const int64_t N = coords.size(), k3 = kernel * kernel * kernel;
  const int64_t half = kernel / 2, R = coords.resolution;
  std::unordered_map<uint64_t, int32_t> index;
  index.reserve(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    const int32_t *r = coords.row(n);
    index.emplace(packRow(r[0], r[1], r[2], r[3]), int32_t(n));
  }
  HostTensor out(DType::I32, {N, k3});
  int32_t *o = out.mutableData<int32_t>();
  // Offset a·k² + β·k + γ looks at (x + a − k/2, y + β − k/2, z + γ − k/2)
  // of the same sample; anything off the grid or inactive is -1.
  parallelFor(N, 256, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const int32_t *r = coords.row(n);
      for (int64_t a = 0; a < kernel; ++a)
        for (int64_t b = 0; b < kernel; ++b)
          for (int64_t c = 0; c < kernel; ++c) {
            int64_t x = r[1] + a - half, y = r[2] + b - half,
                    z = r[3] + c - half;
            int32_t found = -1;
            if (x >= 0 && x < R && y >= 0 && y < R && z >= 0 && z < R) {
              auto it = index.find(packRow(r[0], x, y, z));
              if (it != index.end())
                found = it->second;
            }
            o[n * k3 + (a * kernel + b) * kernel + c] = found;
          }
    }
  });
  return out;
}

Result<HostTensor> sparseConv1x1(const HostTensor &feats,
                                 const HostTensor &weight,
                                 const HostTensor *bias) {
  const char *op = "sparse.conv3d";
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "feats", feats));
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "the weight", weight));
  if (feats.rank() != 2 || weight.rank() != 5 || weight.dim(1) != 1 ||
      weight.dim(2) != 1 || weight.dim(3) != 1 || weight.dim(4) != feats.dim(1))
    return opError(op, "a 1x1x1 conv needs feats [N, I] and weight [O, 1, 1, "
                       "1, I], got " +
                           describe(feats) + " and " + describe(weight));
  const int64_t N = feats.dim(0), I = feats.dim(1), O = weight.dim(0);
  if (bias) {
    TRELLIS_RETURN_IF_ERROR(expectFloat(op, "the bias", *bias));
    if (Status s = expectShape(op, "the bias", *bias, {O}); !s)
      return Error{s.message()};
  }
  FloatView vx(feats), flat(weight);
  std::vector<float> b(size_t(O), 0.0f);
  if (bias) {
    FloatView vb(*bias);
    b.assign(vb.data(), vb.data() + O);
  }
  FloatOut out(feats.dtype(), {N, O});
  // §6.4 [quirk]: spconv's conv1x1 fast path computes x·M + b where M is the
  // contiguous [O, 1, 1, 1, I] buffer viewed as [I, O] row-major:
  // M[i, j] = flat[i·O + j]. It is a reinterpretation, not Wᵀ.
  // Each output sums i ascending, then + bias.
  parallelFor(N, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, O * I)),
              [&](int64_t begin, int64_t end) {
                std::vector<float> acc(static_cast<size_t>(O));
                for (int64_t n = begin; n < end; ++n) {
                  std::fill(acc.begin(), acc.end(), 0.0f);
                  for (int64_t i = 0; i < I; ++i) {
                    const float xi = vx[n * I + i];
                    const float *mrow = flat.data() + i * O;
                    for (int64_t j = 0; j < O; ++j)
                      acc[size_t(j)] += xi * mrow[j];
                  }
                  for (int64_t j = 0; j < O; ++j)
                    out.set(n * O + j, acc[size_t(j)] + b[size_t(j)]);
                }
              });
  return out.take();
}

Result<HostTensor> sparseConv3d(const HostTensor &feats,
                                const HostTensor &neighborMap,
                                const HostTensor &weight,
                                const HostTensor *bias) {
  const char *op = "sparse.conv3d";
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "feats", feats));
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "the weight", weight));
  if (feats.rank() != 2 || weight.rank() != 5 ||
      weight.dim(4) != feats.dim(1) || weight.dim(1) != weight.dim(2) ||
      weight.dim(1) != weight.dim(3))
    return opError(op, "needs feats [N, I] and a KRSC weight [O, k, k, k, I], "
                       "got " +
                           describe(feats) + " and " + describe(weight));
  const int64_t rowsIn = feats.dim(0), I = feats.dim(1), O = weight.dim(0);
  const int64_t k = weight.dim(1), k3 = k * k * k;
  if (k == 1)
    return sparseConv1x1(feats, weight, bias);
  // The output rows are the map's: the feats' own set, or the fine set of a
  // parent neighbour map (whose entries are coarse rows of feats).
  if (neighborMap.dtype() != DType::I32 || neighborMap.rank() != 2 ||
      neighborMap.dim(1) != k3)
    return opError(op, "the neighbour map must be int32 [N, " +
                           std::to_string(k3) + "], got " +
                           describe(neighborMap));
  const int64_t N = neighborMap.dim(0);
  if (bias) {
    TRELLIS_RETURN_IF_ERROR(expectFloat(op, "the bias", *bias));
    if (Status s = expectShape(op, "the bias", *bias, {O}); !s)
      return Error{s.message()};
  }
  const int32_t *nb = neighborMap.data<int32_t>();
  for (int64_t i = 0; i < N * k3; ++i)
    if (nb[i] < -1 || nb[i] >= rowsIn)
      return opError(op, "neighbour map entry " + std::to_string(nb[i]) +
                             " is not a row of the " + std::to_string(rowsIn) +
                             " feats rows (or -1)");
  FloatView vx(feats), vw(weight);
  std::vector<float> b(size_t(O), 0.0f);
  if (bias) {
    FloatView vb(*bias);
    b.assign(vb.data(), vb.data() + O);
  }
  FloatOut out(feats.dtype(), {N, O});
  // §6.4: out[p] = b + Σ_{offsets (a,β,γ)} W[:, a, β, γ, :]·in[q], q = p +
  // (a−1, β−1, γ−1) when active. KRSC: W[o, off, i] at (o·k³ + off)·I + i.
  // Each output sums the offsets ascending (each offset's I-term dot in the
  // fixed order of dotF32), then + bias.
  parallelFor(N, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, O * I)),
              [&](int64_t begin, int64_t end) {
                std::vector<float> acc(static_cast<size_t>(O));
                for (int64_t n = begin; n < end; ++n) {
                  std::fill(acc.begin(), acc.end(), 0.0f);
                  for (int64_t off = 0; off < k3; ++off) {
                    int64_t q = nb[n * k3 + off];
                    if (q < 0)
                      continue;
                    const float *xin = vx.data() + q * I;
                    for (int64_t o = 0; o < O; ++o)
                      acc[size_t(o)] +=
                          dotF32(vw.data() + (o * k3 + off) * I, xin, I);
                  }
                  for (int64_t o = 0; o < O; ++o)
                    out.set(n * O + o, acc[size_t(o)] + b[size_t(o)]);
                }
              });
  return out.take();
}

//===----------------------------------------------------------------------===//
// Down/upsampling (§6.3) and subdivision (§7.4)
//===----------------------------------------------------------------------===//

Result<CoordSet> coarsen(const CoordSet &fine, int64_t factor) {
  const char *op = "sparse.coarsen";
  if (factor < 1 || fine.resolution % factor != 0)
    return opError(op, "factor " + std::to_string(factor) +
                           " must divide the resolution " +
                           std::to_string(fine.resolution));
  const int64_t N = fine.size();
  // §6.3: coarse coordinates ⌊c/f⌋; M_a = max over ALL rows + 1; key =
  // b·MxMyMz + x'·MyMz + y'·Mz + z'; the unique keys in ascending order are
  // the coarse rows (lexicographic in (b, x', y', z')).
  int64_t M[3] = {0, 0, 0};
  for (int64_t n = 0; n < N; ++n)
    for (int a = 0; a < 3; ++a)
      M[a] = std::max<int64_t>(M[a], fine.row(n)[a + 1] / factor + 1);
  std::vector<int64_t> keys(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    const int32_t *r = fine.row(n);
    keys[size_t(n)] =
        ((int64_t(r[0]) * M[0] + r[1] / factor) * M[1] + r[2] / factor) * M[2] +
        r[3] / factor;
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  const int64_t Nc = int64_t(keys.size());
  HostTensor coarse(DType::I32, {Nc, 4});
  int32_t *c = coarse.mutableData<int32_t>();
  for (int64_t r = 0; r < Nc; ++r) {
    int64_t key = keys[size_t(r)];
    c[4 * r + 3] = int32_t(key % M[2]);
    key /= M[2];
    c[4 * r + 2] = int32_t(key % M[1]);
    key /= M[1];
    c[4 * r + 1] = int32_t(key % M[0]);
    c[4 * r + 0] = int32_t(key / M[0]);
  }
  return CoordSet::create(coarse, fine.resolution / factor, fine.batchSize());
}

Result<HostTensor> parentRows(const CoordSet &fine, const CoordSet &coarse) {
  const char *op = "sparse.parent_rows";
  if (coarse.resolution < 1 || fine.resolution % coarse.resolution != 0)
    return opError(op, "the fine resolution " +
                           std::to_string(fine.resolution) +
                           " is not a multiple of the coarse " +
                           std::to_string(coarse.resolution));
  const int64_t f = fine.resolution / coarse.resolution;
  std::unordered_map<uint64_t, int32_t> index;
  index.reserve(size_t(coarse.size()));
  for (int64_t r = 0; r < coarse.size(); ++r) {
    const int32_t *c = coarse.row(r);
    index.emplace(packRow(c[0], c[1], c[2], c[3]), int32_t(r));
  }
  HostTensor idx(DType::I32, {fine.size()});
  int32_t *ip = idx.mutableData<int32_t>();
  for (int64_t n = 0; n < fine.size(); ++n) {
    const int32_t *r = fine.row(n);
    auto it = index.find(packRow(r[0], r[1] / f, r[2] / f, r[3] / f));
    if (it == index.end())
      return opError(op, "the parent of fine row " + std::to_string(n) +
                             " is not in the coarse set (is it the "
                             "coarsening of the fine set?)");
    ip[n] = it->second;
  }
  return idx;
}

Result<HostTensor> parentNeighborMap(const HostTensor &neighborMap,
                                     const CoordSet &coarse,
                                     const CoordSet &fine) {
  const char *op = "sparse.parent_neighbor_map";
  if (neighborMap.dtype() != DType::I32 || neighborMap.rank() != 2 ||
      neighborMap.dim(0) != fine.size())
    return opError(op, "needs an int32 [" + std::to_string(fine.size()) +
                           ", k³] neighbour map of the fine set, got " +
                           describe(neighborMap));
  Result<HostTensor> parents = parentRows(fine, coarse);
  if (!parents)
    return parents.takeError();
  const int32_t *nb = neighborMap.data<int32_t>();
  const int32_t *up = parents->data<int32_t>();
  HostTensor out(DType::I32, neighborMap.shape());
  int32_t *o = out.mutableData<int32_t>();
  for (int64_t i = 0; i < neighborMap.numel(); ++i) {
    if (nb[i] < -1 || nb[i] >= fine.size())
      return opError(op, "neighbour map entry " + std::to_string(nb[i]) +
                             " is not a fine row (or -1)");
    o[i] = nb[i] < 0 ? -1 : up[nb[i]];
  }
  return out;
}

Result<std::pair<HostTensor, HostTensor>> childRows(const CoordSet &fine,
                                                    const CoordSet &coarse) {
  Result<HostTensor> idx = parentRows(fine, coarse);
  if (!idx)
    return idx.takeError();
  const int64_t N = fine.size(), Nc = coarse.size();
  const int32_t *parent = idx->data<int32_t>();
  // Counting sort by parent: children in ascending fine row order.
  HostTensor offsets(DType::I32, {Nc + 1}), children(DType::I32, {N});
  int32_t *o = offsets.mutableData<int32_t>();
  std::fill(o, o + Nc + 1, 0);
  for (int64_t n = 0; n < N; ++n)
    ++o[parent[n] + 1];
  for (int64_t r = 0; r < Nc; ++r)
    o[r + 1] += o[r];
  std::vector<int32_t> fill(o, o + Nc);
  int32_t *c = children.mutableData<int32_t>();
  for (int64_t n = 0; n < N; ++n)
    c[fill[size_t(parent[n])]++] = int32_t(n);
  return std::make_pair(std::move(offsets), std::move(children));
}

Result<HostTensor> segmentMean(const HostTensor &x, const HostTensor &offsets,
                               const HostTensor &rows, int64_t extraCount) {
  const char *op = "segment_mean";
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "x", x));
  if (x.rank() != 2 || offsets.dtype() != DType::I32 || offsets.rank() != 1 ||
      offsets.dim(0) < 1 || rows.dtype() != DType::I32 || rows.rank() != 1)
    return opError(op, "needs x [M, C], i32 offsets [S + 1] and i32 rows [K], "
                       "got " +
                           describe(x) + ", " + describe(offsets) + ", " +
                           describe(rows));
  const int64_t S = offsets.dim(0) - 1, C = x.dim(1), M = x.dim(0);
  const int32_t *o = offsets.data<int32_t>(), *r = rows.data<int32_t>();
  for (int64_t s = 0; s < S; ++s)
    if (o[s] < 0 || o[s] > o[s + 1] || o[s + 1] > rows.dim(0))
      return opError(op, "offsets must rise within [0, " +
                             std::to_string(rows.dim(0)) + "], found " +
                             std::to_string(o[s]) + ", " +
                             std::to_string(o[s + 1]) + " at segment " +
                             std::to_string(s));
  for (int64_t j = 0; j < rows.dim(0); ++j)
    if (r[j] < 0 || r[j] >= M)
      return opError(op, "row " + std::to_string(r[j]) + " at " +
                             std::to_string(j) + " is outside x's " +
                             std::to_string(M) + " rows");
  FloatView vx(x);
  FloatOut out(x.dtype(), {S, C});
  parallelFor(S, 64, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      const int64_t count = o[s + 1] - o[s];
      for (int64_t ch = 0; ch < C; ++ch) {
        float sum = 0.0f;
        for (int64_t j = o[s]; j < o[s + 1]; ++j)
          sum += vx[int64_t(r[j]) * C + ch];
        out.set(s * C + ch, sum / float(count + extraCount));
      }
    }
  });
  return out.take();
}

Result<HostTensor> sparseDownsample(const HostTensor &feats,
                                    const CoordSet &fine,
                                    const CoordSet &coarse) {
  TRELLIS_RETURN_IF_ERROR(checkFeats("sparse.downsample", feats, fine.size()));
  auto csr = childRows(fine, coarse);
  if (!csr)
    return csr.takeError();
  // §6.3 [quirk]: scatter_reduce "mean" with include_self = True into zeros
  // counts the zero: Σ / (n + 1), e.g. {1,2,3} → 1.5, {10} → 5.
  return segmentMean(feats, csr->first, csr->second, /*extraCount=*/1);
}

Result<HostTensor> sparseUpsample(const HostTensor &coarseFeats,
                                  const CoordSet &coarse,
                                  const CoordSet &fine) {
  const char *op = "sparse.upsample";
  if (coarseFeats.rank() != 2 || coarseFeats.dim(0) != coarse.size())
    return opError(op, "needs coarse feats [N', C] with N' = " +
                           std::to_string(coarse.size()) + ", got " +
                           describe(coarseFeats));
  Result<HostTensor> idx = parentRows(fine, coarse);
  if (!idx)
    return idx.takeError();
  std::vector<int64_t> src(size_t(fine.size()));
  for (int64_t n = 0; n < fine.size(); ++n)
    src[size_t(n)] = idx->data<int32_t>()[n];
  // §6.3: each fine row copies its parent (nearest neighbour), in the fine
  // set's row order.
  return gatherRows(coarseFeats, src);
}

Result<CoordSet> subdivideCoords(const CoordSet &coords) {
  if (coords.resolution * 2 > kMaxCoord)
    return opError("sparse.subdivide", "resolution " +
                                           std::to_string(coords.resolution) +
                                           " cannot be doubled");
  const int64_t N = coords.size();
  HostTensor out(DType::I32, {8 * N, 4});
  int32_t *o = out.mutableData<int32_t>();
  // §7.4: parent-major; child (δx, δy, δz) = bits (2, 1, 0) of its index,
  // so δz varies fastest.
  for (int64_t n = 0; n < N; ++n) {
    const int32_t *r = coords.row(n);
    for (int child = 0; child < 8; ++child) {
      int32_t *d = o + 4 * (8 * n + child);
      d[0] = r[0];
      d[1] = 2 * r[1] + ((child >> 2) & 1);
      d[2] = 2 * r[2] + ((child >> 1) & 1);
      d[3] = 2 * r[3] + (child & 1);
    }
  }
  CoordSet set;
  set.coords = std::move(out);
  set.resolution = coords.resolution * 2;
  set.offsets = coords.offsets;
  for (int64_t &off : set.offsets)
    off *= 8;
  return set;
}

Result<HostTensor> subdivideFeats(const HostTensor &feats) {
  if (feats.rank() != 2)
    return opError("sparse.subdivide",
                   "feats must be [N, C], got " + describe(feats));
  std::vector<int64_t> src(size_t(8 * feats.dim(0)));
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = int64_t(i / 8);
  return gatherRows(feats, src);
}

//===----------------------------------------------------------------------===//
// Per-sample normalization and broadcasts
//===----------------------------------------------------------------------===//

Result<HostTensor> sparseGroupNorm(const HostTensor &feats,
                                   const CoordSet &coords, int64_t groups,
                                   float eps, const HostTensor *gamma,
                                   const HostTensor *beta) {
  const char *op = "sparse.group_norm";
  TRELLIS_RETURN_IF_ERROR(checkFeats(op, feats, coords.size()));
  const int64_t C = feats.dim(1);
  if (groups < 1 || C % groups != 0)
    return opError(op, std::to_string(C) + " channels do not split into " +
                           std::to_string(groups) + " groups");
  for (const HostTensor *p : {gamma, beta}) {
    if (!p)
      continue;
    const char *what = p == gamma ? "gamma" : "beta";
    TRELLIS_RETURN_IF_ERROR(expectFloat(op, what, *p));
    if (Status s = expectShape(op, what, *p, {C}); !s)
      return Error{s.message()};
  }
  const int64_t B = coords.batchSize(), cg = C / groups;
  FloatView vx(feats);
  std::vector<float> g(size_t(C), 1.0f), bt(size_t(C), 0.0f);
  if (gamma) {
    FloatView v(*gamma);
    g.assign(v.data(), v.data() + C);
  }
  if (beta) {
    FloatView v(*beta);
    bt.assign(v.data(), v.data() + C);
  }
  // §7.4: statistics per (sample, group) over that sample's rows × the
  // group's C/G channels; biased variance; f32 (GroupNorm32). Sums are
  // per-row partial sums (channels ascending) combined pairwise over rows.
  std::vector<float> mean(size_t(B * groups), 0.0f),
      rstd(size_t(B * groups), 0.0f);
  parallelFor(B * groups, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> part;
    for (int64_t item = begin; item < end; ++item) {
      int64_t b = item / groups, gi = item % groups;
      int64_t r0 = coords.offsets[size_t(b)],
              r1 = coords.offsets[size_t(b + 1)];
      int64_t n = r1 - r0;
      if (n == 0)
        continue;
      part.assign(size_t(n), 0.0f);
      for (int64_t r = r0; r < r1; ++r) {
        float s = 0.0f;
        for (int64_t c = gi * cg; c < (gi + 1) * cg; ++c)
          s += vx[r * C + c];
        part[size_t(r - r0)] = s;
      }
      float m = pairwiseSum(part.data(), n) / float(n * cg);
      for (int64_t r = r0; r < r1; ++r) {
        float s = 0.0f;
        for (int64_t c = gi * cg; c < (gi + 1) * cg; ++c) {
          float d = vx[r * C + c] - m;
          s += d * d;
        }
        part[size_t(r - r0)] = s;
      }
      float var = pairwiseSum(part.data(), n) / float(n * cg);
      mean[size_t(item)] = m;
      rstd[size_t(item)] = 1.0f / std::sqrt(var + eps);
    }
  });
  FloatOut out(feats.dtype(), feats.shape());
  parallelFor(B, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b)
      for (int64_t r = coords.offsets[size_t(b)];
           r < coords.offsets[size_t(b + 1)]; ++r)
        for (int64_t c = 0; c < C; ++c) {
          int64_t item = b * groups + c / cg;
          float y = (vx[r * C + c] - mean[size_t(item)]) * rstd[size_t(item)];
          out.set(r * C + c, y * g[size_t(c)] + bt[size_t(c)]);
        }
  });
  return out.take();
}

Result<HostTensor> gatherRows(const HostTensor &x, const HostTensor &index) {
  if (x.rank() < 1 || index.dtype() != DType::I32 || index.rank() != 1)
    return opError("gather_rows",
                   "needs x [M, ...] and an i32 index [N], got " + describe(x) +
                       ", " + describe(index));
  std::vector<int64_t> src(size_t(index.dim(0)));
  for (size_t n = 0; n < src.size(); ++n) {
    src[n] = index.data<int32_t>()[n];
    if (src[n] < 0 || src[n] >= x.dim(0))
      return opError("gather_rows", "index " + std::to_string(src[n]) + " at " +
                                        std::to_string(n) + " is outside x's " +
                                        std::to_string(x.dim(0)) + " rows");
  }
  return gatherRows(x, src);
}

HostTensor batchIndex(const CoordSet &coords) {
  HostTensor out(DType::I32, {coords.size()});
  for (int64_t n = 0; n < coords.size(); ++n)
    out.mutableData<int32_t>()[n] = coords.row(n)[0];
  return out;
}

Result<HostTensor> batchBroadcast(const HostTensor &v, const CoordSet &coords) {
  if (v.rank() != 2 || v.dim(0) != coords.batchSize())
    return opError(
        "sparse.batch_broadcast",
        "needs v [B, C] with B = " + std::to_string(coords.batchSize()) +
            ", got " + describe(v));
  std::vector<int64_t> src(size_t(coords.size()));
  for (int64_t n = 0; n < coords.size(); ++n)
    src[size_t(n)] = coords.row(n)[0];
  return gatherRows(v, src);
}

HostTensor xyz(const CoordSet &coords) {
  HostTensor out(DType::I32, {coords.size(), 3});
  int32_t *o = out.mutableData<int32_t>();
  for (int64_t n = 0; n < coords.size(); ++n)
    for (int a = 0; a < 3; ++a)
      o[3 * n + a] = coords.row(n)[a + 1];
  return out;
}

//===----------------------------------------------------------------------===//
// Attention segments (§6.5, §7.1)
//===----------------------------------------------------------------------===//

Segments batchSegments(const CoordSet &coords) {
  Segments seg;
  seg.rows = HostTensor(DType::I32, {coords.size()});
  std::iota(seg.rows.mutableData<int32_t>(),
            seg.rows.mutableData<int32_t>() + coords.size(), 0);
  seg.offsets = HostTensor(DType::I32, {int64_t(coords.offsets.size())});
  for (size_t b = 0; b < coords.offsets.size(); ++b)
    seg.offsets.mutableData<int32_t>()[b] = int32_t(coords.offsets[b]);
  return seg;
}

std::array<int64_t, 3> windowGrid(const CoordSet &coords, int64_t window,
                                  int64_t shift) {
  std::array<int64_t, 3> n = {0, 0, 0};
  for (int64_t r = 0; r < coords.size(); ++r)
    for (int a = 0; a < 3; ++a)
      n[size_t(a)] = std::max(n[size_t(a)],
                              (coords.row(r)[a + 1] + shift + window) / window);
  return n;
}

Result<Segments> windowSegments(const CoordSet &coords, int64_t window,
                                int64_t shift) {
  if (window < 1 || shift < 0)
    return opError("sparse.window_segments",
                   "needs window >= 1 and shift >= 0, got " +
                       std::to_string(window) + " and " +
                       std::to_string(shift));
  const int64_t N = coords.size();
  // §7.1 step 1: c' = c + shift on x, y, z; positive, no wrap-around.
  // Step 2: n_a = ⌈(max over ALL rows of the whole batch of c'_a + 1) / w⌉.
  const std::array<int64_t, 3> n = windowGrid(coords, window, shift);
  // Step 3: id = b·nx·ny·nz + Wx·ny·nz + Wy·nz + Wz with W_a = ⌊c'_a / w⌋.
  std::vector<int64_t> id(static_cast<size_t>(N));
  for (int64_t r = 0; r < N; ++r) {
    const int32_t *c = coords.row(r);
    int64_t w[3];
    for (int a = 0; a < 3; ++a)
      w[a] = (c[a + 1] + shift) / window;
    id[size_t(r)] = ((int64_t(c[0]) * n[0] + w[0]) * n[1] + w[1]) * n[2] + w[2];
  }
  // Step 4: groups in ascending id, empty windows skipped; rows ascending
  // inside a window (a stable sort).
  std::vector<int32_t> order(static_cast<size_t>(N));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return id[size_t(a)] < id[size_t(b)];
  });
  std::vector<int32_t> offsets{0};
  for (int64_t p = 1; p < N; ++p)
    if (id[size_t(order[size_t(p)])] != id[size_t(order[size_t(p - 1)])])
      offsets.push_back(int32_t(p));
  if (N > 0)
    offsets.push_back(int32_t(N));
  Segments seg;
  seg.rows = HostTensor(DType::I32, {N});
  if (N > 0)
    std::memcpy(seg.rows.mutableRaw(), order.data(), size_t(N) * 4);
  seg.offsets = HostTensor(DType::I32, {int64_t(offsets.size())});
  std::memcpy(seg.offsets.mutableRaw(), offsets.data(), offsets.size() * 4);
  return seg;
}

//===----------------------------------------------------------------------===//
// unique_mean (§7.4 step 2)
//===----------------------------------------------------------------------===//

Result<UniqueMean> uniqueMean(const HostTensor &keys,
                              const HostTensor &values) {
  const char *op = "unique_mean";
  if (keys.dtype() != DType::I64 || keys.rank() != 1)
    return opError(op, "keys must be int64 [N], got " + describe(keys));
  TRELLIS_RETURN_IF_ERROR(checkFeats(op, values, keys.dim(0)));
  const int64_t N = keys.dim(0), C = values.dim(1);
  const int64_t *k = keys.data<int64_t>();
  std::vector<int64_t> order(static_cast<size_t>(N));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return k[a] < k[b]; });
  std::vector<int64_t> start;
  for (int64_t p = 0; p < N; ++p)
    if (p == 0 || k[order[size_t(p)]] != k[order[size_t(p - 1)]])
      start.push_back(p);
  const int64_t U = int64_t(start.size());
  start.push_back(N);
  UniqueMean result;
  result.keys = HostTensor(DType::I64, {U});
  for (int64_t u = 0; u < U; ++u)
    result.keys.mutableData<int64_t>()[u] = k[order[size_t(start[size_t(u)])]];
  FloatView vx(values);
  FloatOut out(values.dtype(), {U, C});
  // The TRUE mean (include_self = False): Σ / n over the rows of each key,
  // summed in ascending row order.
  parallelFor(U, 64, [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      int64_t p0 = start[size_t(u)], p1 = start[size_t(u + 1)];
      for (int64_t c = 0; c < C; ++c) {
        float s = 0.0f;
        for (int64_t p = p0; p < p1; ++p)
          s += vx[order[size_t(p)] * C + c];
        out.set(u * C + c, s / float(p1 - p0));
      }
    }
  });
  result.means = out.take();
  return result;
}

} // namespace trellis::ref
