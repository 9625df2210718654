"""Interop test of the radiance-field .npz writer (runtime/output).

trellis-output-tool splits a synthetic decoder head [N, 448] into the Strivec
leaf fields (spec §7.3) and writes the .npz; NumPy reads it back and we redo the
split, the +1 on trivec and the leaf positions here.
"""
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

N = 300


def _tool() -> Path:
    build = os.environ.get("TRELLIS_BUILD_DIR")
    if not build:
        pytest.skip("TRELLIS_BUILD_DIR is not set (scripts/run-tests.sh sets it)")
    tool = Path(build) / "bin" / "trellis-output-tool"
    assert tool.is_file(), f"{tool} is not built (ninja trellis-output-tool)"
    return tool


def test_radiance_field_npz(tmp_path):
    rf_path, head_path = tmp_path / "rf.npz", tmp_path / "head.npz"
    out = subprocess.run(
        [str(_tool()), "rf", str(rf_path), "--head", str(head_path), "--count", str(N), "--seed", "5"],
        check=True,
        capture_output=True,
        text=True,
    )
    assert json.loads(out.stdout)["count"] == N
    rf = np.load(rf_path)
    src = np.load(head_path)
    head, coords = src["head"], src["coords"]
    assert head.shape == (N, 448) and head.dtype == np.float32

    assert rf.files == ["coords", "position", "depth", "trivec", "density", "features_dc", "aabb"]
    want = {
        "coords": (np.int32, (N, 4)),
        "position": (np.float32, (N, 3)),
        "depth": (np.uint8, (N, 1)),
        "trivec": (np.float32, (N, 16, 3, 8)),
        "density": (np.float32, (N, 16)),
        "features_dc": (np.float32, (N, 16, 1, 3)),
        "aabb": (np.float32, (6,)),
    }
    for k, (dtype, shape) in want.items():
        assert rf[k].dtype == dtype and rf[k].shape == shape, k

    np.testing.assert_array_equal(rf["coords"], coords)
    assert (coords[:, 0] == 0).all() and coords[:, 1:].min() >= 0 and coords[:, 1:].max() < 64
    assert len(np.unique(coords, axis=0)) == N
    np.testing.assert_array_equal(rf["trivec"], head[:, :384].reshape(N, 16, 3, 8) + np.float32(1))
    np.testing.assert_array_equal(rf["density"], head[:, 384:400])
    np.testing.assert_array_equal(rf["features_dc"], head[:, 400:448].reshape(N, 16, 1, 3))
    np.testing.assert_array_equal(
        rf["position"], (coords[:, 1:].astype(np.float32) + np.float32(0.5)) / np.float32(64)
    )
    assert (rf["depth"] == 6).all()
    np.testing.assert_array_equal(rf["aabb"], np.array([-0.5, -0.5, -0.5, 1, 1, 1], np.float32))
