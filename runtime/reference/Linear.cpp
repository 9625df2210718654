//===- Linear.cpp - linear and matmul -------------------------------------===//
#include "runtime/reference/Common.h"
#include "trellis/Reference/Fp8.h"

#include <optional>

namespace trellis::ref {
using namespace detail;

namespace {
/// The operands of a linear: float x [..., K], weight [O, K], bias [O].
Status checkLinear(const char *op, const HostTensor &x,
                   const HostTensor &weight, const HostTensor *bias) {
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "x", x));
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "the weight", weight));
  if (x.rank() < 1 || weight.rank() != 2 || weight.dim(1) != x.dim(-1))
    return opError(op, "x [..., K] needs a weight [O, K], got x " +
                           describe(x) + " and weight " + describe(weight));
  if (bias) {
    TRELLIS_RETURN_IF_ERROR(expectFloat(op, "the bias", *bias));
    if (Status s = expectShape(op, "the bias", *bias, {weight.dim(0)}); !s)
      return Error{s.message()};
  }
  return Status::ok();
}
} // namespace

Result<HostTensor> linear(const HostTensor &x, const HostTensor &weight,
                          const HostTensor *bias) {
  TRELLIS_RETURN_IF_ERROR(checkLinear("linear", x, weight, bias));
  const int64_t K = weight.dim(1), O = weight.dim(0);
  Shape outShape = x.shape();
  outShape.back() = O;
  const int64_t M = numElements(Shape(x.shape().begin(), x.shape().end() - 1));
  FloatView vx(x), vw(weight);
  std::vector<float> b(size_t(O), 0.0f);
  if (bias) {
    FloatView vb(*bias);
    b.assign(vb.data(), vb.data() + O);
  }
  FloatOut out(x.dtype(), outShape);
  // One output row per item; y[m, o] = (Σ_k x[m, k]·W[o, k], k ascending) +
  // b[o].
  // One output row per item: y[m, o] = dotF32(x[m, :], W[o, :]) + b[o].
  parallelFor(M, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, O * K)),
              [&](int64_t begin, int64_t end) {
                for (int64_t m = begin; m < end; ++m)
                  for (int64_t o = 0; o < O; ++o)
                    out.set(m * O + o,
                            dotF32(vx.data() + m * K, vw.data() + o * K, K) +
                                b[size_t(o)]);
              });
  return out.take();
}

Result<HostTensor> linearFp8(const HostTensor &x, const HostTensor &weight,
                             const HostTensor *bias, float activationAmax) {
  TRELLIS_RETURN_IF_ERROR(checkLinear("linear (fp8_e4m3)", x, weight, bias));
  const int64_t K = weight.dim(1), O = weight.dim(0);
  Shape outShape = x.shape();
  outShape.back() = O;
  const int64_t M = numElements(Shape(x.shape().begin(), x.shape().end() - 1));
  FloatView vx(x), vw(weight);
  std::optional<FloatView> vb;
  if (bias)
    vb.emplace(*bias);
  std::vector<float> y(size_t(M * O));
  linearE4M3(vx.data(), vw.data(), vb ? vb->data() : nullptr, M, K, O, y.data(),
             activationAmax);
  FloatOut out(x.dtype(), outShape);
  for (int64_t i = 0; i < M * O; ++i)
    out.set(i, y[size_t(i)]);
  return out.take();
}

Result<float> e4m3Amax(const HostTensor &x) {
  TRELLIS_RETURN_IF_ERROR(expectFloat("the FP8 amax", "x", x));
  FloatView v(x);
  return e4m3Amax(v.data(), x.numel());
}

Result<HostTensor> matmul(const HostTensor &a, const HostTensor &b) {
  const char *op = "matmul";
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "a", a));
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "b", b));
  if (a.dtype() != b.dtype())
    return opError(op, "operands must have one dtype, got " + describe(a) +
                           " and " + describe(b));
  if (a.rank() < 2 || b.rank() < 2 || a.dim(-1) != b.dim(-2))
    return opError(op, "needs a [..., M, K] and b [..., K, N], got " +
                           describe(a) + " and " + describe(b));
  const int64_t M = a.dim(-2), K = a.dim(-1), N = b.dim(-1);
  // Broadcast the batch dimensions (all but the last two) as NumPy does.
  Shape ba(a.shape().begin(), a.shape().end() - 2);
  Shape bb(b.shape().begin(), b.shape().end() - 2);
  size_t rank = std::max(ba.size(), bb.size());
  Shape batch(rank, 1);
  std::vector<int64_t> strideA(rank, 0), strideB(rank, 0);
  int64_t sa = M * K, sb = K * N;
  for (size_t k = 0; k < rank; ++k) {
    size_t d = rank - 1 - k;
    int64_t da = k < ba.size() ? ba[ba.size() - 1 - k] : 1;
    int64_t db = k < bb.size() ? bb[bb.size() - 1 - k] : 1;
    if (da != db && da != 1 && db != 1)
      return opError(op, "batch dimensions do not broadcast: " + describe(a) +
                             " and " + describe(b));
    batch[d] = da == 1 ? db : da;
    strideA[d] = da == 1 ? 0 : sa;
    strideB[d] = db == 1 ? 0 : sb;
    sa *= da;
    sb *= db;
  }
  Shape outShape = batch;
  outShape.push_back(M);
  outShape.push_back(N);
  const int64_t numBatch = numElements(batch);
  FloatView va(a), vb(b);
  FloatOut out(a.dtype(), outShape);
  parallelFor(numBatch * M,
              std::max<int64_t>(1, 16384 / std::max<int64_t>(1, N * K)),
              [&](int64_t begin, int64_t end) {
                std::vector<float> acc(static_cast<size_t>(N));
                for (int64_t item = begin; item < end; ++item) {
                  int64_t bi = item / M, m = item % M;
                  int64_t offA = 0, offB = 0, rest = bi;
                  for (int d = int(rank) - 1; d >= 0; --d) {
                    int64_t c = rest % batch[d];
                    rest /= batch[d];
                    offA += c * strideA[d];
                    offB += c * strideB[d];
                  }
                  const float *ar = va.data() + offA + m * K;
                  const float *bm = vb.data() + offB;
                  // Row m of the product: Σ_k a[m, k]·b[k, :], k ascending.
                  std::fill(acc.begin(), acc.end(), 0.0f);
                  for (int64_t k = 0; k < K; ++k) {
                    const float a = ar[k];
                    const float *br = bm + k * N;
                    for (int64_t n = 0; n < N; ++n)
                      acc[size_t(n)] += a * br[n];
                  }
                  for (int64_t n = 0; n < N; ++n)
                    out.set(item * N + n, acc[size_t(n)]);
                }
              });
  return out.take();
}

} // namespace trellis::ref
