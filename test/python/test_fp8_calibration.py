"""Static FP8 activation scales: `trellis.exe --calibrate N` measures each FP8 linear's largest input |x| and writes
fp8_scales.json; `trellisc --fp8-scales` (trellis-apply-fp8-scales) compiles them in as `activation_amax`, and both
backends then quantize with that scale (docs/fp8.md). On the tiny model, on the CPU reference: the file names every
FP8 linear, the static program runs and differs from the dynamic one by the scale choice only, the Python API builds
the same program, and every misuse is a clear error. (The GPU's calibration and static GEMMs are checked against
these on the device: bench/fp8/run_device.sh check.)"""
import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

BUILD = Path(os.environ.get("TRELLIS_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))
BIN = BUILD / "bin"
SHORT = ("--steps-ss", "2", "--steps-slat", "2")


def run(*args):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=900)


def compile_tiny(model, out, *extra):
    r = run(
        BIN / "trellisc", model / "pipeline.json", "--target=cpu", "--cond-tokens", "21", *extra, "-o", out
    )
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    d = tmp_path_factory.mktemp("fp8cal")
    model = d / "model"
    r = run(BIN / "trellis-mkmodel", "--preset", "tiny", "--seed", "1", "--out", model, "--quiet")
    assert r.returncode == 0, r.stderr
    dynamic = compile_tiny(model, d / "fp8.exe", "--precision=fp8")
    out = d / "calibration"
    r = run(
        dynamic,
        "--model",
        model,
        "--cond",
        model / "cond.npy",
        "--seed",
        "100",
        "--calibrate",
        "2",
        *SHORT,
        "--out",
        out,
    )
    assert r.returncode == 0, r.stderr
    scales = out / "fp8_scales.json"
    static = compile_tiny(model, d / "fp8s.exe", "--precision=fp8", f"--fp8-scales={scales}")
    return {"dir": d, "model": model, "dynamic": dynamic, "static": static, "scales": scales, "log": r.stderr}


def stage1(c, exe, name, *extra):
    out = c["dir"] / name
    r = run(
        exe,
        "--model",
        c["model"],
        "--cond",
        c["model"] / "cond.npy",
        "--seed",
        "3",
        "--steps-ss",
        "3",
        "--stop-after",
        "ss",
        "--out",
        out,
        *extra,
    )
    assert r.returncode == 0, r.stderr
    return np.load(out / "ss_latent.npy").astype(np.float64)


def test_calibration_names_every_fp8_linear_and_writes_nothing_else(calibrated):
    data = json.loads(calibrated["scales"].read_text())
    assert data["format"] == "trellis-fp8-activation-scales" and data["version"] == 1
    assert data["calibration"]["seeds"] == [100, 101] and data["calibration"]["runs"] == 2
    amax = data["amax"]
    # Every FP8 linear of both flow transformers (attention, MLP, adaLN modulation), named by its weight.
    models = {k.split("/")[0] for k in amax}
    assert models == {"sparse_structure_flow_model", "slat_flow_model"}, models
    assert all(k.endswith(".weight") for k in amax)
    assert all(np.isfinite(v) and v > 0 for v in amax.values())
    # Every FP8 self-attention, named by its q head norm's gain: the largest |v| of each head.
    v_amax = data["v_amax"]
    assert v_amax and all(k.endswith(".q_rms_norm.gamma") for k in v_amax), sorted(v_amax)[:3]
    assert {k.split("/")[0] for k in v_amax} == {"sparse_structure_flow_model", "slat_flow_model"}
    assert all(len(v) == len(next(iter(v_amax.values()))) for v in v_amax.values())
    assert all(np.isfinite(x) and x > 0 for v in v_amax.values() for x in v)
    m = re.search(r"calibration: (\d+) FP8 linears, (\d+) FP8 attention ops over 2 runs", calibrated["log"])
    assert m and int(m.group(1)) == len(amax) and int(m.group(2)) == len(v_amax), calibrated["log"][-500:]
    assert sorted(p.name for p in calibrated["scales"].parent.iterdir()) == ["fp8_scales.json"]


def test_every_fp8_linear_of_the_compiled_program_has_its_static_scale(calibrated):
    r = run(
        BIN / "trellisc",
        calibrated["model"] / "pipeline.json",
        "--target=cuda",
        "--cond-tokens",
        "21",
        "--precision=fp8",
        f"--fp8-scales={calibrated['scales']}",
        "--compile-to=fusion",
    )
    assert r.returncode == 0, r.stderr
    # the FP8 linears, and the FP8 attention ops' v scales (their q and k scales come from the head norms)
    fp8 = [
        line
        for line in r.stdout.splitlines()
        if "trellis.linear" in line and 'precision = "fp8_e4m3"' in line
    ]
    assert fp8 and all("activation_amax = " in line for line in fp8), fp8[:3]
    attention = [
        line for line in r.stdout.splitlines() if "attention" in line and 'precision = "fp8_e4m3"' in line
    ]
    assert attention and all("v_amax = array<f32: " in line for line in attention), attention[:3]


def test_the_static_program_differs_from_the_dynamic_one_by_the_scales_only(calibrated):
    dynamic = stage1(calibrated, calibrated["dynamic"], "dyn")
    static = stage1(calibrated, calibrated["static"], "static")
    rel = np.linalg.norm(static - dynamic) / np.linalg.norm(dynamic)
    # Another scale per tensor moves the E4M3 rounding of every value (3 mantissa bits): a few 1e-3 per GEMM,
    # never a different result; zero would mean the static scales were not used.
    assert 1e-5 < rel < 0.1, rel


def test_the_python_api_compiles_the_same_static_program(calibrated):
    tc = pytest.importorskip("trellisc")
    static = stage1(calibrated, calibrated["static"], "static_py_ref")
    pipe = tc.trellis.compile_pipeline(
        calibrated["model"] / "pipeline.json",
        cond_tokens=21,
        precision="fp8",
        fp8_scales=calibrated["scales"],
    )
    out = pipe.run(
        np.load(calibrated["model"] / "cond.npy"), seed=3, ss_steps=3, slat_steps=1, formats=("gs",)
    )
    np.testing.assert_array_equal(out["ss_latent"].astype(np.float64), static)
    with pytest.raises(tc.TrellisError, match="fp8_scales needs precision 'fp8'"):
        tc.trellis.compile_pipeline(
            calibrated["model"] / "pipeline.json", cond_tokens=21, fp8_scales=calibrated["scales"]
        )


def test_scales_need_an_fp8_program(calibrated):
    r = run(
        BIN / "trellisc",
        calibrated["model"] / "pipeline.json",
        f"--fp8-scales={calibrated['scales']}",
        "-o",
        calibrated["dir"] / "x.exe",
    )
    assert r.returncode == 2 and "--fp8-scales needs --precision=fp8" in r.stderr, r.stderr
    assert not (calibrated["dir"] / "x.exe").exists()


def compile_with_edited_scales(c, name, edit):
    """trellisc --fp8-scales with the calibration file changed by `edit`
    (a function of its JSON): (the result, the output path)."""
    data = json.loads(c["scales"].read_text())
    edit(data)
    bad = c["dir"] / f"{name}.json"
    bad.write_text(json.dumps(data))
    out = c["dir"] / f"{name}.exe"
    r = run(
        BIN / "trellisc",
        c["model"] / "pipeline.json",
        "--cond-tokens",
        "21",
        "--precision=fp8",
        f"--fp8-scales={bad}",
        "-o",
        out,
    )
    return r, out


def test_a_scales_file_of_another_program_is_refused_naming_the_linear(calibrated):
    missing = sorted(json.loads(calibrated["scales"].read_text())["amax"])[0]
    r, out = compile_with_edited_scales(calibrated, "short", lambda d: d["amax"].pop(missing))
    assert r.returncode == 1, r.stderr
    assert f"has no entry for '{missing}'" in r.stderr and "short.json" in r.stderr, r.stderr
    assert not out.exists()


def test_an_attention_v_scale_of_another_head_count_is_refused(calibrated):
    def drop_a_head(data):
        key = sorted(data["v_amax"])[0]
        data["v_amax"][key] = data["v_amax"][key][:-1]

    r, out = compile_with_edited_scales(calibrated, "heads", drop_a_head)
    assert r.returncode == 1, r.stderr
    assert "v_amax must hold one value per head" in r.stderr, r.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    "program, extra, message",
    [
        ("plain", (), "this program has none (compile it with trellisc --precision=fp8)"),
        ("static", (), "needs the FP8 program with dynamic scales"),
        ("dynamic", ("--inputs", "jobs.jsonl"), "--calibrate takes --cond or --image inputs"),
    ],
)
def test_calibrate_refuses_what_it_cannot_measure(calibrated, program, extra, message):
    if program == "plain":
        exe = calibrated["dir"] / "plain.exe"
        if not exe.exists():
            compile_tiny(calibrated["model"], exe)
    else:
        exe = calibrated[program]
    out = calibrated["dir"] / f"refused_{program}"
    inputs = ("--cond", calibrated["model"] / "cond.npy") if not extra else ()
    if extra:
        (calibrated["dir"] / "jobs.jsonl").write_text(
            json.dumps({"id": "a", "cond": str(calibrated["model"] / "cond.npy")}) + "\n"
        )
        extra = ("--inputs", calibrated["dir"] / "jobs.jsonl")
    r = run(exe, "--model", calibrated["model"], *inputs, *extra, "--calibrate", "1", "--out", out)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert not (out / "fp8_scales.json").exists()


def test_inspect_tells_the_fp8_programs_apart(calibrated):
    lines = {}
    for kind in ("dynamic", "static"):
        r = run(calibrated[kind], "--inspect")
        assert r.returncode == 0, r.stderr
        lines[kind] = [line for line in r.stdout.splitlines() if line.startswith("fp8: ")]
    assert len(lines["dynamic"]) == 1 and "dynamic activation scales" in lines["dynamic"][0]
    assert len(lines["static"]) == 1 and "static activation scales" in lines["static"][0]
    n = len(json.loads(calibrated["scales"].read_text())["amax"])
    assert lines["static"][0].startswith(f"fp8: {n} FP8 linears"), lines["static"]
    # the tiny flow models' 2 + 2 blocks: their self-attention runs in FP8 too
    assert "(W8A8 E4M3), 4 FP8 self-attention ops," in lines["static"][0], lines["static"]
