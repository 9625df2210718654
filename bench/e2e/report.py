#!/usr/bin/env python3
"""Prints the end-to-end table of one bench/e2e/run_device.sh call from the files it wrote.

  report.py OUT_DIR

Per voxel set ("own": the pipeline's own stage 1; "surface": a 19k-voxel shell given with --coords, stage 1
skipped; "vary": a new shell every generation; "full": vary with stage 1 run every generation, its voxels
replaced by the shell's): trellisc warm (median over the timed generations of one
trellis.exe process: per-stage wall times, the generation's wall and GPU time, host setup), trellis.exe cold
(one process per generation: the process's wall time), PyTorch eager and torch.compile (torch_pipeline.py
medians), peak device memory (nvidia-smi, context included) and the GPU's busy share of a warm generation
(kernel trace). Missing inputs are left out of the table.
"""
import json
import re
import statistics
import sys
from pathlib import Path

GEN = re.compile(
    r"^generation (\S+): ([0-9.e+-]+) s wall, ([0-9.e+-]+) s GPU, (\d+) voxels.*"
    r"\(host: inputs read in [0-9.e+-]+ s, setup ([0-9.e+-]+) s, downloads ([0-9.e+-]+) s\)"
)
STAGE = re.compile(r"^\[(\d)/3 [^\]]*\] (?:done in ([0-9.e+-]+) s|FlexiCubes \((\w+)\) .* in ([0-9.e+-]+) s)")
BUSY = re.compile(r"span ([0-9.]+) ms, busy ([0-9.]+) ms")


def generations(log):
    """[(id, wall, gpu, voxels, setup, stages)] with stages = {ss, slat, decoders, flexicubes} seconds."""
    out, stages, order = [], {}, []
    for line in Path(log).read_text().splitlines():
        if line.startswith("[1/3") and "running" in line:
            stages, order = {}, []
        m = STAGE.match(line)
        if m and m.group(2):
            key = {"1": "ss", "2": "slat", "3": "decoders"}[m.group(1)]
            stages[key] = stages.get(key, 0.0) + float(m.group(2))
        elif m and m.group(4):
            stages["flexicubes"] = float(m.group(4))
        g = GEN.match(line)
        if g:
            out.append(
                (g.group(1), float(g.group(2)), float(g.group(3)), int(g.group(4)), float(g.group(5)), stages)
            )
            stages = {}
    return out


def med(values):
    return statistics.median(values) if values else float("nan")


def trellisc_row(gens):
    keys = ("ss", "slat", "decoders", "flexicubes")
    stage = {k: med([g[5].get(k, 0.0) for g in gens]) * 1e3 for k in keys}
    return (
        stage,
        med([g[1] for g in gens]) * 1e3,
        med([g[2] for g in gens]) * 1e3,
        med([g[4] for g in gens]) * 1e3,
        [g[3] for g in gens],
    )


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "out-gpu")
    memory = {}
    if (out / "memory.txt").exists():
        for line in (out / "memory.txt").read_text().splitlines():
            f = line.split()
            if len(f) >= 3 and f[1] == "peak_mib":
                memory[f[0]] = max(memory.get(f[0], 0), int(f[2]))
    cold = {}
    if (out / "summary.txt").exists():
        for line in (out / "summary.txt").read_text().splitlines():
            m = re.match(r"^cold_(\w+)_(\d) process_wall_s ([0-9.]+)", line)
            if m:
                cold.setdefault(m.group(1), []).append(float(m.group(3)) * 1e3)
    device = (out / "device.txt").read_text().strip() if (out / "device.txt").exists() else "?"
    print(f"# A generation end to end ({device})\n")
    print(
        "ms per generation (median); trellisc: stage walls as the generation ran them (host work included), "
        "decoders = GS + RF + mesh decoder, files written by the writer thread meanwhile; PyTorch: no "
        "FlexiCubes, no files.\n"
    )
    print(
        "| voxel set | run | ss | slat | decoders | FlexiCubes | total | GPU | host setup | peak MiB | voxels |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for vset in ("own", "surface", "vary", "full"):
        cycles = vset in ("vary", "full")  # a new shell every generation, two cycles
        name = vset if cycles else f"warm_{vset}"
        log = out / f"{name}.log"
        if log.exists():
            gens = generations(log)
            timed = gens[len(gens) // 2 :] if cycles else gens[1:]  # cycles: the second one
            stage, wall, gpu, setup, voxels = trellisc_row(timed)
            busy = ""
            trace = out / f"trace_{vset}.log"
            if trace.exists() and BUSY.search(trace.read_text()):
                span, b = map(float, BUSY.search(trace.read_text()).groups())
                busy = f" (GPU busy {100 * b / span:.0f}%)"
            print(
                f"| {vset} | trellisc warm, {len(timed)} gens{busy} | {stage['ss']:.0f} | {stage['slat']:.0f} | "
                f"{stage['decoders']:.0f} | {stage['flexicubes']:.0f} | {wall:.0f} | {gpu:.0f} | {setup:.0f} | "
                f"{memory.get(name, '')} | {min(voxels)}-{max(voxels)} |"
            )
        if vset in cold:
            print(
                f"| {vset} | trellis.exe cold (process), {len(cold[vset])} runs | | | | | "
                f"{med(cold[vset]):.0f} | | | {memory.get(f'cold_{vset}_1', '')} | |"
            )
        for mode in ("eager", "compile"):
            path = out / f"e2e_torch_{mode}_{vset}.json"
            if not path.exists():
                continue
            m = json.loads(path.read_text())[mode]
            s = m["stages_ms"]
            dec = sum(s.get(k, 0.0) for k in ("decode_gs", "decode_rf", "decode_mesh"))
            err = " (compile failed: eager)" if m.get("compile_error") else ""
            print(
                f"| {vset} | PyTorch {mode}{err} | {s.get('ss', 0):.0f} | {s.get('slat', 0):.0f} | {dec:.0f} | "
                f"— | {m['total_ms']:.0f} | | | {memory.get(f'torch_{mode}_{vset}', '')} | "
                f"{min(m['voxels'])}-{max(m['voxels'])} |"
            )
    for line in (out / "summary.txt").read_text().splitlines() if (out / "summary.txt").exists() else []:
        if line.startswith(("check:", "memcheck rc", "========= ERROR SUMMARY")) or re.match(
            r"^torch_\w+ (timed out|skipped)", line
        ):
            print(f"\n{line}")


if __name__ == "__main__":
    main()
