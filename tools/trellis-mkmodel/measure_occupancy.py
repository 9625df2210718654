#!/usr/bin/env python3
"""Measures the occupancy a synthetic sparse structure decoder produces.

Runs stage 1 of the pipeline with PyTorch on a trellis-mkmodel directory,
independently of trellisc (spec §3.2–§3.3, §4, §5):
  * the SS decoder on random latents z ~ N(0, s²) for a few scales s;
  * optionally (--flow) the whole stage: 25-step Euler sampling of the SS flow
    model with CFG on cond.npy (neg_cond = 0), then the decoder.
Prints the fraction of voxels with logit > 0. Used to check the value of
out_layer.2.bias that trellis-mkmodel derives (MkModel.h,
ssDecoderOutputBias), which targets 3 % for random latents.

    python3 measure_occupancy.py MODEL_DIR [--flow] [--samples 4]

Needs torch and safetensors (the device image has both).
"""
import argparse
import json
import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file


def channel_ln(x, w, b):
    """ChannelLayerNorm32: LayerNorm over C at each voxel, fp32, eps 1e-5."""
    y = F.layer_norm(x.float().permute(0, 2, 3, 4, 1), (x.shape[1],), w.float(), b.float(), eps=1e-5)
    return y.permute(0, 4, 1, 2, 3).to(x.dtype)


def pixel_shuffle_3d(x, s=2):
    b, c8, d, h, w = x.shape
    c = c8 // (s**3)
    x = x.view(b, c, s, s, s, d, h, w).permute(0, 1, 5, 2, 6, 3, 7, 4)
    return x.reshape(b, c, d * s, h * s, w * s)


def ss_decoder(sd, args, z):
    dt = torch.float16 if args.get("use_fp16") else torch.float32
    conv = lambda x, p: F.conv3d(x, sd[p + ".weight"].to(x.dtype), sd[p + ".bias"].to(x.dtype), padding=1)

    def res(x, p):
        h = F.silu(channel_ln(x, sd[p + ".norm1.weight"], sd[p + ".norm1.bias"]))
        h = conv(h, p + ".conv1")
        h = F.silu(channel_ln(h, sd[p + ".norm2.weight"], sd[p + ".norm2.bias"]))
        return conv(h, p + ".conv2") + x

    h = conv(z, "input_layer").to(dt)
    for i in range(args.get("num_res_blocks_middle", 2)):
        h = res(h, f"middle_block.{i}")
    idx = 0
    chans = args["channels"]
    for s in range(len(chans)):
        for _ in range(args["num_res_blocks"]):
            h = res(h, f"blocks.{idx}")
            idx += 1
        if s + 1 < len(chans):
            h = pixel_shuffle_3d(conv(h, f"blocks.{idx}.conv"))
            idx += 1
    h = h.float()
    h = F.silu(channel_ln(h, sd["out_layer.0.weight"], sd["out_layer.0.bias"]))
    return F.conv3d(h, sd["out_layer.2.weight"], sd["out_layer.2.bias"], padding=1)


def ss_flow(sd, a, x, t, cond):
    """SparseStructureFlowModel forward (spec §4.1, §3.6), patch size 1."""
    c, heads = a["model_channels"], a["num_heads"]
    d = c // heads
    dt = torch.float16 if a.get("use_fp16") else torch.float32
    lin = lambda h, p: F.linear(h, sd[p + ".weight"].to(h.dtype), sd[p + ".bias"].to(h.dtype))
    b, cin, r = x.shape[0], x.shape[1], x.shape[2]
    h = x.reshape(b, cin, -1).permute(0, 2, 1)
    h = lin(h, "input_layer") + sd["pos_emb"][None]
    freqs = torch.exp(-math.log(10000) * torch.arange(128, device=x.device, dtype=torch.float32) / 128)
    args = t[:, None].float() * freqs[None]
    emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    e = lin(F.silu(lin(emb, "t_embedder.mlp.0")), "t_embedder.mlp.2").to(dt)
    h, ctx = h.to(dt), cond.to(dt)

    def rms(u, g):
        return (F.normalize(u.float(), dim=-1) * g * math.sqrt(d)).to(u.dtype)

    for i in range(a["num_blocks"]):
        p = f"blocks.{i}"
        m = lin(F.silu(e), p + ".adaLN_modulation.1").chunk(6, dim=1)
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = m
        y = F.layer_norm(h.float(), (c,), eps=1e-6).to(dt)
        y = y * (1 + scale_msa[:, None]) + shift_msa[:, None]
        qkv = lin(y, p + ".self_attn.to_qkv").view(b, -1, 3, heads, d)
        q, k, v = qkv.unbind(2)
        if a.get("qk_rms_norm"):
            q = rms(q, sd[p + ".self_attn.q_rms_norm.gamma"])
            k = rms(k, sd[p + ".self_attn.k_rms_norm.gamma"])
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(
            1, 2
        )
        h = h + gate_msa[:, None] * lin(o.reshape(b, -1, c), p + ".self_attn.to_out")
        y = F.layer_norm(h.float(), (c,), sd[p + ".norm2.weight"], sd[p + ".norm2.bias"], eps=1e-6).to(dt)
        q = lin(y, p + ".cross_attn.to_q").view(b, -1, heads, d)
        kv = lin(ctx, p + ".cross_attn.to_kv").view(b, -1, 2, heads, d)
        k, v = kv.unbind(2)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(
            1, 2
        )
        h = h + lin(o.reshape(b, -1, c), p + ".cross_attn.to_out")
        y = F.layer_norm(h.float(), (c,), eps=1e-6).to(dt)
        y = y * (1 + scale_mlp[:, None]) + shift_mlp[:, None]
        y = lin(F.gelu(lin(y, p + ".mlp.mlp.0"), approximate="tanh"), p + ".mlp.mlp.2")
        h = h + gate_mlp[:, None] * y
    h = F.layer_norm(h.float(), (c,), eps=1e-5)
    h = lin(h, "out_layer")
    return h.permute(0, 2, 1).reshape(b, -1, r, r, r)


def sample_ss(sd, a, params, cond, noise):
    steps, r = params["steps"], params["rescale_t"]
    w, (lo, hi) = params["cfg_strength"], params["cfg_interval"]
    ts = np.linspace(1, 0, steps + 1)
    ts = r * ts / (1 + (r - 1) * ts)
    x = noise
    neg = torch.zeros_like(cond)
    for i in range(steps):
        t, tp = ts[i], ts[i + 1]
        tau = torch.full((x.shape[0],), 1000 * t, device=x.device, dtype=torch.float32)
        v = ss_flow(sd, a, x, tau, cond)
        if lo <= t <= hi:
            v = (1 + w) * v - w * ss_flow(sd, a, x, tau, neg)
        x = x - (t - tp) * v
    return x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("--flow", action="store_true", help="also run the SS flow sampler")
    ap.add_argument("--samples", type=int, default=4)
    opt = ap.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    pipe = json.loads((opt.model_dir / "pipeline.json").read_text())["args"]

    def load(key):
        base = opt.model_dir / pipe["models"][key]
        args = json.loads(base.with_suffix(".json").read_text())["args"]
        sd = {k: v.to(dev) for k, v in load_file(str(base) + ".safetensors").items()}
        return sd, args

    dec_sd, dec_args = load("sparse_structure_decoder")
    flow_sd, flow_args = load("sparse_structure_flow_model")
    r, cin = flow_args["resolution"], flow_args["in_channels"]
    print(f"out_layer.2.bias = {dec_sd['out_layer.2.bias'].item():.6f}")
    g = torch.Generator(device="cpu").manual_seed(0)
    with torch.no_grad():
        for scale in (0.5, 1.0, 2.0):
            occ = []
            for _ in range(opt.samples):
                z = (torch.randn(1, cin, r, r, r, generator=g) * scale).to(dev)
                logits = ss_decoder(dec_sd, dec_args, z)
                occ.append((logits > 0).float().mean().item())
            n = logits.numel()
            print(
                f"random latents N(0, {scale}^2): occupancy "
                + ", ".join(f"{o * 100:.2f}%" for o in occ)
                + f" of {n} voxels (N ~ {int(np.mean(occ) * n)})"
            )
        if opt.flow:
            cond = torch.from_numpy(np.load(opt.model_dir / "cond.npy")).to(dev)
            params = pipe["sparse_structure_sampler"]["params"]
            for s in range(opt.samples):
                noise = torch.randn(1, cin, r, r, r, generator=g).to(dev)
                x = sample_ss(flow_sd, flow_args, params, cond, noise)
                logits = ss_decoder(dec_sd, dec_args, x)
                o = (logits > 0).float().mean().item()
                print(
                    f"stage 1 (25-step CFG sampling) sample {s}: latent std "
                    f"{x.std().item():.3f}, occupancy {o * 100:.2f}% "
                    f"(N = {int((logits > 0).sum().item())})"
                )


if __name__ == "__main__":
    main()
