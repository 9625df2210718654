"""The RGBA test images of the image preprocessing (test/python/
test_image_preprocess.py), made deterministically (each from
numpy.random.default_rng(crc32(name))), and a small PNG writer (zlib only, so
neither Pillow nor any image library is needed to make them).

    /usr/bin/python3 test/golden/image_cases.py DIR   # writes DIR/<name>.png

cases() maps a name to (pixels H x W x 4 uint8, PNG colour type, what it
covers); colour type 6 is RGBA, 2 is RGB (the alpha plane is 255 and is not
written).
"""

import struct
import sys
import zlib
from pathlib import Path

import numpy as np

RGBA, RGB, GREY_ALPHA = 6, 2, 4


def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bytes(pixels, color_type=RGBA, bit_depth=8, extra_chunks=()):
    """A PNG of an H x W x C array (C = 4, 3, 2 or 1 for colour types 6, 2,
    4, 0; uint8, or uint16 for bit depth 16), filter 0, not interlaced."""
    h, w = pixels.shape[:2]
    data = pixels.astype(">u2" if bit_depth == 16 else np.uint8).reshape(h, -1).tobytes()
    row = len(data) // h if h else 0
    raw = b"".join(b"\x00" + data[y * row : (y + 1) * row] for y in range(h))
    ihdr = struct.pack(">IIBBBBB", w, h, bit_depth, color_type, 0, 0, 0)
    body = b"".join(_chunk(k, d) for k, d in extra_chunks)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", ihdr)
        + body
        + _chunk(b"IDAT", zlib.compress(raw, 9))
        + _chunk(b"IEND", b"")
    )


def png_header_only(width, height, bit_depth=8, color_type=RGBA):
    """The signature and IHDR of a PNG, nothing else."""
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr)


def _rng(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def _colours(rng, h, w):
    return rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)


def _blob(rng, h, w, cx, cy, rx, ry, soft=6.0):
    """RGBA noise with an elliptical alpha: 255 inside, a soft ramp (all 256
    values) over `soft` pixels, 0 outside."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    d = np.sqrt(((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2)
    edge = np.clip((1.0 - d) * min(rx, ry) / soft, 0.0, 1.0)
    a = np.round(edge * 255).astype(np.uint8)
    return np.concatenate([_colours(rng, h, w), a[:, :, None]], axis=2)


def _box_alpha(rng, h, w, x0, y0, x1, y1, inside=255, outside=0):
    img = np.concatenate([_colours(rng, h, w), np.full((h, w, 1), outside, np.uint8)], axis=2)
    img[y0 : y1 + 1, x0 : x1 + 1, 3] = inside
    return img


def cases():
    out = {}

    def add(name, fn, color_type, what):
        out[name] = (fn(_rng(name)), color_type, what)

    add(
        "a1x1",
        lambda r: np.array([[[200, 100, 50, 230]]], np.uint8),
        RGBA,
        "1 x 1: one foreground pixel, a 0 x 0 crop (all black, as Pillow)",
    )
    add(
        "a7x13_noise",
        lambda r: np.concatenate([_colours(r, 13, 7), r.integers(0, 256, (13, 7, 1), dtype=np.uint8)], 2),
        RGBA,
        "7 x 13 random alpha: upsampling a tiny crop",
    )
    add("a333x517_blob", lambda r: _blob(r, 517, 333, 150.3, 260.0, 120, 200), RGBA, "333 x 517 soft blob")
    add(
        "a1023x77_wide",
        lambda r: _blob(r, 77, 1023, 511.0, 38.0, 500, 30),
        RGBA,
        "1023 x 77: downsampling, crop far past the top and bottom edges",
    )
    add(
        "thin_alpha_204_205",
        lambda r: _box_alpha(r, 40, 60, 10, 5, 10, 5, inside=205, outside=204) | _thin(r),
        RGBA,
        "alpha 204 everywhere but a few 205s: 204 is background",
    )
    add(
        "transparent_border",
        lambda r: _box_alpha(r, 120, 90, 30, 40, 59, 79),
        RGBA,
        "an opaque box inside a transparent border",
    )
    add(
        "crop_past_edges",
        lambda r: _box_alpha(r, 64, 64, 0, 0, 63, 63, inside=255, outside=0) & _corner_cut(64),
        RGBA,
        "foreground touching every edge: the crop extends past all four",
    )
    add(
        "half_pixel_centres",
        lambda r: _box_alpha(r, 50, 70, 11, 6, 40, 33),
        RGBA,
        "x0 + x1 and y0 + y1 odd: centres end in .5, round half to even",
    )
    add(
        "half_pixel_centres_odd",
        lambda r: _box_alpha(r, 50, 70, 12, 7, 51, 34),
        RGBA,
        "centres ending in .5 with an odd half side",
    )
    add(
        "crop_exactly_518",
        lambda r: _box_alpha(r, 480, 500, 30, 20, 462, 300),
        RGBA,
        "extent 432: the crop is 518 x 518 and copied, not resampled",
    )
    add(
        "downsample_1500x1100",
        lambda r: _blob(r, 1100, 1500, 700.5, 560.0, 690, 400, soft=40.0),
        RGBA,
        "a large image: downsampling by about 3",
    )
    add(
        "upsample_40x30",
        lambda r: _blob(r, 30, 40, 19.5, 14.5, 12, 9, soft=3.0),
        RGBA,
        "a small object: upsampling about 20 times",
    )
    add(
        "alpha_ramp",
        lambda r: _ramp(r),
        RGBA,
        "every alpha value 0..255, every colour: the premultiply and un-premultiply rounding",
    )
    add(
        "rgb_no_alpha",
        lambda r: np.concatenate([_colours(r, 45, 61), np.full((45, 61, 1), 255, np.uint8)], 2),
        RGB,
        "an RGB PNG: needs --no-background-removal",
    )
    add(
        "rgba_alpha_all_255",
        lambda r: np.concatenate([_colours(r, 33, 21), np.full((33, 21, 1), 255, np.uint8)], 2),
        RGBA,
        "an RGBA PNG whose alpha is 255 everywhere: needs --no-background-removal",
    )
    add(
        "rgb_over_1024",
        lambda r: np.concatenate(
            [_blob(r, 700, 1300, 650, 350, 600, 300)[:, :, :3], np.full((700, 1300, 1), 255, np.uint8)], 2
        ),
        RGB,
        "1300 x 700 RGB: with --no-background-removal, TRELLIS's 1024 cap first (1024 x 551)",
    )
    add(
        "alpha_max_204",
        lambda r: _box_alpha(r, 20, 20, 3, 3, 15, 15, inside=204, outside=0),
        RGBA,
        "alpha never reaches 205: no foreground",
    )
    return out


def _thin(r):
    """A second and third pixel at 205 (OR-ed in: 205 | 204 = 205)."""
    img = np.zeros((40, 60, 4), np.uint8)
    img[31, 47, 3] = 205
    img[22, 3, 3] = 205
    return img


def _corner_cut(n):
    """All ones except a transparent top-left corner (AND mask)."""
    m = np.full((n, n, 4), 255, np.uint8)
    m[:5, :5, 3] = 0
    return m


def _ramp(r):
    a = np.arange(256, dtype=np.uint8).reshape(16, 16)
    alpha = np.kron(a, np.ones((3, 3), np.uint8))  # 48 x 48
    img = np.concatenate([_colours(r, 48, 48), alpha[:, :, None]], 2)
    img[20:28, 20:28, 3] = 255
    return img


def write_cases(directory):
    """Writes every case as DIR/<name>.png; returns {name: path}."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, (pixels, color_type, _) in cases().items():
        data = pixels if color_type == RGBA else pixels[:, :, :3]
        path = directory / f"{name}.png"
        path.write_bytes(png_bytes(data, color_type))
        paths[name] = path
    return paths


if __name__ == "__main__":
    for name, path in write_cases(sys.argv[1] if len(sys.argv) > 1 else ".").items():
        print(path)
