#!/usr/bin/python3
"""Regenerates the seed corpora in test/fuzz/corpus/ (small valid files).

    /usr/bin/python3 test/fuzz/make-seeds.py BUILD_DIR

NumPy writes the .npy/.npz seeds; trellis-format-tool (BUILD_DIR/bin) writes
some safetensors seeds and an .npz through libzip; the remaining safetensors
seeds are written byte by byte here, in the reference library's layout.
"""
import io
import json
import os
import struct
import subprocess
import sys
import tempfile
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def out(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def npy_bytes(arr, version=None):
    b = io.BytesIO()
    if version is None:
        np.save(b, arr)
    else:
        np.lib.format.write_array(b, arr, version=version)
    return b.getvalue()


def safetensors(entries, metadata=None, pretty=False):
    """entries: list of (name, dtype, shape, bytes) already in data order."""
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in entries:
        header[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "data_offsets": [len(data), len(data) + len(raw)],
        }
        data += raw
    text = json.dumps(
        header, indent=1 if pretty else None, separators=None if pretty else (",", ":")
    ).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def main():
    tool = os.path.join(sys.argv[1], "bin", "trellis-format-tool")
    rng = np.random.default_rng(7)
    arrays = {
        "f2": rng.standard_normal((2, 3)).astype("<f2"),
        "f4": rng.standard_normal((3,)).astype("<f4"),
        "f8": np.array(1.25, dtype="<f8"),
        "i1": np.arange(-3, 3, dtype="i1").reshape(2, 3),
        "u1": np.arange(5, dtype="u1"),
        "i2": np.arange(4, dtype="<i2").reshape(1, 2, 2),
        "i4": np.arange(3, dtype="<i4"),
        "i8": np.array([2**40, -1], dtype="<i8"),
        "b1": np.array([True, False, True]),
        "empty": np.zeros((0, 4), dtype="<f4"),
    }

    # .npy
    for key, arr in arrays.items():
        out("npy", f"{key}.npy", npy_bytes(arr))
    out("npy", "v2.npy", npy_bytes(arrays["i4"], (2, 0)))
    out("npy", "v3.npy", npy_bytes(arrays["f4"], (3, 0)))

    # .npz (NumPy: stored, deflate, empty)
    for name, fn in (("stored.npz", np.savez), ("compressed.npz", np.savez_compressed)):
        b = io.BytesIO()
        fn(b, cond=arrays["f4"], mask=arrays["b1"], idx=arrays["i8"])
        out("npz", name, b.getvalue())
    b = io.BytesIO()
    np.savez(b)
    out("npz", "empty.npz", b.getvalue())

    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "in.npz")
        np.savez(src, **{k: v for k, v in arrays.items()})
        # .npz written by our libzip writer
        dst = os.path.join(tmp, "ours.npz")
        subprocess.run([tool, "convert", src, dst, "--compressed"], check=True)
        with open(dst, "rb") as f:
            out("npz", "ours-compressed.npz", f.read())
        # safetensors written by writeSafetensors
        dst = os.path.join(tmp, "all.safetensors")
        subprocess.run([tool, "convert", src, dst], check=True)
        with open(dst, "rb") as f:
            out("safetensors_header", "all-dtypes.safetensors", f.read())
        empty = os.path.join(tmp, "empty.npz")
        np.savez(empty)
        dst = os.path.join(tmp, "empty.safetensors")
        subprocess.run([tool, "convert", empty, dst], check=True)
        with open(dst, "rb") as f:
            out("safetensors_header", "empty.safetensors", f.read())

    # The reference library's test vector, a TRELLIS-like layout, metadata,
    # and a hand-formatted header (whitespace, any key order).
    f32 = struct.pack("<6f", 0, 1, 2, 3, 4, 5)
    out("safetensors_header", "attn0.safetensors", safetensors([("attn.0", "F32", (1, 2, 3), f32)]))
    w = rng.standard_normal((12, 4)).astype("<f2").tobytes()
    g = np.ones(4, "<f4").tobytes()
    out(
        "safetensors_header",
        "trellis-like.safetensors",
        safetensors(
            [
                ("blocks.0.norm1.weight", "F32", (4,), g),
                ("pos_emb", "F32", (2, 2), g),
                ("blocks.0.attn.to_qkv.weight", "F16", (12, 4), w),
                ("blocks.0.attn.to_qkv.bias", "F16", (12,), w[:24]),
            ]
        ),
    )
    out(
        "safetensors_header",
        "metadata.safetensors",
        safetensors(
            [("x", "BF16", (2,), b"\x80\x3f\x00\x40")], metadata={"format": "pt", "note": 'a"b\\c\n'}
        ),
    )
    out(
        "safetensors_header",
        "pretty.safetensors",
        safetensors([("a", "I64", (1,), struct.pack("<q", -5)), ("b", "U8", (), b"\x07")], pretty=True),
    )


if __name__ == "__main__":
    main()
