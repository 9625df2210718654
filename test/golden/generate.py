#!/usr/bin/python3
"""Regenerates the golden data of the CPU reference kernels (test/golden/data).

    /usr/bin/python3 test/golden/generate.py [--out DIR]

Each case is a directory data/<case>/ of .npy files: the inputs, scalar
parameters (0-d arrays) and the expected outputs (names starting with
"expected"). Every case draws from its own generator seeded with crc32(case),
so the output is byte-for-byte reproducible and adding a case changes no other.
See README.md for the list of cases and how the C++ tests use them.
"""

import argparse
import math
import os
import shutil
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import blocks_np  # noqa: E402
import fp8_np  # noqa: E402
import trellis_np as T  # noqa: E402

F16, F32 = np.float16, np.float32


class Case:
    def __init__(self, root, name):
        self.dir = os.path.join(root, name)
        os.makedirs(self.dir)
        self.rng = np.random.default_rng(zlib.crc32(name.encode()))

    def save(self, name, array):
        np.save(os.path.join(self.dir, name + ".npy"), np.ascontiguousarray(array))
        return array

    def scalar(self, name, value):
        dtype = np.int64 if isinstance(value, (int, np.integer)) else np.float64
        self.save(name, np.array(value, dtype=dtype))
        return value

    def normal(self, shape, dtype=F32, scale=1.0):
        return (self.rng.standard_normal(shape) * scale).astype(dtype)

    def uniform(self, shape, lo, hi, dtype=F32):
        return self.rng.uniform(lo, hi, shape).astype(dtype)

    def weight(self, shape, fan_in, dtype=F16):
        return self.normal(shape, dtype, 1.0 / math.sqrt(fan_in))


CASES = []


def case(fn):
    CASES.append(fn)
    return fn


# --- dense ------------------------------------------------------------------


@case
def dense_ops(root):
    for dt, tag in ((F32, "f32"), (F16, "f16")):
        c = Case(root, "linear_" + tag)
        x = c.save("x", c.normal((2, 5, 24), dt))
        w = c.save("w", c.weight((16, 24), 24, dt))
        b = c.save("b", c.normal((16,), dt, 0.5))
        c.save("expected", T.linear(x, w, b).astype(dt))

    c = Case(root, "linear_nobias_f32")
    x = c.save("x", c.normal((7, 33)))
    w = c.save("w", c.weight((5, 33), 33, F32))
    c.save("expected", T.linear(x, w).astype(F32))

    c = Case(root, "matmul_f32")
    a = c.save("a", c.normal((2, 1, 4, 6)))
    b = c.save("b", c.normal((3, 6, 5)))
    c.save("expected", np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(F32))

    c = Case(root, "matmul_f16")
    a = c.save("a", c.normal((3, 4, 8), F16))
    b = c.save("b", c.normal((8, 2), F16))
    c.save("expected", np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(F16))

    for dt, tag in ((F32, "f32"), (F16, "f16")):
        c = Case(root, "binary_" + tag)  # b [3,1] broadcasts against a [2,3,4]
        for name, fn in T.BINARY.items():
            a = c.save("a_" + name, c.normal((2, 3, 4), dt))
            b = c.normal((3, 1), dt)
            if name == "div":  # keep the divisor away from zero
                b = (np.sign(b) * (np.abs(b.astype(F32)) + 0.5)).astype(dt)
            c.save("b_" + name, b)
            c.save("expected_" + name, fn(a.astype(np.float64), b.astype(np.float64)).astype(dt))
    for dt, tag in ((np.int32, "i32"), (np.int64, "i64")):
        c = Case(root, "binary_int_" + tag)
        a = c.save("a", c.rng.integers(-50, 50, (4, 5)).astype(dt))
        b = c.save("b", c.rng.integers(-50, 50, (1, 5)).astype(dt))
        c.save("expected_add", a + b)
        c.save("expected_sub", a - b)
        c.save("expected_mul", a * b)
        c.save("expected_maximum", np.maximum(a, b))

    domain = {
        "log": (0.01, 10.0),
        "sqrt": (0.0, 9.0),
        "atanh": (-0.99, 0.99),
        "softplus": (-30.0, 30.0),  # crosses PyTorch's threshold 20
        "exp": (-8.0, 8.0),
        "sin": (-10.0, 10.0),
        "cos": (-10.0, 10.0),
    }
    for dt, tag in ((F32, "f32"), (F16, "f16")):
        c = Case(root, "unary_" + tag)
        for name, fn in T.UNARY.items():
            lo, hi = domain.get(name, (-6.0, 6.0))
            x = c.save("x_" + name, c.uniform((6, 40), lo, hi, dt))
            c.save("expected_" + name, fn(x.astype(np.float64)).astype(dt))

    c = Case(root, "cast")
    a = c.save("f32", c.normal((5, 7), F32, 3.0))
    c.save("expected_f16", a.astype(F16))  # NumPy casts float32->float16 with RNE
    h = c.save("f16", c.normal((5, 7), F16, 3.0))
    c.save("expected_f32", h.astype(F32))
    i = c.save("i32", c.rng.integers(-(2**24), 2**24, (3, 4)).astype(np.int32))
    c.save("expected_i32_f32", i.astype(F32))


@case
def norm_ops(root):
    c = Case(root, "layer_norm_last_f16")
    x = c.save("x", (c.normal((2, 6, 32)) * 2 + 0.7).astype(F16))
    g = c.save("gamma", c.normal((32,), F32, 0.5) + 1)
    b = c.save("beta", c.normal((32,), F32, 0.5))
    c.scalar("eps", 1e-6)
    c.save("expected", T.layer_norm(x, -1, 1e-6, g, b).astype(F16))

    c = Case(root, "layer_norm_last_f32")
    x = c.save("x", c.normal((3, 40)) * 3 - 1)
    c.scalar("eps", 1e-5)
    c.save("expected", T.layer_norm(x, -1, 1e-5).astype(F32))

    c = Case(root, "layer_norm_channel_f16")  # ChannelLN over NCDHW (axis 1)
    x = c.save("x", c.normal((2, 8, 3, 4, 5), F16))
    g = c.save("gamma", c.normal((8,), F32, 0.5) + 1)
    b = c.save("beta", c.normal((8,), F32, 0.5))
    c.scalar("eps", 1e-5)
    c.save("expected", T.layer_norm(x, 1, 1e-5, g, b).astype(F16))

    c = Case(root, "head_rms_norm_f16")
    x = c.normal((2, 5, 3, 16), F16)
    x[1, 2, 1, :] = 0  # the 1e-12 clamp: a zero vector stays zero
    c.save("x", x)
    g = c.save("gamma", c.normal((3, 16), F32, 0.5) + 1)
    c.save("expected", T.head_rms_norm(x, g).astype(F16))

    c = Case(root, "softmax_f32")
    x = c.save("x", c.normal((3, 7, 5), F32, 3.0))
    c.scalar("axis", 1)
    c.save("expected", T.softmax(x, 1).astype(F32))

    c = Case(root, "softmax_f16")
    x = c.save("x", c.normal((4, 9), F16, 3.0))
    c.scalar("axis", -1)
    c.save("expected", T.softmax(x, -1).astype(F16))


@case
def attention_ops(root):
    for dt, tag in ((F32, "f32"), (F16, "f16")):
        c = Case(root, "attention_" + tag)
        q = c.save("q", c.normal((2, 6, 2, 16), dt))
        k = c.save("k", c.normal((2, 9, 2, 16), dt))
        v = c.save("v", c.normal((2, 9, 2, 8), dt))
        c.scalar("scale", 0.25)
        c.save("expected", T.attention(q, k, v, 0.25).astype(dt))

    c = Case(root, "modulate_f16")  # [B,C] broadcast over tokens
    x = c.save("x", c.normal((2, 5, 16), F16))
    sh = c.save("shift", c.normal((2, 16), F16))
    sc = c.save("scale", c.normal((2, 16), F16))
    c.save("expected", T.modulate(x, sh, sc).astype(F16))

    c = Case(root, "modulate_rows_f32")  # same shape as x
    x = c.save("x", c.normal((7, 12)))
    sh = c.save("shift", c.normal((7, 12)))
    sc = c.save("scale", c.normal((7, 12)))
    c.save("expected", T.modulate(x, sh, sc).astype(F32))

    c = Case(root, "gated_residual_f16")
    x = c.save("x", c.normal((2, 5, 16), F16))
    g = c.save("gate", c.normal((2, 16), F16))
    h = c.save("h", c.normal((2, 5, 16), F16))
    c.save("expected", T.gated_residual(x, g, h).astype(F16))


@case
def embedding_ops(root):
    c = Case(root, "timestep_embedding")
    grid = T.time_grid(25, 3.0)
    tau = np.array(
        [T.model_time(grid[0]), T.model_time(grid[1]), T.model_time(grid[13]), 0.0, 1.0, 0.5], dtype=F32
    )
    c.save("tau", tau)
    c.save("expected", T.timestep_embedding(tau).astype(F32))

    for C, L in ((1024, 5), (768, 4)):
        c = Case(root, f"ape_{C}")
        pos = c.save("pos", c.rng.integers(0, 64, (L, 3)).astype(np.int32))
        c.scalar("channels", C)
        c.save("expected", T.ape(pos, C).astype(F32))


@case
def conv_ops(root):
    c = Case(root, "conv3d_f32")
    x = c.save("x", c.normal((1, 3, 5, 4, 6)))
    w = c.save("w", c.weight((4, 3, 3, 3, 3), 81, F32))
    b = c.save("b", c.normal((4,), F32, 0.5))
    c.save("expected", T.conv3d(x, w, b).astype(F32))

    c = Case(root, "conv3d_f16")
    x = c.save("x", c.normal((2, 4, 4, 4, 4), F16))
    w = c.save("w", c.weight((6, 4, 3, 3, 3), 108))
    b = c.save("b", c.normal((6,), F16, 0.5))
    c.save("expected", T.conv3d(x, w, b).astype(F16))

    c = Case(root, "pixel_shuffle_3d")
    x = c.save("x", c.normal((2, 16, 2, 3, 2)))
    c.save("expected", T.pixel_shuffle_3d(x))

    c = Case(root, "shape_ops")
    x = c.save("x", c.normal((2, 3, 4, 5)))
    y = c.save("y", c.normal((2, 3, 2, 5)))
    c.save("expected_permute_0231", np.transpose(x, (0, 2, 3, 1)))
    c.save("expected_concat_axis2", np.concatenate([x, y], axis=2))
    parts = np.split(x, [1], axis=1)
    c.save("expected_split_axis1_0", parts[0])
    c.save("expected_split_axis1_1", parts[1])
    c.save("expected_reshape_6x20", x.reshape(6, -1))

    c = Case(root, "occupancy")
    logits = c.normal((2, 1, 5, 5, 5), F16)
    logits[0, 0, 1, 2, 3] = 0  # exactly zero is NOT occupied (strict > 0)
    logits[1, 0, 4, 4, 4] = -0.0
    c.save("logits", logits)
    c.save("expected", T.occupancy(logits))


@case
def sampler_ops(root):
    c = Case(root, "sampler")
    grid = c.save("expected_grid_25_r3", T.time_grid(25, 3.0))
    c.save("expected_guided_25", np.array(T.guided_steps(grid, 0.5, 1.0), dtype=np.int64))
    c.save("expected_tau_25", np.array([T.model_time(t) for t in grid], dtype=F32))
    c.save("expected_grid_12_r3", T.time_grid(12, 3.0))
    vc = c.save("vc", c.normal((2, 8, 3)))
    vu = c.save("vu", c.normal((2, 8, 3)))
    c.scalar("w", 5.0)
    c.save("expected_cfg", T.cfg_combine(vc, vu, 5.0).astype(F32))
    x = c.save("x", c.normal((2, 8, 3)))
    dt = c.scalar("dt", float(grid[3] - grid[4]))
    c.save("expected_euler", T.euler_update(x, vc, np.float32(dt)).astype(F32))


# --- sparse -----------------------------------------------------------------


@case
def sparse_ops(root):
    c = Case(root, "sparse_conv")
    res, B = 6, 2
    coords = c.save("coords", T.random_coords(c.rng, B, res, [40, 25]))
    c.scalar("resolution", res)
    c.save("expected_nbmap3", T.neighbor_map(coords, 3))
    f32 = c.save("feats_f32", c.normal((coords.shape[0], 5)))
    w32 = c.save("w_f32", c.weight((7, 3, 3, 3, 5), 135, F32))
    b32 = c.save("b_f32", c.normal((7,), F32, 0.5))
    c.save("expected_f32", T.sparse_conv3d(coords, f32, w32, b32, B, res).astype(F32))
    f16 = c.save("feats_f16", c.normal((coords.shape[0], 8), F16))
    w16 = c.save("w_f16", c.weight((4, 3, 3, 3, 8), 216))
    b16 = c.save("b_f16", c.normal((4,), F16, 0.5))
    c.save("expected_f16", T.sparse_conv3d(coords, f16, w16, b16, B, res).astype(F16))
    # k = 1: spconv's reinterpreted weight (§6.4 quirk); also the naive
    # x·W[:,0,0,0,:]ᵀ, which the test checks it does NOT produce.
    w1 = c.save("w1", c.weight((3, 1, 1, 1, 8), 8))
    b1 = c.save("b1", c.normal((3,), F16, 0.5))
    c.save("expected_k1", T.sparse_conv1x1_spconv(f16, w1, b1).astype(F16))
    c.save("naive_k1", T.linear(f16, w1[:, 0, 0, 0, :], b1).astype(F16))

    c = Case(root, "sparse_resample")
    res, B = 8, 2
    coords = c.save("coords", T.random_coords(c.rng, B, res, [60, 35]))
    c.scalar("resolution", res)
    feats = c.save("feats", c.normal((coords.shape[0], 6), F16))
    coarse, idx = T.coarsen(coords)
    c.save("expected_coarse", coarse)
    c.save("expected_idx", idx)
    down = c.save("expected_down", T.downsample(feats, idx, coarse.shape[0]).astype(F16))
    c.save("expected_up", T.upsample(down, idx).astype(F16))
    c.save("expected_sub_coords", T.subdivide_coords(coords))
    c.save("expected_sub_feats", T.subdivide_feats(feats))

    c = Case(root, "sparse_group_norm")
    B = 3  # the middle sample is empty
    coords = T.random_coords(c.rng, B, 5, [20, 0, 13])
    c.save("coords", coords)
    c.scalar("resolution", 5)
    feats = c.save("feats", (c.normal((coords.shape[0], 64)) * 2 + 1).astype(F16))
    g = c.save("gamma", c.normal((64,), F32, 0.5) + 1)
    b = c.save("beta", c.normal((64,), F32, 0.5))
    c.save("expected", T.sparse_group_norm(coords, feats, B, 32, 1e-5, g, b).astype(F16))
    v = c.save("vec", c.normal((B, 7), F16))
    c.save("expected_broadcast", T.batch_broadcast(v, coords).astype(F16))
    c.save("expected_xyz", coords[:, 1:].copy())

    c = Case(root, "sparse_windows")
    res, B = 20, 2
    coords = c.save("coords", T.random_coords(c.rng, B, res, [150, 90]))
    c.scalar("resolution", res)
    for s in (0, 4):
        ids, groups = T.window_partition(coords, 8, s)
        c.save(f"expected_rows_shift{s}", np.concatenate(groups).astype(np.int32))
        c.save(f"expected_offsets_shift{s}", np.cumsum([0] + [len(g) for g in groups]).astype(np.int32))
    H, d = 2, 8
    q = c.save("q", c.normal((coords.shape[0], H, d), F16))
    k = c.save("k", c.normal((coords.shape[0], H, d), F16))
    v = c.save("v", c.normal((coords.shape[0], H, d), F16))
    c.scalar("scale", 1 / math.sqrt(d))
    _, groups = T.window_partition(coords, 8, 4)
    c.save("expected_attn_shift4", T.grouped_attention(q, k, v, groups, 1 / math.sqrt(d)).astype(F16))
    bgroups = T.batch_groups(coords, B)
    c.save("expected_attn_batch", T.grouped_attention(q, k, v, bgroups, 1 / math.sqrt(d)).astype(F16))
    Lc = 7
    kc = c.save("ctx_k", c.normal((B, Lc, H, d), F16))
    vc = c.save("ctx_v", c.normal((B, Lc, H, 4), F16))
    c.save("expected_cross", T.sparse_cross_attention(q, kc, vc, coords, 1 / math.sqrt(d)).astype(F16))

    c = Case(root, "unique_mean")
    keys = c.save("keys", c.rng.integers(0, 30, 80).astype(np.int64) * 1000003)
    vals = c.save("values", c.normal((80, 10)))
    uk, m = T.unique_mean(keys, vals)
    c.save("expected_keys", uk)
    c.save("expected_means", m.astype(F32))


# --- model blocks -----------------------------------------------------------


@case
def block_dense_cross(root):
    c = Case(root, "block_dense_cross")
    B, L, C, H, Lc, Cc = 2, 12, 64, 2, 10, 48
    c.scalar("heads", H)
    x = c.save("x", c.normal((B, L, C), F16))
    e = c.save("t_emb", c.normal((B, C), F16))
    ctx = c.save("ctx", c.normal((B, Lc, Cc), F16))
    p = {
        "ada_w": c.weight((6 * C, C), C),
        "ada_b": c.normal((6 * C,), F16, 0.2),
        "qkv_w": c.weight((3 * C, C), C),
        "qkv_b": c.normal((3 * C,), F16, 0.2),
        "q_gamma": c.normal((H, C // H), F32, 0.2) + 1,
        "k_gamma": c.normal((H, C // H), F32, 0.2) + 1,
        "out_w": c.weight((C, C), C),
        "out_b": c.normal((C,), F16, 0.2),
        "norm2_w": c.normal((C,), F32, 0.2) + 1,
        "norm2_b": c.normal((C,), F32, 0.2),
        "cq_w": c.weight((C, C), C),
        "cq_b": c.normal((C,), F16, 0.2),
        "ckv_w": c.weight((2 * C, Cc), Cc),
        "ckv_b": c.normal((2 * C,), F16, 0.2),
        "cout_w": c.weight((C, C), C),
        "cout_b": c.normal((C,), F16, 0.2),
        "mlp0_w": c.weight((4 * C, C), C),
        "mlp0_b": c.normal((4 * C,), F16, 0.2),
        "mlp2_w": c.weight((C, 4 * C), 4 * C),
        "mlp2_b": c.normal((C,), F16, 0.2),
    }
    for k, v in p.items():
        c.save(k, v)
    c.save("expected", blocks_np.modulated_cross_block(x, e, ctx, p, H).astype(F16))


@case
def block_slat_resblock_down(root):
    c = Case(root, "block_slat_resblock_down")
    B, res, cin, cout, E = 2, 8, 16, 32, 48
    coords = c.save("coords", T.random_coords(c.rng, B, res, [70, 40]))
    c.scalar("resolution", res)
    x = c.save("x", c.normal((coords.shape[0], cin), F16))
    e = c.save("t_emb", c.normal((B, E), F16))
    p = {
        "emb_w": c.weight((2 * cout, E), E),
        "emb_b": c.normal((2 * cout,), F16, 0.2),
        "norm1_w": c.normal((cin,), F32, 0.2) + 1,
        "norm1_b": c.normal((cin,), F32, 0.2),
        "conv1_w": c.weight((cout, 3, 3, 3, cin), 27 * cin),
        "conv1_b": c.normal((cout,), F16, 0.2),
        "conv2_w": c.weight((cout, 3, 3, 3, cout), 27 * cout),
        "conv2_b": c.normal((cout,), F16, 0.2),
        "skip_w": c.weight((cout, cin), cin),
        "skip_b": c.normal((cout,), F16, 0.2),
    }
    for k, v in p.items():
        c.save(k, v)
    coarse, out = blocks_np.slat_resblock_down(coords, x, e, p, B, res)
    c.save("expected_coords", coarse)
    c.save("expected", out.astype(F16))


@case
def block_swin(root):
    c = Case(root, "block_swin")
    B, res, C, H = 2, 20, 64, 2
    coords = c.save("coords", T.random_coords(c.rng, B, res, [120, 80]))
    c.scalar("resolution", res)
    c.scalar("heads", H)
    c.scalar("shift", 4)
    x = c.save("x", c.normal((coords.shape[0], C), F16))
    p = {
        "qkv_w": c.weight((3 * C, C), C),
        "qkv_b": c.normal((3 * C,), F16, 0.2),
        "out_w": c.weight((C, C), C),
        "out_b": c.normal((C,), F16, 0.2),
        "mlp0_w": c.weight((4 * C, C), C),
        "mlp0_b": c.normal((4 * C,), F16, 0.2),
        "mlp2_w": c.weight((C, 4 * C), 4 * C),
        "mlp2_b": c.normal((C,), F16, 0.2),
    }
    for k, v in p.items():
        c.save(k, v)
    _, groups = T.window_partition(coords, 8, 4)
    c.save("expected", blocks_np.sparse_transformer_block(x, groups, p, H).astype(F16))


@case
def block_ssdec(root):
    c = Case(root, "block_ssdec")
    B, C, D, Cu = 1, 16, 4, 8
    x = c.save("x", c.normal((B, C, D, D, D), F16))
    p = {
        "norm1_w": c.normal((C,), F32, 0.2) + 1,
        "norm1_b": c.normal((C,), F32, 0.2),
        "conv1_w": c.weight((C, C, 3, 3, 3), 27 * C),
        "conv1_b": c.normal((C,), F16, 0.2),
        "norm2_w": c.normal((C,), F32, 0.2) + 1,
        "norm2_b": c.normal((C,), F32, 0.2),
        "conv2_w": c.weight((C, C, 3, 3, 3), 27 * C),
        "conv2_b": c.normal((C,), F16, 0.2),
        "up_w": c.weight((8 * Cu, C, 3, 3, 3), 27 * C),
        "up_b": c.normal((8 * Cu,), F16, 0.2),
    }
    for k, v in p.items():
        c.save(k, v)
    y, up = blocks_np.ssdec_resblock_upsample(x, p)
    c.save("expected_res", y.astype(F16))
    c.save("expected", up.astype(F16))


@case
def block_mesh_subdivide(root):
    c = Case(root, "block_mesh_subdivide")
    B, res, cin, cout = 2, 4, 64, 32
    coords = c.save("coords", T.random_coords(c.rng, B, res, [9, 6]))
    c.scalar("resolution", res)
    x = c.save("x", (c.normal((coords.shape[0], cin)) * 1.5 + 0.3).astype(F16))
    p = {
        "gn1_w": c.normal((cin,), F32, 0.2) + 1,
        "gn1_b": c.normal((cin,), F32, 0.2),
        "conv1_w": c.weight((cout, 3, 3, 3, cin), 27 * cin),
        "conv1_b": c.normal((cout,), F16, 0.2),
        "gn2_w": c.normal((cout,), F32, 0.2) + 1,
        "gn2_b": c.normal((cout,), F32, 0.2),
        "conv2_w": c.weight((cout, 3, 3, 3, cout), 27 * cout),
        "conv2_b": c.normal((cout,), F16, 0.2),
        "skip_w": c.weight((cout, 1, 1, 1, cin), cin),
        "skip_b": c.normal((cout,), F16, 0.2),
    }
    for k, v in p.items():
        c.save(k, v)
    cs, out = blocks_np.mesh_subdivide_block(coords, x, p, B, res)
    c.save("expected_coords", cs)
    c.save("expected", out.astype(F16))


@case
def gs_head(root):
    c = Case(root, "gs_head")
    coords = c.save("coords", T.random_coords(c.rng, 1, 64, [5]))
    raw = c.save("raw", c.normal((5, 448), F32, 0.7))
    pert = c.save("offset_perturbation", T.offset_perturbation().astype(F32))
    pos, scale, opa, rot, fdc = T.gs_head(coords, raw, pert)
    c.save("expected_position", pos.astype(F32))
    c.save("expected_scale", scale.astype(F32))
    c.save("expected_opacity", opa.astype(F32))
    c.save("expected_rotation", rot.astype(F32))
    c.save("expected_features_dc", fdc.astype(F32))


# --- fp8 (E4M3) ------------------------------------------------------------


@case
def fp8_ops(root):
    c = Case(root, "fp8_e4m3_rounding")
    v = fp8_np.finite_values()
    mids = ((v[:-1] + v[1:]) / 2).astype(F32)  # ties; 5 significant bits, exact
    inf = F32(np.inf)
    special = np.array(
        [2.0**-10, 3 * 2.0**-10, 2.0**-11, 1e-40, np.finfo(F32).tiny]  # subnormal range
        + [448.5, 449.0, 463.99997, 464.0, 464.00003, 465.0, 480.0, 1000.0, 1e6]
        + [np.finfo(F32).max, np.inf, np.nan],
        dtype=F32,
    )
    pos = np.concatenate(
        [
            v.astype(F32),  # every finite value (0 included)
            mids,
            np.nextafter(mids, inf),
            np.nextafter(mids, F32(0)),
            special,
            c.uniform(64, 0.0, 2.0**-6),  # subnormals and their rounding
            np.exp2(c.uniform(256, -12.0, 9.5)).astype(F32),  # log-uniform over the range
        ]
    )
    normals = [c.normal(64, F32, s) for s in (1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0, 1000.0)]
    x = c.save("x", np.concatenate([pos, -pos] + normals))
    c.save("expected", fp8_np.to_e4m3(x))

    c = Case(root, "fp8_linear")  # W8A8, per-tensor scales
    x = c.normal((37, 96))
    outliers = c.rng.choice(x.size, 4, replace=False)  # a few large activations set amax
    x.flat[outliers] = (c.rng.choice([-1.0, 1.0], 4) * c.rng.uniform(20.0, 60.0, 4)).astype(F32)
    x = c.save("x", x)
    w = c.save("w", c.weight((80, 96), 96, F32))
    b = c.save("b", c.normal((80,), F32, 0.5))
    y, ax, aw, xq, wq = fp8_np.linear(x, w, b)
    c.save("expected", y.astype(F32))
    c.save("expected_amax_x", np.array(ax, dtype=F32))
    c.save("expected_amax_w", np.array(aw, dtype=F32))
    c.save("expected_xq", xq)
    c.save("expected_wq", wq)

    # A static activation scale (trellis.linear's activation_amax) below x's own amax: the large values saturate.
    c = Case(root, "fp8_linear_static")
    x = c.normal((29, 64))
    x.flat[c.rng.choice(x.size, 6, replace=False)] = np.float32(9.0) * c.rng.choice([-1.0, 1.0], 6).astype(
        F32
    )
    x = c.save("x", x)
    w = c.save("w", c.weight((48, 64), 64, F32))
    b = c.save("b", c.normal((48,), F32, 0.5))
    static = c.save("amax", np.array(3.0, dtype=F32))
    y, _, _, xq, _ = fp8_np.linear(x, w, b, static_amax_x=static)
    c.save("expected", y.astype(F32))
    c.save("expected_xq", xq)


@case
def fp8_attention(root):
    # FP8 self-attention (fp8_np.attention_dense). L = 37: the reference takes the largest logit of all keys (fewer
    # than 64); L = 70: of the first 64 only. Half the keys are their query plus noise, so that many rows have a
    # logit near the bound and take bound - 8 as their reference; in L = 70 some rows' weights exceed 2^8.
    for name, shape in (("fp8_attention", (2, 37, 2, 64)), ("fp8_attention_long", (1, 70, 2, 64))):
        c = Case(root, name)
        q = c.normal(shape)
        k = c.normal(shape)
        near = c.rng.random(shape[:2]) < 0.5
        k[near] = q[near] + F32(0.3) * k[near]
        q, k = c.save("q", q.astype(F16)), c.save("k", k.astype(F16))
        v = c.normal(shape, F32, 2.0)
        v.flat[c.rng.choice(v.size, 3, replace=False)] = F32(9.5)  # a few large values set v_amax
        v = c.save("v", v.astype(F16))
        qg = c.save("q_gamma", c.uniform(shape[2:], 0.5, 1.5))
        kg = c.save("k_gamma", c.uniform(shape[2:], 0.5, 1.5))
        scale = c.scalar("scale", 0.125)
        stats = {}
        c.save("expected", fp8_np.attention_dense(q, k, v, qg, kg, scale, stats))
        assert stats["capped"] > 0, stats
        assert name != "fp8_attention_long" or stats["late_max"] > 0, stats
        # and a row with a weight above 2^8: the plain attention (the GPU's fp16 redo)
        assert name != "fp8_attention_long" or stats["above"] > 0, stats


@case
def fp8_attention_static_v(root):
    # FP8 self-attention with a calibration's static v scales (v_amax): head 0's below its largest |v| (those
    # values saturate at 448 after scaling), head 1's above it (v uses fewer of E4M3's binades).
    c = Case(root, "fp8_attention_static_v")
    shape = (2, 37, 2, 64)
    q, k = c.save("q", c.normal(shape).astype(F16)), c.save("k", c.normal(shape).astype(F16))
    v = c.normal(shape, F32, 2.0)
    v[0, 5, 0, 7] = F32(9.5)
    v = c.save("v", v.astype(F16))
    largest = [float(np.max(np.abs(v[:, :, h, :].astype(F32)))) for h in range(2)]
    v_amax = c.save("v_amax", np.array([largest[0] * 0.5, largest[1] * 3.0], dtype=F32))
    qg = c.save("q_gamma", c.uniform(shape[2:], 0.5, 1.5))
    kg = c.save("k_gamma", c.uniform(shape[2:], 0.5, 1.5))
    scale = c.scalar("scale", 0.125)
    c.save("expected", fp8_np.attention_dense(q, k, v, qg, kg, scale, v_amax=v_amax))
    assert np.sum(np.abs(v[:, :, 0, :].astype(F32)) > v_amax[0]) > 0  # some values saturate


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(HERE, "data"))
    args = ap.parse_args()
    if os.path.exists(args.out):
        shutil.rmtree(args.out)
    os.makedirs(args.out)
    for fn in CASES:
        fn(args.out)
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(args.out) for f in fs)
    n = len(os.listdir(args.out))
    print(f"wrote {n} cases, {total} bytes, to {args.out}")


if __name__ == "__main__":
    main()
