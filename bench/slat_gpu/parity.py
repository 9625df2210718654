#!/usr/bin/env python3
"""Parity of trellisc's GPU structured-latent (SLat) stage against a PyTorch fp32 reference.

The reference is the functional PyTorch model of bench/pytorch/slat_stage.py (written from the spec, §6), here
with the weights of a model directory (safetensors, any preset: tiny or image-large) upcast to fp32, every
activation in fp32, TF32 off.

What it compares (all inputs are files trellis.exe wrote or read):
  * one SLat-flow forward: trellis.exe run with --coords C --slat-noise x0 --steps-slat 1 --cfg-slat 0
    (--stop-after slat). The 1-step grid is t̃ = linspace(1, 0, 2) = [1, 0], rescaled t = r·t̃/(1+(r−1)·t̃) =
    [1, 0] for any r, so the one step is t = 1 → t_prev = 0 with τ = float32(1000·1) = 1000; t = 1 lies in the
    guidance interval [0.5, 1] but w = 0 makes v̂ = (1+0)·v_cond − 0·v_uncond = v_cond. Hence
        x1 = x0 − (1 − 0)·v̂ = x0 − v(x0, τ=1000, cond),   i.e.   x0 − x1 = v(x0, τ=1000, cond)
    exactly (up to the fp32 rounding of the subtraction). trellis.exe's slat.npy is DE-normalized (§3.5:
    f·std + mean), so x1 = (slat − mean)/std with pipeline.json's slat_normalization (unless --normalized).
    v_gpu = x0 − x1; v_ref = model(x0, τ=1000, cond) in fp32. Relative L2 and max abs of v.
  * optionally a full run (--full-latent, the 25-step slat.npy from the same coords/noise/cond): against the
    fp32 reference sampler (pipeline.json slat_sampler params; neg cond = zeros). Informational: 44 fp16 forwards
    drift. Reported on the normalized latent and on the de-normalized one.
  * --also-fp16: the same PyTorch model in the spec-§11 fp16 precision map against the fp32 one (what an fp16
    implementation that matches TRELLIS's numerics would show), for scale.

Usage:
  parity.py --model DIR --coords coords.npy --cond cond.npy --noise x0.npy --latent1 slat.npy
            [--full-latent slat25.npy] [--normalized] [--also-fp16] [--json out.json]
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pytorch"))
import slat_stage as ref  # noqa: E402


def rel_l2(a, b):
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument(
        "--coords", required=True, help="int32 [N,4] the run used (its coords.npy or --coords input)"
    )
    ap.add_argument("--cond", required=True)
    ap.add_argument("--noise", required=True, help="the --slat-noise file [N,8] f32")
    ap.add_argument("--latent1", required=True, help="slat.npy of the --steps-slat 1 --cfg-slat 0 run")
    ap.add_argument("--full-latent", help="slat.npy of a default (25-step) run from the same inputs")
    ap.add_argument("--normalized", action="store_true", help="the latent files are NOT de-normalized")
    ap.add_argument("--also-fp16", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_grad_enabled(False)
    f32 = torch.float32

    sd, side, pipe = ref.load_model_dir(a.model)
    cond_np = np.load(a.cond).astype(np.float32)
    cfg = ref.cfg_from_state_dict(sd, side, cond_np.shape[1])
    W = ref.pack_weights(sd, cfg, dev, f32)
    coords_np = np.load(a.coords).astype(np.int32)
    x0_np = np.load(a.noise).astype(np.float32)
    assert x0_np.shape == (coords_np.shape[0], cfg.cin), (x0_np.shape, coords_np.shape)
    norm = pipe.get("slat_normalization", {})
    mean = np.asarray(norm.get("mean", [0.0] * cfg.cin), np.float64)
    std = np.asarray(norm.get("std", [1.0] * cfg.cin), np.float64)

    def to_norm(lat):
        lat = np.asarray(lat, np.float64)
        return lat if a.normalized else (lat - mean) / std

    coords = torch.from_numpy(coords_np).to(dev)
    cond = torch.from_numpy(cond_np).to(dev, f32)
    x0 = torch.from_numpy(x0_np).to(dev, f32)
    G = ref.Geometry(coords, cfg.R, cfg.C)
    out = {
        "device": torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu",
        "cfg": repr(cfg),
        "N": G.N,
        "N_coarse": G.Nc,
    }
    tau = torch.full((1,), 1000.0, device=dev)
    v_ref = ref.flow_forward(W, G, x0[None], tau, cond, f32)[0].cpu().numpy().astype(np.float64)
    x1 = to_norm(np.load(a.latent1))
    v_gpu = x0_np.astype(np.float64) - x1
    out["forward_rel_l2"] = rel_l2(v_gpu, v_ref)
    out["forward_max_abs"] = float(np.abs(v_gpu - v_ref).max())
    out["forward_ref_rms"] = float(np.sqrt((v_ref**2).mean()))
    if a.also_fp16:
        W16 = ref.pack_weights(sd, cfg, dev, torch.float16)
        v16 = ref.flow_forward(W16, G, x0[None], tau, cond, torch.float16)[0].cpu().numpy()
        out["torch_fp16_forward_rel_l2"] = rel_l2(v16, v_ref)
    if a.full_latent:
        p = pipe.get("slat_sampler", {}).get("params", {})
        sp = dict(
            steps=p.get("steps", 25),
            rescale_t=p.get("rescale_t", 3.0),
            cfg_w=p.get("cfg_strength", 5.0),
            interval=tuple(p.get("cfg_interval", [0.5, 1.0])),
        )
        out["sampler"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in sp.items()}
        fwd = lambda W_, G_, x, t, c, h: ref.flow_forward(W_, G_, x, t, c, h)  # noqa: E731
        xs, nfwd = ref.slat_stage(W, coords, cond, x0, f32, fwd, cfg.R, cfg.C, G=G, **sp)
        xs = xs.cpu().numpy().astype(np.float64)
        full = np.load(a.full_latent)
        out["full_forwards"] = nfwd
        out["full_latent_rel_l2"] = rel_l2(to_norm(full), xs)
        out["full_latent_max_abs"] = float(np.abs(to_norm(full) - xs).max())
        ref_dn = xs if a.normalized else xs * std + mean
        out["full_slat_denorm_rel_l2"] = rel_l2(np.asarray(full, np.float64), ref_dn)
        if a.also_fp16:
            x16, _ = ref.slat_stage(W16, coords, cond, x0, torch.float16, fwd, cfg.R, cfg.C, G=G, **sp)
            out["torch_fp16_full_latent_rel_l2"] = rel_l2(x16.cpu().numpy(), xs)
    for k, v in out.items():
        print(f"{k:32s} {v}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
