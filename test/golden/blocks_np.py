"""Model blocks of the TRELLIS v1 networks in NumPy, from the spec text, with
the fp16 storage points of spec §11: every op inside an fp16 region rounds its
output to float16 (q16); norms, softmax and accumulation are exact (float64)
in between. Weights are dicts of NumPy arrays (fp16 linear/conv weights, fp32
norm parameters), exactly what generate.py stores next to the results.
"""

import math

import numpy as np

from trellis_np import (
    UNARY,
    attention,
    batch_broadcast,
    coarsen,
    conv3d,
    downsample,
    gated_residual,
    grouped_attention,
    head_rms_norm,
    layer_norm,
    linear,
    modulate,
    pixel_shuffle_3d,
    q16,
    sparse_conv1x1_spconv,
    sparse_conv3d,
    sparse_group_norm,
    subdivide_coords,
    subdivide_feats,
)

silu = UNARY["silu"]
gelu = UNARY["gelu"]


def modulated_cross_block(x, e, ctx, p, heads):
    """ModulatedTransformerCrossBlock (spec §3.6), fp16 region.
    x [B,L,C] f16, e [B,C] f16 (t_emb), ctx [B,Lc,Cc] f16."""
    B, L, C = x.shape
    Lc = ctx.shape[1]
    d = C // heads
    x = q16(x)
    m = q16(linear(q16(silu(e)), p["ada_w"], p["ada_b"]))
    # chunk order: shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp
    shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = np.split(m, 6, axis=1)
    # self-attention, modulated and gated; q/k head RMS norm
    h = q16(layer_norm(x, -1, 1e-6))
    h = q16(modulate(h, shift_msa, scale_msa))
    qkv = q16(linear(h, p["qkv_w"], p["qkv_b"])).reshape(B, L, 3, heads, d)
    q = q16(head_rms_norm(qkv[:, :, 0], p["q_gamma"]))
    k = q16(head_rms_norm(qkv[:, :, 1], p["k_gamma"]))
    a = q16(attention(q, k, qkv[:, :, 2], 1.0 / math.sqrt(d))).reshape(B, L, C)
    a = q16(linear(a, p["out_w"], p["out_b"]))
    x = q16(gated_residual(x, gate_msa, a))
    # cross-attention: norm2 is affine; neither modulated nor gated
    h = q16(layer_norm(x, -1, 1e-6, p["norm2_w"], p["norm2_b"]))
    q = q16(linear(h, p["cq_w"], p["cq_b"])).reshape(B, L, heads, d)
    kv = q16(linear(ctx, p["ckv_w"], p["ckv_b"])).reshape(B, Lc, 2, heads, d)
    a = q16(attention(q, kv[:, :, 0], kv[:, :, 1], 1.0 / math.sqrt(d))).reshape(B, L, C)
    a = q16(linear(a, p["cout_w"], p["cout_b"]))
    x = q16(x + a)
    # FFN, modulated and gated; GELU tanh
    h = q16(layer_norm(x, -1, 1e-6))
    h = q16(modulate(h, shift_mlp, scale_mlp))
    h = q16(linear(h, p["mlp0_w"], p["mlp0_b"]))
    h = q16(gelu(h))
    h = q16(linear(h, p["mlp2_w"], p["mlp2_b"]))
    return q16(gated_residual(x, gate_mlp, h))


def slat_resblock_down(coords, x, e, p, batch, res):
    """SparseResBlock3d(c_in -> c_out, DOWN) of the SLat flow (spec §6.2, §6.3).
    Returns (coarse coords, out feats)."""
    cout = p["conv1_b"].shape[0]
    emb = q16(linear(q16(silu(e)), p["emb_w"], p["emb_b"]))
    scale, shift = emb[:, :cout], emb[:, cout:]  # ORDER: scale first, then shift
    coarse, idx = coarsen(coords)
    xd = q16(downsample(x, idx, coarse.shape[0]))  # resampling first, Σ/(n+1)
    rc = (res + 1) // 2
    h = q16(layer_norm(xd, -1, 1e-6, p["norm1_w"], p["norm1_b"]))
    h = q16(silu(h))
    h = q16(sparse_conv3d(coarse, h, p["conv1_w"], p["conv1_b"], batch, rc))
    h = q16(layer_norm(h, -1, 1e-6))
    h = q16(modulate(h, batch_broadcast(shift, coarse), batch_broadcast(scale, coarse)))
    h = q16(silu(h))
    h = q16(sparse_conv3d(coarse, h, p["conv2_w"], p["conv2_b"], batch, rc))
    skip = q16(linear(xd, p["skip_w"], p["skip_b"]))
    return coarse, q16(h + skip)


def sparse_transformer_block(x, groups, p, heads):
    """SparseTransformerBlock of the SLat decoders (spec §7.1): windowed
    self-attention (groups = the Swin partition), no modulation, no RMS norm."""
    N, C = x.shape
    d = C // heads
    x = q16(x)
    h = q16(layer_norm(x, -1, 1e-6))
    qkv = q16(linear(h, p["qkv_w"], p["qkv_b"])).reshape(N, 3, heads, d)
    a = q16(grouped_attention(qkv[:, 0], qkv[:, 1], qkv[:, 2], groups, 1.0 / math.sqrt(d)))
    a = q16(linear(a.reshape(N, C), p["out_w"], p["out_b"]))
    x = q16(x + a)
    h = q16(layer_norm(x, -1, 1e-6))
    h = q16(linear(h, p["mlp0_w"], p["mlp0_b"]))
    h = q16(gelu(h))
    h = q16(linear(h, p["mlp2_w"], p["mlp2_b"]))
    return q16(x + h)


def ssdec_resblock_upsample(x, p):
    """SS decoder ResBlock3d(C) (ChannelLN eps 1e-5 affine) then the Upsample
    stage: Conv3d(C -> 8C') + PixelShuffle3D(2) (spec §5.1). fp16 region."""
    x = q16(x)
    h = q16(layer_norm(x, 1, 1e-5, p["norm1_w"], p["norm1_b"]))
    h = q16(silu(h))
    h = q16(conv3d(h, p["conv1_w"], p["conv1_b"]))
    h = q16(layer_norm(h, 1, 1e-5, p["norm2_w"], p["norm2_b"]))
    h = q16(silu(h))
    h = q16(conv3d(h, p["conv2_w"], p["conv2_b"]))
    y = q16(h + x)
    u = q16(conv3d(y, p["up_w"], p["up_b"]))
    return y, pixel_shuffle_3d(u)


def mesh_subdivide_block(coords, x, p, batch, res):
    """SparseSubdivideBlock3d of the mesh decoder (spec §7.4). Returns
    (child coords, out feats)."""
    a = q16(sparse_group_norm(coords, x, batch, 32, 1e-5, p["gn1_w"], p["gn1_b"]))
    a = q16(silu(a))
    cs = subdivide_coords(coords)
    a = subdivide_feats(a)
    xs = subdivide_feats(q16(x))
    h = q16(sparse_conv3d(cs, a, p["conv1_w"], p["conv1_b"], batch, 2 * res))
    h = q16(sparse_group_norm(cs, h, batch, 32, 1e-5, p["gn2_w"], p["gn2_b"]))
    h = q16(silu(h))
    h = q16(sparse_conv3d(cs, h, p["conv2_w"], p["conv2_b"], batch, 2 * res))
    s = q16(sparse_conv1x1_spconv(xs, p["skip_w"], p["skip_b"]))
    return cs, q16(h + s)
