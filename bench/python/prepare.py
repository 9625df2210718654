#!/usr/bin/env python3
"""Compiles bench/python's programs with tc.compile(target="cuda") and writes them, with the compile times
(compile_times.json), as build-gpu-python/python.tar.xz (<name>.tcx each, parameters included: 24 MB, carried
beside build-gpu/lib, whose libtrellis_rt.so runs them). Also the SS flow model written in Python
(python/examples/ss_flow.py) for the tiny and image-large presets (ss_flow_<preset>.tcx, without parameters: the
device reads the checkpoint) and trellisc's own programs of those presets with --export-networks
(<preset>_networks.bundle), for the SS-flow parity and timing of run_device.py.

  PYTHONPATH=python python3 bench/python/prepare.py [DIR]      (needs /tmp/tiny and /tmp/large, made by
                                                                bench/ss_gpu/prepare.sh: trellis-mkmodel seed 1)
"""
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "python" / "examples"))
import programs  # noqa: E402
import ss_flow  # noqa: E402
import trellisc as tc  # noqa: E402


def main():
    dest = Path(sys.argv[1] if len(sys.argv) > 1 else "build-gpu-python")
    dest.mkdir(parents=True, exist_ok=True)
    out = Path(tempfile.mkdtemp())
    times = {}
    for name, (cls, (shape, dtype)) in {**programs.PROGRAMS, **programs.PARITY}.items():
        module = cls()
        module.load_state_dict(programs.params(module))
        t0 = time.perf_counter()
        exe = tc.compile(module, args=[tc.InputInfo(shape, dtype)], target="cuda")
        times[name] = time.perf_counter() - t0
        assert exe.target == "cuda", name
        exe.save(out / f"{name}.tcx")
        print(f"{name}: compiled for cuda in {times[name]:.2f} s")
    # check_finite on the GPU: a NaN names the op and the user's line.
    exe = tc.compile(programs.log_of, args=[tc.InputInfo((4, 64))], target="cuda", check_finite=True)
    exe.save(out / "log_of.tcx")
    # sync_ops: an injected GPU fault names the op and the user's line (run_device.py's fault check).
    exe = tc.compile(programs.log_of, args=[tc.InputInfo((4, 64))], target="cuda", sync_ops=True)
    exe.save(out / "log_of_sync.tcx")
    table = tc.Tensor(np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32))
    exe = tc.compile(
        lambda i: programs.embedding_of(i, table), args=[tc.InputInfo((5,), tc.int32)], target="cuda"
    )
    exe.save(out / "embedding.tcx")
    for preset, tokens in (("tiny", 21), ("large", 1374)):
        model_dir = Path("/tmp") / preset
        model, args = ss_flow.load(model_dir)
        t0 = time.perf_counter()
        exe = ss_flow.compile_model(model, args, tokens, target="cuda")
        times[f"ss_flow_{preset}"] = time.perf_counter() - t0
        exe.save(out / f"ss_flow_{preset}.tcx", params=False)
        print(f"ss_flow ({preset}): compiled for cuda in {times[f'ss_flow_{preset}']:.2f} s")
        subprocess.run(
            [
                str(ROOT / "build/bin/trellisc"),
                str(model_dir / "pipeline.json"),
                "--target=cuda",
                "--cond-tokens",
                str(tokens),
                "--export-networks",
                "--emit=bundle",
                "-o",
                str(out / f"{preset}_networks.bundle"),
            ],
            check=True,
        )
    (out / "compile_times.json").write_text(json.dumps(times))
    with tarfile.open(dest / "python.tar.xz", "w:xz") as tar:
        for f in sorted(out.iterdir()):
            tar.add(f, arcname=f.name)
    print(f"-> {dest / 'python.tar.xz'}")


if __name__ == "__main__":
    main()
