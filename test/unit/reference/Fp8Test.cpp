//===- Fp8Test.cpp - E4M3 emulation and the W8A8 linear ------------------===//
//
// Facts of the E4M3 format checked by hand, every byte round-tripping, and
// the two NumPy goldens of test/golden/fp8_np.py: the rounding byte for byte,
// the quantized linear within the difference of fp32 and exact accumulation
// (the golden sums exactly in float64 and rounds once; we sum 96 products in
// fp32: ~1e-6 relative, tested at 1e-5 relative L2).
//
//===----------------------------------------------------------------------===//
#include "test/unit/reference/TestUtil.h"

#include "trellis/Reference/Fp8.h"
#include "trellis/Reference/Parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>

using namespace trellis;
using namespace trellis::ref;
using namespace trellis::reftest;

namespace {

std::vector<uint8_t> bytes(const HostTensor &t) {
  EXPECT_EQ(t.dtype(), DType::U8);
  return std::vector<uint8_t>(t.data<uint8_t>(), t.data<uint8_t>() + t.numel());
}

std::vector<float> floats(const HostTensor &t) {
  EXPECT_EQ(t.dtype(), DType::F32);
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

} // namespace

TEST(Fp8E4M3, FormatFacts) {
  EXPECT_EQ(fromE4M3(0x7E), 448.0f);
  EXPECT_EQ(fromE4M3(0xFE), -448.0f);
  EXPECT_EQ(fromE4M3(0x08), std::ldexp(1.0f, -6)); // min normal
  EXPECT_EQ(fromE4M3(0x01), std::ldexp(1.0f, -9)); // min subnormal
  EXPECT_EQ(fromE4M3(0x07), 7 * std::ldexp(1.0f, -9));
  EXPECT_EQ(fromE4M3(0x38), 1.0f);
  EXPECT_EQ(fromE4M3(0x39), 1.125f);
  EXPECT_TRUE(std::isnan(fromE4M3(0x7F)));
  EXPECT_TRUE(std::isnan(fromE4M3(0xFF)));
  EXPECT_TRUE(std::signbit(fromE4M3(0x80)) && fromE4M3(0x80) == 0.0f);
  int nans = 0;
  for (int b = 0; b < 256; ++b) {
    EXPECT_FALSE(std::isinf(fromE4M3(uint8_t(b)))) << b; // no infinities
    nans += std::isnan(fromE4M3(uint8_t(b)));
  }
  EXPECT_EQ(nans, 2);
}

TEST(Fp8E4M3, EveryByteRoundTrips) {
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7F) == 0x7F)
      continue;
    EXPECT_EQ(toE4M3(fromE4M3(uint8_t(b))), b) << "byte " << b;
  }
  // The positive codes are increasing in value.
  for (int b = 1; b < 0x7F; ++b)
    EXPECT_LT(fromE4M3(uint8_t(b - 1)), fromE4M3(uint8_t(b))) << b;
}

TEST(Fp8E4M3, RoundingFacts) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(toE4M3(448.0f), 0x7E);
  EXPECT_EQ(toE4M3(std::ldexp(1.0f, -6)), 0x08);
  EXPECT_EQ(toE4M3(std::ldexp(1.0f, -9)), 0x01);
  // Satfinite: beyond 448, and the infinities, saturate.
  EXPECT_EQ(toE4M3(449.0f), 0x7E);
  EXPECT_EQ(toE4M3(1e6f), 0x7E);
  EXPECT_EQ(toE4M3(-1e6f), 0xFE);
  EXPECT_EQ(toE4M3(std::numeric_limits<float>::max()), 0x7E);
  EXPECT_EQ(toE4M3(inf), 0x7E);
  EXPECT_EQ(toE4M3(-inf), 0xFE);
  // 464: the midpoint between 448 and the next, nonexistent, value.
  EXPECT_EQ(toE4M3(464.0f), 0x7E);
  // Ties to even: half the min subnormal to 0, 1.5 · 2^-9 to 2 · 2^-9,
  // 1.0625 (between 0x38 and 0x39) down, 1.1875 (0x39 / 0x3A) up.
  EXPECT_EQ(toE4M3(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(toE4M3(3 * std::ldexp(1.0f, -10)), 0x02);
  EXPECT_EQ(toE4M3(1.0625f), 0x38);
  EXPECT_EQ(toE4M3(1.1875f), 0x3A);
  // Just off the ties.
  EXPECT_EQ(toE4M3(std::nextafter(1.0625f, 2.0f)), 0x39);
  EXPECT_EQ(toE4M3(std::nextafter(std::ldexp(1.0f, -10), 1.0f)), 0x01);
  // Signed zero, fp32 subnormals, NaN of either sign.
  EXPECT_EQ(toE4M3(0.0f), 0x00);
  EXPECT_EQ(toE4M3(-0.0f), 0x80);
  EXPECT_EQ(toE4M3(-1e-40f), 0x80);
  EXPECT_EQ(toE4M3(nan), 0x7F);
  EXPECT_EQ(toE4M3(-nan), 0x7F);
  // The largest subnormal rounds up into the min normal.
  EXPECT_EQ(toE4M3(std::nextafter(std::ldexp(1.0f, -6), 0.0f)), 0x08);
}

TEST(Fp8E4M3, ScalesAndAmax) {
  const float inf = std::numeric_limits<float>::infinity();
  const float x[] = {1.0f, -3.0f, inf, std::nanf(""), 2.0f};
  EXPECT_EQ(e4m3Amax(x, 5), 3.0f); // non-finite values ignored
  EXPECT_EQ(e4m3Amax(x + 2, 2), 0.0f);
  EXPECT_EQ(e4m3Amax(x, 0), 0.0f);
  E4M3Scale s = e4m3ScaleFor(3.0f);
  EXPECT_EQ(s.quantize, 448.0f / 3.0f);
  EXPECT_EQ(s.dequantize, 3.0f / 448.0f);
  for (float a : {0.0f, inf, std::nanf("")}) {
    E4M3Scale u = e4m3ScaleFor(a);
    EXPECT_EQ(u.quantize, 1.0f);
    EXPECT_EQ(u.dequantize, 1.0f);
  }
  uint8_t q[5];
  quantizeE4M3(x, 5, s.quantize, q);
  EXPECT_EQ(q[1], 0xFE); // -amax maps onto -448
  EXPECT_EQ(q[2], 0x7E);
  EXPECT_EQ(q[3], 0x7F);
}

TEST(Fp8E4M3, LinearByHand) {
  // amax 448 on both sides: unit scales, so the quantized values are the
  // E4M3 roundings themselves. 1.0625 → 1, 3.3 → 3.25, 448, -0.3 → -0.3125.
  const float x[] = {1.0625f, 3.3f, 448.0f, -0.3f};          // [2, 2]
  const float w[] = {448.0f, 0.0f, 1.0f, 2.0f, -1.0f, 0.5f}; // [3, 2]
  const float b[] = {0.0f, 1.0f, -1.0f};
  float y[6];
  linearE4M3(x, w, b, 2, 2, 3, y);
  const float expected[] = {
      448.0f,          1.0f + 3.25f * 2.0f + 1.0f, -1.0f + 1.625f - 1.0f,
      448.0f * 448.0f, 448.0f - 0.625f + 1.0f,     -448.0f - 0.15625f - 1.0f};
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(y[i], expected[i]) << i;
  // No bias; an all-zero x (amax 0, unit scales) gives zeros.
  const float zeros[4] = {};
  linearE4M3(zeros, w, nullptr, 2, 2, 3, y);
  for (float v : y)
    EXPECT_EQ(v, 0.0f);
}

//===----------------------------------------------------------------------===//
// Goldens (test/golden/fp8_np.py)
//===----------------------------------------------------------------------===//

TEST(Fp8E4M3, GoldenRoundingByteForByte) {
  std::vector<float> x = floats(golden("fp8_e4m3_rounding", "x"));
  std::vector<uint8_t> e = bytes(golden("fp8_e4m3_rounding", "expected"));
  ASSERT_EQ(x.size(), e.size());
  int64_t differ = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    uint8_t got = toE4M3(x[i]);
    if (got != e[i] && ++differ <= 10)
      ADD_FAILURE() << "x[" << i << "] = " << x[i] << ": got " << int(got)
                    << ", expected " << int(e[i]);
  }
  EXPECT_EQ(differ, 0) << "of " << x.size();
}

TEST(Fp8E4M3, GoldenLinear) {
  const char *c = "fp8_linear";
  HostTensor tx = golden(c, "x"), tw = golden(c, "w"), tb = golden(c, "b");
  ASSERT_EQ(tx.rank(), 2);
  ASSERT_EQ(tw.rank(), 2);
  const int64_t rows = tx.dim(0), in = tx.dim(1), out = tw.dim(0);
  ASSERT_EQ(tw.dim(1), in);
  std::vector<float> x = floats(tx), w = floats(tw), b = floats(tb);

  // The quantization is exact: amax, scales and every byte.
  const float ax = e4m3Amax(x.data(), int64_t(x.size()));
  const float aw = e4m3Amax(w.data(), int64_t(w.size()));
  EXPECT_EQ(ax, float(goldenScalar(c, "expected_amax_x")));
  EXPECT_EQ(aw, float(goldenScalar(c, "expected_amax_w")));
  std::vector<uint8_t> xq(x.size()), wq(w.size());
  quantizeE4M3(x.data(), int64_t(x.size()), e4m3ScaleFor(ax).quantize,
               xq.data());
  quantizeE4M3(w.data(), int64_t(w.size()), e4m3ScaleFor(aw).quantize,
               wq.data());
  EXPECT_EQ(xq, bytes(golden(c, "expected_xq")));
  EXPECT_EQ(wq, bytes(golden(c, "expected_wq")));

  std::vector<float> e = floats(golden(c, "expected"));
  ASSERT_EQ(int64_t(e.size()), rows * out);
  // Bit-identical for any thread count.
  std::vector<float> y(e.size()), y1(e.size());
  linearE4M3(x.data(), w.data(), b.data(), rows, in, out, y.data());
  setNumThreads(1);
  linearE4M3(x.data(), w.data(), b.data(), rows, in, out, y1.data());
  setNumThreads(0);
  EXPECT_EQ(std::memcmp(y.data(), y1.data(), y.size() * sizeof(float)), 0);

  double err2 = 0, ref2 = 0, maxErr = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    double d = double(y[i]) - double(e[i]);
    err2 += d * d;
    ref2 += double(e[i]) * double(e[i]);
    maxErr = std::max(maxErr, std::fabs(d));
  }
  const double relL2 = std::sqrt(err2 / ref2);
  RecordProperty("rel_l2", std::to_string(relL2));
  RecordProperty("max_abs_err", std::to_string(maxErr));
  std::cout << "[ fp8_linear ] relative L2 " << relL2 << ", max |err| "
            << maxErr << " (max |expected| " << maxAbs(golden(c, "expected"))
            << ")\n";
  EXPECT_LE(relL2, 1e-5) << "max |err| " << maxErr;
}

// A static activation scale (trellis.linear's activation_amax) below x's own
// amax: the bytes are the NumPy model's (the large values saturate at ±448),
// and so is y; the dynamic form of the same x differs.
TEST(Fp8E4M3, GoldenLinearStaticScale) {
  const char *c = "fp8_linear_static";
  HostTensor tx = golden(c, "x"), tw = golden(c, "w"), tb = golden(c, "b");
  const int64_t rows = tx.dim(0), in = tx.dim(1), out = tw.dim(0);
  std::vector<float> x = floats(tx), w = floats(tw), b = floats(tb);
  const float amax = float(goldenScalar(c, "amax"));
  ASSERT_LT(amax, e4m3Amax(x.data(), int64_t(x.size())));

  std::vector<uint8_t> xq(x.size());
  quantizeE4M3(x.data(), int64_t(x.size()), e4m3ScaleFor(amax).quantize,
               xq.data());
  EXPECT_EQ(xq, bytes(golden(c, "expected_xq")));
  EXPECT_NE(std::count(xq.begin(), xq.end(), uint8_t(0x7E)) +
                std::count(xq.begin(), xq.end(), uint8_t(0xFE)),
            0)
      << "no value saturated: the case tests nothing";

  std::vector<float> e = floats(golden(c, "expected"));
  std::vector<float> y(e.size()), dynamic(e.size());
  linearE4M3(x.data(), w.data(), b.data(), rows, in, out, y.data(), amax);
  linearE4M3(x.data(), w.data(), b.data(), rows, in, out, dynamic.data());
  double err2 = 0, ref2 = 0, moved2 = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    err2 += std::pow(double(y[i]) - double(e[i]), 2);
    moved2 += std::pow(double(dynamic[i]) - double(e[i]), 2);
    ref2 += double(e[i]) * double(e[i]);
  }
  EXPECT_LE(std::sqrt(err2 / ref2), 1e-5);
  EXPECT_GT(std::sqrt(moved2 / ref2), 1e-3) << "static equals dynamic";

  // The reference op takes the static amax the same way.
  auto yOp = ref::linearFp8(tx, tw, &tb, amax);
  ASSERT_TRUE(yOp) << yOp.message();
  std::vector<float> yv = floats(*yOp);
  EXPECT_EQ(std::memcmp(yv.data(), y.data(), y.size() * sizeof(float)), 0);
}

//===----------------------------------------------------------------------===//
// FP8 self-attention (ref::attentionFp8, ref::sparseAttentionFp8)
//===----------------------------------------------------------------------===//

// The NumPy model (fp8_np.attention) and the C++ share every rounding that
// decides an E4M3 byte or the output: fp32 scales and products, exact dot
// products and sums rounded once, exp2 as the double exp2 rounded to fp32.
// What is left to differ: the fp32 head RMS norm's sum of squares (the C++
// sums in fp32 pairwise, NumPy in float64), the bound's sum of squares (both
// exact in double; the rounding of the sum can differ by an fp32 ulp in
// theory) and the exp2 argument (C++ fmaf, NumPy float64 rounded to fp32: a
// double rounding). Each could move an E4M3 byte of q8, k8 or P by one code
// only where the value sits within ~1e-7 relative of a rounding midpoint, so
// the output is expected bit-identical; the test allows 1 fp16 ulp on at
// most 0.5% of the elements (the effect of one flipped P byte stays below
// that on a row), and reports the count.
TEST(Fp8E4M3, GoldenAttention) {
  for (const char *c : {"fp8_attention", "fp8_attention_long"}) {
    SCOPED_TRACE(c);
    HostTensor q = golden(c, "q"), k = golden(c, "k"), v = golden(c, "v");
    HostTensor qg = golden(c, "q_gamma"), kg = golden(c, "k_gamma");
    const float scale = float(goldenScalar(c, "scale"));
    HostTensor e = golden(c, "expected");
    auto out = ref::attentionFp8(q, k, v, qg, kg, scale);
    ASSERT_TRUE(out) << out.message();
    auto check = halfUlpClose(*out, e, 1, 0.005);
    std::cout << "[ " << c << " ] " << check.message() << "\n";
    EXPECT_TRUE(check);
    // Bit-identical for any thread count.
    setNumThreads(1);
    auto out1 = ref::attentionFp8(q, k, v, qg, kg, scale);
    setNumThreads(0);
    ASSERT_TRUE(out1) << out1.message();
    EXPECT_TRUE(sameTensor(*out1, *out));
    // Not the fp16 attention of the normalized q, k: the E4M3 rounding shows.
    auto fp16 = ref::attention(ok(ref::headRmsNorm(q, qg)),
                               ok(ref::headRmsNorm(k, kg)), v, scale);
    ASSERT_TRUE(fp16) << fp16.message();
    EXPECT_FALSE(halfUlpClose(*fp16, e, 4));
  }
}

// Static v scales (a calibration's v_amax): the golden case's head 0 scale
// lies below its largest |v| (those values saturate), head 1's above it.
// Given the dynamic amax itself, the static path is the dynamic one bit for
// bit.
TEST(Fp8E4M3, GoldenAttentionStaticV) {
  const char *c = "fp8_attention_static_v";
  HostTensor q = golden(c, "q"), k = golden(c, "k"), v = golden(c, "v");
  HostTensor qg = golden(c, "q_gamma"), kg = golden(c, "k_gamma");
  HostTensor vAmax = golden(c, "v_amax");
  const float scale = float(goldenScalar(c, "scale"));
  const std::vector<float> heads(vAmax.data<float>(),
                                 vAmax.data<float>() + vAmax.numel());
  auto out = ref::attentionFp8(q, k, v, qg, kg, scale, heads);
  ASSERT_TRUE(out) << out.message();
  auto check = halfUlpClose(*out, golden(c, "expected"), 1, 0.005);
  std::cout << "[ " << c << " ] " << check.message() << "\n";
  EXPECT_TRUE(check);
  auto dynamic = ref::attentionFp8(q, k, v, qg, kg, scale);
  ASSERT_TRUE(dynamic) << dynamic.message();
  EXPECT_FALSE(sameTensor(*dynamic, *out)); // the static scales are used
  auto amax = ref::fp8HeadAmax(v);
  ASSERT_TRUE(amax) << amax.message();
  auto same = ref::attentionFp8(q, k, v, qg, kg, scale, *amax);
  ASSERT_TRUE(same) << same.message();
  EXPECT_TRUE(sameTensor(*same, *dynamic));
  // One value per head, or an error naming the counts.
  auto bad =
      ref::attentionFp8(q, k, v, qg, kg, scale, std::vector<float>{1.0f});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("v_amax has 1 values for 2 heads"),
            std::string::npos)
      << bad.message();
}

namespace {

/// f16 [n, h, 64] of uniform values in [-r, r] (a fixed LCG).
HostTensor randomHalf(Shape shape, float r, uint32_t &state) {
  HostTensor t(DType::F16, shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    state = state * 1664525u + 1013904223u;
    float u = float(state >> 8) / float(1u << 24);
    t.mutableData<uint16_t>()[i] = floatToHalf((2.0f * u - 1.0f) * r);
  }
  return t;
}

} // namespace

// Two segments of unequal length (37 and 70 rows, the second longer than the
// 64 keys the reference is taken from), their rows interleaved and out of
// order, against the dense op on each sequence alone. Every value is per
// token except v_amax, which is over all rows of the op: the largest |v| of
// each head (9.5) is placed in both sequences so that the dense ops see the
// same one. The results agree bit for bit.
TEST(Fp8E4M3, SparseAttentionSegmentsMatchDense) {
  const int64_t H = 2, D = 64, L1 = 37, L2 = 70, N = L1 + L2;
  uint32_t state = 12345;
  HostTensor q1 = randomHalf({1, L1, H, D}, 2.0f, state),
             k1 = randomHalf({1, L1, H, D}, 2.0f, state),
             v1 = randomHalf({1, L1, H, D}, 4.0f, state),
             q2 = randomHalf({1, L2, H, D}, 2.0f, state),
             k2 = randomHalf({1, L2, H, D}, 2.0f, state),
             v2 = randomHalf({1, L2, H, D}, 4.0f, state);
  for (int64_t h = 0; h < H; ++h) {
    v1.mutableData<uint16_t>()[(5 * H + h) * D + 3] = floatToHalf(9.5f);
    v2.mutableData<uint16_t>()[(60 * H + h) * D + 7] = floatToHalf(-9.5f);
  }
  std::vector<float> g(static_cast<size_t>(H * D));
  for (size_t i = 0; i < g.size(); ++i)
    g[i] = 0.5f + float((i * 37) % 101) / 100.0f;
  HostTensor qg = tensorF32({H, D}, g);
  std::reverse(g.begin(), g.end());
  HostTensor kg = tensorF32({H, D}, g);
  const float scale = 0.125f;
  HostTensor d1 = ok(ref::attentionFp8(q1, k1, v1, qg, kg, scale));
  HostTensor d2 = ok(ref::attentionFp8(q2, k2, v2, qg, kg, scale));

  // Physical row of token t of sequence 1 / 2: interleaved, the second
  // sequence's rows in reverse.
  std::vector<int32_t> rowOf1(static_cast<size_t>(L1)),
      rowOf2(static_cast<size_t>(L2));
  for (int64_t t = 0; t < L1; ++t)
    rowOf1[size_t(t)] = int32_t(2 * t + 1);
  std::vector<int32_t> rest;
  for (int32_t r = 0; r < N; ++r)
    if (r % 2 == 0 || r > 2 * L1)
      rest.push_back(r);
  ASSERT_EQ(int64_t(rest.size()), L2);
  for (int64_t t = 0; t < L2; ++t)
    rowOf2[size_t(t)] = rest[size_t(L2 - 1 - t)];
  HostTensor q(DType::F16, {N, H, D}), k(DType::F16, {N, H, D}),
      v(DType::F16, {N, H, D});
  auto place = [&](const HostTensor &src, HostTensor &dst,
                   const std::vector<int32_t> &rowOf) {
    for (size_t t = 0; t < rowOf.size(); ++t)
      std::memcpy(dst.mutableData<uint16_t>() + rowOf[t] * H * D,
                  src.data<uint16_t>() + int64_t(t) * H * D,
                  size_t(H * D) * sizeof(uint16_t));
  };
  place(q1, q, rowOf1), place(k1, k, rowOf1), place(v1, v, rowOf1);
  place(q2, q, rowOf2), place(k2, k, rowOf2), place(v2, v, rowOf2);
  std::vector<int32_t> rows(rowOf1);
  rows.insert(rows.end(), rowOf2.begin(), rowOf2.end());
  Segments seg{tensorI32({N}, rows),
               tensorI32({3}, {0, int32_t(L1), int32_t(N)})};
  HostTensor s = ok(ref::sparseAttentionFp8(q, k, v, seg, qg, kg, scale));
  ASSERT_EQ(s.shape(), (Shape{N, H, D}));
  int64_t differ = 0;
  auto compare = [&](const HostTensor &dense,
                     const std::vector<int32_t> &rowOf) {
    for (size_t t = 0; t < rowOf.size(); ++t)
      differ += std::memcmp(s.data<uint16_t>() + rowOf[t] * H * D,
                            dense.data<uint16_t>() + int64_t(t) * H * D,
                            size_t(H * D) * sizeof(uint16_t)) != 0;
  };
  compare(d1, rowOf1);
  compare(d2, rowOf2);
  EXPECT_EQ(differ, 0) << "rows differ of " << N;

  // v_amax is over all rows of the op: without the 9.5 in the first
  // sequence, its dense op's v_amax is smaller, while the sparse op still
  // takes 9.5 from the second sequence, so the first sequence's rows differ.
  HostTensor v1Small = v1;
  for (int64_t h = 0; h < H; ++h)
    v1Small.mutableData<uint16_t>()[(5 * H + h) * D + 3] = floatToHalf(0.0f);
  HostTensor d1Small = ok(ref::attentionFp8(q1, k1, v1Small, qg, kg, scale));
  place(v1Small, v, rowOf1);
  HostTensor sSmall = ok(ref::sparseAttentionFp8(q, k, v, seg, qg, kg, scale));
  differ = 0;
  for (size_t t = 0; t < rowOf1.size(); ++t)
    differ += std::memcmp(sSmall.data<uint16_t>() + rowOf1[t] * H * D,
                          d1Small.data<uint16_t>() + int64_t(t) * H * D,
                          size_t(H * D) * sizeof(uint16_t)) != 0;
  EXPECT_GT(differ, 0) << "v_amax is not over all rows of the op";
}

TEST(Fp8E4M3, AttentionShapeErrors) {
  HostTensor g = tensorF32({1, 64}, std::vector<float>(64, 1.0f));
  HostTensor x = tensorF16({1, 3, 1, 64}, std::vector<float>(3 * 64, 0.5f));
  HostTensor y = tensorF16({1, 4, 1, 64}, std::vector<float>(4 * 64, 0.5f));
  auto cross = ref::attentionFp8(x, y, y, g, g, 0.125f);
  ASSERT_FALSE(cross);
  EXPECT_NE(cross.message().find("trellis.attention"), std::string::npos)
      << cross.message();
  HostTensor g32 = tensorF32({1, 32}, std::vector<float>(32, 1.0f));
  HostTensor x32 = tensorF16({1, 3, 1, 32}, std::vector<float>(3 * 32, 0.5f));
  EXPECT_FALSE(ref::attentionFp8(x32, x32, x32, g32, g32, 0.125f));
  auto badGamma = ref::attentionFp8(x, x, x, g32, g, 0.125f);
  ASSERT_FALSE(badGamma);
  EXPECT_NE(badGamma.message().find("q_gamma"), std::string::npos)
      << badGamma.message();
}
