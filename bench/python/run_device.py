#!/usr/bin/env python3
"""bench/python on the GPU machine: the executables prepare.py compiled (tc.compile(target="cuda")), loaded with
tc.Executable.load and run on the GPU, checked against the same bundles on the CPU reference, timed against
PyTorch eager and torch.compile of the same math on the same weights, in the same process.

  TRELLISC_BUILD_DIR=build-gpu PYTHONPATH=python python3 bench/python/run_device.py [--reps 20]

Then the SS flow model written in Python (python/examples/ss_flow.py, its checkpoint read from /tmp/<preset>,
made by trellis-mkmodel seed 1) against trellisc's own sparse_structure_flow_model (a program compiled with
--export-networks, called alone through a session), one forward each on the GPU, same inputs: tiny within
SS_TINY_MAX (1e-3), image-large within SS_LARGE_MAX (2e-3), and their GPU times (CUDA events).

Exit status 1 when a GPU result is further than MAX_REL_L2 (default 2e-3) from the CPU reference's, a program
does not run on the GPU, or an SS flow check misses its threshold. Times: wall time per call of the executable (NumPy in, NumPy out: the input's
upload and the output's download included) and CUDA-event time of the PyTorch forms on device tensors; the
small program's per-call host overhead is the median wall time of a warm call.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import programs  # noqa: E402
import trellisc as tc  # noqa: E402
from trellisc import _native  # noqa: E402

MAX_REL_L2 = float(os.environ.get("MAX_REL_L2", "2e-3"))


def rel_l2(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def wall_ms(fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def torch_forms(name, params):
    """(eager, compiled) PyTorch functions of program `name` on device tensors."""
    import torch
    import torch.nn.functional as F

    p = {k: torch.from_numpy(v).cuda() for k, v in params.items()}
    C, H, T = programs.C, programs.HEADS, programs.TOKENS

    def attention(x):
        q, k, v = F.linear(F.layer_norm(x, (C,), eps=1e-6), p["qkv.weight"], p["qkv.bias"]).split(C, -1)
        q, k, v = (t.view(1, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(1, T, C)
        return x + F.linear(o, p["out.weight"], p["out.bias"])

    def mlp(x):
        h = F.gelu(
            F.linear(F.layer_norm(x, (C,), eps=1e-6), p["fc1.weight"], p["fc1.bias"]), approximate="tanh"
        )
        return x + F.linear(h, p["fc2.weight"], p["fc2.bias"])

    def small(x):
        return F.gelu(F.linear(x, p["fc.weight"]), approximate="tanh") * 2.0

    fn = {"attention": attention, "mlp": mlp, "small": small}[name]
    return fn, torch.compile(fn)


def event_ms(fn, x, reps, warmup=3):
    import torch

    with torch.no_grad():
        for _ in range(warmup):
            fn(x)
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn(x)
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
    return statistics.median(times)


def dlpack_checks(d, reps):
    """torch tensors in GPU memory in, DeviceArray out: the same values as the NumPy path, the result taken by
    torch.from_dlpack without a copy (the same data pointer), and the wall time per call without host copies.
    Returns 1 when a check fails."""
    import torch

    status = 0
    for name in ("attention", "small"):
        exe = tc.Executable.load(d / f"{name}.tcx")
        exe.gpu = "require"
        x = programs.example_input(name)
        want = exe(x, out="numpy")
        xt = torch.from_numpy(x).cuda()
        y = exe(xt)
        yt = torch.from_dlpack(y)
        same_pointer = yt.data_ptr() == y._t.data
        rel = rel_l2(yt.cpu().numpy(), want)
        ok = isinstance(y, tc._dlpack.DeviceArray) and same_pointer and rel == 0.0
        status |= not ok
        device_ms = wall_ms(lambda: torch.from_dlpack(exe(xt)), reps)
        host_ms = wall_ms(lambda: exe(x), reps)
        print(
            f"{'' if ok else 'FAIL: '}DLPack ({name}): torch in, torch.from_dlpack out: same pointer {same_pointer}, "
            f"rel L2 vs the NumPy path {rel:.1e}; wall per call {device_ms:.3f} ms (NumPy in/out: {host_ms:.3f} ms)"
        )
    return status


def error_checks(d):
    """check_finite on the GPU: a NaN stops the run at the op, and the error names the user's line. Returns 1
    when it does not."""
    exe = tc.Executable.load(d / "log_of.tcx")
    exe.gpu = "require"
    x = -np.ones((4, 64), np.float32)
    try:
        exe(x)
        message = "no error"
    except tc.TrellisError as e:
        message = str(e)
    ok = exe.backend == "cuda" and "programs.py" in message and "non-finite" in message and "log" in message
    first = message.splitlines()[0] if message else ""
    print(f"{'' if ok else 'FAIL: '}check_finite on the GPU: {first}")
    return 0 if ok else 1


def parity_checks(d):
    """The PARITY programs (the general ops: group norm, reductions, embedding, where, ...) GPU vs CPU, each
    output within MAX_REL_L2; an embedding's out-of-range index: a NaN row on the GPU, the other rows exact, an
    error naming the index on the CPU. Returns 1 when a check fails."""
    status = 0
    for name in programs.PARITY:
        x = programs.example_input(name)
        gpu = tc.Executable.load(d / f"{name}.tcx")
        gpu.gpu = "require"
        cpu = tc.Executable.load(d / f"{name}.tcx")
        cpu.gpu = "off"
        rels = [rel_l2(g, c) for g, c in zip(gpu(x), cpu(x))]
        ok = gpu.backend == "cuda" and max(rels) <= MAX_REL_L2
        status |= not ok
        print(
            f"{'' if ok else 'FAIL: '}{name}: GPU vs CPU reference rel L2 per output "
            f"{', '.join(f'{r:.2e}' for r in rels)} (limit {MAX_REL_L2:g})"
        )
    gpu = tc.Executable.load(d / "embedding.tcx")
    gpu.gpu = "require"
    cpu = tc.Executable.load(d / "embedding.tcx")
    cpu.gpu = "off"
    good, bad = np.array([0, 15, 3, 3, 7], np.int32), np.array([0, 16, 3, -1, 7], np.int32)
    same = np.array_equal(gpu(good), cpu(good))
    rows = gpu(bad)
    nan_rows = [bool(np.isnan(r).all()) for r in rows]
    kept = np.array_equal(rows[[0, 2, 4]], cpu(good)[[0, 2, 4]])
    try:
        cpu(bad)
        message = "no error"
    except tc.TrellisError as e:
        message = str(e)
    ok = same and nan_rows == [False, True, False, True, False] and kept and "index 16" in message
    status |= not ok
    print(
        f"{'' if ok else 'FAIL: '}embedding: GPU == CPU on valid indices {same}; out-of-range indices 16 and -1 "
        f"give NaN rows on the GPU {nan_rows} (others exact {kept}); the CPU reference: {message.splitlines()[0]}"
    )
    return status


FAULT_SCRIPT = """
import sys, numpy as np, trellisc as tc
exe = tc.Executable.load(sys.argv[1])
exe.gpu = "require"
try:
    exe(np.ones((4, 64), np.float32))
    print("no error")
except tc.TrellisError as e:
    print(e)
"""


def fault_checks(d):
    """sync_ops: a GPU fault injected into the first trellis.log kernel (TRELLIS_GPU_INJECT_FAULT, in a child
    process: the fault ends its CUDA context) is reported with the op and the user's line. Returns 1 if not.
    """
    env = dict(os.environ, TRELLIS_GPU_INJECT_FAULT="trellis.log")
    r = subprocess.run(
        [sys.executable, "-c", FAULT_SCRIPT, str(d / "log_of_sync.tcx")],
        capture_output=True,
        text=True,
        env=env,
    )
    text = r.stdout.strip()
    ok = "GPU failed in this op" in text and "programs.py" in text and "log" in text
    print(
        f"{'' if ok else 'FAIL: '}sync_ops, an injected GPU fault: {text.splitlines()[0] if text else r.stderr}"
    )
    if ok:
        print("\n".join("    " + l for l in text.splitlines()[1:4]))
    return 0 if ok else 1


def overhead_breakdown(d, reps):
    """Where a warm call of the small executable spends its host time: the whole call, the session call alone
    (ctypes and the runtime), and the GPU time."""
    exe = tc.Executable.load(d / "small.tcx")
    exe.gpu = "require"
    x = programs.example_input("small")
    exe(x)
    whole = wall_ms(lambda: exe(x), reps * 50, warmup=50)
    session = exe._session_for()
    native = wall_ms(
        lambda: session.call(exe._function, [x], 1, out_specs=exe._out_specs), reps * 50, warmup=50
    )
    exe(x)
    print(
        f"per-call overhead (small, warm, median of {reps * 50}): whole call {whole * 1e3:.1f} us, of which the "
        f"session call (ctypes + runtime) {native * 1e3:.1f} us; GPU time {exe.last_gpu_seconds * 1e6:.1f} us"
    )


def ss_flow_checks(d, reps):
    """The Python SS flow vs trellisc's network, per preset; returns 1 when a check fails."""
    status = 0
    limits = {
        "tiny": float(os.environ.get("SS_TINY_MAX", "1e-3")),
        "large": float(os.environ.get("SS_LARGE_MAX", "2e-3")),
    }
    for preset, limit in limits.items():
        model_dir = Path("/tmp") / preset
        ckpt = next((model_dir / "ckpts").glob("ss_flow*.safetensors"))
        cond = np.load(model_dir / "cond.npy").astype(np.float32)
        r = 8 if preset == "tiny" else 16
        x = np.random.default_rng(5).standard_normal((1, 8, r, r, r)).astype(np.float32)
        t = np.array([1000.0], np.float32)
        py = tc.Executable.load(d / f"ss_flow_{preset}.tcx", params=ckpt)
        py.gpu = "require"
        program = _native.Program(path=d / f"{preset}_networks.bundle")
        session = _native.Session(program, model_dir=str(model_dir), flags=4 | 32)
        fn = "sparse_structure_flow_model"
        v_py, v_tc = py(x, t, cond), session.call(fn, [x, t, cond], 1)[0]
        rel = rel_l2(v_py, v_tc)
        py_ms, tc_ms = [], []
        for _ in range(reps):
            py(x, t, cond)
            py_ms.append(py.last_gpu_seconds * 1e3)
            session.call(fn, [x, t, cond], 1)
            tc_ms.append(session.gpu_seconds() * 1e3)
        ok = py.backend == "cuda" and session.backend(fn) == "cuda" and rel <= limit
        status |= not ok
        print(
            f"{'' if ok else 'FAIL: '}SS flow ({preset}), Python vs trellisc's network on the GPU: rel L2 {rel:.3e} "
            f"(limit {limit:g}); GPU time per forward (median of {reps}): Python {statistics.median(py_ms):.3f} ms, "
            f"trellisc {statistics.median(tc_ms):.3f} ms"
        )
        session.close()
    return status


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--archive", default="build-gpu-python/python.tar.xz")
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    d = Path(tempfile.mkdtemp())
    with tarfile.open(a.archive) as tar:
        tar.extractall(d)
    compile_times = json.loads((d / "compile_times.json").read_text())
    status, rows = 0, []
    for name, (cls, _) in programs.PROGRAMS.items():
        x = programs.example_input(name)
        gpu = tc.Executable.load(d / f"{name}.tcx")
        gpu.gpu = "require"
        cpu = tc.Executable.load(d / f"{name}.tcx")
        cpu.gpu = "off"
        t0 = time.perf_counter()
        y = gpu(x)
        first = time.perf_counter() - t0
        rel = rel_l2(y, cpu(x))
        ok = gpu.backend == "cuda" and rel <= MAX_REL_L2
        status |= not ok
        print(
            f"{'' if ok else 'FAIL: '}{name}: GPU ({gpu.backend}) vs CPU reference rel L2 {rel:.3e} "
            f"(limit {MAX_REL_L2:g}); first call {first:.3f} s; compiled in {compile_times[name]:.2f} s"
        )
        gpu_ms = []

        def call():
            gpu(x)
            gpu_ms.append(gpu.last_gpu_seconds * 1e3)

        ours = wall_ms(call, a.reps)
        module = cls()
        eager, compiled = torch_forms(name, programs.params(module))
        import torch

        xt = torch.from_numpy(x).cuda()
        rows.append(
            (
                name,
                ours,
                statistics.median(gpu_ms),
                event_ms(eager, xt, a.reps),
                event_ms(compiled, xt, a.reps),
            )
        )
    status |= ss_flow_checks(d, a.reps)
    status |= dlpack_checks(d, a.reps)
    status |= error_checks(d)
    status |= parity_checks(d)
    overhead_breakdown(d, a.reps)
    status |= fault_checks(d)
    print(
        "\n| program | trellisc, wall per call (NumPy in/out) | trellisc GPU time (events) | torch eager (events) "
        "| torch.compile (events) |"
    )
    print("|---|---|---|---|---|")
    for name, ours, ours_gpu, eager, comp in rows:
        print(f"| {name} | {ours:.3f} ms | {ours_gpu:.3f} ms | {eager:.3f} ms | {comp:.3f} ms |")
    return status


if __name__ == "__main__":
    sys.exit(main())
