//===- Fp8.h - FP8 (E4M3) emulation and the W8A8 quantized linear --------===//
//
// The CPU model of FP8 inference: the OCP E4M3 format in the variant NVIDIA
// calls E4M3FN (1 sign bit, 4 exponent bits with bias 7, 3 mantissa bits; no
// infinities; NaN is S.1111.111, 0x7F / 0xFF; max finite 448 = 0x7E, min
// normal 2^-6 = 0x08, min subnormal 2^-9 = 0x01), and a W8A8 linear layer
// with per-tensor scales. A GPU FP8 GEMM (cuBLASLt, per-tensor scales) is
// compared against linearE4M3: everything here is bit-exact and independent
// of the thread count, and the only freedom a GPU has is the order and
// precision of its fp32 accumulation.
//
// The FP8 self-attention (E4M3 Q, K, V and P) is Kernels.h's attentionFp8 /
// sparseAttentionFp8, built on these functions.
//
// Golden values: test/golden/fp8_np.py (an independent NumPy model).
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_REFERENCE_FP8_H
#define TRELLIS_REFERENCE_FP8_H

#include <cstdint>

namespace trellis::ref {

/// The E4M3 byte nearest to `x`, ties to the even mantissa, subnormals
/// included. Saturating ("satfinite", as the GPU's
/// __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3) and
/// cvt.rn.satfinite.e4m3x2.f32): finite values beyond ±448 and ±inf give
/// ±448 (0x7E / 0xFE). Any NaN gives 0x7F. Signed zero keeps its sign
/// (-0 → 0x80); magnitudes up to 2^-10 (half the min subnormal, a tie that
/// goes to the even 0) round to a zero of x's sign.
uint8_t toE4M3(float x);

/// The exact value of an E4M3 byte (a quiet NaN for 0x7F and 0xFF).
float fromE4M3(uint8_t b);

/// max |x[i]| over the finite x[i]; 0 when there is none (or n is 0).
float e4m3Amax(const float *x, int64_t n);

/// A per-tensor scale pair: values are quantized as toE4M3(x · quantize),
/// and a quantized value q stands for fromE4M3(q) · dequantize.
struct E4M3Scale {
  float quantize;
  float dequantize;
};

/// The scales that map amax onto the largest E4M3 value: quantize =
/// 448.0f / amax and dequantize = amax / 448.0f, each one correctly rounded
/// fp32 division (not one the reciprocal of the other). When amax is 0,
/// negative or not finite, both are 1.0f. (An amax below 448 / FLT_MAX,
/// about 2.6e-36, gives an infinite quantize scale, as the formula does.)
E4M3Scale e4m3ScaleFor(float amax);

/// out[i] = toE4M3(x[i] · quantizeScale): one fp32 multiply, then the
/// rounding to E4M3.
void quantizeE4M3(const float *x, int64_t n, float quantizeScale, uint8_t *out);

/// The W8A8 linear y = x·wᵀ + bias with per-tensor scales: x [rows, in],
/// w [out, in] (PyTorch Linear layout), bias [out] or nullptr, y [rows, out]
/// (all row-major, fp32). Exactly:
///   sx = e4m3ScaleFor(activationAmax > 0 ? activationAmax : e4m3Amax(x))
///   (a static scale from a calibration run, or x's own: dynamic),
///   sw = e4m3ScaleFor(e4m3Amax(w));
///   xq = quantizeE4M3(x, sx.quantize), wq = quantizeE4M3(w, sw.quantize);
///   acc[r, o] = Σ_k fromE4M3(xq[r, k]) · fromE4M3(wq[o, k]) in fp32, k
///   ascending (every product of two E4M3 values is exact in fp32, so only
///   the additions round);
///   y[r, o] = acc[r, o] · (sx.dequantize · sw.dequantize) + bias[o], the
///   scale product rounded to fp32 first, then each operation rounded to
///   fp32 (no fused multiply-add).
void linearE4M3(const float *x, const float *w, const float *bias, int64_t rows,
                int64_t in, int64_t out, float *y, float activationAmax = 0.0f);

} // namespace trellis::ref

#endif // TRELLIS_REFERENCE_FP8_H
