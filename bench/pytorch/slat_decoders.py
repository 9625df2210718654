#!/usr/bin/env python3
"""PyTorch baseline for the TRELLIS SLat decoder trunk (Swin-window sparse transformer) + GS / RF / mesh heads.

Written from /work/shared/spec/TRELLIS-v1-inference.md §7.1-7.4, §6.4, §11 (not from TRELLIS code):
  * trunk: input_layer Linear(8→C) fp32 + APE(coords 0..63) fp32 → fp16 → 12 × SparseTransformerBlock
    (x += WindowAttn(LN32(x)); x += FFN(LN32(x)); no modulation, no RMS norm, LN without affine, eps 1e-6).
  * windows for block i: shift s = 4·(i mod 2) added to x, y, z (no wrap), W_a = ⌊c'_a/8⌋,
    n_a = ⌈(max c'_a + 1)/8⌉ over all rows, id = b·nx·ny·nz + Wx·ny·nz + Wy·nz + Wz; each non-empty window is one
    attention sequence (1..512 tokens). Here: windows padded to the largest occupancy, keys masked (SDPA), the
    partition built once per shift and reused by every even / odd block.
  * heads: cast fp32 → LN (no affine, eps 1e-5) → out_layer Linear(C→448) fp32; GS raw → Gaussians (§7.2),
    RF raw → trivec+1 / density / features_dc (§7.3).
  * mesh (§7.4): trunk (no final LN) → 2 × SparseSubdivideBlock3d (GN32 → SiLU → subdivide → SubMConv 3³ →
    GN32 → SiLU → SubMConv 3³, + kernel-1 skip on the subdivided input with spconv's reinterpreted weight
    M = flat buffer as [Cin, Cout], §6.4) → fp32 out_layer Linear(→101), no final norm. Sparse GroupNorm: per
    sample, 32 groups, fp32 statistics, affine, cast back. Subdivision: every voxel → its 8 children
    (b, 2x+δx, 2y+δy, 2z+δz), parent-major, δz fastest (trellisc's sparse.subdivide order). Convs: gather + one
    GEMM per row chunk (bench/pytorch/slat_stage.py's subm_conv / neighbour_map, built per coordinate set).
    Output: coords int32 [64N,4] and fields fp32 [64N,101] at 4× the SLat resolution.

One block function serves all 12 blocks (torch.compile: one graph per shift partition shape); one subdivide-block
function serves both upsample blocks (torch.compile: one graph per block shape).

Usage:
  slat_decoders.py [--model DIR | --preset large|tiny] [--coords C.npy | --synthetic-voxels N] [--slat F.npy]
                   [--mode eager|compile|both] [--heads gs,rf,mesh] [--json F] [--selftest]
                   [--compare-dir D --precision fp32]   (D: gs_*.npy, rf_*.npy, mesh_coords.npy, mesh_fields.npy)
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ss_stage import cuda_time, gemm_peak  # noqa: E402
from slat_stage import ape, synthetic_coords, ln32, neighbour_map, subm_conv  # noqa: E402

PRESETS = {
    "large": dict(
        resolution=64,
        model_channels=768,
        num_blocks=12,
        num_heads=12,
        mlp_ratio=4,
        window_size=8,
        mesh_channels=[192, 96],
    ),
    "tiny": dict(
        resolution=32,
        model_channels=128,
        num_blocks=2,
        num_heads=2,
        mlp_ratio=2,
        window_size=8,
        mesh_channels=[64, 32],
    ),
}
HEAD_KEYS = {"gs": "slat_decoder_gs", "rf": "slat_decoder_rf", "mesh": "slat_decoder_mesh"}
SLAT_MEAN = [
    -2.1687545776367188,
    -0.004347046371549368,
    -0.13352349400520325,
    -0.08418072760105133,
    -0.5271206498146057,
    0.7238689064979553,
    -1.1414450407028198,
    1.2039363384246826,
]
SLAT_STD = [
    2.377650737762451,
    2.386378288269043,
    2.124418020248413,
    2.1748552322387695,
    2.663944721221924,
    2.371192216873169,
    2.6217446327209473,
    2.684523105621338,
]


class Cfg:
    def __init__(self, a):
        self.R = int(a.get("resolution", 64))
        self.C = int(a["model_channels"])
        self.nblocks = int(a["num_blocks"])
        self.H = int(a["num_heads"])
        self.mlp = int(self.C * a.get("mlp_ratio", 4))
        self.win = int(a.get("window_size", 8))
        self.d = self.C // self.H
        self.voxel_size = float(a.get("representation_config", {}).get("voxel_size", 1.5))
        self.up = list(a.get("mesh_channels", [self.C // 4, self.C // 8]))  # mesh: upsample.{0,1} c_out

    def __repr__(self):
        return f"R={self.R} C={self.C} blocks={self.nblocks} H={self.H} mlp={self.mlp} window={self.win}"


# ----------------------------------------------------------------------------- weights
def radical_inverse(i, base):
    r, f = 0.0, 1.0 / base
    while i > 0:
        r += f * (i % base)
        i //= base
        f /= base
    return r


def offset_perturbation(G=32, voxel_size=1.5):
    """§7.2: P[g] = atanh((2·h_g − 1)/voxel_size), h_g = (g/G, φ2(g), φ3(g)) (Hammersley)."""
    h = torch.tensor(
        [[g / G, radical_inverse(g, 2), radical_inverse(g, 3)] for g in range(G)], dtype=torch.float64
    )
    return torch.atanh((2 * h - 1) / voxel_size).float()


def random_state_dict(cfg, seed, out_ch=448):
    g = torch.Generator().manual_seed(seed)
    C, M = cfg.C, cfg.mlp

    def r(shape, fan_in, dt):
        return (torch.randn(shape, generator=g) / math.sqrt(fan_in)).to(dt)

    f16, f32 = torch.float16, torch.float32
    sd = {
        "input_layer.weight": r((C, 8), 8, f32),
        "input_layer.bias": r((C,), C, f32),
        "out_layer.weight": r((out_ch, C), C, f32),
        "out_layer.bias": torch.zeros(out_ch),
        "offset_perturbation": offset_perturbation(32, cfg.voxel_size),
    }
    for i in range(cfg.nblocks):
        p = f"blocks.{i}."
        sd[p + "attn.to_qkv.weight"], sd[p + "attn.to_qkv.bias"] = r((3 * C, C), C, f16), r((3 * C,), C, f16)
        sd[p + "attn.to_out.weight"], sd[p + "attn.to_out.bias"] = r((C, C), C, f16), r((C,), C, f16)
        sd[p + "mlp.mlp.0.weight"], sd[p + "mlp.mlp.0.bias"] = r((M, C), C, f16), r((M,), C, f16)
        sd[p + "mlp.mlp.2.weight"], sd[p + "mlp.mlp.2.bias"] = r((C, M), M, f16), r((C,), M, f16)
    return sd


def random_mesh_state_dict(cfg, seed):
    """Trunk as the GS/RF decoders (no offset_perturbation) + upsample.{0,1} + out_layer [101, up[1]] (§7.4)."""
    sd = random_state_dict(cfg, seed, out_ch=101)
    del sd["offset_perturbation"]
    g = torch.Generator().manual_seed(seed + 1000)
    f16, f32 = torch.float16, torch.float32

    def r(shape, fan_in, dt, gain=1.0):
        return (torch.randn(shape, generator=g) * (gain / math.sqrt(fan_in))).to(dt)

    ci = cfg.C
    for j, co in enumerate(cfg.up):
        p = f"upsample.{j}."
        sd[p + "act_layers.0.weight"] = 1 + 0.02 * torch.randn(ci, generator=g)
        sd[p + "act_layers.0.bias"] = 0.02 * torch.randn(ci, generator=g)
        sd[p + "out_layers.0.conv.weight"] = r((co, 3, 3, 3, ci), 27 * ci, f16)
        sd[p + "out_layers.0.conv.bias"] = r((co,), 27 * ci, f16)
        sd[p + "out_layers.1.weight"] = 1 + 0.02 * torch.randn(co, generator=g)
        sd[p + "out_layers.1.bias"] = 0.02 * torch.randn(co, generator=g)
        sd[p + "out_layers.3.conv.weight"] = r((co, 3, 3, 3, co), 27 * co, f16, 0.5)
        sd[p + "out_layers.3.conv.bias"] = r((co,), 27 * co, f16)
        sd[p + "skip_connection.conv.weight"] = r((co, 1, 1, 1, ci), ci, f16)
        sd[p + "skip_connection.conv.bias"] = r((co,), ci, f16)
        ci = co
    sd["out_layer.weight"] = r((101, ci), ci, f32)
    return sd


def load_decoder(model_dir, key):
    from safetensors.torch import load_file

    with open(os.path.join(model_dir, "pipeline.json")) as f:
        pipe = json.load(f)["args"]
    base = os.path.join(model_dir, pipe["models"][key])
    sd = load_file(base + ".safetensors")
    side = {}
    if os.path.exists(base + ".json"):
        with open(base + ".json") as f:
            side = json.load(f).get("args", {})
    C = sd["input_layer.weight"].shape[0]
    side["model_channels"] = C
    side["num_blocks"] = 1 + max(int(k.split(".")[1]) for k in sd if k.startswith("blocks."))
    side["mlp_ratio"] = sd["blocks.0.mlp.mlp.0.weight"].shape[0] / C
    side.setdefault("num_heads", C // 64)
    if "upsample.0.out_layers.0.conv.weight" in sd:  # mesh: channels from the weights
        side["mesh_channels"] = [
            sd[f"upsample.{j}.out_layers.0.conv.weight"].shape[0]
            for j in range(1 + max(int(k.split(".")[1]) for k in sd if k.startswith("upsample.")))
        ]
    return sd, Cfg(side), pipe


def pack(sd, cfg, dev, hdt):
    f32 = torch.float32
    W = {
        "inw": sd["input_layer.weight"].to(dev, f32),
        "inb": sd["input_layer.bias"].to(dev, f32),
        "outw": sd["out_layer.weight"].to(dev, f32),
        "outb": sd["out_layer.bias"].to(dev, f32),
    }
    if "offset_perturbation" in sd:
        W["P"] = sd["offset_perturbation"].to(dev, f32)
    names = [
        "attn.to_qkv.weight",
        "attn.to_qkv.bias",
        "attn.to_out.weight",
        "attn.to_out.bias",
        "mlp.mlp.0.weight",
        "mlp.mlp.0.bias",
        "mlp.mlp.2.weight",
        "mlp.mlp.2.bias",
    ]
    W["blocks"] = [tuple(sd[f"blocks.{i}.{n}"].to(dev, hdt) for n in names) for i in range(cfg.nblocks)]
    if "upsample.0.out_layers.0.conv.weight" in sd:
        up, ci = [], cfg.C
        for j, co in enumerate(cfg.up):
            p = f"upsample.{j}."
            w1, w2 = sd[p + "out_layers.0.conv.weight"], sd[p + "out_layers.3.conv.weight"]
            ws = sd[p + "skip_connection.conv.weight"]
            assert tuple(w1.shape) == (co, 3, 3, 3, ci) and tuple(w2.shape) == (co, 3, 3, 3, co), (
                p,
                w1.shape,
            )
            assert tuple(ws.shape) == (co, 1, 1, 1, ci), (p, ws.shape)
            # §6.4 quirk: the kernel-1 conv computes x · M + b, M = the flat [co,1,1,1,ci] buffer viewed as [ci, co];
            # stored transposed ([co, ci]) for F.linear.
            M = ws.contiguous().reshape(ci, co)
            up.append(
                (
                    sd[p + "act_layers.0.weight"].to(dev, f32),
                    sd[p + "act_layers.0.bias"].to(dev, f32),
                    w1.reshape(co, 27 * ci).to(dev, hdt).contiguous(),
                    sd[p + "out_layers.0.conv.bias"].to(dev, hdt),
                    sd[p + "out_layers.1.weight"].to(dev, f32),
                    sd[p + "out_layers.1.bias"].to(dev, f32),
                    w2.reshape(co, 27 * co).to(dev, hdt).contiguous(),
                    sd[p + "out_layers.3.conv.bias"].to(dev, hdt),
                    M.t().contiguous().to(dev, hdt),
                    sd[p + "skip_connection.conv.bias"].to(dev, hdt),
                )
            )
            ci = co
        W["up"] = up
    return W


# ----------------------------------------------------------------------------- windows
class Windows:
    """Partition of the rows into shifted windows (§7.1): dst[r] = slot of row r in the padded
    [nW, Lmax] layout, mask [nW, 1, 1, Lmax] (valid keys), sizes of the windows."""

    def __init__(self, coords, win, shift):
        c = coords.long()
        cs = c[:, 1:] + shift
        n = (cs.max(0).values + 1 + win - 1) // win  # ⌈(max c' + 1)/win⌉ per axis, all rows
        w = cs // win
        wid = ((c[:, 0] * n[0] + w[:, 0]) * n[1] + w[:, 1]) * n[2] + w[:, 2]
        _, inv, cnt = torch.unique(wid, sorted=True, return_inverse=True, return_counts=True)
        self.nW = int(cnt.shape[0])
        self.Lmax = int(cnt.max().item())
        order = torch.argsort(inv, stable=True)
        start = torch.cumsum(cnt, 0) - cnt
        pos = torch.empty_like(inv)
        pos[order] = torch.arange(inv.shape[0], device=inv.device) - start[inv[order]]
        self.dst = inv * self.Lmax + pos
        self.mask = (torch.arange(self.Lmax, device=inv.device)[None] < cnt[:, None]).view(
            self.nW, 1, 1, self.Lmax
        )
        self.sizes = cnt


def block_fn(x, dst, mask, qkvw, qkvb, ow, ob, m0w, m0b, m2w, m2b):
    """SparseTransformerBlock with windowed self-attention. x [N,C]; dst [N]; mask [nW,1,1,Lmax]."""
    N, C = x.shape
    nW, Lmax = mask.shape[0], mask.shape[-1]
    H = C // 64
    h = ln32(x, 1e-6)
    qkv = F.linear(h, qkvw, qkvb)
    buf = qkv.new_zeros(nW * Lmax, 3 * C)
    buf[dst] = qkv
    q, k, v = buf.view(nW, Lmax, 3, H, 64).permute(2, 0, 3, 1, 4).unbind(0)  # [nW, H, Lmax, 64]
    a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    a = a.transpose(1, 2).reshape(nW * Lmax, C)[dst]
    x = x + F.linear(a, ow, ob)
    h = ln32(x, 1e-6)
    return x + F.linear(F.gelu(F.linear(h, m0w, m0b), approximate="tanh"), m2w, m2b)


def trunk(W, coords, feats, wins, hdt, blk=block_fn, final_ln=True):
    h = F.linear(feats, W["inw"], W["inb"]) + ape(coords[:, 1:], W["inw"].shape[0])
    h = h.to(hdt)
    for i, b in enumerate(W["blocks"]):
        w = wins[i % 2]
        h = blk(h, w.dst, w.mask, *b)
    return F.layer_norm(h.float(), (h.shape[-1],), eps=1e-5) if final_ln else h


def gs_head(W, coords, h, R):
    """§7.2: raw [N,448] → the Gaussian model's stored fields (_xyz, _features_dc, _scaling, _rotation,
    _opacity; what trellis.exe's gaussians.npz / gs_*.npy hold) and the activated values; voxel-major, then g.
    """
    raw = F.linear(h, W["outw"], W["outb"])
    N = raw.shape[0]
    xyz, fdc = raw[:, 0:96].view(N, 32, 3), raw[:, 96:192].view(N, 32, 1, 3)
    scl, rot, opa = (
        raw[:, 192:288].view(N, 32, 3),
        raw[:, 288:416].view(N, 32, 4),
        raw[:, 416:448].view(N, 32, 1),
    )
    centre = (coords[:, 1:].float() + 0.5) / R
    _xyz = centre[:, None] + torch.tanh(xyz * 1.0 + W["P"][None]) * (0.5 * 1.5 / R)  # stored field (lr 1.0)
    _rot = rot * 0.1  # lr multiplier 0.1
    s_b = math.log(math.expm1(0.004))
    scale = torch.sqrt(F.softplus(scl + s_b) ** 2 + 9e-4**2)
    opacity = torch.sigmoid(opa + math.log(0.1 / 0.9))
    q = _rot + torch.tensor([1.0, 0, 0, 0], device=rot.device)
    rotation = q / q.norm(dim=-1, keepdim=True)
    return {
        "_xyz": _xyz.reshape(-1, 3),
        "_features_dc": fdc.reshape(-1, 1, 3),
        "_scaling": scl.reshape(-1, 3),
        "_rotation": _rot.reshape(-1, 4),
        "_opacity": opa.reshape(-1, 1),
        "position": _xyz.reshape(-1, 3) - 0.5,
        "scale": scale.reshape(-1, 3),
        "opacity": opacity.reshape(-1, 1),
        "rotation": rotation.reshape(-1, 4),
    }


def rf_head(W, coords, h, R):
    """§7.3: raw [N,448] → trivec [N,16,3,8] (+1), density [N,16], features_dc [N,16,1,3]."""
    raw = F.linear(h, W["outw"], W["outb"])
    N = raw.shape[0]
    return {
        "trivec": raw[:, :384].view(N, 16, 3, 8) + 1,
        "density": raw[:, 384:400].view(N, 16),
        "features_dc": raw[:, 400:448].view(N, 16, 1, 3),
        "position": (coords[:, 1:].float() + 0.5) / R,
    }


# ----------------------------------------------------------------------------- mesh head (§7.4)
CHILDREN = [(dx, dy, dz) for dx in (0, 1) for dy in (0, 1) for dz in (0, 1)]  # δz fastest


def subdivide_coords(coords):
    """(b,x,y,z) → its 8 children (b, 2x+δx, 2y+δy, 2z+δz), parent-major, δz fastest (trellisc sparse.subdivide)."""
    ch = torch.tensor(CHILDREN, dtype=coords.dtype, device=coords.device)
    xyz = (coords[:, None, 1:] * 2 + ch[None]).reshape(-1, 3)
    return torch.cat([coords[:, :1].repeat_interleave(8, 0), xyz], 1)


class MeshGeometry:
    """Coordinates and neighbour maps of the two subdivision levels (built once per coordinate set)."""

    def __init__(self, coords, R):
        Rf = max(R, int(coords[:, 1:].max().item()) + 1)
        self.nb = int(coords[:, 0].max().item()) + 1
        self.coords = [coords]
        self.nbr = []
        for lvl in (1, 2):
            c = subdivide_coords(self.coords[-1])
            self.coords.append(c)
            self.nbr.append(neighbour_map(c, Rf << lvl))
        self.bid = [c[:, 0].long() for c in self.coords]  # batch ids per level (GN per sample)

    def active_pairs(self):
        return [int((n < n.shape[0]).sum().item()) for n in self.nbr]


def group_norm32(x, bid, nb, w, b, G=32, eps=1e-5):
    """Sparse GroupNorm (§7.4): per sample, G groups of C/G channels over all of the sample's rows; biased
    variance; fp32 math; affine; cast back to x's dtype."""
    N, C = x.shape
    xf = x.float().view(N, G, C // G)
    if nb == 1:
        mean = xf.mean(dim=(0, 2), keepdim=True)
        var = (xf - mean).square().mean(dim=(0, 2), keepdim=True)
    else:
        cnt = torch.zeros(nb, device=x.device).index_add_(0, bid, torch.ones(N, device=x.device))[:, None] * (
            C // G
        )
        mean = (torch.zeros(nb, G, device=x.device).index_add_(0, bid, xf.sum(-1)) / cnt)[bid][:, :, None]
        var = (torch.zeros(nb, G, device=x.device).index_add_(0, bid, (xf - mean).square().sum(-1)) / cnt)[
            bid
        ][:, :, None]
    y = ((xf - mean) * torch.rsqrt(var + eps)).view(N, C) * w + b
    return y.to(x.dtype)


def subdivide_block_fn(x, bid, bid2, nbr, nb, g1w, g1b, c1w, c1b, g2w, g2b, c2w, c2b, skw, skb):
    """SparseSubdivideBlock3d (§7.4). x [N,Cin] (hdt) at R → [8N,Cout] at 2R; nbr: the 2R level's neighbour map.
    GN and SiLU commute with the copy-to-children, so they run on the N parents."""
    a = F.silu(group_norm32(x, bid, nb, g1w, g1b))
    h = subm_conv(a.repeat_interleave(8, 0)[None], nbr, c1w, c1b)[0]
    h = F.silu(group_norm32(h, bid2, nb, g2w, g2b))
    h = subm_conv(h[None], nbr, c2w, c2b)[0]
    # kernel-1 skip on the subdivided x: x · M + b (skw = Mᵀ), a per-row op, so done on the parents and copied
    return h + F.linear(x, skw, skb).repeat_interleave(8, 0)


def mesh_forward(W, coords, feats, wins, geo, hdt, blk=block_fn, sub=subdivide_block_fn):
    h = trunk(W, coords, feats, wins, hdt, blk, final_ln=False)  # fp16 [N, C], no final LN
    for j, u in enumerate(W["up"]):
        h = sub(h, geo.bid[j], geo.bid[j + 1], geo.nbr[j], geo.nb, *u)
    return {"fields": F.linear(h.float(), W["outw"], W["outb"]), "coords": geo.coords[-1]}


def mesh_flops(cfg, N, wins, geo):
    """Trunk (as flops(), input layer only) + the two subdivide blocks + the 101-channel head.
    executed: 27 taps per conv row (gather-GEMM); real: active neighbour pairs only."""
    base = flops(cfg, N, wins)
    head448 = 2 * N * cfg.C * 448
    ex, real, ci, n = 0, 0, cfg.C, N
    pairs = geo.active_pairs()
    for j, co in enumerate(cfg.up):
        other = 2 * n * ci * co  # kernel-1 skip (on the parents, then copied)
        n *= 8
        ex += 2 * n * 27 * (ci * co + co * co) + other
        real += 2 * pairs[j] * (ci * co + co * co) + other
        ci = co
    head = 2 * n * ci * 101
    return dict(
        trunk_executed=base["total_executed"] - head448,
        upsample_executed=ex,
        upsample_real=real,
        head=head,
        total_real=base["total_real"] - head448 + real + head,
        total_executed=base["total_executed"] - head448 + ex + head,
        voxels_out=n,
        mean_active_neighbours=[p / (N * 8 ** (j + 1)) for j, p in enumerate(pairs)],
    )


def flops(cfg, N, wins):
    C, M = cfg.C, cfg.mlp
    lin = 2 * N * C * 3 * C + 2 * N * C * C + 4 * N * C * M
    real_core = sum(4 * C * int((w.sizes.double() ** 2).sum().item()) for w in wins)  # per (even, odd) pair
    pad_core = sum(4 * C * w.nW * w.Lmax**2 for w in wins)
    nb = cfg.nblocks
    io = 2 * N * 8 * C + 2 * N * C * 448
    return dict(
        linear=nb * lin,
        attn_core_real=nb // 2 * real_core,
        attn_core_padded=nb // 2 * pad_core,
        total_real=nb * lin + nb // 2 * real_core + io,
        total_executed=nb * lin + nb // 2 * pad_core + io,
    )


# ----------------------------------------------------------------------------- self-test
def selftest(dev):
    """Windowed attention via the padded layout == per-window attention done one window at a time (fp32)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    g = torch.Generator().manual_seed(5)
    R, C = 20, 128
    occ = torch.rand(R, R, R, generator=g) < 0.2
    xyz = torch.argwhere(occ)
    coords = torch.cat([torch.zeros(len(xyz), 1, dtype=torch.long), xyz], 1).int().to(dev)
    N = coords.shape[0]
    x = torch.randn(N, C, generator=g).to(dev)
    b = [
        (torch.randn(s, generator=g) / 10).to(dev)
        for s in [(3 * C, C), (3 * C,), (C, C), (C,), (256, C), (256,), (C, 256), (C,)]
    ]
    for shift in (0, 4):
        w = Windows(coords, 8, shift)
        y = block_fn(x, w.dst, w.mask, *b)
        # brute force
        cs = coords[:, 1:].long() + shift
        key = [tuple((cs[r] // 8).tolist()) for r in range(N)]
        h = F.layer_norm(x, (C,), eps=1e-6)
        qkv = F.linear(h, b[0], b[1]).view(N, 3, 2, 64)
        a = torch.zeros(N, C, device=dev)
        for kk in set(key):
            rows = torch.tensor([r for r in range(N) if key[r] == kk], device=dev)
            q, k_, v = (qkv[rows, i].transpose(0, 1) for i in range(3))
            a[rows] = F.scaled_dot_product_attention(q, k_, v).transpose(0, 1).reshape(-1, C)
        yr = x + F.linear(a, b[2], b[3])
        yr = yr + F.linear(
            F.gelu(F.linear(F.layer_norm(yr, (C,), eps=1e-6), b[4], b[5]), approximate="tanh"), b[6], b[7]
        )
        err = ((y - yr).norm() / yr.norm()).item()
        assert err < 1e-5, (shift, err)
        print(
            f"selftest window shift {shift}: {w.nW} windows (max {w.Lmax} tokens), rel {err:.1e}", flush=True
        )
    P = offset_perturbation()
    assert (
        abs(P[0, 0].item() + 0.80472) < 1e-4
        and abs(P[1, 0].item() + 0.73317) < 1e-4
        and abs(P[1, 1].item()) < 1e-6
        and abs(P[1, 2].item() + 0.22599) < 1e-4
    ), P[:2]


# ----------------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model")
    ap.add_argument("--preset", default="large", choices=list(PRESETS))
    ap.add_argument("--coords")
    ap.add_argument("--synthetic-voxels", type=int, default=20000)
    ap.add_argument("--slat", help="de-normalized SLat [N,8] f32 (default: seeded randn·std + mean)")
    ap.add_argument("--heads", default="gs,rf", help="comma list of gs, rf, mesh")
    ap.add_argument("--mode", default="both", choices=["eager", "compile", "both"])
    ap.add_argument("--compile-mode", default="default")
    ap.add_argument("--precision", default=None, choices=["fp16", "fp32"])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--selftest", action="store_true")
    ap.add_argument(
        "--compare-dir",
        help="dir with trellis gs_*.npy / rf_*.npy / mesh_coords.npy + mesh_fields.npy "
        "decoded from --slat/--coords: per-field rel L2 of this model's output, mesh coords exactly "
        "(use --precision fp32 and --model)",
    )
    ap.add_argument("--json")
    args = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    prec = args.precision or ("fp16" if dev.type == "cuda" else "fp32")
    hdt = torch.float16 if prec == "fp16" else torch.float32
    torch.set_grad_enabled(False)
    if args.selftest:
        selftest(dev)
    if prec == "fp32":
        torch.backends.cuda.matmul.allow_tf32 = False
    print(
        f"torch {torch.__version__}; device {torch.cuda.get_device_name() if dev.type == 'cuda' else 'cpu'}; "
        f"precision {prec}",
        flush=True,
    )
    heads = args.heads.split(",")
    Ws = {}
    for hname in heads:
        key = HEAD_KEYS[hname]
        if args.model:
            sd, cfg, _ = load_decoder(args.model, key)
            src = args.model
        else:
            cfg = Cfg(PRESETS[args.preset])
            sd = (random_mesh_state_dict if hname == "mesh" else random_state_dict)(cfg, args.seed + len(Ws))
            src = f"random ({args.preset} shapes)"
        Ws[hname] = (pack(sd, cfg, dev, hdt), cfg)
        del sd
    cfg = next(iter(Ws.values()))[1]
    coords_np = (
        np.load(args.coords).astype(np.int32)
        if args.coords
        else synthetic_coords(args.synthetic_voxels, cfg.R)
    )
    N = coords_np.shape[0]
    if args.slat:
        slat_np = np.load(args.slat).astype(np.float32)
    else:
        z = torch.randn(N, 8, generator=torch.Generator().manual_seed(9))
        slat_np = (z * torch.tensor(SLAT_STD) + torch.tensor(SLAT_MEAN)).numpy()
    coords = torch.from_numpy(coords_np).to(dev)
    slat = torch.from_numpy(slat_np).to(dev)
    wins = [Windows(coords, cfg.win, 0), Windows(coords, cfg.win, cfg.win // 2)]
    fl = flops(cfg, N, wins)
    print(
        f"weights {src}; {cfg}; N={N}; windows: shift 0 {wins[0].nW} (max {wins[0].Lmax}, token-weighted mean "
        f"{(wins[0].sizes.double()**2).sum().item()/N:.1f}), shift {cfg.win//2} {wins[1].nW} (max {wins[1].Lmax})",
        flush=True,
    )
    print("FLOPs per decoder (TFLOP): " + ", ".join(f"{k} {v/1e12:.3f}" for k, v in fl.items()), flush=True)
    hfl = {h: fl for h in Ws}
    fl_mesh = None
    if "mesh" in Ws:
        mc = Ws["mesh"][1]
        mwins = [Windows(coords, mc.win, 0), Windows(coords, mc.win, mc.win // 2)]
        geo = MeshGeometry(coords, mc.R)
        fl_mesh = mesh_flops(mc, N, mwins, geo)
        hfl["mesh"] = fl_mesh
        print(
            f"mesh: {mc}, upsample channels {mc.up}; {geo.coords[1].shape[0]} voxels at {2*mc.R}^3, "
            f"{geo.coords[2].shape[0]} at {4*mc.R}^3; mean active neighbours "
            + ", ".join(f"{a:.1f}" for a in fl_mesh["mean_active_neighbours"]),
            flush=True,
        )
        print(
            "mesh FLOPs (TFLOP): "
            + ", ".join(
                f"{k} {v/1e12:.3f}"
                for k, v in fl_mesh.items()
                if k not in ("voxels_out", "mean_active_neighbours")
            ),
            flush=True,
        )
        del geo, mwins

    def decode(hname, W, c, blk=block_fn, sub=subdivide_block_fn):
        """Everything that depends on the coordinates is rebuilt per call (windows, subdivision, neighbour maps)."""
        w2 = [Windows(coords, c.win, 0), Windows(coords, c.win, c.win // 2)]
        if hname == "mesh":
            return mesh_forward(W, coords, slat, w2, MeshGeometry(coords, c.R), hdt, blk, sub)
        head = gs_head if hname == "gs" else rf_head
        return head(W, coords, trunk(W, coords, slat, w2, hdt, blk), c.R)

    cmp = {}
    if args.compare_dir:
        names = {
            "gs": {
                "xyz": "_xyz",
                "features_dc": "_features_dc",
                "scaling": "_scaling",
                "rotation": "_rotation",
                "opacity": "_opacity",
            },
            "rf": {"trivec": "trivec", "density": "density", "features_dc": "features_dc"},
            "mesh": {"fields": "fields"},
        }
        for hname, (W, c) in Ws.items():
            r = decode(hname, W, c)
            if hname == "mesh":
                f = os.path.join(args.compare_dir, "mesh_coords.npy")
                if os.path.exists(f):
                    t = np.load(f)
                    o = r["coords"].cpu().numpy()
                    same = o.shape == t.shape and bool((o == t.astype(o.dtype)).all())
                    cmp["mesh_coords_identical"] = same
                    print(
                        f"compare mesh_coords: {list(t.shape)} vs {list(o.shape)}, identical {same}"
                        + (
                            ""
                            if same or o.shape != t.shape
                            else f" ({int((o != t).any(1).sum())} rows differ)"
                        ),
                        flush=True,
                    )
            for fn, k in names[hname].items():
                f = os.path.join(args.compare_dir, f"{hname}_{fn}.npy")
                if os.path.exists(f):
                    t = np.load(f).astype(np.float64).ravel()
                    o = r[k].double().cpu().numpy().ravel()
                    e = (
                        float(np.linalg.norm(o - t) / max(np.linalg.norm(t), 1e-30))
                        if o.shape == t.shape
                        else None
                    )
                    cmp[f"{hname}_{fn}"] = e
                    extra = ""
                    if hname == "mesh" and e is not None:
                        ch = r[k].double().cpu().numpy()
                        tt = t.reshape(ch.shape)
                        parts = {"sdf": (0, 8), "deform": (8, 32), "weights": (32, 53), "color": (53, 101)}
                        pe = {
                            n: float(
                                np.linalg.norm(ch[:, a:b] - tt[:, a:b])
                                / max(np.linalg.norm(tt[:, a:b]), 1e-30)
                            )
                            for n, (a, b) in parts.items()
                        }
                        cmp.update({f"mesh_{n}": v for n, v in pe.items()})
                        extra = (
                            " ("
                            + ", ".join(f"{n} {v:.2e}" for n, v in pe.items())
                            + f"; max abs {np.abs(ch - tt).max():.3e})"
                        )
                    print(f"compare {hname}_{fn}: rel L2 {e}{extra}", flush=True)
            del r
    gms, gtf = gemm_peak(dev) if dev.type == "cuda" else (float("nan"), float("nan"))
    out = {}
    for mode in ["eager", "compile"] if args.mode == "both" else [args.mode]:
        if mode == "compile":
            torch._dynamo.reset()
            blk = torch.compile(block_fn, mode=args.compile_mode, dynamic=False, fullgraph=True)
            sub = torch.compile(subdivide_block_fn, mode=args.compile_mode, dynamic=False, fullgraph=True)
        else:
            blk, sub = block_fn, subdivide_block_fn
        for hname, (W, c) in Ws.items():

            def run():
                return decode(hname, W, c, blk, sub)

            for attempt in range(2):
                try:
                    if dev.type == "cuda":
                        torch.cuda.empty_cache()
                    t0 = time.perf_counter()
                    r = run()
                    if dev.type == "cuda":
                        torch.cuda.synchronize()
                    first = time.perf_counter() - t0
                    del r
                    if dev.type == "cuda":
                        torch.cuda.reset_peak_memory_stats()
                    ms, ts = cuda_time(run, args.reps, 2, dev)
                    r = run()
                    peak = torch.cuda.max_memory_allocated() if dev.type == "cuda" else 0
                    o0 = r["fields"] if hname == "mesh" else next(iter(r.values()))
                    fin = all(bool(torch.isfinite(v).all()) for k, v in r.items() if v.is_floating_point())
                    tag = mode if attempt == 0 else "compile-trunk"
                    out[f"{tag}/{hname}"] = dict(
                        ms=ms,
                        first_s=first,
                        peak_bytes=peak,
                        finite=fin,
                        tflops_s=hfl[hname]["total_executed"] / (ms * 1e-3) / 1e12,
                        out0=o0.float(),
                    )
                    del r
                    print(
                        f"[{tag}/{hname}] median {ms:.2f} ms over {len(ts)}; first call {first:.1f} s; "
                        f"peak {peak/2**30:.2f} GiB; finite {fin}",
                        flush=True,
                    )
                    break
                except Exception as ex:
                    print(f"[{mode}/{hname}] FAILED: {type(ex).__name__}: {str(ex)[:2000]}", flush=True)
                    if not (mode == "compile" and hname == "mesh" and attempt == 0):
                        break
                    print(
                        "[compile/mesh] retrying with the subdivide blocks eager (trunk compiled)", flush=True
                    )
                    sub = subdivide_block_fn
    print(f"\n=== SLat decoders baseline (PyTorch), N={N}, {prec}, weights {src} ===")
    if any(h != "mesh" for h in Ws):
        print(
            f"FLOPs per decoder: executed {fl['total_executed']/1e12:.3f} TFLOP (padded windows), real "
            f"{fl['total_real']/1e12:.3f} (spec §10.4 ≈ 3.5 + 0.014 head)"
        )
    if fl_mesh:
        print(
            f"mesh decoder FLOPs: executed {fl_mesh['total_executed']/1e12:.3f} TFLOP (padded windows, 27-tap "
            f"convs), real {fl_mesh['total_real']/1e12:.3f} (upsample convs: executed "
            f"{fl_mesh['upsample_executed']/1e12:.3f}, active pairs {fl_mesh['upsample_real']/1e12:.3f}; "
            f"spec §10.4 ≈ 2.5 at k̄≈18); {fl_mesh['voxels_out']} output voxels"
        )
    print(f"{'mode/head':14} {'ms':>8} {'TF/s':>7} {'peak GiB':>9} {'1st s':>6}")
    for k, r in out.items():
        print(f"{k:14} {r['ms']:8.2f} {r['tflops_s']:7.1f} {r['peak_bytes']/2**30:9.2f} {r['first_s']:6.1f}")
    for hname in heads:
        b_key = f"compile/{hname}" if f"compile/{hname}" in out else f"compile-trunk/{hname}"
        if f"eager/{hname}" in out and b_key in out:
            a, b = out[f"eager/{hname}"]["out0"], out[b_key]["out0"]
            print(f"{hname}: eager vs compile first output rel L2 {((a-b).norm()/a.norm()).item():.2e}")
    print(f"fp16 GEMM 4096x4096x1024 torch.matmul: {gms:.4f} ms = {gtf:.1f} TFLOP/s")
    if args.json:
        with open(args.json, "w") as f:
            d = dict(
                device=torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
                torch=torch.__version__,
                precision=prec,
                N=N,
                cfg=repr(cfg),
                flops=fl,
                windows=[dict(shift=s, n=w.nW, max=w.Lmax) for s, w in zip((0, cfg.win // 2), wins)],
                gemm_tflops=gtf,
                compare=cmp,
                modes={k: {kk: vv for kk, vv in v.items() if kk != "out0"} for k, v in out.items()},
            )
            if fl_mesh:
                d["flops_mesh"] = fl_mesh
            json.dump(d, f, indent=1)


if __name__ == "__main__":
    main()
