#!/usr/bin/env python3
"""One call of each bench/python executable on the GPU (NumPy in and out, then torch in and DeviceArray out), for
compute-sanitizer:

  compute-sanitizer --tool memcheck --error-exitcode 1 python3 bench/python/sanitize.py [ARCHIVE]
"""
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import programs  # noqa: E402
import trellisc as tc  # noqa: E402


def main():
    archive = sys.argv[1] if len(sys.argv) > 1 else "build-gpu-python/python.tar.xz"
    d = Path(tempfile.mkdtemp())
    with tarfile.open(archive) as tar:
        tar.extractall(d)
    import torch

    for name in ("small", "attention", "ops"):
        exe = tc.Executable.load(d / f"{name}.tcx")
        exe.gpu = "require"
        x = programs.example_input(name)
        exe(x)
        ys = exe(torch.from_numpy(x).cuda())
        ys = [torch.from_dlpack(y) for y in (ys if isinstance(ys, tuple) else (ys,))]
        torch.cuda.synchronize()
        print(f"{name}: {exe.backend}, {[tuple(y.shape) for y in ys]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
