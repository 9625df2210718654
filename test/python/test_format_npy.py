"""Interop of trellisc's .npy/.npz (and safetensors) code with NumPy.

NumPy writes files that our reader must read, and reads the files our writer
writes. The C++ side is driven through trellis-format-tool (built from
test/unit/format/FormatTool.cpp into $TRELLIS_BUILD_DIR/bin), which prints
name, dtype, shape and the CRC-32 of the raw bytes of each tensor, or
converts between formats. scripts/run-tests.sh sets TRELLIS_BUILD_DIR.
"""
import io
import json
import os
import struct
import subprocess
import zipfile
import zlib

import numpy as np
import pytest

BUILD_DIR = os.environ.get("TRELLIS_BUILD_DIR")
pytestmark = pytest.mark.skipif(
    not BUILD_DIR, reason="TRELLIS_BUILD_DIR is not set (scripts/run-tests.sh sets it)"
)

DTYPES = {
    np.float16: "F16",
    np.float32: "F32",
    np.float64: "F64",
    np.int8: "I8",
    np.uint8: "U8",
    np.int16: "I16",
    np.int32: "I32",
    np.int64: "I64",
    np.bool_: "BOOL",
}
SHAPES = [(), (0,), (7,), (2, 3), (2, 0, 3), (3, 1, 4, 2)]


@pytest.fixture(scope="module")
def tool():
    path = os.path.join(BUILD_DIR, "bin", "trellis-format-tool")
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is not built (ninja -C {BUILD_DIR} trellis-format-tool)")
    return path


def run(tool, *args):
    return subprocess.run([tool, *map(str, args)], capture_output=True, text=True)


def info(tool, path):
    p = run(tool, "info", path)
    assert p.returncode == 0, p.stderr
    rows = []
    for line in p.stdout.splitlines():
        name, dtype, dims, crc = line.split("\t")
        shape = tuple(int(d) for d in dims.split(",")) if dims else ()
        rows.append((name, dtype, shape, int(crc, 16)))
    return rows


def sample(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    if dtype is np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        ii = np.iinfo(dtype)
        return rng.integers(ii.min, ii.max, shape, dtype=dtype, endpoint=True)
    return (rng.standard_normal(shape) * 100).astype(dtype)


def crc(arr):
    return zlib.crc32(np.ascontiguousarray(arr).tobytes()) & 0xFFFFFFFF


def expected_row(name, arr):
    return (name, DTYPES[arr.dtype.type], arr.shape, crc(arr))


def all_arrays():
    arrays, seed = {}, 0
    for dtype in DTYPES:
        for shape in SHAPES:
            seed += 1
            arrays[f"{np.dtype(dtype).name}_{len(shape)}d_{seed}"] = sample(dtype, shape, seed)
    return arrays


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", list(DTYPES), ids=lambda d: np.dtype(d).name)
def test_reads_npy_written_by_numpy(tool, tmp_path, dtype, shape):
    arr = sample(dtype, shape, 1)
    path = tmp_path / "a.npy"
    np.save(path, arr)
    assert info(tool, path) == [expected_row("-", arr)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", list(DTYPES), ids=lambda d: np.dtype(d).name)
def test_writes_npy_identical_to_numpy(tool, tmp_path, dtype, shape):
    arr = sample(dtype, shape, 2)
    src, dst = tmp_path / "np.npy", tmp_path / "ours.npy"
    np.save(src, arr)
    p = run(tool, "convert", src, dst)
    assert p.returncode == 0, p.stderr
    assert dst.read_bytes() == src.read_bytes()
    back = np.load(dst)
    assert back.dtype == arr.dtype and back.shape == arr.shape
    np.testing.assert_array_equal(back, arr)


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_reads_every_npy_version(tool, tmp_path, version):
    arr = sample(np.float32, (3, 5), 3)
    path = tmp_path / "v.npy"
    with open(path, "wb") as f:
        np.lib.format.write_array(f, arr, version=version)
    assert info(tool, path) == [expected_row("-", arr)]


def test_conditioning_sized_array_both_ways(tool, tmp_path):
    cond = sample(np.float32, (1, 1374, 1024), 4)  # DINOv2 tokens, B = 1
    np.save(tmp_path / "cond.npy", cond)
    assert info(tool, tmp_path / "cond.npy") == [expected_row("-", cond)]
    p = run(tool, "convert", tmp_path / "cond.npy", tmp_path / "back.npz", "--compressed")
    assert p.returncode == 0, p.stderr
    with np.load(tmp_path / "back.npz") as z:
        np.testing.assert_array_equal(z["-"], cond)


@pytest.mark.parametrize("compress", [False, True], ids=["savez", "savez_compressed"])
def test_reads_npz_written_by_numpy(tool, tmp_path, compress):
    arrays = all_arrays()
    path = tmp_path / "a.npz"
    (np.savez_compressed if compress else np.savez)(path, **arrays)
    assert info(tool, path) == [expected_row(k, v) for k, v in arrays.items()]


@pytest.mark.parametrize("compress", [False, True], ids=["stored", "compressed"])
def test_writes_npz_numpy_reads(tool, tmp_path, compress):
    arrays = all_arrays()
    src, dst = tmp_path / "np.npz", tmp_path / "ours.npz"
    np.savez(src, **arrays)
    p = run(tool, "convert", src, dst, "--compressed" if compress else "--stored")
    assert p.returncode == 0, p.stderr
    with zipfile.ZipFile(dst) as zf:
        assert zf.testzip() is None
        members = zf.infolist()
        assert [m.filename for m in members] == [k + ".npy" for k in arrays]
        want = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
        assert all(m.compress_type == want for m in members)
    with np.load(dst) as z:
        assert list(z.keys()) == list(arrays)
        for k, v in arrays.items():
            assert z[k].dtype == v.dtype and z[k].shape == v.shape, k
            np.testing.assert_array_equal(z[k], v)
            # each member is byte-identical to what np.save writes
            buf = io.BytesIO()
            np.save(buf, v)
            with zipfile.ZipFile(dst) as zf:
                assert zf.read(k + ".npy") == buf.getvalue(), k


def test_empty_npz_both_ways(tool, tmp_path):
    np.savez(tmp_path / "np.npz")
    assert info(tool, tmp_path / "np.npz") == []
    p = run(tool, "convert", tmp_path / "np.npz", tmp_path / "ours.npz")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "ours.npz").read_bytes() == (tmp_path / "np.npz").read_bytes()
    with np.load(tmp_path / "ours.npz") as z:
        assert list(z.keys()) == []


@pytest.mark.parametrize(
    "arr, message",
    [
        (np.arange(4, dtype=">f4"), "descr '>f4' is big-endian"),
        (np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)), "fortran_order is True"),
        (np.array([1, "a"], dtype=object), "is an object array"),
        (np.arange(3, dtype="<c8"), "unsupported dtype '<c8'"),
        (np.arange(3, dtype="<u4"), "unsupported dtype '<u4'"),
        (np.zeros(2, dtype=[("x", "<f4"), ("y", "<i4")]), "structured (record) dtypes"),
    ],
    ids=["big-endian", "fortran", "object", "complex", "uint32", "structured"],
)
def test_refuses_unsupported_arrays_clearly(tool, tmp_path, arr, message):
    npy = tmp_path / "x.npy"
    np.save(npy, arr, allow_pickle=True)
    p = run(tool, "info", npy)
    assert p.returncode == 1
    assert f"'{npy}'" in p.stderr and message in p.stderr, p.stderr
    npz = tmp_path / "x.npz"
    np.savez(npz, ok=np.zeros(2, np.float32), bad=arr)
    p = run(tool, "info", npz)
    assert p.returncode == 1
    assert "member 'bad.npy'" in p.stderr and message in p.stderr, p.stderr


def test_safetensors_writer_layout(tool, tmp_path):
    """npz -> safetensors -> info, and the header checked with Python's json:
    compact, no __metadata__, descending dtype rank then name, padded to 8."""
    arrays = {k: v for k, v in all_arrays().items()}
    np.savez(tmp_path / "a.npz", **arrays)
    st = tmp_path / "a.safetensors"
    p = run(tool, "convert", tmp_path / "a.npz", st)
    assert p.returncode == 0, p.stderr
    got = {r[0]: r for r in info(tool, st)}
    assert got == {k: expected_row(k, v) for k, v in arrays.items()}

    raw = st.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    text = raw[8 : 8 + n].decode()
    assert n % 8 == 0 and text == text.rstrip() + " " * (n - len(text.rstrip()))
    header = json.loads(text)
    assert "__metadata__" not in header
    assert json.dumps(header, separators=(",", ":")) == text.rstrip()
    rank = ["BOOL", "U8", "I8", "I16", "F16", "BF16", "I32", "F32", "F64", "I64"]
    order = sorted(header, key=lambda k: (-rank.index(header[k]["dtype"]), k.encode()))
    assert list(header) == order
    pos = 0
    for k in order:
        b, e = header[k]["data_offsets"]
        assert b == pos
        pos = e
    assert 8 + n + pos == len(raw)
