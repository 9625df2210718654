#!/usr/bin/env python3
"""Device half of the generated-kernel GPU check (README.md).

Loads the PTX that gen_cases.py produced with the CUDA driver API (ctypes),
runs every case of manifest.json on random data and compares with a PyTorch
re-implementation of the CPU reference's math (runtime/reference). Prints one
row per kernel: max error (relative to the reference's max |value|; integer
and data-movement kernels: mismatch count), the tolerance, and for the large
cases the time per launch and the achieved bandwidth, counting each input and
output byte once:
  cold   buffers rotated over > 4 x 50 MB so every launch reads DRAM,
  warm   the same buffers every launch (L2-resident when they fit).
Launches are timed inside a CUDA graph (no host launch overhead).
Cases with dynamic rows (manifest `rows`, `threads_per_row`) run once per row
count with buffers at the bound, the trailing `rows` argument and
grid.x = max(1, ceil(rows * threads_per_row / block.x)) (the runtime's
launch, docs/design/gpu-backend.md); input rows past `rows` are NaN (a read
of them would reach the result) and every output byte past `rows` must be
unchanged. Exit status 1 when any case fails. Needs numpy, torch and an
NVIDIA GPU.

  python3 test/gpu/codegen/check_kernels.py --dir build-gpu/codegen [--only layer_norm] [--json r.json]
"""
import argparse
import ctypes
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

DT = {"f16": torch.float16, "f32": torch.float32, "i32": torch.int32}
UNARY = {
    "silu": lambda x: x / (1 + torch.exp(-x)),
    "gelu": lambda x: F.gelu(x, approximate="tanh"),
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "exp": torch.exp,
    "neg": torch.neg,
    "abs": torch.abs,
    "sqrt": torch.sqrt,
    "softplus": F.softplus,
}
BINARY = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "maximum": torch.maximum,
    "pow": torch.pow,
    "greater": lambda a, b: (a > b).to(a.dtype),  # 1 or 0 in the operands' type
    "less": lambda a, b: (a < b).to(a.dtype),
    "equal": lambda a, b: (a == b).to(a.dtype),
}
EXACT = ("split", "concat", "permute", "pixel_shuffle_3d", "broadcast_rows", "conv3d")


class Driver:
    def __init__(self, ptx_path):
        self.cu = ctypes.CDLL("libcuda.so.1")
        torch.zeros(1, device="cuda")  # the primary context, shared with torch
        with open(ptx_path, "rb") as f:
            ptx = f.read() + b"\0"
        self.mod = ctypes.c_void_p()
        self.ck(self.cu.cuModuleLoadData(ctypes.byref(self.mod), ptx), "cuModuleLoadData")
        self.fns = {}

    @staticmethod
    def ck(r, what):
        if r != 0:
            raise RuntimeError("%s failed: CUresult %d" % (what, r))

    def fn(self, name):
        if name not in self.fns:
            f = ctypes.c_void_p()
            self.ck(self.cu.cuModuleGetFunction(ctypes.byref(f), self.mod, name.encode()), name)
            self.fns[name] = f
        return self.fns[name]

    def prepare(self, c, ptrs, scalars=()):
        """The argument array of one launch (kept alive by the caller)."""
        vals = [ctypes.c_uint64(p) for p in ptrs] + list(scalars)
        arr = (ctypes.c_void_p * len(vals))(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in vals])
        return (vals, arr)

    def launch(self, c, args, grid=None):
        stream = torch.cuda.current_stream().cuda_stream
        self.ck(
            self.cu.cuLaunchKernel(
                self.fn(c["kernel"]),
                grid or c["grid"],
                1,
                1,
                c["block"],
                1,
                1,
                0,
                ctypes.c_void_p(stream),
                args[1],
                None,
            ),
            "launch " + c["kernel"],
        )


def rand(t, kind):
    shape, dt = t["shape"], DT[t["dtype"]]
    if dt == torch.int32:
        return torch.randint(-100, 100, shape, device="cuda", dtype=dt)
    x = torch.randn(shape, device="cuda") * 2
    if kind == "layer_norm":  # rows with an offset: the variance is not E[x²]
        x = x + 3
    if kind in ("sqrt", "pow"):  # (pow: positive bases)
        x = x.abs()
    if kind in ("equal", "where"):  # ties and zeros (a where's cond selects both ways)
        x = torch.round(x)
    return x.to(dt)


def is_direct(c):
    """A conv3d with few output channels: one direct kernel (x, w, out)
    instead of the im2col kernel (x, col)."""
    return c["kernel"].startswith("conv3d_direct")


def reference(c, ins):
    k, a = c["kind"], c["attrs_parsed"]
    odt = DT[c["outs"][0]["dtype"]]
    f = [x.float() if x.is_floating_point() else x for x in ins]
    if k == "cast":
        return [ins[0].to(odt)]
    if k in UNARY:
        return [UNARY[k](f[0]).to(odt)]
    if k in BINARY:
        return [BINARY[k](f[0], f[1]).to(odt)]
    if k == "where":
        return [torch.where(f[0] != 0, f[1], f[2]).to(odt)]
    if k == "gated_residual_norm":  # the rounded residual (+ plus), then its norm
        x = f[0]
        B = x.shape[0]

        def bc1(v):
            return v.view(B, 1, -1) if v.dim() == 2 and x.dim() == 3 else v

        groups, rest = c["form"].split(), f[3:]
        r = (x + bc1(f[2]) * f[1]).to(odt)
        if "plus" in groups:
            r = (r.float() + bc1(rest[0])).to(odt)
            rest = rest[1:]
        n = F.layer_norm(r.float(), [x.shape[-1]], eps=float(a["eps"]))
        if "modulate" in groups:
            n = n * (1 + bc1(rest[1])) + bc1(rest[0])
        elif "affine" in groups:
            n = n * rest[0] + rest[1]
        return [r, n.to(DT[c["outs"][1]["dtype"]])]  # f32 with f32_result
    if k in ("modulate", "gated_residual", "layer_norm_modulate"):
        x = f[0]
        B = x.shape[0]

        def bc(v):
            return v.view(B, 1, -1) if v.shape != x.shape else v

        if k == "modulate":
            return [(x * (1 + bc(f[2])) + bc(f[1])).to(odt)]
        if k == "gated_residual":
            return [(x + bc(f[2]) * f[1]).to(odt)]
        n = F.layer_norm(x, [x.shape[-1]], eps=float(a["eps"]))
        return [(n * (1 + bc(f[2])) + bc(f[1])).to(odt)]
    if k == "layer_norm":
        ax = int(a.get("axis", -1)) % f[0].dim()
        x = f[0]
        m = x.mean(dim=ax, keepdim=True)
        v = ((x - m) ** 2).mean(dim=ax, keepdim=True)
        y = (x - m) / torch.sqrt(v + float(a["eps"]))
        if len(f) == 3:
            shp = [1] * x.dim()
            shp[ax] = -1
            y = y * f[1].view(shp) + f[2].view(shp)
        return [y.to(odt)]
    if k == "head_rms_norm":
        x = f[0]
        d = x.shape[-1]
        return [(x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12) * f[1] * math.sqrt(d)).to(odt)]
    if k == "softmax":
        return [torch.softmax(f[0], dim=int(a.get("axis", -1))).to(odt)]
    if k == "reduce":
        ax, keep = int(a.get("axis", -1)), a.get("keepdim") == "true"
        x = f[0].double()
        r = {"sum": lambda: x.sum(ax, keepdim=keep), "mean": lambda: x.mean(ax, keepdim=keep)}.get(
            a["kind"], lambda: x.amax(ax, keepdim=keep)
        )()
        return [r.to(odt)]
    if k == "split":
        ax = int(a["axis"])
        sizes = [o["shape"][ax] for o in c["outs"]]
        return [p.contiguous() for p in torch.split(ins[0], sizes, dim=ax)]
    if k == "concat":
        return [torch.cat(ins, dim=int(a["axis"]))]
    if k == "permute":
        return [ins[0].permute(*[int(p) for p in a["perm"].split(",")]).contiguous()]
    if k == "pixel_shuffle_3d":
        x = ins[0]
        B, C8, D, H, W = x.shape
        C = C8 // 8
        return [
            x.view(B, C, 2, 2, 2, D, H, W).permute(0, 1, 5, 2, 6, 3, 7, 4).reshape(B, C, 2 * D, 2 * H, 2 * W)
        ]
    if k == "broadcast_rows":
        return [ins[0].view(-1).expand(*c["outs"][0]["shape"]).contiguous()]
    if k == "timestep_embedding":
        half = c["outs"][0]["shape"][1] // 2
        neg_log = torch.tensor(-math.log(float(a.get("max_period", 1e4))), dtype=torch.float32)
        j = torch.arange(half, dtype=torch.float32)
        freq = torch.exp(((neg_log * j) / half).double()).float().cuda()
        arg = (f[0][:, None] * freq[None]).double()
        return [torch.cat([torch.cos(arg), torch.sin(arg)], dim=1).float()]
    if k == "conv3d" and is_direct(c):  # the conv itself, in f64
        p = int(a.get("padding", 1))
        return [F.conv3d(ins[0].double(), ins[1].double(), padding=p).to(odt)]
    if k == "conv3d":  # the im2col matrix [B, Cin·k³, D'·H'·W']
        x = ins[0]
        p = int(a.get("padding", 1))
        kk = c["ins"][1]["shape"][2]
        B, Ci = x.shape[:2]
        od, oh, ow = c["outs"][0]["shape"][2:]
        xp = F.pad(x.float(), (p,) * 6).to(x.dtype)
        cols = [
            xp[:, :, ia : ia + od, ib : ib + oh, ig : ig + ow].reshape(B, Ci, 1, -1)
            for ia in range(kk)
            for ib in range(kk)
            for ig in range(kk)
        ]
        return [torch.cat(cols, dim=2).reshape(B, Ci * kk**3, -1)]
    raise KeyError(k)


def tolerance(c):
    k, odt = c["kind"], c["outs"][0]["dtype"]
    if k == "conv3d" and is_direct(c):
        return 1e-5 if odt == "f32" else 4e-3
    if k in EXACT or k == "cast" or odt == "i32":
        return 0.0
    if k == "timestep_embedding":
        return 1e-6
    return 4e-3 if odt == "f16" else 1e-5


def error(outs, exp):
    worst = 0.0
    for o, e in zip(outs, exp):
        if not o.is_floating_point():
            worst = max(worst, float((o != e).sum().item()))
            continue
        of, ef = o.float(), e.float()
        if not torch.isfinite(of).all() and torch.isfinite(ef).all():
            return float("inf")
        worst = max(worst, (of - ef).abs().max().item() / (ef.abs().max().item() + 1e-30))
    return worst


BITS = {torch.float16: torch.int16, torch.float32: torch.int32, torch.int32: torch.int32}


def dynamic_grid(c, rows):
    """The runtime's grid.x for a dynamic-row kernel."""
    return max(1, -(-rows * c["threads_per_row"] // c["block"]))


def run_dynamic(drv, c):
    """Runs a dynamic-row case for each of its row counts. Returns (worst
    error over the valid rows, whether every output byte past `rows` was left
    alone)."""
    worst, tails_ok = 0.0, True
    for rows in c["rows"]:
        if c["kind"] == "flow_update":
            x, vc, vu = [torch.randn(c["ins"][0]["shape"], device="cuda") for _ in range(3)]
            for t in (x, vc, vu):
                t[rows:] = float("nan")
            ins, scalars = [x, vc, vu], None
        else:
            ins = [rand(t, c["kind"]) for t in c["ins"]]
            if c["kind"] == "conv3d":
                ins = ins[:1]
            for x, t in zip(ins, c["ins"]):
                if t.get("dynamic"):
                    x[rows:] = float("nan") if x.is_floating_point() else 1 << 30
        outs = [
            torch.full(t["shape"], float("nan"), device="cuda", dtype=DT[t["dtype"]])
            if DT[t["dtype"]].is_floating_point
            else torch.full(t["shape"], -1, device="cuda", dtype=DT[t["dtype"]])
            for t in c["outs"]
        ]
        tails = [o[rows:].clone() for o in outs]
        for guided in (1, 0) if c["kind"] == "flow_update" else (None,):
            if guided is not None:
                w, dt = 7.5, 0.0137
                scalars = [ctypes.c_float(w), ctypes.c_float(dt), ctypes.c_int32(guided)]
                ptrs = [x.data_ptr(), vc.data_ptr(), vu.data_ptr() if guided else 0, outs[0].data_ptr()]
            else:
                scalars = []
                ptrs = [t.data_ptr() for t in ins + outs]
            args = drv.prepare(c, ptrs, scalars + [ctypes.c_int64(rows)])
            drv.launch(c, args, grid=dynamic_grid(c, rows))
            torch.cuda.synchronize()
            for o, t in zip(outs, tails):
                tails_ok &= torch.equal(o[rows:].view(BITS[o.dtype]), t.view(BITS[t.dtype]))
            if rows == 0:
                continue
            if guided is not None:
                v = (1 + w) * vc[:rows] - w * vu[:rows] if guided else vc[:rows]
                worst = max(worst, (outs[0][:rows] - (x[:rows] - dt * v)).abs().max().item())
            else:
                valid = [x[:rows] if t.get("dynamic") else x for x, t in zip(ins, c["ins"])]
                worst = max(worst, error([o[:rows] for o in outs], reference(c, valid)))
    return worst, tails_ok


E4M3_MAX = 448.0


def run_e4m3(drv, c):
    """The E4M3 variant of a fused layer norm (manifest `e4m3`), on the inputs
    the f16 kernel runs on first: its bytes must equal the f16 result
    quantized as the FP8 GEMM's static quantization does (f32(y) * q rounded
    to E4M3, saturating at +-448: runtime/kernels/fp8.cuh), exactly; its other
    results must equal the f16 kernel's bit for bit. q puts the largest fifth
    of the range past 448, so saturation is exercised. Dynamic rows: 1000
    rows, the bytes past them untouched. Returns the mismatching values."""
    v = c["e4m3"]
    rows = 1000 if "rows" in c else None
    ins = [rand(t, c["kind"]) for t in c["ins"]]
    if rows is not None:
        for x, t in zip(ins, c["ins"]):
            if t.get("dynamic"):
                x[rows:] = float("nan")
    tail = [ctypes.c_int64(rows)] if rows is not None else []
    grid = dynamic_grid(c, rows) if rows is not None else None

    def fresh():
        return [torch.full(t["shape"], float("nan"), device="cuda", dtype=DT[t["dtype"]]) for t in c["outs"]]

    outs = fresh()
    args = drv.prepare(c, [t.data_ptr() for t in ins + outs], tail)
    drv.launch(c, args, grid=grid)
    y = outs[v["result"]][:rows].float()
    q = E4M3_MAX / (0.8 * y.abs().max().item())
    e4m3 = torch.full(c["outs"][v["result"]]["shape"], 0xAB, device="cuda", dtype=torch.uint8)
    outs2 = fresh()
    outs2[v["result"]] = e4m3
    variant = dict(c, kernel=v["kernel"], grid=v["grid"], block=v["block"])
    args2 = drv.prepare(variant, [t.data_ptr() for t in ins + outs2], [ctypes.c_float(q)] + tail)
    drv.launch(variant, args2, grid=grid)
    torch.cuda.synchronize()
    exp = (y * q).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).view(torch.uint8)
    bad = int((e4m3[:rows] != exp).sum().item())
    if rows is not None:
        bad += int((e4m3[rows:] != 0xAB).sum().item())
    for i, (o, o2) in enumerate(zip(outs, outs2)):
        if i != v["result"]:
            bad += int((o[:rows].view(BITS[o.dtype]) != o2[:rows].view(BITS[o.dtype])).sum().item())
    return bad


def time_launches(drv, c, sets, reps):
    """ms per launch over `reps` launches cycling through `sets` (CUDA graph)."""
    args = [drv.prepare(c, ptrs) for ptrs in sets]
    for a in args:  # warm-up, also loads the function outside the capture
        drv.launch(c, a)
    torch.cuda.synchronize()
    try:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for i in range(reps):
                drv.launch(c, args[i % len(args)])
        run = g.replay
    except Exception:  # eager fallback: includes host launch overhead

        def run():
            for i in range(reps):
                drv.launch(c, args[i % len(args)])

    run()
    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    st.record()
    run()
    en.record()
    torch.cuda.synchronize()
    return st.elapsed_time(en) / reps


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True, help="gen_cases.py output (kernels.ptx, manifest.json)")
    ap.add_argument("--only", default="", help="substring of the kernel names to run")
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--timing-min-mb", type=float, default=8.0, help="time cases of at least this size")
    ap.add_argument("--json", default="", help="also write the rows here")
    a = ap.parse_args()
    torch.manual_seed(0)
    drv = Driver(os.path.join(a.dir, "kernels.ptx"))
    cases = json.load(open(os.path.join(a.dir, "manifest.json")))
    rows, bad = [], 0
    hdr = "%-4s %-48s %10s %8s %9s %9s %9s" % (
        "",
        "kernel",
        "max err",
        "tol",
        "us/call",
        "GB/s cold",
        "GB/s warm",
    )
    print(hdr)
    print("-" * len(hdr))
    for c in cases:
        if a.only not in c["kernel"]:
            continue
        row = dict(kernel=c["kernel"], kind=c["kind"], grid=c["grid"], block=c["block"])
        tails_ok = True
        if "rows" in c:
            worst, tails_ok = run_dynamic(drv, c)
            tol = 1e-5 if c["kind"] == "flow_update" else tolerance(c)
            row.update(rows=c["rows"], threads_per_row=c["threads_per_row"], tails_ok=tails_ok)
        elif c["kind"] == "flow_update":
            x, vc, vu = [torch.randn(c["ins"][0]["shape"], device="cuda") for _ in range(3)]
            worst = 0.0
            for guided in (1, 0):
                out = torch.full_like(x, float("nan"))
                w, dt = 7.5, 0.0137
                args = drv.prepare(
                    c,
                    [x.data_ptr(), vc.data_ptr(), vu.data_ptr() if guided else 0, out.data_ptr()],
                    [ctypes.c_float(w), ctypes.c_float(dt), ctypes.c_int32(guided)],
                )
                drv.launch(c, args)
                torch.cuda.synchronize()
                v = (1 + w) * vc - w * vu if guided else vc
                worst = max(worst, (out - (x - dt * v)).abs().max().item())
            tol = 1e-5
        else:
            ins = [rand(t, c["kind"]) for t in c["ins"]]
            if c["kind"] == "conv3d" and not is_direct(c):
                ins = ins[:1]  # the im2col kernel reads x only
            exp = reference(c, ins)
            outs = [torch.empty_like(e) for e in exp]
            for o in outs:
                o.fill_(float("nan") if o.is_floating_point() else -1)
            drv.launch(c, drv.prepare(c, [t.data_ptr() for t in ins + outs]))
            torch.cuda.synchronize()
            worst = error(outs, exp)
            tol = tolerance(c)
            nbytes = sum(t.numel() * t.element_size() for t in ins + outs)
            if nbytes >= a.timing_min_mb * 2**20:
                nsets = max(1, math.ceil(200 * 2**20 / nbytes))
                sets = [[t.data_ptr() for t in ins + outs]]
                keep = []
                for _ in range(nsets - 1):
                    s = [t.clone() for t in ins] + [torch.empty_like(o) for o in outs]
                    keep.append(s)
                    sets.append([t.data_ptr() for t in s])
                cold = time_launches(drv, c, sets, max(a.reps, nsets))
                warm = time_launches(drv, c, sets[:1], a.reps)
                row.update(
                    bytes=nbytes,
                    us_cold=cold * 1e3,
                    us_warm=warm * 1e3,
                    gbs_cold=nbytes / cold / 1e6,
                    gbs_warm=nbytes / warm / 1e6,
                )
                del keep
        ok = worst <= tol and tails_ok
        bad += not ok
        row.update(max_err=worst, tol=tol, ok=ok)
        rows.append(row)
        if c.get("e4m3"):
            mismatches = run_e4m3(drv, c)
            bad += mismatches > 0
            rows.append(
                dict(kernel=c["e4m3"]["kernel"], kind=c["kind"], mismatches=mismatches, ok=not mismatches)
            )
            print(
                "%-4s %-48s %10d %8s  E4M3 bytes vs the f16 result quantized"
                % ("ok" if not mismatches else "BAD", c["e4m3"]["kernel"], mismatches, "0"),
                flush=True,
            )
        t = (
            "%9.2f %9.0f %9.0f" % (row["us_cold"], row["gbs_cold"], row["gbs_warm"])
            if "us_cold" in row
            else ""
        )
        if "rows" in c:
            t = "rows %s%s" % (",".join(map(str, c["rows"])), "" if tails_ok else "  WROTE PAST rows")
        print("%-4s %-48s %10.3g %8.1g %s" % ("ok" if ok else "BAD", c["kernel"], worst, tol, t), flush=True)
    print("%d kernels, %s" % (len(rows), "FAILED %d" % bad if bad else "all match the reference"))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
