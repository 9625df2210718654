#!/usr/bin/env python3
"""One table for issue 6 from the JSON files of one bench/slat_gpu/run_device.sh run: trellisc's SLat stage
and decoders (trellis-slat-bench --json) next to PyTorch eager and torch.compile of the same math
(bench/pytorch/slat_stage.py --json, bench/pytorch/slat_decoders.py --json), with the ratios and the device
memory of each.

  report.py --trellis trellis.json --torch-stage torch.json [--torch-decoders torch_decoders.json]
"""
import argparse
import json


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trellis", required=True)
    ap.add_argument("--torch-stage", required=True)
    ap.add_argument("--torch-decoders")
    a = ap.parse_args()
    tr = json.load(open(a.trellis))
    ts = json.load(open(a.torch_stage))
    td = json.load(open(a.torch_decoders)) if a.torch_decoders else {"modes": {}}
    # (row name, trellisc function, torch entry: (modes dict, eager key, compile key))
    rows = [
        (
            "SLat stage (25 steps, cfg 5 on [0.5, 1])",
            "slat_stage",
            ts["modes"],
            "eager",
            "compile",
            "stage_ms",
        )
    ]
    for head, fn in (("gs", "decode_gs"), ("rf", "decode_rf"), ("mesh", "decode_mesh")):
        rows.append((f"{head} decoder", fn, td["modes"], f"eager/{head}", f"compile/{head}", "ms"))
    print(
        f"{tr['voxels']} voxels, {tr['device']}; torch {ts.get('torch', '?')}, PyTorch fp16 as the spec's precision map"
    )
    print(
        "| stage | trellisc ms | eager ms | compile ms | vs eager | vs compile | trellisc device MiB "
        "(weights + arena; in use) | torch peak MiB eager / compile |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, fn, modes, ek, ck, key in rows:
        t = tr["functions"].get(fn)
        if t is None:
            continue
        e, c = modes.get(ek), modes.get(ck)
        if c is None and f"compile-trunk/{ek.split('/')[-1]}" in modes:
            c = modes[f"compile-trunk/{ek.split('/')[-1]}"]
        em = e[key] if e else float("nan")
        cm = c[key] if c else float("nan")
        peak = lambda m: f"{m['peak_bytes'] / 2**20:.0f}" if m and "peak_bytes" in m else "-"
        print(
            f"| {name} | {t['median_ms']:.1f} | {em:.1f} | {cm:.1f} | {em / t['median_ms']:.2f}x | "
            f"{cm / t['median_ms']:.2f}x | {t['weights_mib'] + t['arena_mib']:.0f}; {t['device_in_use_mib']:.0f} | "
            f"{peak(e)} / {peak(c)} |"
        )


if __name__ == "__main__":
    main()
