#!/usr/bin/env python3
"""Compiles bench/python's programs with tc.compile(target="cuda") and writes them, with the compile times
(compile_times.json), as build-gpu-python/python.tar.xz (<name>.tcx each, parameters included: 24 MB, carried
beside build-gpu/lib, whose libtrellis_rt.so runs them).

  PYTHONPATH=python python3 bench/python/prepare.py [DIR]
"""
import json
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import programs  # noqa: E402
import trellisc as tc  # noqa: E402


def main():
    dest = Path(sys.argv[1] if len(sys.argv) > 1 else "build-gpu-python")
    dest.mkdir(parents=True, exist_ok=True)
    out = Path(tempfile.mkdtemp())
    times = {}
    for name, (cls, (shape, dtype)) in programs.PROGRAMS.items():
        module = cls()
        module.load_state_dict(programs.params(module))
        t0 = time.perf_counter()
        exe = tc.compile(module, args=[tc.InputInfo(shape, dtype)], target="cuda")
        times[name] = time.perf_counter() - t0
        assert exe.target == "cuda", name
        exe.save(out / f"{name}.tcx")
        print(f"{name}: compiled for cuda in {times[name]:.2f} s")
    (out / "compile_times.json").write_text(json.dumps(times))
    with tarfile.open(dest / "python.tar.xz", "w:xz") as tar:
        for f in sorted(out.iterdir()):
            tar.add(f, arcname=f.name)
    print(f"-> {dest / 'python.tar.xz'}")


if __name__ == "__main__":
    main()
