#!/usr/bin/env python3
"""Parity of trellisc's GPU sparse-structure stage against a PyTorch fp32 reference (issue 5).

The reference is the functional PyTorch model of bench/pytorch/ss_stage.py (written from the spec),
here with the weights of a model directory (safetensors, any preset: tiny or image-large) upcast to
fp32, and every activation in fp32.

What it compares (all inputs are files trellis.exe wrote or read):
  * one SS-flow forward: trellis.exe run with --steps-ss 1 --cfg-ss 0 from --ss-noise x0 gives
    x1 = x0 - 1·v (the one-step grid is t = 1 -> 0), so v_gpu = x0 - x1; v_ref = model(x0, τ=1000,
    cond) in fp32. Relative L2 of v.
  * the SS decoder: the fp32 reference decoder applied to trellis' latent; occupancy (logit > 0)
    agreement with trellis' coords over all voxels of the grid.
  * optionally a full run (--full-latent/--full-coords): the 25-step latent against the fp32
    reference sampler from the same noise (informational: 44 fp16 forwards drift), and its occupancy.

Usage:
  parity.py --model DIR --cond cond.npy --noise x0.npy --latent1 ss_latent.npy --coords1 coords.npy
            [--full-latent L --full-coords C] [--json out.json]
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "pytorch"))
import ss_stage as ref  # noqa: E402


def rel_l2(a, b):
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def occupancy_agreement(logits_ref, coords):
    """Fraction of grid voxels where (ref logit > 0) == (voxel in coords); and the IoU."""
    occ_ref = (logits_ref[:, 0] > 0).cpu().numpy()
    occ = np.zeros_like(occ_ref)
    c = np.asarray(coords)
    if c.size:
        occ[c[:, 0], c[:, 1], c[:, 2], c[:, 3]] = True
    agree = float((occ == occ_ref).mean())
    inter = float((occ & occ_ref).sum())
    union = float((occ | occ_ref).sum())
    return agree, inter / max(union, 1.0), int(occ.sum()), int(occ_ref.sum())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--cond", required=True)
    ap.add_argument("--noise", required=True)
    ap.add_argument("--latent1", required=True, help="trellis.exe ss_latent.npy of the 1-step, cfg 0 run")
    ap.add_argument("--coords1", required=True, help="trellis.exe coords.npy of that run")
    ap.add_argument("--full-latent")
    ap.add_argument("--full-coords")
    ap.add_argument("--json")
    a = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    W, D, _ = ref.load_model_dir(a.model, dev, torch.float32)
    f32 = torch.float32
    cond = torch.from_numpy(np.load(a.cond)).to(dev, f32)
    x0 = torch.from_numpy(np.load(a.noise)).to(dev, f32)
    x1 = np.load(a.latent1)
    out = {"device": torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu"}
    with torch.no_grad():
        tau = torch.full((x0.shape[0],), 1000.0, device=dev)
        v_ref = ref.flow_forward(W, x0, tau, cond, f32, ref.block_fn).cpu().numpy()
        v_gpu = np.load(a.noise).astype(np.float64) - x1.astype(np.float64)
        out["forward_rel_l2"] = rel_l2(v_gpu, v_ref)
        out["forward_max_abs"] = float(np.abs(v_gpu - v_ref).max())
        logits = ref.decoder_forward(D, torch.from_numpy(x1).to(dev, f32), f32)
        agree, iou, n_gpu, n_ref = occupancy_agreement(logits, np.load(a.coords1))
        out.update(decoder_occupancy_agreement=agree, decoder_iou=iou, voxels_gpu=n_gpu, voxels_ref=n_ref)
        if a.full_latent:
            # The fp32 reference sampler (spec §3.2-3.3) from the same noise, zero neg_cond.
            sp = json.load(open(os.path.join(a.model, "pipeline.json")))["args"]["sparse_structure_sampler"][
                "params"
            ]
            steps, w = sp.get("steps", 25), sp.get("cfg_strength", 7.5)
            lo, hi = sp.get("cfg_interval", [0.5, 1.0])
            neg = torch.zeros_like(cond)
            xs = x0.clone()
            ts = ref.time_grid(steps, sp.get("rescale_t", 3.0))
            for i in range(steps):
                t, tp = ts[i], ts[i + 1]
                taui = torch.full((x0.shape[0],), float(np.float32(1000.0 * t)), device=dev)
                v = ref.flow_forward(W, xs, taui, cond, f32, ref.block_fn)
                if lo <= t <= hi:
                    vu = ref.flow_forward(W, xs, taui, neg, f32, ref.block_fn)
                    v = (1 + w) * v - w * vu
                xs = xs - (t - tp) * v
            out["full_latent_rel_l2"] = rel_l2(np.load(a.full_latent), xs.cpu().numpy())
            logits_full = ref.decoder_forward(D, xs, f32)
            agree, iou, n_gpu, n_ref = occupancy_agreement(logits_full, np.load(a.full_coords))
            out.update(
                full_occupancy_agreement=agree, full_iou=iou, full_voxels_gpu=n_gpu, full_voxels_ref=n_ref
            )
    for k, v in out.items():
        print(f"{k:32s} {v}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
