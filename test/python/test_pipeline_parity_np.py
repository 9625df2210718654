"""Parity of the compiled sparse-structure stage with an independent NumPy
implementation of spec §4/§5 (test/golden/{trellis_np,blocks_np}.py), on the
tiny synthetic model: one Euler step with CFG off gives the SS flow velocity
v = noise - latent (t0 = 1, t1 = 0), compared by relative L2; the occupancy
after the SS decoder is compared as a set (TRELLIS's own fp16 noise makes the
threshold flip a voxel now and then, so the bar is IoU >= 0.99)."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "test" / "golden"))
import blocks_np  # noqa: E402
from trellis_np import (
    UNARY,
    conv3d,
    layer_norm,
    linear,
    occupancy,  # noqa: E402
    pixel_shuffle_3d,
    q16,
    timestep_embedding,
)

BUILD = Path(os.environ.get("TRELLIS_BUILD_DIR", ROOT / "build"))
BIN = BUILD / "bin"
silu = UNARY["silu"]


def read_safetensors(path):
    """A minimal reader (independent of our C++ one)."""
    data = Path(path).read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        dt = {"F16": np.float16, "F32": np.float32}[e["dtype"]]
        a, b = e["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + a : 8 + n + b], dtype=dt).reshape(e["shape"])
    return out


def cross_block_params(w, i):
    """blocks.{i} of a flow model as blocks_np.modulated_cross_block takes them."""
    p = lambda k: w[f"blocks.{i}.{k}"]  # noqa: E731
    return {
        "ada_w": p("adaLN_modulation.1.weight"),
        "ada_b": p("adaLN_modulation.1.bias"),
        "qkv_w": p("self_attn.to_qkv.weight"),
        "qkv_b": p("self_attn.to_qkv.bias"),
        "q_gamma": p("self_attn.q_rms_norm.gamma"),
        "k_gamma": p("self_attn.k_rms_norm.gamma"),
        "out_w": p("self_attn.to_out.weight"),
        "out_b": p("self_attn.to_out.bias"),
        "norm2_w": p("norm2.weight"),
        "norm2_b": p("norm2.bias"),
        "cq_w": p("cross_attn.to_q.weight"),
        "cq_b": p("cross_attn.to_q.bias"),
        "ckv_w": p("cross_attn.to_kv.weight"),
        "ckv_b": p("cross_attn.to_kv.bias"),
        "cout_w": p("cross_attn.to_out.weight"),
        "cout_b": p("cross_attn.to_out.bias"),
        "mlp0_w": p("mlp.mlp.0.weight"),
        "mlp0_b": p("mlp.mlp.0.bias"),
        "mlp2_w": p("mlp.mlp.2.weight"),
        "mlp2_b": p("mlp.mlp.2.bias"),
    }


def ss_flow(w, args, x, tau, cond):
    """SparseStructureFlowModel forward (spec §4.1), patch size 1."""
    B, C8, R = x.shape[0], x.shape[1], x.shape[2]
    h = x.reshape(B, C8, R**3).transpose(0, 2, 1)
    h = linear(h, w["input_layer.weight"], w["input_layer.bias"])
    h = h + w["pos_emb"]
    e = timestep_embedding(tau)
    e = linear(
        silu(linear(e, w["t_embedder.mlp.0.weight"], w["t_embedder.mlp.0.bias"])),
        w["t_embedder.mlp.2.weight"],
        w["t_embedder.mlp.2.bias"],
    )
    h, e, ctx = q16(h), q16(e), q16(cond)
    for i in range(args["num_blocks"]):
        params = cross_block_params(w, i)
        h = blocks_np.modulated_cross_block(h, e, ctx, params, args["num_heads"])
    h = layer_norm(h.astype(np.float32), -1, 1e-5)
    h = linear(h, w["out_layer.weight"], w["out_layer.bias"])
    return h.transpose(0, 2, 1).reshape(x.shape)


def ss_decoder(w, args, z):
    """SparseStructureDecoder (spec §5.1), ChannelLN, middle blocks first."""

    def res(h, pre):
        y = q16(silu(layer_norm(h, 1, 1e-5, w[pre + "norm1.weight"], w[pre + "norm1.bias"])))
        y = q16(conv3d(y, w[pre + "conv1.weight"], w[pre + "conv1.bias"]))
        y = q16(silu(layer_norm(y, 1, 1e-5, w[pre + "norm2.weight"], w[pre + "norm2.bias"])))
        y = q16(conv3d(y, w[pre + "conv2.weight"], w[pre + "conv2.bias"]))
        return q16(y + h)

    h = q16(conv3d(z, w["input_layer.weight"], w["input_layer.bias"]))
    for i in range(args["num_res_blocks_middle"]):
        h = res(h, f"middle_block.{i}.")
    k = 0
    chs = args["channels"]
    for s in range(len(chs)):
        for _ in range(args["num_res_blocks"]):
            h = res(h, f"blocks.{k}.")
            k += 1
        if s + 1 < len(chs):
            h = q16(
                pixel_shuffle_3d(q16(conv3d(h, w[f"blocks.{k}.conv.weight"], w[f"blocks.{k}.conv.bias"])))
            )
            k += 1
    h = h.astype(np.float32)
    h = silu(layer_norm(h, 1, 1e-5, w["out_layer.0.weight"], w["out_layer.0.bias"]))
    return conv3d(h, w["out_layer.2.weight"], w["out_layer.2.bias"])


def test_ss_stage_matches_numpy(tmp_path):
    model = tmp_path / "model"
    r = subprocess.run(
        [BIN / "trellis-mkmodel", "--preset", "tiny", "--seed", "3", "--out", model, "--quiet"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    exe = tmp_path / "t.exe"
    r = subprocess.run(
        [BIN / "trellisc", model / "pipeline.json", "--target=cpu", "--cond-tokens", "21", "-o", exe],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    noise = np.random.default_rng(5).standard_normal((1, 8, 8, 8, 8)).astype(np.float32)
    np.save(tmp_path / "noise.npy", noise)
    out = tmp_path / "out"
    r = subprocess.run(
        [
            exe,
            "--model",
            model,
            "--cond",
            model / "cond.npy",
            "--out",
            out,
            "--ss-noise",
            tmp_path / "noise.npy",
            "--steps-ss",
            "1",
            "--cfg-ss",
            "0",
            "--steps-slat",
            "1",
            "--formats",
            "gs",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    latent = np.load(out / "ss_latent.npy")
    v_ours = noise.astype(np.float64) - latent  # x1 = x0 - (1 - 0)·v

    flow_args = json.loads((model / "ckpts/ss_flow_tiny.json").read_text())["args"]
    w = read_safetensors(model / "ckpts/ss_flow_tiny.safetensors")
    cond = np.load(model / "cond.npy")
    v_np = ss_flow(w, flow_args, noise, np.array([1000.0]), cond)
    rel = np.linalg.norm(v_ours - v_np) / np.linalg.norm(v_np)
    assert rel < 1e-2, rel
    print("SS flow velocity rel L2 vs NumPy:", rel)

    dec_args = json.loads((model / "ckpts/ss_dec_tiny.json").read_text())["args"]
    wd = read_safetensors(model / "ckpts/ss_dec_tiny.safetensors")
    logits = ss_decoder(wd, dec_args, latent.astype(np.float64))
    ref = {tuple(c) for c in occupancy(logits)}
    ours = {tuple(c) for c in np.load(out / "coords.npy")}
    iou = len(ref & ours) / max(1, len(ref | ours))
    assert len(ours) > 0 and iou >= 0.99, (iou, len(ours), len(ref))


def slat_res_block(w, pre, coords, x, e, res, mode, fine=None):
    """SparseResBlock3d (spec §6.2): mode None | "down" | "up" (fine = (coords,
    idx, res) of the level before the matching downsample)."""
    from trellis_np import batch_broadcast, coarsen, downsample, modulate, sparse_conv3d, upsample

    cout = w[pre + "conv1.conv.bias"].shape[0]
    emb = q16(linear(q16(silu(e)), w[pre + "emb_layers.1.weight"], w[pre + "emb_layers.1.bias"]))
    scale, shift = emb[:, :cout], emb[:, cout:]  # scale first
    idx = None
    if mode == "down":
        coarse, idx = coarsen(coords)
        x = q16(downsample(x, idx, coarse.shape[0]))
        coords, res = coarse, res // 2
    elif mode == "up":
        fcoords, fidx, fres = fine
        x = q16(upsample(x, fidx))
        coords, res = fcoords, fres
    h = q16(silu(layer_norm(x, -1, 1e-6, w[pre + "norm1.weight"], w[pre + "norm1.bias"])))
    h = q16(sparse_conv3d(coords, h, w[pre + "conv1.conv.weight"], w[pre + "conv1.conv.bias"], 1, res))
    h = q16(layer_norm(h, -1, 1e-6))
    h = q16(modulate(h, batch_broadcast(shift, coords), batch_broadcast(scale, coords)))
    h = q16(silu(h))
    h = q16(sparse_conv3d(coords, h, w[pre + "conv2.conv.weight"], w[pre + "conv2.conv.bias"], 1, res))
    skip = x
    if pre + "skip_connection.weight" in w:
        skip = q16(linear(x, w[pre + "skip_connection.weight"], w[pre + "skip_connection.bias"]))
    return coords, q16(h + skip), res, idx


def slat_flow(w, args, coords, x, tau, cond):
    """SLatFlowModel (spec §6.1) for one sample, io_block_channels of length 1."""
    from trellis_np import ape

    res = args["resolution"]
    h = q16(linear(x, w["input_layer.weight"], w["input_layer.bias"]))
    e = timestep_embedding(tau)
    e = q16(
        linear(
            silu(linear(e, w["t_embedder.mlp.0.weight"], w["t_embedder.mlp.0.bias"])),
            w["t_embedder.mlp.2.weight"],
            w["t_embedder.mlp.2.bias"],
        )
    )
    ctx = q16(cond)
    n_io = args["num_io_res_blocks"]
    skips, c, r = [], coords, res
    for j in range(n_io - 1):
        c, h, r, _ = slat_res_block(w, f"input_blocks.{j}.", c, h, e, r, None)
        skips.append(h)
    fine = (c, None, r)
    c, h, r, idx = slat_res_block(w, f"input_blocks.{n_io - 1}.", c, h, e, r, "down")
    fine = (fine[0], idx, fine[2])
    skips.append(h)
    h = q16(h + q16(ape(c[:, 1:], h.shape[1])))
    for i in range(args["num_blocks"]):
        params = cross_block_params(w, i)
        # One sample: full attention over its rows = a dense block with L = N'.
        h = blocks_np.modulated_cross_block(h[None], e, ctx, params, args["num_heads"])[0]
    for j in range(n_io):
        h = np.concatenate([h, skips.pop()], axis=1)
        c, h, r, _ = slat_res_block(w, f"out_blocks.{j}.", c, h, e, r, "up" if j == 0 else None, fine)
    h = q16(layer_norm(h, -1, 1e-5)).astype(np.float32)
    return linear(h, w["out_layer.weight"], w["out_layer.bias"])


def test_slat_stage_matches_numpy(tmp_path):
    model = tmp_path / "model"
    r = subprocess.run(
        [BIN / "trellis-mkmodel", "--preset", "tiny", "--seed", "3", "--out", model, "--quiet"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    exe = tmp_path / "t.exe"
    r = subprocess.run(
        [BIN / "trellisc", model / "pipeline.json", "--target=cpu", "--cond-tokens", "21", "-o", exe],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    rng = np.random.default_rng(9)
    # A blob of voxels at 32³ (one sample), in argwhere order.
    grid = np.argwhere(rng.random((32, 32, 32)) < 0.03)
    coords = np.ascontiguousarray(
        np.concatenate([np.zeros((len(grid), 1), np.int64), grid], 1).astype(np.int32)
    )
    noise = rng.standard_normal((len(coords), 8)).astype(np.float32)
    np.save(tmp_path / "coords.npy", coords)
    np.save(tmp_path / "noise.npy", noise)
    out = tmp_path / "out"
    r = subprocess.run(
        [
            exe,
            "--model",
            model,
            "--cond",
            model / "cond.npy",
            "--out",
            out,
            "--coords",
            tmp_path / "coords.npy",
            "--slat-noise",
            tmp_path / "noise.npy",
            "--steps-slat",
            "1",
            "--cfg-slat",
            "0",
            "--formats",
            "gs",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    pipeline = json.loads((model / "pipeline.json").read_text())["args"]
    mean = np.array(pipeline["slat_normalization"]["mean"])
    std = np.array(pipeline["slat_normalization"]["std"])
    slat = np.load(out / "slat.npy").astype(np.float64)
    v_ours = noise - (slat - mean) / std  # one step from t=1 to 0, then de-normalized

    args = json.loads((model / "ckpts/slat_flow_tiny.json").read_text())["args"]
    w = read_safetensors(model / "ckpts/slat_flow_tiny.safetensors")
    v_np = slat_flow(w, args, coords, noise, np.array([1000.0]), np.load(model / "cond.npy"))
    rel = np.linalg.norm(v_ours - v_np) / np.linalg.norm(v_np)
    print("SLat flow velocity rel L2 vs NumPy:", rel, "N =", len(coords))
    assert rel < 1e-2, rel

    # The Gaussian decoder on the same coordinates and latent (spec §7.1, §7.2).
    dargs = json.loads((model / "ckpts/slat_dec_gs_tiny.json").read_text())["args"]
    wd = read_safetensors(model / "ckpts/slat_dec_gs_tiny.safetensors")
    xyz_np, fdc_np = gs_decoder(wd, dargs, coords, slat)
    g = np.load(out / "gaussians.npz")
    for name, ours, ref in [
        ("_xyz", g["_xyz"], xyz_np),
        ("_features_dc", g["_features_dc"].reshape(-1, 3), fdc_np),
    ]:
        rel = np.linalg.norm(ours - ref) / np.linalg.norm(ref)
        print(f"GS decoder {name} rel L2 vs NumPy:", rel)
        assert rel < 1e-2, (name, rel)


def gs_decoder(w, args, coords, feats):
    """SLatGaussianDecoder (spec §7.1-7.2): APE, Swin blocks (shift 0 / 4 on
    even / odd blocks), final LN, out_layer; returns stored _xyz and f_dc."""
    from trellis_np import ape, window_partition

    C, res, G = args["model_channels"], args["resolution"], 32
    h = linear(feats, w["input_layer.weight"], w["input_layer.bias"])
    h = q16(h + ape(coords[:, 1:], C))
    win = args["window_size"]
    for i in range(args["num_blocks"]):
        _, groups = window_partition(coords, win, (i % 2) * win // 2)
        p = lambda k: w[f"blocks.{i}.{k}"]  # noqa: E731
        params = {
            "qkv_w": p("attn.to_qkv.weight"),
            "qkv_b": p("attn.to_qkv.bias"),
            "out_w": p("attn.to_out.weight"),
            "out_b": p("attn.to_out.bias"),
            "mlp0_w": p("mlp.mlp.0.weight"),
            "mlp0_b": p("mlp.mlp.0.bias"),
            "mlp2_w": p("mlp.mlp.2.weight"),
            "mlp2_b": p("mlp.mlp.2.bias"),
        }
        h = blocks_np.sparse_transformer_block(h, groups, params, args["num_heads"])
    h = layer_norm(h.astype(np.float32), -1, 1e-5)
    raw = linear(h, w["out_layer.weight"], w["out_layer.bias"])
    n = raw.shape[0]
    centre = (coords[:, 1:].astype(np.float64) + 0.5) / res
    off = raw[:, : 3 * G].reshape(n, G, 3) + w["offset_perturbation"].astype(np.float64)[None]
    xyz = (centre[:, None, :] + np.tanh(off) * (0.5 * 1.5 / res)).reshape(-1, 3)
    return xyz, raw[:, 3 * G : 6 * G].reshape(-1, 3)
