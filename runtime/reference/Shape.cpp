//===- Shape.cpp - reshape, permute, concat, split ------------------------===//
//
// Pure data movement: any dtype, elements copied bit for bit.
//
//===----------------------------------------------------------------------===//
#include "runtime/reference/Common.h"

#include <algorithm>
#include <cstring>

namespace trellis::ref {
using namespace detail;

Result<HostTensor> broadcastRows(const HostTensor &row, const Shape &shape) {
  const char *op = "broadcast_rows";
  int r = row.rank(), n = int(shape.size());
  if (r < 2 || row.dim(0) != 1 || n < r ||
      !std::equal(row.shape().begin() + 1, row.shape().end(),
                  shape.end() - (r - 1)))
    return opError(op, "row " + describe(row) + " does not repeat into " +
                           shapeToString(shape));
  HostTensor out(row.dtype(), shape);
  size_t bytes = row.nbytes();
  auto *dst = static_cast<char *>(out.mutableRaw());
  for (int64_t i = 0, copies = out.numel() / std::max<int64_t>(1, row.numel());
       i < copies; ++i)
    std::memcpy(dst + size_t(i) * bytes, row.raw(), bytes);
  return out;
}

Result<HostTensor> reshape(const HostTensor &x, const Shape &shape) {
  const char *op = "reshape";
  Shape s = shape;
  int inferred = -1;
  int64_t known = 1;
  for (int d = 0; d < int(s.size()); ++d) {
    if (s[d] == -1) {
      if (inferred >= 0)
        return opError(op, "at most one dimension may be -1");
      inferred = d;
    } else if (s[d] < 0) {
      return opError(op, "negative dimension in " + shapeToString(shape));
    } else {
      known *= s[d];
    }
  }
  if (inferred >= 0) {
    if (known == 0 || x.numel() % known != 0)
      return opError(op, "cannot infer -1 in " + shapeToString(shape) +
                             " for " + describe(x));
    s[size_t(inferred)] = x.numel() / known;
  }
  if (numElements(s) != x.numel())
    return opError(op, "cannot reshape " + describe(x) + " to " +
                           shapeToString(shape));
  return x.reshaped(s);
}

Result<HostTensor> permute(const HostTensor &x, const std::vector<int> &perm) {
  const char *op = "permute";
  const int r = x.rank();
  std::vector<char> used(size_t(r), 0);
  if (int(perm.size()) != r)
    return opError(op, "the permutation must have " + std::to_string(r) +
                           " entries");
  for (int p : perm) {
    if (p < 0 || p >= r || used[size_t(p)])
      return opError(op,
                     "not a permutation of the dimensions of " + describe(x));
    used[size_t(p)] = 1;
  }
  Shape outShape(static_cast<size_t>(r));
  std::vector<int64_t> inStride(size_t(r), 1), stride(static_cast<size_t>(r));
  for (int d = r - 2; d >= 0; --d)
    inStride[size_t(d)] = inStride[size_t(d + 1)] * x.dim(d + 1);
  for (int d = 0; d < r; ++d) {
    outShape[size_t(d)] = x.dim(perm[size_t(d)]);
    stride[size_t(d)] = inStride[size_t(perm[size_t(d)])];
  }
  HostTensor out(x.dtype(), outShape);
  const size_t es = dtypeSize(x.dtype());
  const auto *src = static_cast<const uint8_t *>(x.raw());
  auto *dst = static_cast<uint8_t *>(out.mutableRaw());
  parallelFor(out.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int64_t rest = i, off = 0;
      for (int d = r - 1; d >= 0; --d) {
        off += (rest % outShape[size_t(d)]) * stride[size_t(d)];
        rest /= outShape[size_t(d)];
      }
      std::memcpy(dst + size_t(i) * es, src + size_t(off) * es, es);
    }
  });
  return out;
}

Result<HostTensor> concat(const std::vector<HostTensor> &parts, int axis) {
  const char *op = "concat";
  if (parts.empty())
    return opError(op, "needs at least one operand");
  const HostTensor &first = parts.front();
  int ax = normalizeAxis(axis, first.rank());
  if (ax < 0)
    return opError(op, "axis " + std::to_string(axis) +
                           " is out of range for " + describe(first));
  Shape outShape = first.shape();
  outShape[size_t(ax)] = 0;
  for (const HostTensor &p : parts) {
    bool ok = p.dtype() == first.dtype() && p.rank() == first.rank();
    for (int d = 0; ok && d < p.rank(); ++d)
      ok = d == ax || p.dim(d) == first.dim(d);
    if (!ok)
      return opError(op, "operands must agree in dtype and in every dimension "
                         "but the axis, got " +
                             describe(first) + " and " + describe(p));
    outShape[size_t(ax)] += p.dim(ax);
  }
  HostTensor out(first.dtype(), outShape);
  const size_t es = dtypeSize(first.dtype());
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < ax; ++d)
    outer *= outShape[size_t(d)];
  for (int d = ax + 1; d < first.rank(); ++d)
    inner *= outShape[size_t(d)];
  auto *dst = static_cast<uint8_t *>(out.mutableRaw());
  const int64_t outRow = outShape[size_t(ax)] * inner;
  int64_t at = 0;
  for (const HostTensor &p : parts) {
    const int64_t row = p.dim(ax) * inner;
    const auto *src = static_cast<const uint8_t *>(p.raw());
    for (int64_t o = 0; row > 0 && o < outer; ++o)
      std::memcpy(dst + size_t(o * outRow + at) * es,
                  src + size_t(o * row) * es, size_t(row) * es);
    at += row;
  }
  return out;
}

Result<std::vector<HostTensor>> split(const HostTensor &x, int axis,
                                      const std::vector<int64_t> &sizes) {
  const char *op = "split";
  int ax = normalizeAxis(axis, x.rank());
  if (ax < 0)
    return opError(op, "axis " + std::to_string(axis) +
                           " is out of range for " + describe(x));
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0)
      return opError(op, "negative split size");
    total += s;
  }
  if (total != x.dim(ax))
    return opError(op, "sizes sum to " + std::to_string(total) +
                           ", the axis has " + std::to_string(x.dim(ax)));
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < ax; ++d)
    outer *= x.dim(d);
  for (int d = ax + 1; d < x.rank(); ++d)
    inner *= x.dim(d);
  const size_t es = dtypeSize(x.dtype());
  const auto *src = static_cast<const uint8_t *>(x.raw());
  const int64_t inRow = x.dim(ax) * inner;
  std::vector<HostTensor> outs;
  int64_t at = 0;
  for (int64_t s : sizes) {
    Shape shape = x.shape();
    shape[size_t(ax)] = s;
    HostTensor part(x.dtype(), shape);
    auto *dst = static_cast<uint8_t *>(part.mutableRaw());
    const int64_t row = s * inner;
    for (int64_t o = 0; row > 0 && o < outer; ++o)
      std::memcpy(dst + size_t(o * row) * es, src + size_t(o * inRow + at) * es,
                  size_t(row) * es);
    at += row;
    outs.push_back(std::move(part));
  }
  return outs;
}

} // namespace trellis::ref
