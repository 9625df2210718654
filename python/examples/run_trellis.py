#!/usr/bin/env python3
"""Run a compiled TRELLIS pipeline through the C ABI (libtrellis_rt.so).

    PYTHONPATH=python python3 python/examples/run_trellis.py \
        --program trellis.exe --model models/tiny --cond models/tiny/cond.npy \
        --out out/ [--seed 1] [--steps-ss N] [--steps-slat N] [--formats gs,rf,mesh]

The checkpoints are mapped with NumPy (np.memmap of each safetensors tensor)
and handed to the runtime as a weight table of host pointers; one
trellis_run call does the inference; the outputs are saved with NumPy under
the names trellis.exe uses: ss_latent.npy, coords.npy, slat.npy,
gaussians.npz, radiance_field.npz (arrays as the decoders return them, all
samples), mesh_fields.npz. ``--files`` also lets the runtime write the
formatted files (gaussians.ply, mesh.ply/.glb, ...) into --out.
"""
import argparse
import json
import struct
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from trellisc import _bundle, trellis  # noqa: E402

_ST = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "I64": np.int64, "U8": np.uint8}


def bundle_sections(path):
    """Sections of a bundle file or of the bundle inside a trellis.exe."""
    data = Path(path).read_bytes()
    if data[-8:] == b"TRLSEXE1":
        offset, size = struct.unpack_from("<QQ", data, len(data) - 24)
        data = data[offset : offset + size]
    return _bundle.parse(data)


def map_safetensors(path):
    """{name: np.memmap view} of one safetensors file (nothing read whole)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        dtype = np.dtype(_ST[e["dtype"]])
        out[name] = np.memmap(
            path, dtype=dtype, mode="r", offset=8 + n + begin, shape=tuple(e["shape"]) if e["shape"] else (1,)
        )
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--program", required=True, help="trellis.exe or a bundle")
    ap.add_argument("--model", required=True, help="TRELLIS model directory")
    ap.add_argument("--cond", required=True, help="conditioning tokens (.npy)")
    ap.add_argument("--neg-cond", help='text pipelines: CLIP("") tokens (.npy)')
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--steps-ss", type=int, default=0)
    ap.add_argument("--steps-slat", type=int, default=0)
    ap.add_argument("--formats", default="gs,rf,mesh")
    ap.add_argument(
        "--gpu",
        choices=["auto", "off", "require"],
        default="auto",
        help="where the GPU stages run (default: the GPU if usable)",
    )
    ap.add_argument("--files", action="store_true", help="also let the runtime write trellis.exe's files")
    a = ap.parse_args(argv)

    manifest = json.loads(bundle_sections(a.program)["weights"])
    weights = {}
    for model, rel in manifest.items():
        for name, array in map_safetensors(Path(a.model) / rel).items():
            weights[(model, name)] = array
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)

    def progress(kind, stage, step, steps, extra):
        if kind == "step":
            print(
                f"\r  {stage}: step {step}/{steps}",
                end="\n" if step == steps else "",
                file=sys.stderr,
                flush=True,
            )
        elif kind == "coords":
            print(f"  stage 1 coordinates ready: {extra.shape[0]} voxels", file=sys.stderr)
        elif kind == "stage_begin":
            print(f"[{stage}] started", file=sys.stderr)

    start = time.time()
    cond = np.load(a.cond)
    neg = np.load(a.neg_cond) if a.neg_cond else None
    r = trellis.run(
        None,
        cond.astype(np.float32),
        bundle_path=a.program,
        neg_cond=neg,
        seed=a.seed,
        weights=weights,
        formats=a.formats.split(","),
        ss_steps=a.steps_ss,
        slat_steps=a.steps_slat,
        out_dir=out if a.files else None,
        progress=progress,
        gpu=a.gpu,
    )
    for name in ("ss_latent", "coords", "slat"):
        if name in r:
            np.save(out / f"{name}.npy", r[name])
    if "gs_xyz" in r:
        np.savez(
            out / "gaussians.npz",
            _xyz=r["gs_xyz"],
            _features_dc=r["gs_features_dc"],
            _scaling=r["gs_scaling"],
            _rotation=r["gs_rotation"],
            _opacity=r["gs_opacity"],
        )
    if "rf_trivec" in r:
        np.savez(
            out / "radiance_field.npz",
            coords=r["coords"],
            trivec=r["rf_trivec"],
            density=r["rf_density"],
            features_dc=r["rf_features_dc"],
        )
    if "mesh_cubes" in r:
        np.savez(out / "mesh_fields.npz", coords=r["mesh_cubes"], fields=r["mesh_fields"])
    print(f"outputs written to {out} in {time.time() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # a TrellisError names the input or the op
        print(f"run_trellis.py: error: {e}", file=sys.stderr)
        sys.exit(1)
