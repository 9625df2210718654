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


# --- FP8 self-attention ------------------------------------------------------
#
# The CPU reference's model of the GPU's FP8 self-attention (ref::attentionFp8 /
# ref::sparseAttentionFp8 in include/trellis/Reference/Kernels.h, the GPU kernel
# runtime/kernels/attention_fp8_sm90.cuh), written from the formula, per head, vectorized over the tokens of a
# sequence. Float32 where a float32 value decides an E4M3 byte or a rounding (the head RMS norm, the scales,
# x * scale, the logit scale c, the reference, the exp2 argument); the dot products and sums of E4M3 values in
# float64, where they are exact (products of two E4M3 values are multiples of 2^-18 with 8 significant bits),
# rounded once to float32. exp2 is evaluated in float64 and rounded to float32.

HEAD_DIM = 64
LOG2E = F32(1.4426950408889634)


def head_rms_norm_f32(x, gamma):
    """trellis.head_rms_norm evaluated in float32 as u / max(||u||, 1e-12) * gamma * sqrt(d) (in that order), the
    sum of squares in float64 rounded once; result float32 (the caller rounds to the storage dtype)."""
    u = np.asarray(x, dtype=F32)
    g = np.asarray(gamma, dtype=F32)
    ss = np.sum((u * u).astype(np.float64), axis=-1, keepdims=True).astype(F32)
    denom = np.maximum(np.sqrt(ss), F32(1e-12))
    return (u / denom) * g * F32(np.sqrt(u.shape[-1]))


def head_scale(gamma_h):
    """448 / (8 max|gamma_h|), float32; 1 when the max is 0."""
    m = F32(np.max(np.abs(np.asarray(gamma_h, dtype=F32))))
    return F32(448.0) / (F32(8.0) * m) if m > 0 else F32(1.0)


def attention(q, k, v, q_gamma, k_gamma, scale, seqs, stats=None, v_amax=None):
    """FP8 self-attention of q, k, v [N, H, 64] (float16) with the head RMS norms q_gamma, k_gamma [H, 64]; `seqs`
    lists each sequence's row indices in order (its "first 64 keys" are the first 64 of that list). Returns the
    float16 output [N, H, 64]. `v_amax` [H] (a calibration's static v scales), when given, replaces each head's
    max |v| (values beyond it saturate at 448 after scaling). `stats`, a dict, receives counts of the rows whose reference is the bound (capped),
    of those whose largest logit lies past the first 64 keys (late_max) and of the P that saturate at 448.

    P <= 2^8 holds only for the first 64 keys and where ref_i is the bound: a later key whose logit exceeds the
    first 64 keys' largest by more than 8 (log2 units) gets P > 2^8 (it may saturate at 448). Such a row is not
    FP8: the GPU recomputes its tile with the fp16 kernel, so the model gives it the plain attention of q', k', v.
    """
    n, heads, d = q.shape
    assert d == HEAD_DIM and k.shape == q.shape and v.shape == q.shape
    qn = head_rms_norm_f32(q, q_gamma).astype(q.dtype).astype(F32)
    kn = head_rms_norm_f32(k, k_gamma).astype(k.dtype).astype(F32)
    vf = np.asarray(v, dtype=F32)
    kg = np.asarray(k_gamma, dtype=F32)
    out = np.zeros((n, heads, d), dtype=F32)
    if stats is not None:
        stats.setdefault("capped", 0)
        stats.setdefault("late_max", 0)
        stats.setdefault("saturated", 0)
    for h in range(heads):
        s_q, s_k = head_scale(q_gamma[h]), head_scale(k_gamma[h])
        # over every token of the op, or the static value
        s_v, dq_v = scale_for(amax(vf[:, h, :]) if v_amax is None else F32(v_amax[h]))
        q8 = from_e4m3(to_e4m3(qn[:, h, :] * s_q))
        k8 = from_e4m3(to_e4m3(kn[:, h, :] * s_k))
        v8 = from_e4m3(to_e4m3(vf[:, h, :] * s_v))
        c = F32(scale) * LOG2E / (s_q * s_k)
        for rows in seqs:
            rows = np.asarray(rows)
            if rows.size == 0:
                continue
            qs, ks, vs = q8[rows], k8[rows], v8[rows]
            s = (qs @ ks.T).astype(F32)  # exact, rounded once
            a = qs.astype(F32) * kg[h]  # float32 products
            qq = np.sum(a.astype(np.float64) ** 2, axis=1).astype(F32)
            bound = np.sqrt(qq * F32(HEAD_DIM)) * s_k * c * F32(1.07)
            m = np.max(s[:, : min(64, rows.size)], axis=1)
            ref = np.minimum(m * c, bound - F32(8.0))
            x = (s.astype(np.float64) * np.float64(c) - ref[:, None].astype(np.float64)).astype(F32)
            p = from_e4m3(to_e4m3(np.exp2(x.astype(np.float64)).astype(F32)))
            assert np.all(np.max(p, axis=1) >= 1.0)  # ref <= the first keys' largest logit
            l_sum = np.sum(p, axis=1).astype(F32)
            o = (p @ vs).astype(F32)
            inv = dq_v / l_sum
            res = o * inv[:, None]
            above = np.max(p, axis=1) > 256.0
            if np.any(above):  # the plain attention of q', k' (float64)
                logits = (
                    qn[rows][:, h, :].astype(np.float64) @ kn[rows][:, h, :].astype(np.float64).T
                ) * scale
                w = np.exp(logits - logits.max(axis=1, keepdims=True))
                exact = (w / w.sum(axis=1, keepdims=True)) @ vf[rows][:, h, :].astype(np.float64)
                res[above] = exact[above].astype(F32)
            out[rows, h, :] = res
            if stats is not None:
                stats["capped"] += int(np.sum(bound - F32(8.0) < m * c))
                stats["late_max"] += int(np.sum((np.max(s, axis=1) > m) & (bound - F32(8.0) >= m * c)))
                stats["saturated"] += int(np.sum(p == MAX))
                stats["above"] = stats.get("above", 0) + int(np.sum(above))
    return out.astype(q.dtype)


def attention_dense(q, k, v, q_gamma, k_gamma, scale, stats=None, v_amax=None):
    """trellis.attention with precision = "fp8_e4m3": q, k, v [B, L, H, 64], each batch entry one sequence."""
    b, seq_len, heads, d = q.shape
    rows = [np.arange(i * seq_len, (i + 1) * seq_len) for i in range(b)]
    flat = [np.asarray(t).reshape(b * seq_len, heads, d) for t in (q, k, v)]
    return attention(*flat, q_gamma, k_gamma, scale, rows, stats, v_amax).reshape(q.shape)
