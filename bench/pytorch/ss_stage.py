#!/usr/bin/env python3
"""PyTorch baseline for the TRELLIS sparse-structure (SS) stage (issue 5).

Written from /work/shared/spec/TRELLIS-v1-inference.md (not from TRELLIS code):
  * SparseStructureFlowModel (spec §4, blocks §3.6, precision §11), random weights of the stored
    shapes/dtypes generated on the device (seeded, ~1/sqrt(fan_in)).
  * FlowEulerGuidanceIntervalSampler (§3.2-3.3): 25 steps, rescale_t 3, cfg 5 on [0.5, 1.0]
    -> 19 guided steps (cond + uncond batched as 2B) + 6 unguided = 44 forwards.
  * SparseStructureDecoder (§5.1) and occupancy extraction (§5.3, logits > 0).

Usage:
  python3 ss_stage.py --mode eager|compile|both [--tiny] [--smoke] [--compile-mode default]
The model is written functionally (weights as plain tensors) so that torch.compile sees one block
function, reused by all 24 blocks (one graph per batch size), which keeps compile time short.
"""
import argparse
import math
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


# ----------------------------------------------------------------------------- config
class Cfg:
    def __init__(self, tiny=False):
        if tiny:
            self.R, self.C, self.nblocks, self.H, self.Lc, self.Cc = 4, 64, 2, 4, 7, 64
            self.dec_ch = [32, 16, 8]
        else:
            self.R, self.C, self.nblocks, self.H, self.Lc, self.Cc = 16, 1024, 24, 16, 1374, 1024
            self.dec_ch = [512, 128, 32]
        self.cin = 8
        self.mlp = 4 * self.C
        self.d = self.C // self.H
        self.L = self.R**3


# ----------------------------------------------------------------------------- weights
def rnd(shape, fan_in, dtype, dev, gain=1.0):
    return (torch.randn(shape, device=dev, dtype=torch.float32) * (gain / math.sqrt(fan_in))).to(dtype)


def ape_table(cfg, dev):
    """Absolute position embedding of the R^3 grid (§3.6): rows n = 256 i + 16 j + k (i slowest),
    [sin(xw), cos(xw), sin(yw), cos(yw), sin(zw), cos(zw)], zero-padded to C. fp32."""
    R, C = cfg.R, cfg.C
    Fn = C // 3 // 2
    w = torch.pow(10000.0, -torch.arange(Fn, dtype=torch.float32, device=dev) / Fn)
    g = torch.arange(R, dtype=torch.float32, device=dev)
    ii, jj, kk = torch.meshgrid(g, g, g, indexing="ij")
    parts = []
    for c in (ii.reshape(-1), jj.reshape(-1), kk.reshape(-1)):
        a = c[:, None] * w[None, :]
        parts += [torch.sin(a), torch.cos(a)]
    pe = torch.cat(parts, dim=1)
    if pe.shape[1] < C:
        pe = F.pad(pe, (0, C - pe.shape[1]))
    return pe.contiguous()


def make_flow_weights(cfg, dev, hdt):
    C, Cc, M = cfg.C, cfg.Cc, cfg.mlp
    f32 = torch.float32
    W = {
        "t0w": rnd((C, 256), 256, f32, dev),
        "t0b": torch.zeros(C, device=dev),
        "t2w": rnd((C, C), C, f32, dev),
        "t2b": torch.zeros(C, device=dev),
        "pos": ape_table(cfg, dev),
        "inw": rnd((C, cfg.cin), cfg.cin, f32, dev),
        "inb": rnd((C,), C, f32, dev),
        "outw": rnd((cfg.cin, C), C, f32, dev),
        "outb": torch.zeros(cfg.cin, device=dev),
    }
    blocks = []
    for _ in range(cfg.nblocks):
        b = (
            torch.ones(C, device=dev) + 0.02 * torch.randn(C, device=dev),  # norm2.weight f32
            0.02 * torch.randn(C, device=dev),  # norm2.bias f32
            rnd((3 * C, C), C, hdt, dev),
            rnd((3 * C,), C, hdt, dev),  # to_qkv
            1.0 + 0.1 * torch.randn(cfg.H, cfg.d, device=dev),  # q_rms gamma f32
            1.0 + 0.1 * torch.randn(cfg.H, cfg.d, device=dev),  # k_rms gamma f32
            rnd((C, C), C, hdt, dev),
            rnd((C,), C, hdt, dev),  # self to_out
            rnd((C, C), C, hdt, dev),
            rnd((C,), C, hdt, dev),  # cross to_q
            rnd((2 * C, Cc), Cc, hdt, dev),
            rnd((2 * C,), Cc, hdt, dev),  # cross to_kv
            rnd((C, C), C, hdt, dev),
            rnd((C,), C, hdt, dev),  # cross to_out
            rnd((M, C), C, hdt, dev),
            rnd((M,), C, hdt, dev),  # mlp.0
            rnd((C, M), M, hdt, dev),
            rnd((C,), M, hdt, dev),  # mlp.2
            rnd((6 * C, C), C, hdt, dev, 0.5),
            rnd((6 * C,), C, hdt, dev),  # adaLN_modulation.1
        )
        blocks.append(b)
    W["blocks"] = blocks
    return W


def make_dec_weights(cfg, dev, hdt):
    c0, c1, c2 = cfg.dec_ch
    f32 = torch.float32

    def conv(ci, co, dt):
        return (rnd((co, ci, 3, 3, 3), ci * 27, dt, dev), rnd((co,), ci * 27, dt, dev))

    def ln(c):
        return (
            torch.ones(c, device=dev) + 0.02 * torch.randn(c, device=dev),
            0.02 * torch.randn(c, device=dev),
        )

    def res(c):
        return ("res",) + ln(c) + conv(c, c, hdt) + ln(c) + conv(c, c, hdt)

    layers = [
        res(c0),
        res(c0),  # middle_block.0, .1
        res(c0),
        res(c0),  # blocks.0, .1
        ("up",) + conv(c0, c1 * 8, hdt),  # blocks.2
        res(c1),
        res(c1),  # blocks.3, .4
        ("up",) + conv(c1, c2 * 8, hdt),  # blocks.5
        res(c2),
        res(c2),
    ]  # blocks.6, .7
    return {"in": conv(cfg.cin, c0, f32), "layers": layers, "outln": ln(c2), "out": conv(c2, 1, f32)}


def load_model_dir(model_dir, dev, hdt):
    """The SS flow and decoder weights of a model directory (safetensors, any preset), in the
    functional model's layout: block GEMM and conv weights in `hdt`, norms, gammas, the t-embedder,
    the input / output layers and the decoder's first and last conv in fp32 (spec §11) — the same
    dtypes make_flow_weights / make_dec_weights use. With hdt = fp32 everything is fp32 (parity.py)."""
    import json
    from safetensors.torch import load_file

    with open(os.path.join(model_dir, "pipeline.json")) as f:
        pipe = json.load(f)["args"]["models"]
    flow = load_file(os.path.join(model_dir, pipe["sparse_structure_flow_model"] + ".safetensors"))
    dec = load_file(os.path.join(model_dir, pipe["sparse_structure_decoder"] + ".safetensors"))
    f32 = {k: v.to(dev, torch.float32) for k, v in flow.items()}
    d32 = {k: v.to(dev, torch.float32) for k, v in dec.items()}
    W = {
        "t0w": f32["t_embedder.mlp.0.weight"],
        "t0b": f32["t_embedder.mlp.0.bias"],
        "t2w": f32["t_embedder.mlp.2.weight"],
        "t2b": f32["t_embedder.mlp.2.bias"],
        "pos": f32["pos_emb"],
        "inw": f32["input_layer.weight"],
        "inb": f32["input_layer.bias"],
        "outw": f32["out_layer.weight"],
        "outb": f32["out_layer.bias"],
    }
    n = 1 + max(int(k.split(".")[1]) for k in f32 if k.startswith("blocks."))
    blocks = []
    for i in range(n):
        p = f"blocks.{i}."

        def g(s, dt=hdt):
            return f32[p + s].to(dt)

        blocks.append(
            (
                g("norm2.weight", torch.float32),
                g("norm2.bias", torch.float32),
                g("self_attn.to_qkv.weight"),
                g("self_attn.to_qkv.bias"),
                g("self_attn.q_rms_norm.gamma", torch.float32),
                g("self_attn.k_rms_norm.gamma", torch.float32),
                g("self_attn.to_out.weight"),
                g("self_attn.to_out.bias"),
                g("cross_attn.to_q.weight"),
                g("cross_attn.to_q.bias"),
                g("cross_attn.to_kv.weight"),
                g("cross_attn.to_kv.bias"),
                g("cross_attn.to_out.weight"),
                g("cross_attn.to_out.bias"),
                g("mlp.mlp.0.weight"),
                g("mlp.mlp.0.bias"),
                g("mlp.mlp.2.weight"),
                g("mlp.mlp.2.bias"),
                g("adaLN_modulation.1.weight"),
                g("adaLN_modulation.1.bias"),
            )
        )
    W["blocks"] = blocks

    def conv(p, dt=hdt):
        return (d32[p + ".weight"].to(dt), d32[p + ".bias"].to(dt))

    def res(p):
        return (
            ("res", d32[p + ".norm1.weight"], d32[p + ".norm1.bias"])
            + conv(p + ".conv1")
            + (d32[p + ".norm2.weight"], d32[p + ".norm2.bias"])
            + conv(p + ".conv2")
        )

    layers = []
    mids = sorted({int(k.split(".")[1]) for k in d32 if k.startswith("middle_block.")})
    layers += [res(f"middle_block.{i}") for i in mids]
    ids = sorted({int(k.split(".")[1]) for k in d32 if k.startswith("blocks.")})
    for i in ids:
        if f"blocks.{i}.conv1.weight" in d32:
            layers.append(res(f"blocks.{i}"))
        else:
            layers.append(("up",) + conv(f"blocks.{i}.conv"))
    D = {
        "in": conv("input_layer", torch.float32),
        "layers": layers,
        "outln": (d32["out_layer.0.weight"], d32["out_layer.0.bias"]),
        "out": conv("out_layer.2", torch.float32),
    }
    return W, D, pipe


# ----------------------------------------------------------------------------- flow model
def ln32(x, eps, w=None, b=None):
    return F.layer_norm(x.float(), (x.shape[-1],), w, b, eps).to(x.dtype)


def head_rms(u, gamma):
    # u [B, L, H, d]; L2 normalise per head, * gamma[h, :] * sqrt(d); fp32 compute, cast back
    d = u.shape[-1]
    uf = u.float()
    n = uf.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return (uf / n * gamma * math.sqrt(d)).to(u.dtype)


def block_fn(
    x,
    e,
    ctx,
    n2w,
    n2b,
    qkvw,
    qkvb,
    gq,
    gk,
    sow,
    sob,
    cqw,
    cqb,
    ckvw,
    ckvb,
    cow,
    cob,
    m0w,
    m0b,
    m2w,
    m2b,
    adw,
    adb,
):
    """ModulatedTransformerCrossBlock (§3.6). x [B,L,C] fp16, e [B,C] fp16, ctx [B,Lc,Cc] fp16."""
    B, L, C = x.shape
    H, d = gq.shape
    Lc = ctx.shape[1]
    m = F.linear(F.silu(e), adw, adb)
    shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = m.unsqueeze(1).chunk(6, dim=-1)
    # self-attention
    h = ln32(x, 1e-6) * (1 + scale_msa) + shift_msa
    qkv = F.linear(h, qkvw, qkvb).view(B, L, 3, H, d)
    q, k, v = qkv.unbind(2)
    q = head_rms(q, gq)
    k = head_rms(k, gk)
    a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    a = a.transpose(1, 2).reshape(B, L, C)
    x = x + gate_msa * F.linear(a, sow, sob)
    # cross-attention (not gated, not modulated)
    h = ln32(x, 1e-6, n2w, n2b)
    q = F.linear(h, cqw, cqb).view(B, L, H, d)
    kv = F.linear(ctx, ckvw, ckvb).view(B, Lc, 2, H, d)
    k, v = kv.unbind(2)
    a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    a = a.transpose(1, 2).reshape(B, L, C)
    x = x + F.linear(a, cow, cob)
    # FFN
    h = ln32(x, 1e-6) * (1 + scale_mlp) + shift_mlp
    h = F.linear(F.gelu(F.linear(h, m0w, m0b), approximate="tanh"), m2w, m2b)
    return x + gate_mlp * h


def t_embed(W, tau):
    half = 128
    f = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32, device=tau.device) / half)
    a = tau[:, None].float() * f[None]
    e = torch.cat([torch.cos(a), torch.sin(a)], dim=-1)
    return F.linear(F.silu(F.linear(e, W["t0w"], W["t0b"])), W["t2w"], W["t2b"])


def flow_forward(W, x, tau, cond, hdt, blk):
    """x [B,8,R,R,R] fp32, tau [B] fp32, cond [B,Lc,Cc] -> v [B,8,R,R,R] fp32 (§4.1)."""
    B, cin, R = x.shape[0], x.shape[1], x.shape[2]
    h = x.reshape(B, cin, R**3).transpose(1, 2)  # patchify p=1: [B, L, 8]
    h = F.linear(h, W["inw"], W["inb"]) + W["pos"]
    e = t_embed(W, tau)
    h, e, c = h.to(hdt), e.to(hdt), cond.to(hdt)
    for b in W["blocks"]:
        h = blk(h, e, c, *b)
    h = F.layer_norm(h.float(), (h.shape[-1],), eps=1e-5)
    h = F.linear(h, W["outw"], W["outb"])
    return h.transpose(1, 2).reshape(B, cin, R, R, R)


# ----------------------------------------------------------------------------- decoder
def channel_ln(x, w, b, eps=1e-5):
    y = F.layer_norm(x.float().permute(0, 2, 3, 4, 1), (x.shape[1],), w, b, eps)
    return y.permute(0, 4, 1, 2, 3).to(x.dtype)


def pixel_shuffle3d(x, s=2):
    B, C8, D, Hh, Ww = x.shape
    c = C8 // (s**3)
    x = x.view(B, c, s, s, s, D, Hh, Ww).permute(0, 1, 5, 2, 6, 3, 7, 4)
    return x.reshape(B, c, D * s, Hh * s, Ww * s)


def decoder_forward(D, z, hdt):
    h = F.conv3d(z, D["in"][0], D["in"][1], padding=1).to(hdt)
    for L in D["layers"]:
        if L[0] == "res":
            _, n1w, n1b, c1w, c1b, n2w, n2b, c2w, c2b = L
            r = F.conv3d(F.silu(channel_ln(h, n1w, n1b)), c1w, c1b, padding=1)
            r = F.conv3d(F.silu(channel_ln(r, n2w, n2b)), c2w, c2b, padding=1)
            h = h + r
        else:
            h = pixel_shuffle3d(F.conv3d(h, L[1], L[2], padding=1))
    h = h.float()
    h = F.silu(channel_ln(h, *D["outln"]))
    return F.conv3d(h, D["out"][0], D["out"][1], padding=1)


# ----------------------------------------------------------------------------- sampler
def time_grid(steps=25, rescale_t=3.0):
    tt = np.linspace(1.0, 0.0, steps + 1)
    return [float(rescale_t * t / (1 + (rescale_t - 1) * t)) for t in tt]


def ss_stage(W, D, cond, neg, noise, hdt, fwd, dec, steps=25, rescale_t=3.0, cfg_w=5.0, interval=(0.5, 1.0)):
    """Returns (occupancy coords [N,4], logits, number of forwards)."""
    B = noise.shape[0]
    x = noise.clone()
    ts = time_grid(steps, rescale_t)
    cond2 = torch.cat([cond, neg], 0)
    nfwd = 0
    for i in range(steps):
        t, tp = ts[i], ts[i + 1]
        tau = float(np.float32(1000.0 * t))
        if interval[0] <= t <= interval[1]:
            v2 = fwd(W, torch.cat([x, x], 0), torch.full((2 * B,), tau, device=x.device), cond2, hdt)
            vc, vu = v2[:B], v2[B:]
            v = (1 + cfg_w) * vc - cfg_w * vu
            nfwd += 2
        else:
            v = fwd(W, x, torch.full((B,), tau, device=x.device), cond, hdt)
            nfwd += 1
        x = x - (t - tp) * v
    logits = dec(D, x, hdt)
    coords = torch.argwhere(logits[:, 0] > 0).int()
    return coords, logits, nfwd


# ----------------------------------------------------------------------------- FLOPs
def flow_flops_per_sample(cfg):
    L, C, Lc, Cc, M = cfg.L, cfg.C, cfg.Lc, cfg.Cc, cfg.mlp
    per_block = {
        "qkv": 2 * L * C * 3 * C,
        "self_core": 4 * L * L * C,
        "self_out": 2 * L * C * C,
        "cross_q": 2 * L * C * C,
        "cross_kv": 2 * Lc * Cc * 2 * C,
        "cross_core": 4 * L * Lc * C,
        "cross_out": 2 * L * C * C,
        "ffn": 2 * 2 * L * C * M,
        "adaln": 2 * C * 6 * C,
    }
    blk = sum(per_block.values())
    io = 2 * L * cfg.cin * C * 2 + 2 * (256 * C + C * C)
    return per_block, blk, cfg.nblocks * blk + io


def dec_flops(cfg, B=1):
    c0, c1, c2 = cfg.dec_ch
    R = cfg.R
    f = 2 * cfg.cin * c0 * 27 * R**3
    f += 8 * 2 * c0 * c0 * 27 * R**3
    f += 2 * c0 * c1 * 8 * 27 * R**3
    f += 4 * 2 * c1 * c1 * 27 * (2 * R) ** 3
    f += 2 * c1 * c2 * 8 * 27 * (2 * R) ** 3
    f += 4 * 2 * c2 * c2 * 27 * (4 * R) ** 3
    f += 2 * c2 * 1 * 27 * (4 * R) ** 3
    return B * f


# ----------------------------------------------------------------------------- timing
def cuda_time(fn, reps, warm, dev):
    """Median ms over reps (CUDA events on GPU; host clock + nothing async on CPU)."""
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(reps):
        if dev.type == "cuda":
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            ts.append(s.elapsed_time(e))
        else:
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts), ts


def gemm_peak(dev, reps=50):
    M, N, K = 4096, 4096, 1024
    As = [torch.randn(M, K, device=dev, dtype=torch.float16) for _ in range(4)]
    Bs = [torch.randn(K, N, device=dev, dtype=torch.float16) for _ in range(4)]
    it = [0]

    def f():
        i = it[0] % 4
        it[0] += 1
        torch.matmul(As[i], Bs[i])

    ms, _ = cuda_time(f, reps, 10, dev)
    return ms, 2 * M * N * K / (ms * 1e-3) / 1e12


# ----------------------------------------------------------------------------- main
def run_mode(mode, cfg, W, D, cond, neg, noise, hdt, dev, args, out):
    torch._dynamo.reset() if mode == "compile" else None
    if mode == "compile":
        cblk = torch.compile(block_fn, mode=args.compile_mode, dynamic=False, fullgraph=True)
        cdec = torch.compile(decoder_forward, mode=args.compile_mode, dynamic=False)

        def fwd(W_, x, tau, c, h):
            return flow_forward(W_, x, tau, c, h, cblk)

        dec = cdec
    else:

        def fwd(W_, x, tau, c, h):
            return flow_forward(W_, x, tau, c, h, block_fn)

        dec = decoder_forward
    B = noise.shape[0]
    x2 = torch.cat([noise, noise], 0)
    tau2 = torch.full((2 * B,), 500.0, device=dev)
    cond2 = torch.cat([cond, neg], 0)

    # compile / first-call time: one full stage (compiles B=2 and B=1 graphs + decoder)
    sync = (lambda: torch.cuda.synchronize()) if dev.type == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    coords, logits, nfwd = ss_stage(W, D, cond, neg, noise, hdt, fwd, dec)
    sync()
    first = time.perf_counter() - t0
    print(
        f"[{mode}] first stage call (incl. compile/autotune): {first:.1f} s; forwards={nfwd}; "
        f"occupied={coords.shape[0]}; logits finite={bool(torch.isfinite(logits).all())}",
        flush=True,
    )

    with torch.no_grad():
        fms, fts = cuda_time(lambda: fwd(W, x2, tau2, cond2, hdt), args.fwd_reps, 3, dev)
        print(f"[{mode}] CFG-batched forward (B={2*B}): median {fms:.2f} ms over {len(fts)}", flush=True)
        if dev.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        res = {}

        def stage():
            res["r"] = ss_stage(W, D, cond, neg, noise, hdt, fwd, dec)

        sms, sts = cuda_time(stage, args.stage_reps, 1, dev)
        peak = torch.cuda.max_memory_allocated() if dev.type == "cuda" else 0
        print(
            f"[{mode}] stage: median {sms:.1f} ms over {len(sts)} reps: "
            + ", ".join(f"{t:.1f}" for t in sts)
            + f"; occupied={res['r'][0].shape[0]}",
            flush=True,
        )
    out[mode] = dict(
        first_s=first,
        fwd_ms=fms,
        stage_ms=sms,
        peak=peak,
        nfwd=nfwd,
        occ=res["r"][0].shape[0],
        logits=res["r"][1],
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="both", choices=["eager", "compile", "both"])
    ap.add_argument("--tiny", action="store_true", help="tiny dimensions (CPU logic test)")
    ap.add_argument("--smoke", action="store_true", help="run a tiny 1-step check first")
    ap.add_argument("--compile-mode", default="default")
    ap.add_argument("--stage-reps", type=int, default=5)
    ap.add_argument("--fwd-reps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--model",
        help="time on this model directory's weights and cond.npy (the ones trellis.exe "
        "runs on) instead of random ones; the power-capped GPU's speed depends on the values",
    )
    ap.add_argument(
        "--autotune-extra",
        action="store_true",
        help="after the table, also try mode max-autotune-no-cudagraphs if time allows",
    )
    ap.add_argument("--autotune-if-below-s", type=float, default=150.0)
    args = ap.parse_args()

    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    hdt = torch.float16 if dev.type == "cuda" else torch.float32  # CPU logic test runs fp32
    print(
        f"torch {torch.__version__}; device "
        f"{torch.cuda.get_device_name() if dev.type == 'cuda' else 'cpu'}; half dtype {hdt}",
        flush=True,
    )
    torch.set_grad_enabled(False)

    if args.smoke:
        c = Cfg(tiny=True)
        g = torch.Generator().manual_seed(1)
        torch.manual_seed(1)
        Wt, Dt = make_flow_weights(c, dev, hdt), make_dec_weights(c, dev, hdt)
        x = torch.randn(1, 8, c.R, c.R, c.R, generator=g).to(dev)
        cond = torch.randn(1, c.Lc, c.Cc, device=dev)
        v = flow_forward(Wt, x, torch.full((1,), 1000.0, device=dev), cond, hdt, block_fn)
        lg = decoder_forward(Dt, x, hdt)
        assert v.shape == x.shape and v.dtype == torch.float32, v.shape
        assert lg.shape == (1, 1, 4 * c.R, 4 * c.R, 4 * c.R), lg.shape
        assert torch.isfinite(v).all() and torch.isfinite(lg).all()
        # pixel shuffle index check: out[c', 2x+s1, 2y+s2, 2z+s3] = in[8c'+4s1+2s2+s3, x, y, z]
        t = torch.arange(16 * 8, dtype=torch.float32).view(1, 16, 2, 2, 2)
        ps = pixel_shuffle3d(t)
        assert ps[0, 1, 3, 2, 1].item() == t[0, 8 * 1 + 4 * 1 + 2 * 0 + 1, 1, 1, 0].item()
        ts = time_grid()
        assert abs(ts[1] - 0.98630) < 1e-4 and sum(t_ >= 0.5 for t_ in ts[:-1]) == 19
        print(f"smoke OK: v std {v.std().item():.3f}, logits std {lg.std().item():.3f}", flush=True)

    cfg = Cfg(tiny=args.tiny)
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    B = 1
    if args.model:
        W, D, _ = load_model_dir(args.model, dev, hdt)
        cond = torch.from_numpy(np.load(os.path.join(args.model, "cond.npy"))).to(dev, torch.float32)
        if (
            W["pos"].shape[0] != cfg.L
            or W["blocks"][0][2].shape != (3 * cfg.C, cfg.C)
            or cond.shape != (B, cfg.Lc, cfg.Cc)
        ):
            sys.exit(
                f"error: {args.model}: expected the {'tiny' if args.tiny else 'image-large'} shapes "
                f"(pos_emb [{cfg.L}, {cfg.C}], cond [{B}, {cfg.Lc}, {cfg.Cc}]); found pos_emb "
                f"{list(W['pos'].shape)}, cond {list(cond.shape)}"
            )
    else:
        W = make_flow_weights(cfg, dev, hdt)
        D = make_dec_weights(cfg, dev, hdt)
        cond = torch.randn(B, cfg.Lc, cfg.Cc, device=dev)
    neg = torch.zeros_like(cond)
    noise = torch.randn(B, 8, cfg.R, cfg.R, cfg.R, generator=torch.Generator().manual_seed(42)).to(dev)
    nparam = sum(t.numel() * t.element_size() for b in W["blocks"] for t in b)
    print(
        f"weights {'of ' + args.model if args.model else 'random'} in {time.perf_counter()-t0:.1f} s; flow block weights {nparam/1e9:.3f} GB",
        flush=True,
    )

    per_block, blk, fwd_flops = flow_flops_per_sample(cfg)
    print(
        "FLOPs per block per sample (GFLOP): "
        + ", ".join(f"{k} {v/1e9:.2f}" for k, v in per_block.items())
        + f"; block total {blk/1e9:.1f}"
    )
    print(
        f"FLOPs per forward per sample: {fwd_flops/1e12:.3f} TFLOP; decoder {dec_flops(cfg)/1e12:.3f} TFLOP"
    )
    # sanity: one forward's activations stay O(1)
    v = flow_forward(W, noise, torch.full((1,), 1000.0, device=dev), cond, hdt, block_fn)
    print(
        f"velocity std at t=1: {v.float().std().item():.3f}, finite {bool(torch.isfinite(v).all())}",
        flush=True,
    )

    gms, gtf = gemm_peak(dev) if dev.type == "cuda" else (float("nan"), float("nan"))
    print(f"fp16 GEMM 4096x4096x1024 torch.matmul: {gms:.4f} ms = {gtf:.1f} TFLOP/s", flush=True)
    T0 = time.perf_counter()
    modes = ["eager", "compile"] if args.mode == "both" else [args.mode]
    out = {}
    for m in modes:
        try:
            run_mode(m, cfg, W, D, cond, neg, noise, hdt, dev, args, out)
        except Exception as ex:  # keep the other mode's numbers
            print(f"[{m}] FAILED: {type(ex).__name__}: {ex}", flush=True)
    report(out, cfg, args, dev, B, fwd_flops, gms, gtf)
    # optional extra: max-autotune-no-cudagraphs, only if there is time left (table above already printed)
    if args.autotune_extra and dev.type == "cuda" and time.perf_counter() - T0 < args.autotune_if_below_s:
        first_mode = args.compile_mode
        args.compile_mode = "max-autotune-no-cudagraphs"
        try:
            o2 = {}
            run_mode("compile", cfg, W, D, cond, neg, noise, hdt, dev, args, o2)
            out["compile-mat"] = o2["compile"]
            args.compile_mode = first_mode
            report(out, cfg, args, dev, B, fwd_flops, gms, gtf)
        except Exception as ex:
            print(f"[max-autotune] FAILED: {type(ex).__name__}: {ex}", flush=True)
    elif args.autotune_extra:
        print(f"max-autotune extra skipped ({time.perf_counter() - T0:.0f} s used)")


def report(out, cfg, args, dev, B, fwd_flops, gms, gtf):
    if "eager" in out and "compile" in out:
        le, lc = out["eager"]["logits"], out["compile"]["logits"]
        rel = ((le - lc).float().norm() / le.float().norm()).item()
        agree = ((le > 0) == (lc > 0)).float().mean().item()
        print(f"eager vs compile final logits rel L2 {rel:.3e}, occupancy sign agreement {agree:.5f}")
    fwd2 = 2 * B * fwd_flops
    stage_flops = None
    print(
        "\n=== SS stage baseline (PyTorch), B=1, image-large shapes"
        + (" [TINY]" if args.tiny else "")
        + (f", weights and cond of {args.model}" if args.model else ", random weights")
        + " ==="
    )
    print(
        f"device: {torch.cuda.get_device_name() if dev.type == 'cuda' else 'cpu'}; torch {torch.__version__}; "
        f"compile: block fn compiled once (fullgraph, dynamic=False) reused by all blocks; decoder compiled; "
        f"'compile' = mode {args.compile_mode!r} (first mode run), 'compile-mat' = max-autotune-no-cudagraphs extra"
    )
    print(f"FLOPs: CFG-batched forward (2B) {fwd2/1e12:.3f} TFLOP; decoder {dec_flops(cfg)/1e12:.3f} TFLOP")
    print(
        f"{'mode':11} {'fwd2B ms':>9} {'fwd TF/s':>9} {'stage ms':>9} {'stage TF/s':>10} {'peak GiB':>9} "
        f"{'1st call s':>10} {'fwds':>5} {'occ':>7}"
    )
    for m, r in out.items():
        stage_flops = r["nfwd"] * B * fwd_flops + dec_flops(cfg)
        print(
            f"{m:11} {r['fwd_ms']:9.2f} {fwd2/(r['fwd_ms']*1e-3)/1e12:9.1f} {r['stage_ms']:9.1f} "
            f"{stage_flops/(r['stage_ms']*1e-3)/1e12:10.1f} {r['peak']/2**30:9.2f} {r['first_s']:10.1f} "
            f"{r['nfwd']:5d} {r['occ']:7d}"
        )
    if stage_flops is not None:
        print(f"stage FLOPs: {stage_flops/1e12:.2f} TFLOP (forwards x per-sample forward + decoder)")
    print(f"fp16 GEMM 4096x4096x1024 torch.matmul: {gms:.4f} ms = {gtf:.1f} TFLOP/s")
    if "eager" in out:
        for m in ("compile", "compile-mat"):
            if m in out:
                print(
                    f"{m}: compile time ~ first stage call minus eager first call = "
                    f"{out[m]['first_s'] - out['eager']['first_s']:.1f} s"
                )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
