"""Interop tests of the mesh PLY / GLB writers and the mesh report (runtime/output).

trellis-output-tool writes an icosphere (closed, or with every 8th face removed)
as PLY and GLB. We check:
  * the PLY with a hand parser and with Open3D (counts, colours, and Open3D's own
    watertight / manifold / orientation / component verdicts against our report);
  * the GLB's JSON and binary chunks by hand (y-up axis change, accessors,
    material), with Open3D (assimp), and with the Khronos glTF validator
    (npm gltf-validator, installed by scripts/install-deps.sh --test): zero errors.
"""
import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
VALIDATE_JS = Path(__file__).resolve().parent / "output_gltf_validate.js"


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


# name -> tool arguments
VARIANTS = {
    "closed": ["--subdiv", "3"],
    "open_nocolor": ["--subdiv", "3", "--open", "--no-colors"],
    "simplified_unlit": ["--subdiv", "4", "--simplify", "0.05", "--unlit"],
}


@pytest.fixture(scope="module")
def meshes(tmp_path_factory):
    d = tmp_path_factory.mktemp("mesh")
    out = {}
    for name, args in VARIANTS.items():
        prefix = d / name
        info = _run("mesh", prefix, *args)
        out[name] = (prefix.with_suffix(".ply"), prefix.with_suffix(".glb"), info)
    return out


def read_mesh_ply(path: Path):
    data = path.read_bytes()
    end = data.index(b"end_header\n") + len(b"end_header\n")
    header = data[:end].decode("ascii").splitlines()
    assert header[:2] == ["ply", "format binary_little_endian 1.0"]
    nv = int(next(l for l in header if l.startswith("element vertex")).split()[2])
    nf = int(next(l for l in header if l.startswith("element face")).split()[2])
    colors = "property uchar red" in header
    vfields = [("xyz", "<f4", 3)] + ([("rgb", "u1", 3)] if colors else [])
    vdt = np.dtype(vfields)
    fdt = np.dtype([("n", "u1"), ("idx", "<i4", 3)])
    body = data[end:]
    assert len(body) == nv * vdt.itemsize + nf * fdt.itemsize
    v = np.frombuffer(body, vdt, count=nv)
    f = np.frombuffer(body, fdt, count=nf, offset=nv * vdt.itemsize)
    assert (f["n"] == 3).all()
    return header, v, f["idx"]


def read_glb(path: Path):
    data = path.read_bytes()
    magic, version, length = struct.unpack_from("<4sII", data, 0)
    assert magic == b"glTF" and version == 2 and length == len(data)
    jlen, jtype = struct.unpack_from("<II", data, 12)
    assert jtype == 0x4E4F534A and jlen % 4 == 0
    doc = json.loads(data[20 : 20 + jlen])
    blen, btype = struct.unpack_from("<II", data, 20 + jlen)
    assert btype == 0x004E4942 and blen % 4 == 0
    return doc, data[28 + jlen : 28 + jlen + blen]


def accessor(doc, binchunk, index, dtype, width):
    acc = doc["accessors"][index]
    view = doc["bufferViews"][acc["bufferView"]]
    start = view.get("byteOffset", 0) + acc.get("byteOffset", 0)
    a = np.frombuffer(binchunk, dtype, count=acc["count"] * width, offset=start)
    return acc, a.reshape(acc["count"], width) if width > 1 else a


@pytest.mark.parametrize("name", list(VARIANTS))
def test_ply_and_report_agree_with_open3d(meshes, name):
    o3d = pytest.importorskip("open3d")
    ply, _, info = meshes[name]
    rep = info["report"]
    header, v, f = read_mesh_ply(ply)
    assert len(v) == rep["vertices"] and len(f) == rep["faces"]
    m = o3d.io.read_triangle_mesh(str(ply))
    assert len(m.vertices) == rep["vertices"] and len(m.triangles) == rep["faces"]
    np.testing.assert_array_equal(np.asarray(m.triangles), f)
    np.testing.assert_array_equal(np.asarray(m.vertices), v["xyz"].astype(np.float64))
    assert m.has_vertex_colors() == ("nocolor" not in name)
    if m.has_vertex_colors():
        # colour = position + 0.5, quantized to 8 bits
        want = np.clip(v["xyz"] + 0.5, 0, 1)
        np.testing.assert_allclose(np.asarray(m.vertex_colors), want, atol=0.5 / 255 + 1e-7)

    # Open3D's verdicts, computed independently, must match our report.
    assert m.is_watertight() == rep["watertight"], rep["line"]
    assert m.is_edge_manifold(allow_boundary_edges=True) == (rep["non_manifold_edges"] == 0)
    assert m.is_vertex_manifold() == (rep["non_manifold_vertices"] == 0)
    # Open3D's is_orientable says an orientation *exists*; our flag says the
    # winding *is* consistent. The synthetic meshes are wound consistently, so
    # both must hold.
    assert m.is_orientable() and rep["oriented"] and rep["inconsistent_edges"] == 0
    odd = np.asarray(m.get_non_manifold_edges(allow_boundary_edges=False))
    assert len(odd) == rep["boundary_edges"] + rep["non_manifold_edges"]
    clusters, _, _ = m.cluster_connected_triangles()
    assert len(set(np.asarray(clusters).tolist())) == rep["components"]
    if name == "closed":
        assert rep["watertight"] and rep["manifold"] and rep["euler"] == 2
    if name == "open_nocolor":
        assert not rep["watertight"] and rep["boundary_edges"] > 0


@pytest.mark.parametrize("name", list(VARIANTS))
def test_glb_structure(meshes, name):
    ply, glb, info = meshes[name]
    doc, binchunk = read_glb(glb)
    g = info["glb"]
    assert doc["asset"]["version"] == "2.0"
    prim = doc["meshes"][0]["primitives"][0]
    assert prim.get("mode", 4) == 4
    acc, pos = accessor(doc, binchunk, prim["attributes"]["POSITION"], "<f4", 3)
    assert acc["componentType"] == 5126 and acc["type"] == "VEC3"
    assert acc["count"] == g["vertices_after"]
    np.testing.assert_array_equal(np.array(acc["min"], np.float32), pos.min(axis=0))
    np.testing.assert_array_equal(np.array(acc["max"], np.float32), pos.max(axis=0))
    iacc, idx = accessor(doc, binchunk, prim["indices"], "<u4", 1)
    assert iacc["componentType"] == 5125 and iacc["count"] == 3 * g["faces_after"]
    assert idx.max() < acc["count"]
    assert ("COLOR_0" in prim["attributes"]) == ("nocolor" not in name)
    mat = doc["materials"][prim["material"]]
    assert mat.get("doubleSided", False) is False
    if "unlit" in name:
        assert "KHR_materials_unlit" in mat["extensions"]
        assert doc["extensionsUsed"] == ["KHR_materials_unlit"]
    else:
        assert mat["pbrMetallicRoughness"].get("roughnessFactor", 1.0) == 1.0

    if g["faces_after"] == g["faces_before"]:
        # No simplification: same vertices, y-up (x, y, z) -> (x, z, -y).
        _, v, f = read_mesh_ply(ply)
        xyz = v["xyz"]
        np.testing.assert_array_equal(pos, np.stack([xyz[:, 0], xyz[:, 2], -xyz[:, 1]], 1))
        np.testing.assert_array_equal(idx.reshape(-1, 3), f)
    else:
        # simplify 0.05 of 5120 faces: meshoptimizer should reach ~256.
        assert g["faces_before"] == 5120
        assert 0.8 * 256 <= g["faces_after"] <= 256
        assert g["vertices_after"] < g["vertices_before"]
        # every vertex of the simplified mesh is still on the sphere (r = 0.5)
        np.testing.assert_allclose(np.linalg.norm(pos, axis=1), 0.5, atol=1e-6)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_open3d_reads_the_glb(meshes, name):
    o3d = pytest.importorskip("open3d")
    _, glb, info = meshes[name]
    doc, binchunk = read_glb(glb)
    prim = doc["meshes"][0]["primitives"][0]
    _, pos = accessor(doc, binchunk, prim["attributes"]["POSITION"], "<f4", 3)
    m = o3d.io.read_triangle_mesh(str(glb))
    assert len(m.triangles) == info["glb"]["faces_after"]
    # assimp may reorder or drop unreferenced vertices: compare the referenced
    # positions as sets.
    got = np.asarray(m.vertices)[np.unique(np.asarray(m.triangles))]
    _, idx = accessor(doc, binchunk, prim["indices"], "<u4", 1)
    want = pos.astype(np.float64)[np.unique(idx)]
    np.testing.assert_array_equal(np.unique(got, axis=0), np.unique(want, axis=0))
    assert m.has_vertex_colors() == ("COLOR_0" in prim["attributes"])


def _validator():
    node = shutil.which("node")
    if not node:
        pytest.skip("node is not installed; the Khronos glTF validator runs on node")
    modules = Path(
        os.environ.get("TRELLIS_GLTF_VALIDATOR_DIR", REPO / "build-deps" / "node" / "node_modules")
    )
    if not (modules / "gltf-validator" / "package.json").is_file():
        pytest.skip(f"gltf-validator is not installed in {modules}; run scripts/install-deps.sh --test")
    return node, modules


@pytest.mark.parametrize("name", list(VARIANTS))
def test_khronos_validator_finds_no_errors(meshes, name):
    node, modules = _validator()
    _, glb, info = meshes[name]
    out = subprocess.run(
        [node, str(VALIDATE_JS), str(glb), str(modules)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode in (0, 1), out.stderr
    report = json.loads(out.stdout)
    issues = report["issues"]
    print(
        f"{name}: gltf-validator {report['validatorVersion']}: "
        f"{issues['numErrors']} errors, {issues['numWarnings']} warnings, "
        f"{issues['numInfos']} infos, {issues['numHints']} hints"
    )
    for msg in issues["messages"]:
        print("  ", msg)
    assert issues["numErrors"] == 0, json.dumps(issues["messages"], indent=1)
    assert report["info"]["totalTriangleCount"] == info["glb"]["faces_after"]
    assert report["info"]["totalVertexCount"] == info["glb"]["vertices_after"]
