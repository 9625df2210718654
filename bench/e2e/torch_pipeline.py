#!/usr/bin/env python3
"""End-to-end PyTorch baseline of the TRELLIS image-to-3D pipeline (one generation = what a user runs).

The math is the three spec-written baselines in bench/pytorch (imported, not copied):
  ss_stage.py       sparse-structure flow, 25 Euler steps with CFG (cond + uncond batched), SS decoder,
                    occupancy (logits > 0) -> coords int32 [N,4]
  slat_stage.py     structured-latent flow over those N voxels, 25 steps with CFG; then de-normalization
                    (feats * std + mean, spec §3.5, pipeline.json's slat_normalization)
  slat_decoders.py  GS, RF and mesh decoders on (coords, feats)

  cond [1, Lc, Cc] -> SS stage -> coords -> SLat stage -> de-normalize -> decode_gs, decode_rf, decode_mesh

Sampler settings (steps, cfg_strength, cfg_interval, rescale_t) come from the model's pipeline.json
(spec defaults 25 / 5.0 / [0.5, 1.0] / 3.0 otherwise); --steps / --cfg override both samplers.

What is timed and what is not:
  * weights are loaded once and stay on the GPU; cond is given (no DINOv2 image encoding);
  * --warmup W generations (seeds base+K .. base+K+W-1), then --generations K timed ones (seed base+g):
    same cond, noise from a CPU generator seeded with the seed (SS noise [1,8,R,R,R] then SLat noise [N,8],
    spec §3.4); with --coords FILE stage 1 is skipped (ss = 0) and every generation uses those coords;
  * per stage: wall time between torch.cuda.synchronize() calls (time.perf_counter); total = wall time of
    the whole generation (the stages + the CPU noise draws);
  * NOT included: the mesh decoder's FlexiCubes surface extraction (the spec's FlexiCubes needs kaolin;
    decode_mesh ends at the [64N,101] fields and their coords at 4x resolution), and writing files (PLY / GLB /
    npz): this baseline writes nothing but the --json report;
  * peak device memory per mode (max_memory_allocated / max_memory_reserved, reset after the weights are
    loaded, so it includes the resident weights, warmup and compilation).

--mode compile: torch.compile (default mode) of the per-block functions, as the bench/pytorch scripts do:
SS block (fullgraph) + SS decoder, static shapes; SLat block (fullgraph) + res block; decoder block (fullgraph)
+ mesh subdivide block. The voxel count changes from seed to seed, so those are compiled with dynamic=True
unless --coords fixes N (--dynamic auto; true / false force it); with dynamic shapes the sparse convs gather in
one chunk up to --compile-chunk-mib (their row-chunk loop would make dynamo specialize N), which raises the peak
memory. "graphs_compiled" per generation counts the graphs dynamo compiled during it (non-zero in a timed
generation = a recompile was timed). If compiling a stage
fails, the error goes to "compile_error" and that stage runs eagerly from then on ("eager_fallback").

Usage:
  torch_pipeline.py --model DIR [--mode eager|compile|both] [--generations 3] [--warmup 1] [--seed 0]
                    [--formats gs,rf,mesh] [--coords coords.npy] [--cond cond.npy] [--steps S] [--cfg W]
                    [--precision fp16|fp32] [--dynamic auto|true|false] [--compile-mode default] [--json F]
  torch_pipeline.py --selftest [--mode both] [--json F]   tiny random weights, CPU or GPU, a few seconds
Without --model: random weights of --preset (tiny | large); random SS weights occupy about half the grid, so
for --preset large pass --coords.

--json FILE: {"eager": M, "compile": M, "meta": {...}}, M = {"stages_ms": {"ss", "slat", "decode_gs",
"decode_rf", "decode_mesh"} (medians over the timed generations), "total_ms" (median), "voxels" [per timed
generation], "peak_allocated_bytes", "peak_reserved_bytes", "generations": [per generation: seed, voxels,
stages_ms, total_ms, graphs_compiled, outputs], "warmup": [same], "compile_error": {stage: msg},
"eager_fallback": [stages], "dynamic", "conv_chunk_bytes"}; meta: torch, cuda, device, precision, model,
sampler, notes, ...
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pytorch"))
import ss_stage as SS  # noqa: E402
import slat_stage as SL  # noqa: E402
import slat_decoders as DEC  # noqa: E402

STAGES = ["ss", "slat", "decode_gs", "decode_rf", "decode_mesh"]
NOTES = [
    "FlexiCubes (mesh extraction from the mesh decoder's fields) is not part of the PyTorch baseline: "
    "the spec's FlexiCubes needs kaolin; decode_mesh ends at the [64N,101] fields",
    "times exclude writing files (the PyTorch baseline writes none), weight loading and image encoding",
]


# ----------------------------------------------------------------------------- weights
def sampler_params(p):
    return dict(
        steps=p.get("steps", 25),
        rescale_t=p.get("rescale_t", 3.0),
        cfg_w=p.get("cfg_strength", 5.0),
        interval=tuple(p.get("cfg_interval", [0.5, 1.0])),
    )


def load(args, dev, hdt):
    """Everything resident on the device: SS flow + decoder (unless --coords), SLat flow, the decoders, cond."""
    P = argparse.Namespace(dev=dev, hdt=hdt, ss=None)
    pipe = {}
    if args.model:
        with open(os.path.join(args.model, "pipeline.json")) as f:
            pipe = json.load(f)["args"]
    cond_file = args.cond or (os.path.join(args.model, "cond.npy") if args.model else None)
    cond = np.load(cond_file).astype(np.float32) if cond_file else None
    # SLat flow
    if args.model:
        sd, side, _ = SL.load_model_dir(args.model)
        cfg = SL.cfg_from_state_dict(sd, side, cond.shape[1] if cond is not None else None)
    else:
        cfg = SL.Cfg(SL.PRESETS[args.preset])
        sd = SL.random_state_dict(cfg, args.weight_seed)
    P.slW, P.slcfg = SL.pack_weights(sd, cfg, dev, hdt), cfg
    del sd
    if cond is None:  # seeded, each token normalized (like DINOv2 after its affine-free LayerNorm)
        c = torch.randn(1, cfg.Lc, cfg.Cc, generator=torch.Generator().manual_seed(args.weight_seed + 7))
        cond = torch.nn.functional.layer_norm(c, (cfg.Cc,)).numpy()
    P.cond = torch.from_numpy(cond).to(dev)
    P.neg = torch.zeros_like(P.cond)
    # SS flow + decoder
    if not args.coords:
        if args.model:
            P.ssW, P.ssD, _ = SS.load_model_dir(args.model, dev, hdt)
        else:
            c = SS.Cfg(tiny=args.preset == "tiny")
            c.Cc, c.Lc = cfg.Cc, cfg.Lc  # one cond for both flows
            torch.manual_seed(args.weight_seed)
            P.ssW, P.ssD = SS.make_flow_weights(c, dev, hdt), SS.make_dec_weights(c, dev, hdt)
        P.ssR = round(P.ssW["pos"].shape[0] ** (1 / 3))
        P.ss_cin = P.ssW["inw"].shape[1]
    # decoders
    P.dec = {}
    for i, fmt in enumerate(args.formats):
        if args.model:
            sd, dcfg, _ = DEC.load_decoder(args.model, DEC.HEAD_KEYS[fmt])
        else:
            dcfg = DEC.Cfg(DEC.PRESETS[args.preset])
            sd = (DEC.random_mesh_state_dict if fmt == "mesh" else DEC.random_state_dict)(
                dcfg, args.weight_seed + i
            )
        P.dec[fmt] = (DEC.pack(sd, dcfg, dev, hdt), dcfg)
        del sd
    # samplers, normalization
    P.ss_sp = sampler_params(pipe.get("sparse_structure_sampler", {}).get("params", {}))
    P.slat_sp = sampler_params(pipe.get("slat_sampler", {}).get("params", {}))
    for sp in (P.ss_sp, P.slat_sp):
        if args.steps is not None:
            sp["steps"] = args.steps
        if args.cfg is not None:
            sp["cfg_w"] = args.cfg
    norm = pipe.get("slat_normalization", {})
    P.mean = torch.tensor(norm.get("mean", DEC.SLAT_MEAN), dtype=torch.float32, device=dev)
    P.std = torch.tensor(norm.get("std", DEC.SLAT_STD), dtype=torch.float32, device=dev)
    return P


# ----------------------------------------------------------------------------- stages
def run_ss(P, noise, blk, dec):
    def fwd(W, x, tau, c, h):
        return SS.flow_forward(W, x, tau, c, h, blk)

    coords, _, _ = SS.ss_stage(P.ssW, P.ssD, P.cond, P.neg, noise, P.hdt, fwd, dec, **P.ss_sp)
    return coords  # int32 [N,4] (b,x,y,z), argwhere order


def run_slat(P, coords, noise, blk, res):
    def fwd(W, G, x, tau, c, h):
        return SL.flow_forward(W, G, x, tau, c, h, blk, res)

    lat, _ = SL.slat_stage(P.slW, coords, P.cond, noise, P.hdt, fwd, P.slcfg.R, P.slcfg.C, **P.slat_sp)
    return lat * P.std + P.mean  # de-normalized (spec §3.5)


def run_decoder(P, fmt, coords, feats, blk, sub):
    W, c = P.dec[fmt]
    wins = [DEC.Windows(coords, c.win, 0), DEC.Windows(coords, c.win, c.win // 2)]
    if fmt == "mesh":  # fields [64N,101] + coords; FlexiCubes not run
        return DEC.mesh_forward(W, coords, feats, wins, DEC.MeshGeometry(coords, c.R), P.hdt, blk, sub)
    head = DEC.gs_head if fmt == "gs" else DEC.rf_head
    return head(W, coords, DEC.trunk(W, coords, feats, wins, P.hdt, blk), c.R)


# distinct code objects, so that dynamo keeps separate caches for the SS and the SLat use of block_fn
def _ss_block(*a):
    return SS.block_fn(*a)


def _slat_block(*a):
    return SL.block_fn(*a)


def _dec_block(*a):
    return DEC.block_fn(*a)


EAGER = {
    "ss": (SS.block_fn, SS.decoder_forward),
    "slat": (SL.block_fn, SL.res_fn),
    "dec": (DEC.block_fn, DEC.subdivide_block_fn),
}


def graphs_compiled():
    try:
        from torch._dynamo.utils import counters

        return int(counters["stats"]["unique_graphs"])
    except Exception:
        return 0


CHUNK0 = SL.CONV_CHUNK_BYTES


class Runner:
    """Per-mode stage functions; times a stage; on a compile failure records it and reruns the stage eagerly."""

    def __init__(self, mode, dyn, compile_mode, dev, chunk_mib=0):
        self.mode, self.errors, self.dev = mode, {}, dev
        self.fns = dict(EAGER)
        # the sparse convs' row chunking is a Python loop over N, which makes dynamo specialize N (a recompile
        # per voxel count); with dynamic shapes the gather runs in one chunk up to chunk_mib (more memory)
        SL.CONV_CHUNK_BYTES = max(CHUNK0, chunk_mib << 20) if mode == "compile" and dyn else CHUNK0
        if mode == "compile":
            torch._dynamo.reset()
            for k in ("cache_size_limit", "recompile_limit"):
                if hasattr(torch._dynamo.config, k):
                    setattr(torch._dynamo.config, k, max(64, getattr(torch._dynamo.config, k)))

            def cc(f, dynamic, fullgraph=False):
                return torch.compile(f, mode=compile_mode, dynamic=dynamic, fullgraph=fullgraph)

            self.fns = {
                "ss": (cc(_ss_block, False, True), cc(SS.decoder_forward, False)),
                "slat": (cc(_slat_block, dyn, True), cc(SL.res_fn, dyn)),
                "dec": (cc(_dec_block, dyn, True), cc(DEC.subdivide_block_fn, dyn, True)),
            }

    def sync(self):
        if self.dev.type == "cuda":
            torch.cuda.synchronize()

    def timed(self, stage, fn):
        """fn(*stage_functions) -> result; returns (result, ms)."""
        group = "dec" if stage.startswith("decode") else stage
        if self.mode == "compile" and stage not in self.errors:
            try:
                self.sync()
                t0 = time.perf_counter()
                r = fn(*self.fns[group])
                self.sync()
                return r, (time.perf_counter() - t0) * 1e3
            except Exception as ex:
                self.errors[stage] = f"{type(ex).__name__}: {ex}"[:4000]
                print(
                    f"[compile] {stage}: torch.compile FAILED ({type(ex).__name__}: {str(ex)[:300]}); "
                    f"falling back to eager for this stage",
                    flush=True,
                )
        self.sync()
        t0 = time.perf_counter()
        r = fn(*EAGER[group])
        self.sync()
        return r, (time.perf_counter() - t0) * 1e3


def generation(P, R, seed, formats, coords_fixed, check):
    g = torch.Generator().manual_seed(seed)
    n0 = graphs_compiled()
    st, outs = {}, {}
    R.sync()
    t_start = time.perf_counter()
    if coords_fixed is None:
        noise = torch.randn(1, P.ss_cin, P.ssR, P.ssR, P.ssR, generator=g).to(P.dev)
        coords, st["ss"] = R.timed("ss", lambda blk, dec: run_ss(P, noise, blk, dec))
    else:
        coords, st["ss"] = coords_fixed, 0.0
    N = int(coords.shape[0])
    if N == 0:
        raise RuntimeError(f"seed {seed}: empty occupancy (N = 0); the later stages are undefined")
    noise = torch.randn(N, P.slcfg.cin, generator=g).to(P.dev)
    feats, st["slat"] = R.timed("slat", lambda blk, res: run_slat(P, coords, noise, blk, res))
    for fmt in formats:
        out, st["decode_" + fmt] = R.timed(
            "decode_" + fmt, lambda blk, sub: run_decoder(P, fmt, coords, feats, blk, sub)
        )
        key = {"gs": "_xyz", "rf": "density", "mesh": "fields"}[fmt]
        outs[fmt] = list(out[key].shape)
        if check:
            assert all(bool(torch.isfinite(v).all()) for v in out.values() if v.is_floating_point()), fmt
        del out
    R.sync()
    total = (time.perf_counter() - t_start) * 1e3
    if check:
        assert coords.dtype == torch.int32 and coords.shape[1] == 4 and bool((coords[:, 0] == 0).all())
        assert bool(torch.isfinite(feats).all())
    return (
        dict(
            seed=seed,
            voxels=N,
            stages_ms=st,
            total_ms=total,
            graphs_compiled=graphs_compiled() - n0,
            outputs=outs,
        ),
        coords,
    )


def run_mode(mode, P, args, dyn):
    dev = P.dev
    if dev.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    R = Runner(mode, dyn, args.compile_mode, dev, args.compile_chunk_mib)
    coords_fixed = None
    if args.coords:
        c = np.load(args.coords).astype(np.int32)
        assert (
            c.ndim == 2 and c.shape[1] == 4 and (c[:, 0] == 0).all()
        ), "--coords: int32 [N,4], b = 0 (B = 1)"
        coords_fixed = torch.from_numpy(c).to(dev)
    res = {"warmup": [], "generations": []}
    K, W = args.generations, args.warmup
    plan = [("warmup", args.seed + K + w) for w in range(W)] + [
        ("generations", args.seed + g) for g in range(K)
    ]
    for kind, seed in plan:
        r, _ = generation(P, R, seed, args.formats, coords_fixed, args.selftest)
        res[kind].append(r)
        print(
            f"[{mode}] {'warmup' if kind == 'warmup' else 'gen':6} seed {seed:3d}: N={r['voxels']:6d}  "
            + "  ".join(f"{k} {v:8.1f}" for k, v in r["stages_ms"].items())
            + f"  total {r['total_ms']:8.1f} ms"
            + (f"  (graphs compiled {r['graphs_compiled']})" if mode == "compile" else ""),
            flush=True,
        )
    gens = res["generations"]
    res["stages_ms"] = {k: statistics.median(g["stages_ms"][k] for g in gens) for k in gens[0]["stages_ms"]}
    res["total_ms"] = statistics.median(g["total_ms"] for g in gens)
    res["voxels"] = [g["voxels"] for g in gens]
    res["peak_allocated_bytes"] = torch.cuda.max_memory_allocated() if dev.type == "cuda" else 0
    res["peak_reserved_bytes"] = torch.cuda.max_memory_reserved() if dev.type == "cuda" else 0
    res["dynamic"] = dyn if mode == "compile" else None
    res["conv_chunk_bytes"] = SL.CONV_CHUNK_BYTES
    res["compile_error"] = R.errors
    res["eager_fallback"] = sorted(R.errors)
    for s, e in R.errors.items():
        print(f"[{mode}] {s}: ran EAGER (compile failed: {e[:200]})", flush=True)
    return res


# ----------------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="TRELLIS model dir (pipeline.json + ckpts/*.safetensors [+ cond.npy])")
    ap.add_argument(
        "--preset", default="tiny", choices=["tiny", "large"], help="random-weight shapes without --model"
    )
    ap.add_argument("--weight-seed", type=int, default=0, help="seed of the random weights / random cond")
    ap.add_argument("--cond", help="f32 [1,Lc,Cc] .npy (default: the model's cond.npy, else seeded random)")
    ap.add_argument("--coords", help="int32 [N,4] .npy: skip stage 1, same coords every generation")
    ap.add_argument("--formats", default="gs,rf,mesh")
    ap.add_argument(
        "--mode", default=None, choices=["eager", "compile", "both"], help="default both (selftest: eager)"
    )
    ap.add_argument("--generations", type=int, default=None, help="timed generations (default 3; selftest 2)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0, help="base seed: timed generation g uses seed + g")
    ap.add_argument("--steps", type=int, help="override both samplers' steps (selftest default 5)")
    ap.add_argument("--cfg", type=float, help="override both samplers' cfg_strength")
    ap.add_argument("--precision", choices=["fp16", "fp32"], help="default fp16 on the GPU, fp32 on the CPU")
    ap.add_argument(
        "--dynamic",
        default="auto",
        choices=["auto", "true", "false"],
        help="torch.compile dynamic= for the SLat stage and the decoders (auto: true unless --coords)",
    )
    ap.add_argument("--compile-mode", default="default")
    ap.add_argument(
        "--compile-chunk-mib",
        type=int,
        default=16384,
        help="compile with dynamic shapes: sparse-conv gather chunk (eager: slat_stage's 1024 MiB)",
    )
    ap.add_argument("--selftest", action="store_true", help="tiny random weights, few steps, output checks")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.selftest:
        args.model, args.preset = None, "tiny"
        args.steps = 5 if args.steps is None else args.steps
    args.mode = args.mode or ("eager" if args.selftest else "both")
    args.generations = args.generations or (2 if args.selftest else 3)
    args.formats = [f for f in args.formats.split(",") if f]
    assert args.formats and all(
        f in DEC.HEAD_KEYS for f in args.formats
    ), "--formats: comma list of gs, rf, mesh"
    assert args.generations >= 1 and args.warmup >= 0

    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    prec = args.precision or ("fp16" if dev.type == "cuda" else "fp32")
    hdt = torch.float16 if prec == "fp16" else torch.float32
    if prec == "fp32":
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    torch.set_grad_enabled(False)
    devname = torch.cuda.get_device_name() if dev.type == "cuda" else "cpu"
    print(
        f"torch {torch.__version__} (CUDA {torch.version.cuda}); device {devname}; precision {prec}",
        flush=True,
    )
    if not args.model and args.preset == "large" and not args.coords:
        print(
            "WARNING: random SS weights of the large preset occupy about half of the 64^3 grid; pass --coords "
            "(or --model) for a meaningful voxel count",
            flush=True,
        )

    t0 = time.perf_counter()
    P = load(args, dev, hdt)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    load_s = time.perf_counter() - t0
    wbytes = torch.cuda.memory_allocated() if dev.type == "cuda" else 0
    src = args.model or f"random ({args.preset} preset, seed {args.weight_seed})"
    print(
        f"weights {src}: loaded in {load_s:.1f} s, {wbytes / 2**30:.2f} GiB on the device; cond "
        f"{list(P.cond.shape)}; SLat {P.slcfg}; SS sampler {P.ss_sp}; SLat sampler {P.slat_sp}",
        flush=True,
    )
    for n in NOTES:
        print("note: " + n, flush=True)

    dyn = {"true": True, "false": False}.get(args.dynamic, not args.coords)
    out = {}
    for m in ["eager", "compile"] if args.mode == "both" else [args.mode]:
        try:
            out[m] = run_mode(m, P, args, dyn)
        except Exception as ex:  # keep the other mode's numbers
            if args.selftest:
                raise
            print(f"[{m}] FAILED: {type(ex).__name__}: {str(ex)[:2000]}", flush=True)

    stg = ["ss", "slat"] + ["decode_" + f for f in args.formats]
    print(
        f"\n=== TRELLIS end to end, PyTorch baseline: medians over {args.generations} generations after "
        f"{args.warmup} warmup; {devname}, {prec}, weights {src}"
        + (f", coords {args.coords} (stage 1 skipped)" if args.coords else "")
        + " ==="
    )
    print(
        f"{'mode':8} " + " ".join(f"{s:>11}" for s in stg) + f" {'total ms':>10} {'peak alloc GiB':>14} "
        f"{'reserved GiB':>12}  voxels"
    )
    for m, r in out.items():
        print(
            f"{m:8} " + " ".join(f"{r['stages_ms'][s]:11.1f}" for s in stg) + f" {r['total_ms']:10.1f} "
            f"{r['peak_allocated_bytes'] / 2**30:14.2f} {r['peak_reserved_bytes'] / 2**30:12.2f}  {r['voxels']}"
            + (f"  eager fallback: {r['eager_fallback']}" if r["eager_fallback"] else "")
        )
    print("not included: " + "; ".join(NOTES))

    if args.json:
        meta = dict(
            torch=torch.__version__,
            cuda=torch.version.cuda,
            device=devname,
            precision=prec,
            model=src,
            coords=args.coords,
            formats=args.formats,
            generations=args.generations,
            warmup=args.warmup,
            seed=args.seed,
            sampler={"ss": P.ss_sp, "slat": P.slat_sp},
            compile_mode=args.compile_mode,
            dynamic=dyn,
            load_s=load_s,
            weights_bytes=wbytes,
            slat_cfg=repr(P.slcfg),
            notes=NOTES,
            timing="stage = perf_counter between torch.cuda.synchronize() calls; total = whole generation",
        )
        with open(args.json, "w") as f:
            json.dump(dict(out, meta=meta), f, indent=1)
        print(f"wrote {args.json}")

    if args.selftest:
        selftest_checks(P, args, out)


def selftest_checks(P, args, out):
    for m, r in out.items():
        assert set(r["stages_ms"]) == {"ss", "slat"} | {"decode_" + f for f in args.formats}, r["stages_ms"]
        assert len(r["generations"]) == args.generations and len(r["voxels"]) == args.generations
        for g in r["generations"] + r["warmup"]:
            N = g["voxels"]
            assert N > 0 and all(math.isfinite(v) and v >= 0 for v in g["stages_ms"].values())
            exp = {"gs": [32 * N, 3], "rf": [N, 16], "mesh": [64 * N, 101]}
            assert all(g["outputs"][f] == exp[f] for f in args.formats), (g["outputs"], N)
    # the --coords path: the coords of seed s, fed back, give the same N and skip stage 1
    R = Runner("eager", False, "default", P.dev)
    g0, coords = generation(P, R, args.seed, args.formats, None, True)
    g1, _ = generation(P, R, args.seed, args.formats, coords, True)
    assert g1["voxels"] == g0["voxels"] and g1["stages_ms"]["ss"] == 0.0
    if "eager" in out:
        assert out["eager"]["generations"][0]["voxels"] == g0["voxels"], "seed not reproducible"
    print(
        f"selftest OK: modes {list(out)}, voxels {[r['voxels'] for r in out.values()]}, "
        f"outputs {g0['outputs']}, --coords path N={g1['voxels']}",
        flush=True,
    )


if __name__ == "__main__":
    main()
