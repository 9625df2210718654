#!/usr/bin/env python3
"""Sustained (power-capped) rates of the SS stage's kernel classes, PyTorch on the device.

The SS stage runs at the H100's power cap (measured 2026-11-22; bench/ss_gpu/README.md, "What bounds the
stage"), so the rates that matter are the ones a kernel sustains for seconds, not the ones of a short warm
benchmark. For each shape class of the stage this runs the operation back to back for --seconds, reports
its sustained TFLOP/s (CUDA events over the last half) and the board power / SM clock read by nvidia-smi
meanwhile, and then the stage's lower bound: its executed FLOPs per class at those rates (GEMMs and
attention), plus nothing for the memory-bound row kernels.

  python3 bench/ss_gpu/power_ceiling.py [--seconds 4]
"""
import argparse
import subprocess
import threading
import time

import torch
import torch.nn.functional as F


def smi_sampler(stop, samples):
    while not stop.is_set():
        out = (
            subprocess.run(
                ["nvidia-smi", "--query-gpu=power.draw,clocks.sm", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
            )
            .stdout.strip()
            .split(",")
        )
        try:
            samples.append((float(out[0]), float(out[1])))
        except (ValueError, IndexError):
            pass
        time.sleep(0.2)


def sustained(fn, flops, seconds):
    fn()
    torch.cuda.synchronize()
    t0 = time.time()
    n = 0
    while time.time() - t0 < seconds / 2:  # heat up to the power cap
        fn()
        n += 1
    torch.cuda.synchronize()
    stop, samples = threading.Event(), []
    th = threading.Thread(target=smi_sampler, args=(stop, samples))
    th.start()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    reps = max(n, 10)
    s.record()
    for _ in range(reps):
        fn()
    e.record()
    torch.cuda.synchronize()
    stop.set()
    th.join()
    ms = s.elapsed_time(e) / reps
    watts = sorted(p for p, _ in samples)[len(samples) // 2] if samples else float("nan")
    mhz = sorted(c for _, c in samples)[len(samples) // 2] if samples else float("nan")
    return ms, flops / ms / 1e9, watts, mhz


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=4.0)
    args = ap.parse_args()
    dev = "cuda"
    h = torch.float16
    L, C, H, D, LK = 4096, 1024, 16, 64, 1374
    x = torch.randn(L, C, device=dev, dtype=h)
    hid = torch.randn(L, 4 * C, device=dev, dtype=h)
    w_up = torch.randn(4 * C, C, device=dev, dtype=h) * 0.02
    w_dn = torch.randn(C, 4 * C, device=dev, dtype=h) * 0.02
    w_qkv = torch.randn(3 * C, C, device=dev, dtype=h) * 0.02
    w_sq = torch.randn(C, C, device=dev, dtype=h) * 0.02
    q = torch.randn(1, H, L, D, device=dev, dtype=h)
    k = torch.randn(1, H, L, D, device=dev, dtype=h)
    v = torch.randn(1, H, L, D, device=dev, dtype=h)
    kc = torch.randn(1, H, LK, D, device=dev, dtype=h)
    vc = torch.randn(1, H, LK, D, device=dev, dtype=h)
    rows = []
    cases = [
        ("MLP up 4096x1024->4096", lambda: F.linear(x, w_up), 2 * L * C * 4 * C),
        ("MLP down 4096x4096->1024", lambda: F.linear(hid, w_dn), 2 * L * 4 * C * C),
        ("qkv 4096x1024->3072", lambda: F.linear(x, w_qkv), 2 * L * C * 3 * C),
        ("1024x1024", lambda: F.linear(x, w_sq), 2 * L * C * C),
        (
            "self-attention L4096 H16 d64 (SDPA)",
            lambda: F.scaled_dot_product_attention(q, k, v),
            4 * L * L * D * H,
        ),
        (
            "cross-attention 4096x1374 (SDPA)",
            lambda: F.scaled_dot_product_attention(q, kc, vc),
            4 * L * LK * D * H,
        ),
    ]
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}; {args.seconds} s per case")
    print("| case | ms/call | sustained TFLOP/s | board W | SM MHz |")
    print("|---|---|---|---|---|")
    rate = {}
    for name, fn, flops in cases:
        ms, tf, w, mhz = sustained(fn, flops, args.seconds)
        rate[name] = tf
        print(f"| {name} | {ms:.4f} | {tf:.1f} | {w:.0f} | {mhz:.0f} |")
    # The stage's executed FLOPs per class (bench/ss_gpu/README.md: 44 forwards, 24 blocks; the cross-attention
    # and its q / out projections only on the 25 conditional forwards; the K/V projections hoisted).
    fw, blocks, cond = 44, 24, 25
    gemm_tf = {
        "MLP up 4096x1024->4096": fw * blocks * 2 * L * C * 4 * C,
        "MLP down 4096x4096->1024": fw * blocks * 2 * L * 4 * C * C,
        "qkv 4096x1024->3072": fw * blocks * 2 * L * C * 3 * C,
        "1024x1024": (fw + 2 * cond) * blocks * 2 * L * C * C,
        "self-attention L4096 H16 d64 (SDPA)": fw * blocks * 4 * L * L * D * H,
        "cross-attention 4096x1374 (SDPA)": cond * blocks * 4 * L * LK * D * H,
    }
    total_ms = sum(f / rate[n] / 1e9 for n, f in gemm_tf.items())
    print(
        f"\nstage lower bound at these sustained rates (GEMMs + attention only, no row kernels, "
        f"no overlap losses): {total_ms:.1f} ms for {sum(gemm_tf.values()) / 1e12:.1f} TFLOP"
    )


if __name__ == "__main__":
    main()
