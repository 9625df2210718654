#!/usr/bin/env python3
"""Build-machine half of the generated-kernel GPU check (README.md).

Writes one CUDA function with one op per case (ops.mlir), runs
`trellis-opt --trellis-gpu-codegen=ptx-out=kernels.ptx` on it and records, per
case, the kernel name, its launch and the tensor specs (manifest.json). Cases
with dynamic rows (the sparse stages: `tensor<?x...>` with a bound) also
record `threads_per_row` and the row counts the device runner launches them
with (`rows`); their tensor specs carry the bound as dimension 0 and
`"dynamic": true`. Only the standard library: the build machine needs no
NumPy / PyTorch.

  test/gpu/codegen/gen_cases.py --trellis-opt build/bin/trellis-opt --out build-gpu/codegen
"""
import argparse
import json
import os
import re
import subprocess
import sys

F16, F32, I32 = "f16", "f32", "i32"
UNARY = ["silu", "gelu", "sigmoid", "tanh", "exp", "neg", "abs", "sqrt", "softplus"]
# Dynamic-row cases: the bound of dimension 0 and the actual row counts the
# device runner launches each with (fewer than the bound, one, none, all).
BOUND = 4096
ROWS = [1000, 1, 0, BOUND]


def T(shape, dt):
    return {"shape": shape, "dtype": dt}


def D(shape, dt):
    """A tensor with dynamic rows: shape[0] is the bound."""
    return {"shape": shape, "dtype": dt, "dynamic": True}


def ty(t):
    if t.get("dynamic"):
        return "tensor<?x%sx%s, #trellis.bounds<[%d]>>" % (
            "x".join(map(str, t["shape"][1:])),
            t["dtype"],
            t["shape"][0],
        )
    return "tensor<%sx%s>" % ("x".join(map(str, t["shape"])), t["dtype"])


def build_cases():
    cases = []

    def case(kind, ins, outs, attrs="", form="", e4m3=False):
        """`form`: gated_residual_norm's optional operand groups, in order
        ("plus", "modulate", "affine"), after its three operands. `e4m3`: the
        normalized result feeds a static-scale FP8 linear, so the kernel also
        gets its E4M3 variant (trellis.launch_e4m3)."""
        cases.append(dict(kind=kind, ins=ins, outs=outs, attrs=attrs, form=form, e4m3=e4m3))

    # X: the SS flow transformer's tokens at image-large size with CFG batched
    # (B = 2); X1: one sample, the shape the SS-stage profile reports.
    X, X1 = [2, 4096, 1024], [1, 4096, 1024]
    case("cast", [T(X, F32)], [T(X, F16)])
    case("cast", [T(X, F16)], [T(X, F32)])
    for u in UNARY:
        s = [2, 4096, 4096] if u == "gelu" else [1, 512, 256]
        case(u, [T(s, F16)], [T(s, F16)])
    case("silu", [T([1, 16, 32, 32, 32], F32)], [T([1, 16, 32, 32, 32], F32)])
    case("add", [T(X1, F16), T([4096, 1024], F16)], [T(X1, F16)])
    case("mul", [T(X1, F16), T([1, 1024], F16)], [T(X1, F16)])
    case("sub", [T([4, 8], F32), T([4, 1], F32)], [T([4, 8], F32)])
    case("div", [T([3, 5, 7], F32), T([5, 1], F32)], [T([3, 5, 7], F32)])
    case("maximum", [T([6, 10], F16), T([10], F16)], [T([6, 10], F16)])
    case("pow", [T([6, 10], F32), T([10], F32)], [T([6, 10], F32)])
    for cmp in ("greater", "less", "equal"):
        case(cmp, [T([6, 10], F32), T([10], F32)], [T([6, 10], F32)])
    case("greater", [T([16, 3], I32), T([3], I32)], [T([16, 3], I32)])
    case("where", [T([6, 10], F16), T([6, 10], F16), T([1], F16)], [T([6, 10], F16)])
    case("add", [T([16, 3], I32), T([3], I32)], [T([16, 3], I32)])
    case("modulate", [T(X, F16), T([2, 1024], F16), T([2, 1024], F16)], [T(X, F16)])
    for s in (X, X1):
        v = [s[0], 1024]
        case("gated_residual", [T(s, F16), T(s, F16), T(v, F16)], [T(s, F16)])
        case("layer_norm", [T(s, F16)], [T(s, F16)], "{eps = 1.0e-06 : f64}")
        case("layer_norm", [T(s, F16), T([1024], F32), T([1024], F32)], [T(s, F16)], "{eps = 1.0e-06 : f64}")
        fp8 = s == X1  # the E4M3 variants at the SS stage's shape
        case(
            "layer_norm_modulate",
            [T(s, F16), T(v, F16), T(v, F16)],
            [T(s, F16)],
            "{eps = 1.0e-06 : f64}",
            e4m3=fp8,
        )
        case(
            "gated_residual_norm",
            [T(s, F16), T(s, F16)] + [T(v, F16)] * 3,
            [T(s, F16), T(s, F16)],
            "{eps = 1.0e-06 : f64}",
            form="modulate",
            e4m3=fp8,
        )
        case(
            "gated_residual_norm",
            [T(s, F16), T(s, F16), T(v, F16), T([1024], F32), T([1024], F32)],
            [T(s, F16), T(s, F16)],
            "{eps = 1.0e-06 : f64}",
            form="affine",
            e4m3=fp8,
        )
    # The SS flow's f32 output layer (the residual widened, its norm in f32).
    case(
        "gated_residual_norm",
        [T(X1, F16), T(X1, F16), T([1, 1024], F16)],
        [T(X1, F16), T(X1, F32)],
        "{eps = 1.0e-05 : f64, f32_result}",
    )
    case("layer_norm", [T([1, 512, 128], F32)], [T([1, 512, 128], F32)], "{eps = 1.0e-05 : f64}")
    case("layer_norm", [T([3, 1374], F16)], [T([3, 1374], F16)], "{eps = 1.0e-05 : f64}")
    case("layer_norm", [T([2, 16384], F32)], [T([2, 16384], F32)], "{eps = 1.0e-05 : f64}")
    # The SS decoder's channel-first layer norms (16³·512, 32³·128, 64³·32).
    for c, d, dt in ((512, 16, F16), (128, 32, F16), (32, 64, F16), (32, 64, F32), (24, 6, F32)):
        s = [1, c, d, d, d]
        case(
            "layer_norm",
            [T(s, dt), T([c], F32), T([c], F32)],
            [T(s, dt)],
            "{axis = 1 : i64, eps = 1.0e-05 : f64}",
        )
    case(
        "layer_norm", [T([2, 8, 5, 6], F32)], [T([2, 8, 5, 6], F32)], "{axis = 1 : i64, eps = 1.0e-05 : f64}"
    )
    case("head_rms_norm", [T([2, 4096, 16, 64], F16), T([16, 64], F32)], [T([2, 4096, 16, 64], F16)])
    case("softmax", [T([4, 1374], F16)], [T([4, 1374], F16)])
    case("softmax", [T([4, 6, 5], F32)], [T([4, 6, 5], F32)], "{axis = 1 : i64}")
    case("reduce", [T([4, 1374], F16)], [T([4], F16)], '{kind = "mean"}')
    case("reduce", [T(X, F16)], [T([2, 4096, 1], F16)], '{kind = "sum", keepdim = true}')
    case("reduce", [T([4, 6, 5], F32)], [T([4, 5], F32)], '{kind = "max", axis = 1 : i64}')
    case("reduce", [T([8, 300, 3], F32)], [T([300, 3], F32)], '{kind = "sum", axis = 0 : i64}')
    case(
        "split",
        [T([2, 4096, 3, 16, 64], F16)],
        [T([2, 4096, 1, 16, 64], F16)] * 3,
        "{axis = 2 : i64, sizes = array<i64: 1, 1, 1>}",
    )
    case(
        "split",
        [T([2, 6144], F16)],
        [T([2, 1024], F16)] * 6,
        "{axis = 1 : i64, sizes = array<i64: 1024, 1024, 1024, 1024, 1024, 1024>}",
    )
    case(
        "split",
        [T([5, 7], F32)],
        [T([5, 3], F32), T([5, 4], F32)],
        "{axis = 1 : i64, sizes = array<i64: 3, 4>}",
    )
    case("concat", [T([5, 2], F16), T([5, 4], F16)], [T([5, 6], F16)], "{axis = 1 : i64}")
    case("concat", [T(X, F16), T(X, F16)], [T([2, 4096, 2048], F16)], "{axis = 2 : i64}")
    case("permute", [T([1, 8, 4096], F32)], [T([1, 4096, 8], F32)], "{perm = array<i64: 0, 2, 1>}")
    case("permute", [T([2, 4, 64], F16)], [T([4, 2, 64], F16)], "{perm = array<i64: 1, 0, 2>}")
    case(
        "pixel_shuffle_3d",
        [T([1, 1024, 16, 16, 16], F16)],
        [T([1, 128, 32, 32, 32], F16)],
        "{factor = 2 : i64}",
    )
    case(
        "timestep_embedding",
        [T([2], F32)],
        [T([2, 256], F32)],
        "{dim = 256 : i64, max_period = 1.000000e+04 : f64}",
    )
    case("broadcast_rows", [T([1, 1024], F16)], [T([2, 1374, 1024], F16)])
    # conv3d: the codegen's part is the im2col kernel (the GEMM is cuBLASLt),
    # or with at most 4 output channels the whole conv (a direct kernel): the
    # SS decoder's f32 output conv, and the small f32 ones below.
    case(
        "conv3d",
        [T([1, 512, 16, 16, 16], F16), T([1024, 512, 3, 3, 3], F16)],
        [T([1, 1024, 16, 16, 16], F16)],
        "{padding = 1 : i64}",
    )
    case("conv3d", [T([1, 32, 64, 64, 64], F16), T([32, 32, 3, 3, 3], F16)], [T([1, 32, 64, 64, 64], F16)])
    case("conv3d", [T([2, 8, 8, 8, 8], F32), T([4, 8, 3, 3, 3], F32)], [T([2, 4, 8, 8, 8], F32)])
    case(
        "conv3d",
        [T([1, 3, 5, 6, 7], F32), T([4, 3, 3, 3, 3], F32)],
        [T([1, 4, 3, 4, 5], F32)],
        "{padding = 0 : i64}",
    )
    case("conv3d", [T([1, 32, 64, 64, 64], F32), T([1, 32, 3, 3, 3], F32)], [T([1, 1, 64, 64, 64], F32)])
    case("conv3d", [T([2, 8, 8, 8, 8], F32), T([5, 8, 3, 3, 3], F32)], [T([2, 5, 8, 8, 8], F32)])
    # Dynamic rows (the SLat flow at image-large width, its decoders): built
    # for the bound, launched for ROWS.
    N = BOUND
    case("cast", [D([N, 1024], F32)], [D([N, 1024], F16)])
    case("cast", [D([N, 128], F16)], [D([N, 128], F32)])
    case("cast", [D([N, 3], I32)], [D([N, 3], F32)])
    case("silu", [D([N, 192], F16)], [D([N, 192], F16)])
    case("add", [D([N, 1024], F16), T([1, 1024], F16)], [D([N, 1024], F16)])
    case("add", [D([N, 32, 3], F32), T([32, 3], F32)], [D([N, 32, 3], F32)])
    case("add", [D([N, 1, 3], F32), D([N, 32, 3], F32)], [D([N, 32, 3], F32)])
    case("mul", [D([N, 128], F32), T([1], F32)], [D([N, 128], F32)])
    case("add", [D([N, 768], F16), D([N, 768], F16)], [D([N, 768], F16)])
    case("gated_residual", [D([N, 1024], F16)] * 3, [D([N, 1024], F16)])
    case(
        "layer_norm",
        [D([N, 1024], F16), T([1024], F32), T([1024], F32)],
        [D([N, 1024], F16)],
        "{eps = 1.0e-06 : f64}",
    )
    case("layer_norm", [D([N, 768], F16)], [D([N, 768], F16)], "{eps = 1.0e-06 : f64}")
    case("layer_norm", [D([N, 16384], F32)], [D([N, 16384], F32)], "{eps = 1.0e-05 : f64}")
    case(
        "layer_norm_modulate",
        [D([N, 1024], F16)] * 3,
        [D([N, 1024], F16)],
        "{eps = 1.0e-06 : f64}",
        e4m3=True,
    )
    case("layer_norm_modulate", [D([N, 128], F16)] * 3, [D([N, 128], F16)], "{eps = 1.0e-06 : f64}")
    case(
        "gated_residual_norm",
        [D([N, 1024], F16)] * 2 + [T([1, 1024], F16)] * 4,
        [D([N, 1024], F16)] * 2,
        "{eps = 1.0e-06 : f64}",
        form="plus modulate",
        e4m3=True,
    )
    case("head_rms_norm", [D([N, 16, 64], F16), T([16, 64], F32)], [D([N, 16, 64], F16)])
    case(
        "reduce",
        [D([N, 16, 64], F16)],
        [D([N, 1, 64], F16)],
        '{kind = "mean", axis = 1 : i64, keepdim = true}',
    )
    case("concat", [D([N, 1024], F16), D([N, 1024], F16)], [D([N, 2048], F16)], "{axis = 1 : i64}")
    case("concat", [D([N, 128], F16), D([N, 128], F16)], [D([N, 256], F16)], "{axis = 1 : i64}")
    case(
        "split",
        [D([N, 448], F32)],
        [D([N, 96], F32)] * 3 + [D([N, 128], F32), D([N, 32], F32)],
        "{axis = 1 : i64, sizes = array<i64: 96, 96, 96, 128, 32>}",
    )
    case(
        "split",
        [D([N, 3, 16, 64], F16)],
        [D([N, 1, 16, 64], F16)] * 3,
        "{axis = 1 : i64, sizes = array<i64: 1, 1, 1>}",
    )
    return cases


# The flow samplers: the SS stage's static latent and the SLat stage's
# [?, 8] one (dynamic rows).
DYN8 = "tensor<?x8xf32, #trellis.bounds<[%d]>>" % BOUND
FLOWS = [([2, 8, 16, 16, 16], False), ([BOUND, 8], True)]
FLOW_DYN = """  %fd = trellis.flow_sample %noised, %cond, %cond {cfg_interval = array<f64: 5.000000e-01, 1.000000e+00>, cfg_strength = 7.500000e+00 : f64, rescale_t = 3.000000e+00 : f64, steps = 25 : i64} : (DYN8, tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> DYN8 {
  ^bb0(%x: DYN8, %t: tensor<2xf32>, %c: tensor<2x4x16xf32>):
    trellis.yield %x : DYN8
  }""".replace(
    "DYN8", DYN8
)
FLOW = """  %fs = trellis.flow_sample %noise, %cond, %cond {cfg_interval = array<f64: 5.000000e-01, 1.000000e+00>, cfg_strength = 7.500000e+00 : f64, rescale_t = 3.000000e+00 : f64, steps = 25 : i64} : (tensor<2x8x16x16x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x8x16x16x16xf32> {
  ^bb0(%x: tensor<2x8x16x16x16xf32>, %t: tensor<2xf32>, %c: tensor<2x4x16xf32>):
    trellis.yield %x : tensor<2x8x16x16x16xf32>
  }"""


def module_text(cases):
    lines, args = [], []
    for ci, c in enumerate(cases):
        names = []
        for ii, t in enumerate(c["ins"]):
            n = "%%a%d_%d" % (ci, ii)
            args.append("%s: %s" % (n, ty(t)))
            names.append(n)
        outs = ", ".join(ty(t) for t in c["outs"])
        if len(c["outs"]) > 1:
            outs = "(" + outs + ")"
        res = "%%r%d" % ci + (":%d" % len(c["outs"]) if len(c["outs"]) > 1 else "")
        if c["kind"] in UNARY:
            lines.append("  %s = trellis.%s %s : %s" % (res, c["kind"], names[0], ty(c["ins"][0])))
        elif c["form"]:  # x, h, gate, then one or two operands per group
            text, rest = ", ".join(names[:3]), names[3:]
            for group in c["form"].split():
                n = 1 if group == "plus" else 2
                text += " %s %s" % (group, ", ".join(rest[:n]))
                rest = rest[n:]
            lines.append(
                "  %s = trellis.%s %s %s : (%s) -> %s"
                % (res, c["kind"], text, c["attrs"], ", ".join(ty(t) for t in c["ins"]), outs)
            )
        else:
            lines.append(
                "  %s = trellis.%s %s %s : (%s) -> %s"
                % (res, c["kind"], ", ".join(names), c["attrs"], ", ".join(ty(t) for t in c["ins"]), outs)
            )
        if c["e4m3"]:  # the normalized (last) result into a static-scale FP8 linear
            y = c["outs"][-1]
            w = "%%w%d" % ci
            args.append("%s: tensor<64x%dxf16>" % (w, y["shape"][-1]))
            lin = dict(y, shape=y["shape"][:-1] + [64])
            lines.append(
                '  %%l%d = trellis.linear %%r%d%s, %s {activation_amax = 4.0 : f32, precision = "fp8_e4m3"}'
                " : (%s, tensor<64x%dxf16>) -> %s"
                % (
                    ci,
                    ci,
                    "#%d" % (len(c["outs"]) - 1) if len(c["outs"]) > 1 else "",
                    w,
                    ty(y),
                    y["shape"][-1],
                    ty(lin),
                )
            )
    args += ["%noise: tensor<2x8x16x16x16xf32>", "%cond: tensor<2x4x16xf32>", "%noised: " + DYN8]
    return 'func.func @check(%s) attributes {trellis.device = "cuda"} {\n%s\n%s\n%s\n  return\n}\n' % (
        ", ".join(args),
        "\n".join(lines),
        FLOW,
        FLOW_DYN,
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trellis-opt", required=True)
    ap.add_argument("--out", required=True, help="directory for ops.mlir, kernels.ptx, manifest.json")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    cases = build_cases()
    mlir = os.path.join(a.out, "ops.mlir")
    ptx = os.path.join(a.out, "kernels.ptx")
    with open(mlir, "w") as f:
        f.write(module_text(cases))
    r = subprocess.run(
        [a.trellis_opt, "--trellis-gpu-codegen=ptx-out=" + ptx, mlir], capture_output=True, text=True
    )
    if r.returncode:
        sys.exit("trellis-opt failed:\n" + r.stderr)
    launches = re.findall(
        r"trellis\.(?:launch|update) = \{block = array<i64: (\d+), 1, 1>, "
        r'grid = array<i64: (\d+), 1, 1>, kernel = "([^"]+)", smem = \d+ : i64'
        r"(?:, threads_per_row = (\d+) : i64)?\}",
        r.stdout,
    )
    if len(launches) != len(cases) + len(FLOWS):
        sys.exit("expected %d kernel annotations, found %d" % (len(cases) + len(FLOWS), len(launches)))
    variants = re.findall(
        r"trellis\.launch_e4m3 = \{block = array<i64: (\d+), 1, 1>, "
        r'grid = array<i64: (\d+), 1, 1>, kernel = "([^"]+)", result = (\d+) : i64',
        r.stdout,
    )
    fp8_cases = [c for c in cases if c["e4m3"]]
    if len(variants) != len(fp8_cases):
        sys.exit("expected %d E4M3 variants, found %d" % (len(fp8_cases), len(variants)))
    for c, (b, g, k, res) in zip(fp8_cases, variants):
        c["e4m3"] = dict(block=int(b), grid=int(g), kernel=k, result=int(res))
    for shape, dyn in FLOWS:
        t = D(shape, F32) if dyn else T(shape, F32)
        cases.append(dict(kind="flow_update", ins=[t] * 3, outs=[t], attrs=""))
    for c, (b, g, k, tpr) in zip(cases, launches):
        c.update(block=int(b), grid=int(g), kernel=k)
        c["attrs_parsed"] = {
            k: v.strip('"')
            for k, v in re.findall(r'(\w+) = (?:array<i64: )?("[^"]*"|true|false|[-\d., e+]+)', c["attrs"])
        }
        dyn = any(t.get("dynamic") for t in c["ins"] + c["outs"])
        if dyn != bool(tpr):
            sys.exit("%s: dynamic rows %s but threads_per_row %r" % (k, dyn, tpr))
        if dyn:
            c.update(threads_per_row=int(tpr), rows=ROWS)
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(cases, f, indent=1)
    print("%d cases, %d kernels -> %s" % (len(cases), len(launches), a.out))


if __name__ == "__main__":
    main()
