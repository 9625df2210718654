#!/usr/bin/env python3
"""The image suite's checks (bench/image_gpu/run_device.sh), each against its threshold; exit status 1 when one
is missed (the line says "FAIL: ...").

  compare.py tokens GOT.npy WANT.npy MAX_REL_L2 WHAT      conditioning tokens: relative L2 and worst token cosine
  compare.py arrays A_DIR B_DIR NAME MAX_REL_L2 WHAT      one output (ss_latent.npy, slat.npy) of two runs
"""
import sys

import numpy as np


def rel_l2(got, want):
    return float(np.linalg.norm((got - want).astype(np.float64)) / np.linalg.norm(want.astype(np.float64)))


def main(argv):
    kind = argv[1]
    if kind == "tokens":
        got, want, limit, what = np.load(argv[2]), np.load(argv[3]), float(argv[4]), argv[5]
        if got.shape != want.shape:
            print(f"FAIL: {what}: shapes {got.shape} vs {want.shape}")
            return 1
        g, w = got.reshape(-1, got.shape[-1]).astype(np.float64), want.reshape(-1, want.shape[-1]).astype(
            np.float64
        )
        cos = (g * w).sum(1) / (np.linalg.norm(g, axis=1) * np.linalg.norm(w, axis=1))
        rel = rel_l2(got, want)
        line = (
            f"{what}: rel L2 {rel:.3e} (limit {limit:g}); worst token cosine {cos.min():.7f}; max |diff| "
            + (f"{np.abs(got - want).max():.3e}")
        )
    elif kind == "arrays":
        a_dir, b_dir, name, limit, what = argv[2], argv[3], argv[4], float(argv[5]), argv[6]
        a, b = np.load(f"{a_dir}/{name}"), np.load(f"{b_dir}/{name}")
        if a.shape != b.shape:
            print(f"FAIL: {what}: {name} shapes {a.shape} vs {b.shape}")
            return 1
        rel = rel_l2(b, a)
        line = f"{what}: {name} rel L2 {rel:.3e} (limit {limit:g})"
    else:
        print(__doc__)
        return 2
    ok = rel <= limit
    print(("" if ok else "FAIL: ") + line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
