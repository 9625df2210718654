#!/usr/bin/env python3
"""The fp8 program against the fp16 one (bench/fp8/run_device.sh gate).

  compare.py DIR16 DIR8 [--ss-only]

Each DIR (run_device.sh gate, one per program): ss/ (stage 1 on its own voxels) with ss.log, full/ (stages 2-3
on the fp16 run's voxels) with full.log, and surface.log (stage 2 on the 20k-voxel surface of
bench/slat_gpu/make_coords.py, the brief's voxel target). Prints the issue's figures: occupancy agreement, latent
rel L2, Gaussian and radiance-field rel L2 per field, mesh vertex/face counts and the symmetric Chamfer distance
of the vertex sets against 1/256 of the object's extent, and each stage's GPU time (CUDA events), the median of
the runs after the first. --ss-only: stage 1 only (the gate's control: the fp16 program against itself on its portable
kernels, how far the occupancy of these random weights moves at fp16's own rounding differences)."""
import re
import sys

import numpy as np


def rel(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(a), 1e-30))


def read_ply(path):
    with open(path, "rb") as f:
        header = b""
        while not header.endswith(b"end_header\n"):
            header += f.readline()
        text = header.decode()
        nv = int(re.search(r"element vertex (\d+)", text).group(1))
        nf = int(re.search(r"element face (\d+)", text).group(1))
        props = re.findall(r"element vertex \d+\n((?:property \w+ \w+\n)+)", text)[0]
        sizes = {"float": 4, "uchar": 1, "int": 4, "double": 8}
        stride = sum(sizes[p.split()[1]] for p in props.strip().split("\n"))
        raw = np.frombuffer(f.read(nv * stride), np.uint8).reshape(nv, stride)
        xyz = raw[:, :12].copy().view(np.float32).reshape(nv, 3)
    return xyz, nv, nf


def chamfer(a, b):
    """Mean nearest-neighbour distance both ways (the GPU when torch has one)."""
    try:
        import torch

        dev = "cuda" if torch.cuda.is_available() else "cpu"
        ta = torch.tensor(a, device=dev)
        tb = torch.tensor(b, device=dev)

        def one_way(x, y):
            d = []
            for i in range(0, len(x), 8192):
                d.append(torch.cdist(x[i : i + 8192], y).min(dim=1).values)
            return torch.cat(d).mean().item()

        return 0.5 * (one_way(ta, tb) + one_way(tb, ta))
    except ImportError:
        return float("nan")


def stage_times(log):
    """Per stage, the GPU time (events) of every run in the log, and the weights staged."""
    text = open(log).read()
    rows = re.findall(
        r"^\[(\d)/3 [^]]*\] done in ([0-9.e-]+) s on the GPU \(([0-9.e-]+) s of GPU time", text, re.M
    )
    staged = [float(v) for v in re.findall(r"([0-9]+) MiB weights staged", text)]
    return rows, staged


def median_after_first(times):
    """The median over the runs after the first (which builds, tunes and stages)."""
    rest = times[1:] if len(times) > 1 else times
    return float(np.median(rest))


def stage_medians(log):
    rows, staged = stage_times(log)
    out = {}
    for stage in sorted({r[0] for r in rows}):
        t = [float(r[2]) for r in rows if r[0] == stage]
        if stage == "3":  # the decoders: three lines per run
            t = [sum(t[i : i + 3]) for i in range(0, len(t) - 2, 3)]
        out[stage] = (median_after_first(t), len(t))
    return out, staged


def main():
    d16, d8 = sys.argv[1:3]
    ss_only = "--ss-only" in sys.argv[3:]
    a = {tuple(v) for v in np.load(f"{d16}/ss/coords.npy")}
    b = {tuple(v) for v in np.load(f"{d8}/ss/coords.npy")}
    print(f"== {d8} against {d16}")
    print(
        f"stage 1: {len(a)} voxels, {len(b)} voxels; occupancy agreement {len(a & b) / len(a | b):.4f} "
        f"(intersection over union; the issue asks >= 0.99)"
    )
    print(
        f"ss_latent rel L2 {rel(np.load(f'{d16}/ss/ss_latent.npy'), np.load(f'{d8}/ss/ss_latent.npy')):.3e}"
    )
    if ss_only:
        return
    print(
        f"slat (same voxels) rel L2 {rel(np.load(f'{d16}/full/slat.npy'), np.load(f'{d8}/full/slat.npy')):.3e}"
    )
    for name in ("gaussians.npz", "radiance_field.npz"):
        x, y = np.load(f"{d16}/full/{name}"), np.load(f"{d8}/full/{name}")
        print(
            f"{name}: " + ", ".join(f"{k} {rel(x[k], y[k]):.2e}" for k in x.files if x[k].dtype.kind == "f")
        )
    va, nva, nfa = read_ply(f"{d16}/full/mesh.ply")
    vb, nvb, nfb = read_ply(f"{d8}/full/mesh.ply")
    extent = float(np.linalg.norm(va.max(0) - va.min(0)))
    cd = chamfer(va, vb)
    print(
        f"mesh: vertices {nva} / {nvb} ({(nvb - nva) / nva:+.2%}), faces {nfa} / {nfb} ({(nfb - nfa) / nfa:+.2%}); "
        f"Chamfer {cd:.3e} = {cd / extent * 256:.3f} / 256 of the extent {extent:.3f} (the issue asks <= 1/256)"
    )
    for label, log in (
        ("stage 1 (own voxels)", "ss.log"),
        ("stages 2-3 (fp16's stage-1 voxels)", "full.log"),
        ("stage 2 (the 20k-voxel surface)", "surface.log"),
    ):
        m16, w16 = stage_medians(f"{d16}/{log}")
        m8, w8 = stage_medians(f"{d8}/{log}")
        for stage in sorted(m16):
            (g16, n16), (g8, n8) = m16[stage], m8.get(stage, (float("nan"), 0))
            print(
                f"{label} [{stage}/3] GPU time, median of runs 2..{n16}: fp16 {g16 * 1e3:.1f} ms, "
                f"fp8 {g8 * 1e3:.1f} ms ({g16 / g8:.3f}x)"
            )
        print(
            f"{label}: weights staged fp16 {sum(w16):.0f} MiB, fp8 {sum(w8):.0f} MiB "
            f"({sum(w8) / max(sum(w16), 1):.1%}; the issue asks <= 60%)"
        )


if __name__ == "__main__":
    main()
