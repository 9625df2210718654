#!/usr/bin/env python3
"""TRELLIS's sparse-structure flow model (spec §4, blocks §3.6) written in Python with trellisc's ops, loaded from
its checkpoint by name, compiled with tc.compile: the same math as the C++ builder (lib/Models/SparseStructure.cpp),
op for op, so that the two agree to rounding.

  PYTHONPATH=python python3 python/examples/ss_flow.py MODEL_DIR [--target cuda|cpu|auto] [--out v.npy]

MODEL_DIR is a TRELLIS model directory (pipeline.json, ckpts/): the flow model's sidecar JSON gives the sizes,
its .safetensors the weights. The script runs one forward on seeded noise at t = 1 with MODEL_DIR/cond.npy and
prints where it ran and how long a warm call takes.
"""
import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

import trellisc as tc

F16, F32 = tc.float16, tc.float32


class SiLU(tc.Module):
    def forward(self, x):
        return tc.silu(x)


class GELU(tc.Module):
    def forward(self, x):
        return tc.gelu(x)


class HeadRmsNorm(tc.Module):
    """q / k norm of the attention: gamma [H, d] f32."""

    def __init__(self, heads, head_dim):
        super().__init__()
        self.gamma = tc.Parameter(shape=(heads, head_dim), dtype=F32)

    def forward(self, x):
        return tc.head_rms_norm(x, self.gamma)


def split_heads(x, parts, heads):
    """[B, L, parts·C] -> `parts` tensors [B, L, H, d] (head-major channels)."""
    b, n, c = x.shape
    d = c // parts // heads
    pieces = tc.split(x.reshape((b, n, parts, heads, d)), [1] * parts, axis=2)
    return [p.reshape((b, n, heads, d)) for p in pieces]


def merge_heads(x):
    b, n, h, d = x.shape
    return x.reshape((b, n, h * d))


class SelfAttention(tc.Module):
    def __init__(self, channels, heads, qk_rms_norm):
        super().__init__()
        self.heads = heads
        self.to_qkv = tc.Linear(channels, 3 * channels, dtype=F16)
        if qk_rms_norm:
            self.q_rms_norm = HeadRmsNorm(heads, channels // heads)
            self.k_rms_norm = HeadRmsNorm(heads, channels // heads)
        self.qk_rms_norm = qk_rms_norm
        self.to_out = tc.Linear(channels, channels, dtype=F16)

    def forward(self, x):
        q, k, v = split_heads(self.to_qkv(x), 3, self.heads)
        if self.qk_rms_norm:
            q, k = self.q_rms_norm(q), self.k_rms_norm(k)
        o = tc.attention(q, k, v, scale=1.0 / math.sqrt(q.shape[-1]))
        return self.to_out(merge_heads(o))


class CrossAttention(tc.Module):
    def __init__(self, channels, ctx_channels, heads):
        super().__init__()
        self.heads = heads
        self.to_q = tc.Linear(channels, channels, dtype=F16)
        self.to_kv = tc.Linear(ctx_channels, 2 * channels, dtype=F16)
        self.to_out = tc.Linear(channels, channels, dtype=F16)

    def forward(self, x, ctx):
        (q,) = split_heads(self.to_q(x), 1, self.heads)
        k, v = split_heads(self.to_kv(ctx), 2, self.heads)
        o = tc.attention(q, k, v, scale=1.0 / math.sqrt(q.shape[-1]))
        return self.to_out(merge_heads(o))


class FeedForward(tc.Module):
    def __init__(self, channels, hidden):
        super().__init__()
        self.mlp = tc.Sequential(
            tc.Linear(channels, hidden, dtype=F16), GELU(), tc.Linear(hidden, channels, dtype=F16)
        )

    def forward(self, x):
        return self.mlp(x)


class ModulatedCrossBlock(tc.Module):
    """adaLN-modulated self-attention, plain cross-attention, modulated MLP (spec §3.6)."""

    def __init__(self, channels, ctx_channels, heads, hidden, qk_rms_norm):
        super().__init__()
        self.channels = channels
        self.adaLN_modulation = tc.Sequential(SiLU(), tc.Linear(channels, 6 * channels, dtype=F16))
        self.self_attn = SelfAttention(channels, heads, qk_rms_norm)
        self.norm2 = tc.LayerNorm(channels, eps=1e-6)
        self.cross_attn = CrossAttention(channels, ctx_channels, heads)
        self.mlp = FeedForward(channels, hidden)

    def forward(self, x, emb, ctx):
        c = self.channels
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = tc.split(
            self.adaLN_modulation(emb), [c] * 6, axis=1
        )
        h = tc.modulate(tc.layer_norm(x, eps=1e-6), shift_msa, scale_msa)
        y = tc.gated_residual(x, self.self_attn(h), gate_msa)
        y = y + self.cross_attn(self.norm2(y), ctx)
        h = tc.modulate(tc.layer_norm(y, eps=1e-6), shift_mlp, scale_mlp)
        return tc.gated_residual(y, self.mlp(h), gate_mlp)


class TimestepEmbedder(tc.Module):
    def __init__(self, channels, frequencies=256):
        super().__init__()
        self.frequencies = frequencies
        self.mlp = tc.Sequential(tc.Linear(frequencies, channels), SiLU(), tc.Linear(channels, channels))

    def forward(self, t):
        return self.mlp(tc.timestep_embedding(t, self.frequencies, 10000.0))


class SparseStructureFlow(tc.Module):
    """forward(x [B, Cin, R, R, R], t [B] (x 1000), cond [B, Lc, Cc]) -> the velocity [B, Cout, R, R, R]."""

    def __init__(self, args):
        super().__init__()
        a = args
        if a["patch_size"] != 1 or a.get("pe_mode", "ape") != "ape":
            raise ValueError(
                "this example covers patch_size 1 with the stored position table (TRELLIS's SS flow)"
            )
        self.a = a
        c, r = a["model_channels"], a["resolution"]
        self.input_layer = tc.Linear(a["in_channels"], c)
        self.pos_emb = tc.Parameter(shape=(r**3, c), dtype=F32)
        self.t_embedder = TimestepEmbedder(c)
        hidden = int(c * a["mlp_ratio"])
        self.blocks = tc.ModuleList(
            ModulatedCrossBlock(c, a["cond_channels"], a["num_heads"], hidden, a["qk_rms_norm"])
            for _ in range(a["num_blocks"])
        )
        self.out_layer = tc.Linear(c, a["out_channels"])

    def forward(self, x, t, cond):
        b, cin, r = x.shape[0], x.shape[1], x.shape[2]
        h = tc.permute(x.reshape((b, cin, r**3)), [0, 2, 1])  # patchify, patch 1
        h = self.input_layer(h) + self.pos_emb
        emb = tc.cast(self.t_embedder(t), F16)
        h, ctx = tc.cast(h, F16), tc.cast(cond, F16)
        for block in self.blocks:
            h = block(h, emb, ctx)
        h = self.out_layer(tc.layer_norm(tc.cast(h, F32), eps=1e-5))
        return tc.permute(h, [0, 2, 1]).reshape((b, self.a["out_channels"], r, r, r))


def load(model_dir):
    """The SS flow model of a TRELLIS model directory, its weights loaded by name, and its sizes."""
    model_dir = Path(model_dir)
    pipeline = json.loads((model_dir / "pipeline.json").read_text())
    ckpt = model_dir / pipeline["args"]["models"]["sparse_structure_flow_model"]
    args = json.loads(ckpt.with_suffix(".json").read_text())["args"]
    model = SparseStructureFlow(args)
    model.load_safetensors(ckpt.with_suffix(".safetensors"))
    return model, args


def compile_model(model, args, cond_tokens, target="auto", batch=1):
    r = args["resolution"]
    return tc.compile(
        model,
        args=[
            tc.InputInfo((batch, args["in_channels"], r, r, r)),
            tc.InputInfo((batch,)),
            tc.InputInfo((batch, cond_tokens, args["cond_channels"])),
        ],
        target=target,
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("--target", default="auto")
    ap.add_argument("--out", help="write the velocity here (.npy)")
    a = ap.parse_args()
    model, args = load(a.model_dir)
    cond = np.load(Path(a.model_dir) / "cond.npy").astype(np.float32)
    t0 = time.perf_counter()
    exe = compile_model(model, args, cond.shape[1], a.target)
    compiled = time.perf_counter() - t0
    r = args["resolution"]
    x = np.random.default_rng(0).standard_normal((1, args["in_channels"], r, r, r)).astype(np.float32)
    t = np.array([1000.0], np.float32)
    v = exe(x, t, cond)
    t1 = time.perf_counter()
    exe(x, t, cond)
    warm = time.perf_counter() - t1
    print(
        f"compiled for {exe.target} in {compiled:.2f} s; runs on {exe.backend}; warm call {warm * 1e3:.2f} ms; "
        f"velocity {list(v.shape)}"
    )
    if a.out:
        np.save(a.out, v)
    return 0


if __name__ == "__main__":
    sys.exit(main())
