"""The C ABI (libtrellis_rt.so): the C example program and the Python
launcher produce the same outputs as trellis.exe on the tiny preset, stage 1
coordinates arrive before stage 2 starts, and bad calls return clear errors
(never an abort)."""
import ctypes
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import _tc_env  # noqa: F401
from _tc_env import BUILD, run, tiny_cpu_program
import trellisc as tc
from trellisc import _bundle, _native

REPO = Path(__file__).resolve().parents[2]
BIN = BUILD / "bin"
STEPS = ["--steps-ss", "1", "--steps-slat", "1"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("capi")
    model, exe = tiny_cpu_program(d)
    ref = d / "ref"
    r = run(
        exe,
        "--model",
        model,
        "--cond",
        model / "cond.npy",
        "--out",
        ref,
        "--seed",
        "1",
        "--debug-outputs",
        *STEPS,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return model, exe, ref, d


def assert_same_as_trellis_exe(ref, arrays):
    """arrays: name -> array, in trellis_outputs names."""
    for name in ("ss_latent", "coords", "slat"):
        np.testing.assert_array_equal(arrays[name], np.load(ref / f"{name}.npy"), name)
    g = np.load(ref / "gaussians.npz")
    for key in g.files:
        np.testing.assert_array_equal(arrays["gs" + key], g[key], key)
    rf = np.load(ref / "radiance_field.npz")
    for key in ("trivec", "density", "features_dc"):
        np.testing.assert_array_equal(arrays["rf_" + key], rf[key], key)
    m = np.load(ref / "mesh_fields.npz")
    np.testing.assert_array_equal(arrays["mesh_cubes"], m["coords"])
    np.testing.assert_array_equal(arrays["mesh_fields"], m["fields"])


def test_c_example_matches_trellis_exe(tiny):
    model, exe, ref, d = tiny
    out = d / "c"
    r = run(
        BIN / "trellis-c-example", exe, model, model / "cond.npy", out, "--seed", "1", *STEPS, timeout=300
    )
    assert r.returncode == 0, r.stderr
    assert "stage 1 coordinates ready" in r.stderr
    arrays = {p.stem: np.load(p) for p in out.glob("*.npy")}
    assert_same_as_trellis_exe(ref, arrays)
    assert arrays["mesh_faces"].shape[1] == 3 and arrays["mesh_vertices"].shape[1] == 3


def test_python_launcher_matches_trellis_exe(tiny):
    model, exe, ref, d = tiny
    out = d / "py"
    env = dict(os.environ, TRELLISC_BUILD_DIR=str(BUILD))
    r = run(
        sys.executable,
        REPO / "python/examples/run_trellis.py",
        "--program",
        exe,
        "--model",
        model,
        "--cond",
        model / "cond.npy",
        "--out",
        out,
        "--seed",
        "1",
        *STEPS,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    for name in ("ss_latent.npy", "coords.npy", "slat.npy"):
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name
    g, gr = np.load(out / "gaussians.npz"), np.load(ref / "gaussians.npz")
    assert sorted(g.files) == sorted(gr.files)
    for key in g.files:
        np.testing.assert_array_equal(g[key], gr[key], key)
    m, mr = np.load(out / "mesh_fields.npz"), np.load(ref / "mesh_fields.npz")
    np.testing.assert_array_equal(m["fields"], mr["fields"])


def test_weight_table_progress_and_early_coords(tiny):
    model, exe, ref, d = tiny
    sys.path.insert(0, str(REPO / "python/examples"))
    import run_trellis

    manifest = __import__("json").loads(run_trellis.bundle_sections(exe)["weights"])
    weights = {
        (m, n): a for m, rel in manifest.items() for n, a in run_trellis.map_safetensors(model / rel).items()
    }
    events = []

    def progress(kind, stage, step, steps, extra):
        events.append((kind, stage, extra.copy() if kind == "coords" else None))

    # The pipeline compiled from Python (libtrellisc.so) is trellisc's program.
    pipeline = tc.trellis.compile_pipeline(model / "pipeline.json", cond_tokens=21)
    assert _bundle.parse(pipeline.bundle)["program"] == run_trellis.bundle_sections(exe)["program"]
    out = d / "files"
    res = pipeline.run(
        np.load(model / "cond.npy"),
        weights=weights,
        seed=1,
        ss_steps=1,
        slat_steps=1,
        formats=("gs",),
        out_dir=out,
        progress=progress,
    )
    np.testing.assert_array_equal(res["slat"], np.load(ref / "slat.npy"))
    assert "rf_trivec" not in res and "gs_xyz" in res
    # Progress per stage and step; stage 1's coordinates before stage 2.
    kinds = [(k, s) for k, s, _ in events if k != "message"]
    coords_at = kinds.index(("coords", "ss_stage"))
    assert kinds.index(("stage_end", "ss_stage")) < coords_at < kinds.index(("stage_begin", "slat_stage"))
    assert kinds.count(("step", "ss_stage")) == 1
    early = next(e for k, _, e in events if k == "coords")
    np.testing.assert_array_equal(early, np.load(ref / "coords.npy"))
    # out_dir: the runtime writes trellis.exe's files too, byte for byte.
    assert (out / "gaussians.ply").read_bytes() == (ref / "gaussians.ply").read_bytes()
    # A table without a tensor and no model_dir: the error names it.
    del weights[next(iter(weights))]
    with pytest.raises(tc.TrellisError, match="weight table has no tensor"):
        tc.trellis.run(
            None,
            np.load(model / "cond.npy"),
            bundle_path=exe,
            weights=weights,
            ss_steps=1,
            slat_steps=1,
            formats=("gs",),
        )


def call_run(spec, cond, outputs=None, weights=None):
    lib = _native.runtime()
    emb = _native.Embeddings()
    emb.cond = _native.tensor_of(cond)
    err = _native.Error()
    status = lib.trellis_run(
        ctypes.byref(spec),
        ctypes.byref(weights or _native.Weights()),
        ctypes.byref(emb),
        ctypes.byref(outputs) if outputs is not None else None,
        ctypes.byref(err),
    )
    message = ctypes.string_at(err.message).decode() if err.message else ""
    lib.trellis_error_clear(ctypes.byref(err))
    return status, message


def base_spec(exe, model):
    spec = _native.RunSpec()
    _native.runtime().trellis_run_spec_init(ctypes.byref(spec))
    spec.bundle_path = str(exe).encode()
    spec.ss.steps = spec.slat.steps = 1
    spec.targets = 1
    return spec


def test_c_abi_errors(tiny):
    model, exe, ref, d = tiny
    cond = np.load(model / "cond.npy").astype(np.float32)
    w = _native.Weights()
    w.model_dir = str(model).encode()
    # Wrong conditioning shape: names the input, expected and found.
    status, msg = call_run(base_spec(exe, model), cond[:, :5], weights=w)
    assert status == 1 and "embeddings.cond" in msg and "expects" in msg, msg
    # A compiled-in sampler setting cannot change at run time.
    spec = base_spec(exe, model)
    spec.ss.sigma_min = 0.5
    status, msg = call_run(spec, cond, weights=w)
    assert status == 7 and "spec.ss.sigma_min" in msg and "recompile" in msg, msg
    # Sampler numbers out of pipeline.json's ranges.
    spec = base_spec(exe, model)
    spec.ss.steps = 2**31 - 1
    status, msg = call_run(spec, cond, weights=w)
    assert status == 7 and "spec.ss.steps must be in 0..10000" in msg, msg
    spec = base_spec(exe, model)
    spec.slat.cfg_strength = float("inf")
    status, msg = call_run(spec, cond, weights=w)
    assert status == 7 and "spec.slat.cfg_strength must be a finite" in msg, msg
    # Contradicting flags.
    spec = base_spec(exe, model)
    spec.flags |= 16 | 32  # TRELLIS_FLAG_CPU_ONLY | TRELLIS_FLAG_REQUIRE_GPU
    status, msg = call_run(spec, cond, weights=w)
    assert status == 1 and "exclude each other" in msg, msg
    # A caller buffer that is too small.
    outs = _native.Outputs()
    small = np.zeros(4, np.float32)
    outs.slat.data, outs.slat.capacity = small.ctypes.data, small.nbytes
    status, msg = call_run(base_spec(exe, model), cond, outs, weights=w)
    assert status == 6 and "outputs.slat" in msg, msg
    _native.runtime().trellis_outputs_free(ctypes.byref(outs))
    # No program at all; a missing bundle file.
    spec = base_spec(exe, model)
    spec.bundle_path = b"/nonexistent/trellis.exe"
    status, msg = call_run(spec, cond, weights=w)
    assert status == 2 and "/nonexistent/trellis.exe" in msg, msg
    spec.struct_size = 8
    status, msg = call_run(spec, cond, weights=w)
    assert status == 1 and "struct_size" in msg, msg


def test_caller_buffers_receive_outputs(tiny):
    model, exe, ref, d = tiny
    cond = np.load(model / "cond.npy").astype(np.float32)
    w = _native.Weights()
    w.model_dir = str(model).encode()
    coords_ref = np.load(ref / "coords.npy")
    spec = base_spec(exe, model)
    spec.seed = 1
    spec.ss.rescale_t = 3.0  # restating a compiled value is fine
    outs = _native.Outputs()
    buf = np.zeros((coords_ref.shape[0] + 10, 4), np.int32)
    outs.coords.data, outs.coords.capacity = buf.ctypes.data, buf.nbytes
    status, msg = call_run(spec, cond, outs, weights=w)
    assert status == 0, msg
    assert outs.coords.owned == 0 and outs.coords.shape[0] == coords_ref.shape[0]
    np.testing.assert_array_equal(buf[: coords_ref.shape[0]], coords_ref)
    _native.runtime().trellis_outputs_free(ctypes.byref(outs))


def test_compile_pipeline_checks_its_numbers(tiny):
    """libtrellisc.so refuses a batch, image count or token count out of
    range before any work, naming the option (as trellisc does). (The
    Python API refuses them first, test_tc_numbers.py; here the C ABI is
    called directly.)"""
    model = tiny[0]
    for kw, name in [
        ({"batch": 0}, "batch"),
        ({"images": 65}, "images"),
        ({"cond_tokens": -5}, "cond_tokens"),
    ]:
        options = {
            "target": "cpu",
            "batch": 1,
            "cond_tokens": 0,
            "images": 1,
            "multi_image": "none",
            "precision": "trellis",
            **kw,
        }
        result = _native.compile_pipeline(model / "pipeline.json", options)
        assert result.code != 0
        messages = " ".join(d["message"] for d in result.diagnostics)
        assert f"option {name} must be in" in messages, messages
