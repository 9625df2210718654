"""trellis.exe --image on the tiny preset (CPU reference): the image is preprocessed bit for bit as the NumPy golden
does it (test/golden/image_preprocess_np.py), and the compiled image-conditioning model's tokens match an
independent NumPy float64 forward (test/golden/dinov2_np.py) on the same synthetic weights."""

import json
import os
import sys

import numpy as np
import pytest

from _safetensors import read_safetensors
from _tc_env import BUILD, run

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden")
sys.path.insert(0, GOLDEN)

import dinov2_np  # noqa: E402
import image_cases as C  # noqa: E402
import image_preprocess_np as G  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("image")
    model, exe = d / "tiny", d / "tiny.exe"
    r = run(BUILD / "bin/trellis-mkmodel", "--preset", "tiny", "--seed", "3", "--out", model, "--quiet")
    assert r.returncode == 0, r.stderr
    assert (model / "image_cond_model" / "config.json").exists()
    r = run(BUILD / "bin/trellisc", model / "pipeline.json", "--target=cpu", "-o", exe)
    assert r.returncode == 0, r.stderr
    return model, exe, d


def write_image(path, rgba):
    path.write_bytes(C.png_bytes(rgba))


def test_image_to_tokens_matches_the_numpy_forward(tiny, tmp_path):
    model, exe, _ = tiny
    rgba = C.cases()["a333x517_blob"][0]  # a soft-edged object, downsampled to 518
    image = tmp_path / "object.png"
    write_image(image, rgba)
    out = tmp_path / "out"
    r = run(
        exe,
        "--model",
        model,
        "--image",
        image,
        "--out",
        out,
        "--save-cond",
        "--stop-after",
        "ss",
        "--steps-ss",
        "1",
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert "image_stage" in r.stderr
    # The preprocessed image, bit for bit.
    golden_rgb = G.preprocess(rgba)
    got_rgb = np.load(out / "cond_image.npy")
    assert got_rgb.shape == (1, 518, 518, 3) and got_rgb.dtype == np.uint8
    assert np.array_equal(got_rgb[0], golden_rgb)
    # The tokens against the float64 NumPy forward of the same weights.
    cfg = json.loads((model / "image_cond_model" / "config.json").read_text())
    weights = read_safetensors(model / "image_cond_model" / "model.safetensors")
    want = dinov2_np.forward(weights, cfg, G.normalize(golden_rgb)[None])
    got = np.load(out / "cond_tokens.npy")
    assert got.shape == want.shape == (1, 1374, 128)
    rel = np.linalg.norm(got - want) / np.linalg.norm(want)
    print(f"image_stage vs NumPy float64: relative L2 = {rel:.3g}")
    assert rel < 1e-4
    assert (out / "coords.npy").exists()


def test_image_errors_are_named(tiny, tmp_path):
    model, exe, d = tiny
    opaque = tmp_path / "opaque.png"
    write_image(opaque, np.full((40, 30, 4), 255, np.uint8))
    r = run(exe, "--model", model, "--image", opaque, "--out", tmp_path / "o1", "--stop-after", "ss")
    assert r.returncode != 0
    assert "--no-background-removal" in r.stderr, r.stderr
    # --image and --cond exclude each other.
    r = run(exe, "--model", model, "--image", opaque, "--cond", model / "cond.npy", "--out", tmp_path / "o2")
    assert r.returncode == 2 and "exclude each other" in r.stderr, r.stderr
    # A program compiled for tokens only (its --cond-tokens differ from the image model's) names why.
    tokens_exe = d / "tokens.exe"
    r = run(
        BUILD / "bin/trellisc",
        model / "pipeline.json",
        "--target=cpu",
        "--cond-tokens",
        "21",
        "-o",
        tokens_exe,
    )
    assert r.returncode == 0, r.stderr
    assert "no image_stage" in r.stderr, r.stderr
    r = run(
        tokens_exe,
        "--model",
        model,
        "--image",
        opaque,
        "--no-background-removal",
        "--out",
        tmp_path / "o3",
        "--stop-after",
        "ss",
    )
    assert r.returncode == 1
    assert "compiled without the image-conditioning model" in r.stderr, r.stderr


def test_manifest_mixes_images_and_tokens(tiny, tmp_path):
    """--inputs lines take "image" (a path or a list) or "cond"; each generation gets its own folder."""
    model, exe, _ = tiny
    write_image(tmp_path / "a.png", C.cases()["transparent_border"][0])
    manifest = tmp_path / "jobs.jsonl"
    manifest.write_text(
        json.dumps({"id": "pic", "image": "a.png", "seed": 1})
        + "\n"
        + json.dumps({"id": "tokens", "cond": str(model / "cond_1374.npy"), "seed": 1})
        + "\n"
    )
    np.save(
        model / "cond_1374.npy", np.random.default_rng(0).standard_normal((1, 1374, 128)).astype(np.float32)
    )
    out = tmp_path / "out"
    r = run(
        exe,
        "--model",
        model,
        "--inputs",
        manifest,
        "--out",
        out,
        "--stop-after",
        "ss",
        "--steps-ss",
        "1",
        "--save-cond",
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert (out / "pic" / "cond_image.npy").exists() and (out / "pic" / "coords.npy").exists()
    assert (out / "tokens" / "coords.npy").exists() and not (out / "tokens" / "cond_image.npy").exists()


def test_python_and_c_abi_take_images(tiny):
    """Pipeline.run(images=...) (trellis_run_spec.images through the C ABI): the tokens it returns match the
    NumPy forward of the golden preprocessing, and a run on those tokens gives the same generation."""
    import trellisc as tc

    model, _, _ = tiny
    rgba = C.cases()["a333x517_blob"][0]
    pipe = tc.trellis.compile_pipeline(model / "pipeline.json")
    assert pipe.entries[0] == "image_stage"
    kw = dict(seed=5, ss_steps=1, slat_steps=1, formats=("gs",), gpu="off")
    from_image = pipe.run(images=rgba, **kw)
    cfg = json.loads((model / "image_cond_model" / "config.json").read_text())
    weights = read_safetensors(model / "image_cond_model" / "model.safetensors")
    want = dinov2_np.forward(weights, cfg, G.normalize(G.preprocess(rgba))[None])
    got = from_image["cond"]
    assert got.shape == want.shape == (1, 1374, 128) and got.dtype == np.float32
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-4
    from_tokens = pipe.run(cond=got, **kw)
    assert "cond" not in from_tokens
    for name in ("coords", "slat", "gs_xyz"):
        assert np.array_equal(from_image[name], from_tokens[name]), name
    # An RGB array has no alpha: named, with the option that accepts it.
    with pytest.raises(
        tc.TrellisError,
        match=r"spec.images\[0\]: the image has no alpha channel.*" r"no_background_removal=True",
    ):
        pipe.run(images=np.ascontiguousarray(rgba[:, :, :3]), **kw)
    rgb = pipe.run(images=[rgba[:, :, :3]], no_background_removal=True, **kw)
    assert rgb["cond"].shape == (1, 1374, 128)
    with pytest.raises(tc.TrellisError, match="exactly one of them"):
        pipe.run(cond=got, images=rgba, **kw)
    with pytest.raises(tc.TrellisError, match=r"images\[0\]: expected uint8 \[height, width, 4\].*float32"):
        pipe.run(images=rgba.astype(np.float32), **kw)
    with pytest.raises(tc.TrellisError, match=r"spec.images\[0\]: the image is 0 x 5 pixels"):
        pipe.run(images=np.zeros((5, 0, 4), np.uint8), **kw)
