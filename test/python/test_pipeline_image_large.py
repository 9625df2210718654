"""The image-large synthetic model (3 GB of weights, exact published sizes)
compiles: trellisc traces every network and stage from the real-sized configs
and checkpoint headers, and emits a CPU executable. It is not run (hours on
the CPU reference backend). Skipped when the disk has no room for it."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

BUILD = Path(os.environ.get("TRELLIS_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))
BIN = BUILD / "bin"


def test_image_large_compiles_every_stage(tmp_path):
    if shutil.disk_usage(tmp_path).free < 8 << 30:
        pytest.skip("needs 8 GB of free disk for the 3 GB image-large checkpoints")
    model = tmp_path / "image-large"
    try:
        r = subprocess.run(
            [BIN / "trellis-mkmodel", "--preset", "image-large", "--seed", "0", "--out", model, "--quiet"],
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert r.returncode == 0, r.stderr
        r = subprocess.run(
            [BIN / "trellisc", model / "pipeline.json", "--compile-to=trace"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, r.stderr
        ir = r.stdout
        for fn in [
            "sparse_structure_flow_model",
            "sparse_structure_decoder",
            "slat_flow_model",
            "slat_decoder_gs",
            "slat_decoder_rf",
            "slat_decoder_mesh",
            "image_cond_model",
            "image_stage",
            "ss_stage",
            "slat_stage",
            "decode_gs",
            "decode_rf",
            "decode_mesh",
        ]:
            # The networks are private to the program, the stages its entries.
            network = not fn.endswith("_stage") and not fn.startswith("decode_")
            assert f"func.func {'private ' if network else ''}@{fn}(" in ir, fn
        # Real sizes: 16³ tokens of width 1024 conditioned on 1374 tokens.
        assert "tensor<1x4096x1024xf16>" in ir
        assert "tensor<1x1374x1024xf32>" in ir
        assert (
            'trellis.weight "blocks.23.mlp.mlp.2.weight" of "slat_flow_model" : tensor<1024x4096xf16>' in ir
        )
        exe = tmp_path / "trellis.exe"
        r = subprocess.run(
            [BIN / "trellisc", model / "pipeline.json", "--target=cpu", "-o", exe],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, r.stderr
        r = subprocess.run([exe, "--inspect"], capture_output=True, text=True)
        # The image-conditioning model (image_cond_model/, written by trellis-mkmodel) comes first.
        assert "entries: image_stage ss_stage slat_stage decode_gs decode_rf decode_mesh" in r.stdout
    finally:
        shutil.rmtree(model, ignore_errors=True)
