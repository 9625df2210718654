"""Interop tests of the Gaussian PLY / .npz writers (runtime/output).

trellis-output-tool writes a deterministic synthetic Gaussian set; we read the
raw fields back with NumPy, recompute every PLY column here from spec §9.1 (an
independent NumPy implementation, quaternions checked by rotating vectors with
the Hamilton product), and open the PLY with Open3D (legacy and tensor API).
"""
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

PROPS = [
    "x",
    "y",
    "z",
    "nx",
    "ny",
    "nz",
    "f_dc_0",
    "f_dc_1",
    "f_dc_2",
    "opacity",
    "scale_0",
    "scale_1",
    "scale_2",
    "rot_0",
    "rot_1",
    "rot_2",
    "rot_3",
]
S_B = np.log(np.expm1(0.004))  # softplus^-1(0.004)
O_B = np.log(0.1 / 0.9)  # logit(0.1)
COUNT = 2000


def _tool() -> Path:
    build = os.environ.get("TRELLIS_BUILD_DIR")
    if not build:
        pytest.skip("TRELLIS_BUILD_DIR is not set (scripts/run-tests.sh sets it)")
    tool = Path(build) / "bin" / "trellis-output-tool"
    assert tool.is_file(), f"{tool} is not built (ninja trellis-output-tool)"
    return tool


def _run(*args):
    out = subprocess.run([str(_tool()), *map(str, args)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def read_ply(path: Path):
    """(header lines, body bytes) of a binary PLY, parsed by hand."""
    data = path.read_bytes()
    end = data.index(b"end_header\n") + len(b"end_header\n")
    return data[:end].decode("ascii").splitlines(), data[end:]


@pytest.fixture(scope="module")
def gaussians(tmp_path_factory):
    d = tmp_path_factory.mktemp("gaussians")
    ply, npz = d / "g.ply", d / "g.npz"
    info = _run("gaussians", ply, "--npz", npz, "--count", COUNT, "--seed", 3)
    assert info["count"] == COUNT
    return ply, npz


def qmul(a, b):
    """Hamilton product of wxyz quaternions, row-wise."""
    aw, ax, ay, az = a.T
    bw, bx, by, bz = b.T
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=1,
    )


def rotate(q, v):
    """q v q* for unit quaternions q [n,4] and vectors v [3]."""
    vq = np.concatenate([np.zeros((len(q), 1)), np.broadcast_to(v, (len(q), 3))], axis=1)
    conj = q * np.array([1, -1, -1, -1])
    return qmul(qmul(q, vq), conj)[:, 1:]


def test_npz_fields(gaussians):
    _, npz = gaussians
    z = np.load(npz)
    assert z.files == ["_xyz", "_features_dc", "_scaling", "_rotation", "_opacity"]
    shapes = {
        "_xyz": (COUNT, 3),
        "_features_dc": (COUNT, 1, 3),
        "_scaling": (COUNT, 3),
        "_rotation": (COUNT, 4),
        "_opacity": (COUNT, 1),
    }
    for k, shape in shapes.items():
        assert z[k].dtype == np.float32 and z[k].shape == shape, k
    assert 0.0 <= z["_xyz"].min() and z["_xyz"].max() <= 1.0


def test_ply_header_is_3dgs_layout(gaussians):
    ply, _ = gaussians
    header, body = read_ply(ply)
    assert header[:3] == ["ply", "format binary_little_endian 1.0", f"element vertex {COUNT}"]
    assert header[3:-1] == [f"property float {p}" for p in PROPS]
    assert header[-1] == "end_header"
    assert len(body) == COUNT * 17 * 4


def test_ply_values_match_spec(gaussians):
    ply, npz = gaussians
    z = np.load(npz)
    _, body = read_ply(ply)
    rows = np.frombuffer(body, dtype="<f4").reshape(COUNT, 17)
    col = {p: rows[:, i] for i, p in enumerate(PROPS)}

    # position = _xyz * 1 + (-0.5) (float32), then (x, y, z) -> (x, -z, y)
    pos = z["_xyz"] * np.float32(1.0) + np.float32(-0.5)
    np.testing.assert_array_equal(col["x"], pos[:, 0])
    np.testing.assert_array_equal(col["y"], -pos[:, 2])
    np.testing.assert_array_equal(col["z"], pos[:, 1])
    for n in ("nx", "ny", "nz"):
        assert not col[n].any()
    for c in range(3):
        np.testing.assert_array_equal(col[f"f_dc_{c}"], z["_features_dc"][:, 0, c])

    # opacity = logit(sigmoid(_opacity + o_b))
    o = z["_opacity"][:, 0].astype(np.float64) + O_B
    p = 1.0 / (1.0 + np.exp(-o))
    np.testing.assert_allclose(col["opacity"], np.log(p / (1 - p)), rtol=0, atol=2e-6)

    # scale = ln sqrt(softplus(_scaling + s_b)^2 + 9e-4^2)
    sp = np.logaddexp(0.0, z["_scaling"].astype(np.float64) + S_B)
    want = np.log(np.sqrt(sp**2 + 9e-4**2))
    for c in range(3):
        np.testing.assert_allclose(col[f"scale_{c}"], want[:, c], rtol=1e-6, atol=1e-6)

    # rot = quaternion of T R(q), q = _rotation + (1,0,0,0): it must rotate
    # vectors exactly as T (rotation by q) does, be unit, largest part > 0.
    rot = np.stack([col[f"rot_{c}"] for c in range(4)], axis=1).astype(np.float64)
    q = (z["_rotation"] + np.array([1, 0, 0, 0], np.float32)).astype(np.float64)
    norm = np.linalg.norm(q, axis=1, keepdims=True)
    zero = norm[:, 0] < 1e-12
    assert zero.sum() == 1  # the synthetic set has one q = 0 (row 1)
    q = np.where(zero[:, None], np.array([1.0, 0, 0, 0]), q / np.maximum(norm, 1e-12))
    np.testing.assert_allclose(np.linalg.norm(rot, axis=1), 1.0, atol=1e-6)
    largest = np.abs(rot).argmax(axis=1)
    assert (rot[np.arange(COUNT), largest] > 0).all()
    for v in (np.array([1.0, 0, 0]), np.array([0, 1.0, 0]), np.array([0.2, -0.5, 0.8])):
        a = rotate(q, v)
        want = np.stack([a[:, 0], -a[:, 2], a[:, 1]], axis=1)  # T applied
        np.testing.assert_allclose(rotate(rot, v), want, atol=2e-6)


def test_open3d_reads_the_ply(gaussians):
    o3d = pytest.importorskip("open3d")
    ply, _ = gaussians
    _, body = read_ply(ply)
    rows = np.frombuffer(body, dtype="<f4").reshape(COUNT, 17)

    pc = o3d.io.read_point_cloud(str(ply))
    assert len(pc.points) == COUNT
    np.testing.assert_array_equal(np.asarray(pc.points), rows[:, :3].astype(np.float64))
    assert pc.has_normals() and not np.asarray(pc.normals).any()

    t = o3d.t.io.read_point_cloud(str(ply))
    names = set(t.point)
    extra = [p for p in PROPS[6:]]
    missing = [p for p in extra if p not in names]
    assert not missing, f"open3d did not expose {missing}; it has {sorted(names)}"
    for i, p in enumerate(PROPS):
        if i < 6:
            continue
        np.testing.assert_array_equal(t.point[p].numpy()[:, 0], rows[:, i], err_msg=p)
