#!/usr/bin/env python3
"""The fp8 program against the fp16 one (bench/fp8/run_device.sh gate).

  compare.py SS16 SS8 FULL16 FULL8 LOG_SS16 LOG_SS8 LOG16 LOG8

SS16/SS8: output folders of the stage-1 runs (own voxels); FULL16/FULL8: the stage 2-3 runs on the fp16 run's
voxels; LOG*: their logs (stage times of the last run, weights staged). Prints the issue's figures: occupancy
agreement, latent rel L2, Gaussian and radiance-field rel L2 per field, mesh vertex/face counts and the
symmetric Chamfer distance of the vertex sets against 1/256 of the object's extent, and the times."""
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
    text = open(log).read()
    rows = re.findall(
        r"^\[(\d)/3 [^]]*\] done in ([0-9.e-]+) s on the GPU \(([0-9.e-]+) s of GPU time", text, re.M
    )
    staged = [float(v) for v in re.findall(r"([0-9]+) MiB weights staged", text)]
    return rows, staged


def main():
    ss16, ss8, full16, full8, log_ss16, log_ss8, log16, log8 = sys.argv[1:9]
    a = {tuple(v) for v in np.load(f"{ss16}/coords.npy")}
    b = {tuple(v) for v in np.load(f"{ss8}/coords.npy")}
    print(
        f"stage 1: {len(a)} voxels fp16, {len(b)} fp8; occupancy agreement {len(a & b) / len(a | b):.4f} "
        f"(intersection over union; the issue asks >= 0.99)"
    )
    print(f"ss_latent rel L2 {rel(np.load(f'{ss16}/ss_latent.npy'), np.load(f'{ss8}/ss_latent.npy')):.3e}")
    print(f"slat (same voxels) rel L2 {rel(np.load(f'{full16}/slat.npy'), np.load(f'{full8}/slat.npy')):.3e}")
    for name in ("gaussians.npz", "radiance_field.npz"):
        x, y = np.load(f"{full16}/{name}"), np.load(f"{full8}/{name}")
        print(
            f"{name}: " + ", ".join(f"{k} {rel(x[k], y[k]):.2e}" for k in x.files if x[k].dtype.kind == "f")
        )
    va, nva, nfa = read_ply(f"{full16}/mesh.ply")
    vb, nvb, nfb = read_ply(f"{full8}/mesh.ply")
    extent = float(np.linalg.norm(va.max(0) - va.min(0)))
    cd = chamfer(va, vb)
    print(
        f"mesh: vertices {nva} / {nvb} ({(nvb - nva) / nva:+.2%}), faces {nfa} / {nfb} ({(nfb - nfa) / nfa:+.2%}); "
        f"Chamfer {cd:.3e} = {cd / extent * 256:.3f} / 256 of the extent {extent:.3f} (the issue asks <= 1/256)"
    )
    for label, l16, l8 in (("stage 1", log_ss16, log_ss8), ("stages 2-3", log16, log8)):
        r16, w16 = stage_times(l16)
        r8, w8 = stage_times(l8)
        for stage in sorted({r[0] for r in r16}):
            t16 = [r for r in r16 if r[0] == stage]
            t8 = [r for r in r8 if r[0] == stage]
            n = 1 if stage != "3" else 3  # the decoders: three lines per run
            g16 = sum(float(r[2]) for r in t16[-n:])
            g8 = sum(float(r[2]) for r in t8[-n:])
            print(
                f"{label} [{stage}/3] GPU time, last run: fp16 {g16 * 1e3:.1f} ms, fp8 {g8 * 1e3:.1f} ms "
                f"({g16 / g8:.3f}x)"
            )
        print(
            f"{label}: weights staged fp16 {sum(w16):.0f} MiB, fp8 {sum(w8):.0f} MiB "
            f"({sum(w8) / max(sum(w16), 1):.1%}; the issue asks <= 60%)"
        )


if __name__ == "__main__":
    main()
