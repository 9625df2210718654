"""NumPy model of FP8 E4M3 (the "E4M3FN" variant NVIDIA uses) and of the W8A8
quantized linear with per-tensor scales, independently of the C++ reference
(runtime/reference/Fp8.cpp). It is the source of the fp8_* golden cases.

Format: 1 sign bit, 4 exponent bits with bias 7, 3 mantissa bits; no
infinities; NaN is S.1111.111 (0x7F / 0xFF); max finite 448 (0x7E), min normal
2^-6 (0x08), min subnormal 2^-9 (0x01).

Structure differs on purpose from the C++ (which rounds the fp32 bit pattern
with integer arithmetic): here the 256 byte codes are decoded into a table of
float64 values, and a value is rounded by looking up its neighbours in the
sorted table of finite non-negative values (np.searchsorted) and taking the
nearer one, ties to the even byte code (= even mantissa). Magnitudes of 448 and
more saturate to 448 (the GPU's "satfinite" conversion), infinities included;
any NaN gives 0x7F.

The quantized linear accumulates in float64 from the dequantized values. Every
product of two E4M3 values is a multiple of 2^-18 below 2^18 with 8 significant
bits, so a sum of up to ~2^7 of them is exact in float64 in any order: the
golden is the exact dot product, scaled and biased in float64, rounded once to
float32 by the caller. The C++ accumulates in fp32, so it differs by the fp32
rounding of the sum and of its two last operations: ~1e-6 relative, which is
the tolerance of the tests. The quantization itself (amax, the fp32 scales, the
fp32 product x * scale before rounding) is reproduced in float32, because it
decides which byte each element becomes and must match bit for bit.

Only Debian's numpy is needed (run with /usr/bin/python3).
"""

import numpy as np

F32 = np.float32

NAN_CODE = 0x7F
MAX_CODE = 0x7E
MAX = 448.0


def _decode_all():
    """float64 value of every byte code 0..255 (NaN for 0x7F and 0xFF)."""
    codes = np.arange(256)
    exp = (codes >> 3) & 0xF
    mant = codes & 0x7
    mag = np.where(exp == 0, mant * 2.0**-9, (8 + mant) * np.exp2(exp - 10.0))
    values = np.where(codes & 0x80, -mag, mag)
    values[(codes & 0x7F) == NAN_CODE] = np.nan
    return values


VALUES = _decode_all()

# The finite values of sign 0, sorted, with their codes.
_pos = np.flatnonzero(~np.isnan(VALUES) & (np.arange(256) < 0x80))
_order = np.argsort(VALUES[_pos], kind="stable")
POS_CODES = _pos[_order]
POS_VALUES = VALUES[POS_CODES]
assert np.all(np.diff(POS_VALUES) > 0) and POS_VALUES[-1] == MAX


def finite_values():
    """The 127 finite non-negative E4M3 values, increasing (0 .. 448)."""
    return POS_VALUES.copy()


def from_e4m3(codes):
    """The float64 values of an array of byte codes."""
    return VALUES[np.asarray(codes, dtype=np.uint8)]


def to_e4m3(x):
    """Byte codes (uint8) of the nearest E4M3 values, ties to even, satfinite."""
    x = np.asarray(x)
    xf = x.astype(np.float64)  # exact for float16/float32 inputs
    nan = np.isnan(xf)
    # Saturation first: 448 itself is in the table, so clipping is "satfinite".
    a = np.where(nan, 0.0, np.minimum(np.abs(xf), MAX))
    hi = np.searchsorted(POS_VALUES, a, side="left")  # first value >= a
    lo = np.maximum(hi - 1, 0)
    d_hi = POS_VALUES[hi] - a  # exact in float64
    d_lo = a - POS_VALUES[lo]
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (POS_CODES[hi] % 2 == 0))
    code = np.where(pick_hi, POS_CODES[hi], POS_CODES[lo])
    code = code | np.where(np.signbit(xf), 0x80, 0)
    code = np.where(nan, NAN_CODE, code)
    return code.astype(np.uint8)


def amax(x):
    """max |x| over the finite elements (float32; 0 when there is none)."""
    f = np.asarray(x, dtype=F32)
    f = f[np.isfinite(f)]
    return F32(np.max(np.abs(f))) if f.size else F32(0.0)


def scale_for(a):
    """(quantize, dequantize) = (448 / amax, amax / 448), each one float32
    division; (1, 1) when amax is 0 or not finite."""
    a = F32(a)
    if not (a > 0 and np.isfinite(a)):
        return F32(1.0), F32(1.0)
    return F32(448.0) / a, a / F32(448.0)


def quantize(x, quantize_scale):
    """to_e4m3 of the float32 product x * scale."""
    return to_e4m3(np.asarray(x, dtype=F32) * F32(quantize_scale))


def linear(x, w, b=None, static_amax_x=None):
    """W8A8 y = x·wᵀ + b with per-tensor scales; x [rows, in], w [out, in]. `static_amax_x`: x's scale from that
    amax (a calibrated, static scale: larger |x| saturate at ±448) instead of x's own.

    Returns (y float64, amax_x, amax_w, xq, wq)."""
    ax = np.float32(static_amax_x) if static_amax_x is not None else amax(x)
    aw = amax(w)
    (qx, dx), (qw, dw) = scale_for(ax), scale_for(aw)
    xq, wq = quantize(x, qx), quantize(w, qw)
    acc = from_e4m3(xq) @ from_e4m3(wq).T  # exact (see the module docstring)
    dequantize = dx * dw  # the combined scale, rounded to float32
    y = acc * np.float64(dequantize)
    if b is not None:
        y = y + np.asarray(b, dtype=np.float64)
    return y, ax, aw, xq, wq
