"""The torch-hub layout of DINOv2 (spec §3.1) converted by tools/dinov2-convert to Hugging Face's (§3.2) gives the
same tensors bit for bit and, compiled, the same conditioning tokens as the Hugging Face folder itself."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from _safetensors import read_safetensors
from _tc_env import BUILD, run

ROOT = Path(__file__).resolve().parents[2]
CONVERT = ROOT / "tools/dinov2-convert/convert_dinov2_hub.py"
sys.path.insert(0, str(ROOT / "test/golden"))

import image_cases as C  # noqa: E402


def write(path, tensors):
    header, offset, blobs = {}, 0, []
    for k, v in tensors.items():
        b = np.ascontiguousarray(v, np.float32).tobytes()
        header[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    Path(path).write_bytes(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def to_hub(hf):
    """The inverse of spec §3.3, written here independently of the converter."""
    hub = {
        "cls_token": hf["embeddings.cls_token"],
        "mask_token": hf["embeddings.mask_token"],
        "register_tokens": hf["embeddings.register_tokens"],
        "pos_embed": hf["embeddings.position_embeddings"],
        "patch_embed.proj.weight": hf["embeddings.patch_embeddings.projection.weight"],
        "patch_embed.proj.bias": hf["embeddings.patch_embeddings.projection.bias"],
        "norm.weight": hf["layernorm.weight"],
        "norm.bias": hf["layernorm.bias"],
    }
    i = 0
    while f"encoder.layer.{i}.norm1.weight" in hf:
        l, b = f"encoder.layer.{i}.", f"blocks.{i}."
        for p in ("weight", "bias"):
            for n in ("norm1", "norm2", "mlp.fc1", "mlp.fc2"):
                hub[b + f"{n}.{p}"] = hf[l + f"{n}.{p}"]
            hub[b + f"attn.qkv.{p}"] = np.concatenate(
                [hf[l + f"attention.attention.{q}.{p}"] for q in ("query", "key", "value")]
            )
            hub[b + f"attn.proj.{p}"] = hf[l + f"attention.output.dense.{p}"]
        hub[b + "ls1.gamma"] = hf[l + "layer_scale1.lambda1"]
        hub[b + "ls2.gamma"] = hf[l + "layer_scale2.lambda1"]
        i += 1
    return hub


def test_hub_layout_converts_to_the_same_tensors_and_tokens(tmp_path):
    model = tmp_path / "tiny"
    r = run(BUILD / "bin/trellis-mkmodel", "--preset", "tiny", "--seed", "5", "--out", model, "--quiet")
    assert r.returncode == 0, r.stderr
    hf_dir = model / "image_cond_model"
    hf = read_safetensors(hf_dir / "model.safetensors")
    write(tmp_path / "hub.safetensors", to_hub(hf))
    converted = tmp_path / "converted"
    r = subprocess.run(
        [sys.executable, CONVERT, tmp_path / "hub.safetensors", converted, "--heads", "2"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    back = read_safetensors(converted / "model.safetensors")
    assert sorted(back) == sorted(hf)
    for k in hf:
        assert np.array_equal(back[k], hf[k]), k
    want_cfg = json.loads((hf_dir / "config.json").read_text())
    got_cfg = json.loads((converted / "config.json").read_text())
    for key in (
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "patch_size",
        "image_size",
        "mlp_ratio",
    ):
        assert got_cfg[key] == want_cfg[key], key
    # Compiled from either folder: the same tokens.
    image = tmp_path / "object.png"
    image.write_bytes(C.png_bytes(C.cases()["transparent_border"][0]))
    tokens = []
    for name, extra in (("hf", []), ("hub", ["--image-model", converted])):
        exe = tmp_path / f"{name}.exe"
        r = run(BUILD / "bin/trellisc", model / "pipeline.json", "--target=cpu", *extra, "-o", exe)
        assert r.returncode == 0, r.stderr
        out = tmp_path / f"out_{name}"
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
        tokens.append(np.load(out / "cond_tokens.npy"))
    assert np.array_equal(tokens[0], tokens[1])


def test_converter_refuses_what_it_cannot_map(tmp_path):
    write(tmp_path / "odd.safetensors", {"cls_token": np.zeros((1, 1, 8)), "surprise": np.zeros(3)})
    r = subprocess.run(
        [sys.executable, CONVERT, tmp_path / "odd.safetensors", tmp_path / "o"],
        capture_output=True,
        text=True,
    )
    assert r.returncode != 0
    assert "the checkpoint has no tensor 'mask_token'" in r.stderr, r.stderr
