#!/usr/bin/env python3
"""Writes a synthetic voxel set for the SLat benchmarks: int32 [N, 4] rows (b=0, x, y, z) at the given
resolution, the N voxels closest to a sphere of radius 0.44·res (a closed surface shell about two voxels
thick, like the occupancy of a real object's surface), sorted lexicographically as trellis' coordinate
sets are.

  make_coords.py --voxels 20000 [--res 64] --out coords.npy
"""
import argparse

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--voxels", type=int, required=True)
    ap.add_argument("--res", type=int, default=64)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    r = a.res
    if not 0 < a.voxels <= r**3:
        raise SystemExit(f"--voxels must be in 1..{r ** 3}")
    g = np.stack(np.meshgrid(*[np.arange(r)] * 3, indexing="ij"), -1).reshape(-1, 3)
    dist = np.abs(np.linalg.norm(g - (r - 1) / 2, axis=1) - 0.44 * r)
    keep = g[np.sort(np.argsort(dist, kind="stable")[: a.voxels])]  # ascending flat index = lexicographic
    out = np.concatenate([np.zeros((len(keep), 1), np.int32), keep.astype(np.int32)], 1)
    np.save(a.out, out)
    print(f"{a.out}: {len(out)} voxels at {r}^3")


if __name__ == "__main__":
    main()
