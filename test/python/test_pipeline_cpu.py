"""End to end on the CPU: the tiny synthetic model compiled by trellisc
(--target=cpu) and run by the resulting trellis.exe, twice with identical
outputs; shapes and dtypes as the issue specifies; the Gaussian PLY opens in
Open3D. Also checks --coords (stages 2-3 only) and run-time input errors."""
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

BUILD = Path(os.environ.get("TRELLIS_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))
BIN = BUILD / "bin"


def run(*args, **kw):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    model = d / "model"
    r = run(BIN / "trellis-mkmodel", "--preset", "tiny", "--seed", "1", "--out", model, "--quiet")
    assert r.returncode == 0, r.stderr
    exe = d / "trellis.exe"
    r = run(BIN / "trellisc", model / "pipeline.json", "--target=cpu", "--cond-tokens", "21", "-o", exe)
    assert r.returncode == 0, r.stderr
    return model, exe, d


@pytest.fixture(scope="module")
def outputs(compiled):
    model, exe, d = compiled
    outs = []
    for i in range(2):
        out = d / f"out{i}"
        r = run(
            exe,
            "--model",
            model,
            "--cond",
            model / "cond.npy",
            "--out",
            out,
            "--seed",
            "7",
            "--debug-outputs",
            timeout=600,
        )
        assert r.returncode == 0, r.stderr
        assert "ss_stage: step 25/25" in r.stderr  # progress on stderr
        outs.append(out)
    return outs


FILES = [
    "ss_latent.npy",
    "coords.npy",
    "slat.npy",
    "gaussians.ply",
    "gaussians.npz",
    "radiance_field.npz",
    "mesh_fields.npz",
    "mesh.ply",
    "mesh.glb",
]


def test_same_inputs_same_outputs_bit_for_bit(outputs):
    for name in FILES:
        a = (outputs[0] / name).read_bytes()
        b = (outputs[1] / name).read_bytes()
        assert a == b, name


def test_output_shapes(outputs):
    out = outputs[0]
    latent = np.load(out / "ss_latent.npy")
    assert latent.shape == (1, 8, 8, 8, 8) and latent.dtype == np.float32
    coords = np.load(out / "coords.npy")
    assert coords.dtype == np.int32 and coords.shape[1] == 4
    n = coords.shape[0]
    assert n > 0
    # argwhere order: lexicographic (b, x, y, z).
    keys = coords[:, 0] * 32**3 + coords[:, 1] * 32**2 + coords[:, 2] * 32 + coords[:, 3]
    assert np.all(np.diff(keys) > 0)
    slat = np.load(out / "slat.npy")
    assert slat.shape == (n, 8) and np.isfinite(slat).all()
    g = np.load(out / "gaussians.npz")
    assert g["_xyz"].shape == (32 * n, 3)
    assert g["_features_dc"].shape == (32 * n, 1, 3)
    assert g["_rotation"].shape == (32 * n, 4)
    # Gaussian centres stay within 0.75 voxel of their voxel (spec §7.2).
    centres = (np.repeat(coords[:, 1:], 32, axis=0) + 0.5) / 32
    assert np.abs(g["_xyz"] - centres).max() <= 0.75 / 32 + 1e-6
    rf = np.load(out / "radiance_field.npz")
    assert rf["trivec"].shape == (n, 16, 3, 8)
    m = np.load(out / "mesh_fields.npz")  # --debug-outputs
    assert m["coords"].shape == (64 * n, 4) and m["fields"].shape == (64 * n, 101)
    assert m["coords"][:, 1:].max() < 128


def test_gaussian_ply_opens_in_open3d(outputs):
    o3d = pytest.importorskip("open3d")
    pc = o3d.io.read_point_cloud(str(outputs[0] / "gaussians.ply"))
    n = np.load(outputs[0] / "coords.npy").shape[0]
    assert len(pc.points) == 32 * n


def test_mesh_is_extracted_and_opens_in_open3d(outputs):
    o3d = pytest.importorskip("open3d")
    mesh = o3d.io.read_triangle_mesh(str(outputs[0] / "mesh.ply"))
    assert len(mesh.triangles) > 0 and len(mesh.vertices) > 0
    v = np.asarray(mesh.vertices)
    assert np.abs(v).max() <= 0.5 + 1.0 / 128  # inside the unit cube (spec §7.4)
    glb = o3d.io.read_triangle_mesh(str(outputs[0] / "mesh.glb"))
    assert len(glb.triangles) == len(mesh.triangles)


def test_given_coordinates_run_stages_2_and_3(compiled, outputs, tmp_path):
    model, exe, _ = compiled
    coords = outputs[0] / "coords.npy"
    slat_noise = tmp_path / "noise.npy"
    n = np.load(coords).shape[0]
    np.save(slat_noise, np.random.default_rng(0).standard_normal((n, 8)).astype(np.float32))
    r = run(
        exe,
        "--model",
        model,
        "--cond",
        model / "cond.npy",
        "--out",
        tmp_path / "o",
        "--coords",
        coords,
        "--slat-noise",
        slat_noise,
        "--formats",
        "gs",
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert "ss_stage" not in r.stderr
    assert (tmp_path / "o" / "gaussians.ply").exists()
    assert not (tmp_path / "o" / "mesh_fields.npz").exists()


def test_bad_inputs_give_clear_errors(compiled, tmp_path):
    model, exe, _ = compiled
    bad = tmp_path / "bad_cond.npy"
    np.save(bad, np.zeros((1, 5, 128), np.float32))
    r = run(exe, "--model", model, "--cond", bad, "--out", tmp_path / "o")
    assert r.returncode == 1
    assert "--cond" in r.stderr and "[1, 5, 128]" in r.stderr and "expects" in r.stderr
    r = run(
        exe, "--model", model, "--cond", model / "cond.npy", "--out", tmp_path / "o", "--formats", "gs,obj"
    )
    assert r.returncode == 2 and "unknown format 'obj'" in r.stderr
    r = run(
        exe,
        "--model",
        tmp_path / "nowhere",
        "--cond",
        model / "cond.npy",
        "--out",
        tmp_path / "o2",
        "--steps-ss",
        "1",
        "--steps-slat",
        "1",
    )
    assert r.returncode == 1 and "nowhere" in r.stderr
    assert not list((tmp_path / "o2").glob("*.npy"))


def test_inspect_prints_the_bundle(compiled):
    _, exe, _ = compiled
    r = run(exe, "--inspect")
    assert r.returncode == 0
    assert "entries: ss_stage slat_stage decode_gs decode_rf decode_mesh" in r.stdout
    assert "sections:" in r.stdout and "crc32" in r.stdout


def test_batch_of_two_samples_writes_one_file_per_sample(compiled, tmp_path):
    model, _, _ = compiled
    exe = tmp_path / "trellis2.exe"
    r = run(
        BIN / "trellisc",
        model / "pipeline.json",
        "--target=cpu",
        "--cond-tokens",
        "21",
        "--batch",
        "2",
        "-o",
        exe,
    )
    assert r.returncode == 0, r.stderr
    out = tmp_path / "o"
    r = run(
        exe,
        "--model",
        model,
        "--cond",
        model / "cond.npy",
        "--out",
        out,
        "--steps-ss",
        "2",
        "--steps-slat",
        "2",
        "--formats",
        "gs,rf",
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert np.load(out / "ss_latent.npy").shape == (2, 8, 8, 8, 8)
    coords = np.load(out / "coords.npy")
    counts = np.bincount(coords[:, 0], minlength=2)
    for b in range(2):
        g = np.load(out / f"gaussians_{b}.npz")
        assert g["_xyz"].shape == (32 * counts[b], 3)
        rf = np.load(out / f"radiance_field_{b}.npz")
        assert (rf["coords"][:, 0] == b).all()
        assert (out / f"gaussians_{b}.ply").exists()
    assert not (out / "gaussians.ply").exists()
