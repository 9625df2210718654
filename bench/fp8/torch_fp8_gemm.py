#!/usr/bin/env python3
"""FP8 (E4M3, per-tensor scales, fp32 accumulation, fp16 out) against fp16 GEMMs at the flow transformers'
linear shapes, through PyTorch's torch._scaled_mm (its own cuBLASLt) — the GEMM speed-up a W8A8 path could
get, measured where the toolkit's cuBLASLt refuses the FP8 call (gemm_bench.cu, README.md).

  python3 torch_fp8_gemm.py M N K [M N K ...]     (m = out features, n = tokens, k = in features)

Prints per shape: fp16 us, fp8 us, fp8 with fast accumulation us, the activation's quantization (amax,
scale, cast) in eager PyTorch us (an upper bound: a fused kernel reads the fp16 once and writes fp8 once), and
the relative error of the fp8 result against the fp16 one on random data."""
import sys

import torch


def median_us(fn, reps=50):
    for _ in range(10):
        fn()
    start = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    stop = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        start[i].record()
        fn()
        stop[i].record()
    torch.cuda.synchronize()
    t = sorted(s.elapsed_time(e) * 1000 for s, e in zip(start, stop))
    return t[len(t) // 2]


def main():
    a = [int(v) for v in sys.argv[1:]]
    if not a or len(a) % 3:
        sys.exit(__doc__)
    torch.manual_seed(0)
    print(f"# {torch.cuda.get_device_name()} torch {torch.__version__} cuda {torch.version.cuda}")
    print("m n k fp16_us fp8_us fp8_fast_us quantize_us rel_err")
    for m, n, k in zip(a[0::3], a[1::3], a[2::3]):
        x = torch.randn(n, k, device="cuda", dtype=torch.float16)
        w = torch.randn(m, k, device="cuda", dtype=torch.float16) * 0.05
        t16 = median_us(lambda: x @ w.t())

        def quant(t):
            amax = t.abs().amax().float()
            scale = 448.0 / amax
            return (t.float() * scale).to(torch.float8_e4m3fn), (amax / 448.0).reshape(())

        xq, sx = quant(x)
        wq, sw = quant(w)
        f8 = lambda fast: torch._scaled_mm(
            xq, wq.t(), scale_a=sx, scale_b=sw, out_dtype=torch.float16, use_fast_accum=fast
        )
        t8 = median_us(lambda: f8(False))
        t8f = median_us(lambda: f8(True))
        tq = median_us(lambda: quant(x))
        ref = x.float() @ w.float().t()
        err = ((f8(False).float() - ref).norm() / ref.norm()).item()
        print(f"{m} {n} {k} {t16:.1f} {t8:.1f} {t8f:.1f} {tq:.1f} {err:.2e}", flush=True)


if __name__ == "__main__":
    main()
