"""TRELLIS's image preprocessing (runtime/image, tools/trellis-preprocess)
against the NumPy implementation written from the spec
(test/golden/image_preprocess_np.py), bit for bit, on the deterministic test
images of test/golden/image_cases.py; where Pillow is installed, the NumPy
implementation against Pillow itself (TRELLIS's preprocess_image code with
Pillow's crop and resize), and JPEG decoding against Pillow's. Bad images
each get a non-zero exit and a named message.
"""

import io
import os
import resource
import struct
import sys
import zlib

import numpy as np
import pytest

from _tc_env import BUILD, run

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden")
sys.path.insert(0, GOLDEN)

import image_cases as C  # noqa: E402
import image_preprocess_np as G  # noqa: E402

try:
    from PIL import Image

    HAVE_PIL = True
except ImportError:  # Debian's python3-pil (scripts/install-deps.sh --test)
    HAVE_PIL = False

TOOL = BUILD / "bin/trellis-preprocess"
CASES = C.cases()
NO_BG_FLAG = "--no-background-removal"


@pytest.fixture(scope="module")
def tool():
    if not os.access(TOOL, os.X_OK):
        pytest.fail(f"{TOOL} is not built (ninja -C {BUILD} trellis-preprocess)")
    return TOOL


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return C.write_cases(tmp_path_factory.mktemp("images"))


def _needs_flag(name):
    pixels, color_type, _ = CASES[name]
    return not G.alpha_trusted(pixels, color_type == C.RGBA)


def _golden(name):
    pixels, color_type, _ = CASES[name]
    return G.preprocess(pixels, color_type == C.RGBA, no_background_removal=_needs_flag(name))


def _preprocess(tool, image, tmp_path, *flags):
    rgb, x = tmp_path / "rgb.npy", tmp_path / "x.npy"
    r = run(tool, image, "--out-rgb", rgb, "--out-tensor", x, *flags)
    assert r.returncode == 0, r.stderr
    return np.load(rgb), np.load(x)


GOOD = [n for n in CASES if n != "alpha_max_204"]


def test_cases_cover_the_brief():
    # The set the spec and the issue ask for: odd sizes, up- and downsampling,
    # thin alpha, borders, crops past the edge, half-pixel centres, a copy.
    shapes = {CASES[n][0].shape[:2] for n in CASES}
    assert {(1, 1), (13, 7), (517, 333), (77, 1023)} <= shapes
    boxes = {n: G.crop_box(CASES[n][0]) for n in GOOD if not _needs_flag(n)}
    assert boxes["crop_exactly_518"][2] - boxes["crop_exactly_518"][0] == 518
    l, t, r, b = boxes["a1023x77_wide"]
    assert t < 0 and b > 77 and r - l > 518  # downsampling, past the edges
    assert boxes["upsample_40x30"][2] - boxes["upsample_40x30"][0] < 518
    assert boxes["half_pixel_centres"] == (8, 2, 42, 36)  # 8.5 -> 8, 2.5 -> 2
    assert boxes["half_pixel_centres_odd"][0] == 8  # 31.5 - 23 = 8.5 -> 8
    assert boxes["a1x1"] == (0, 0, 0, 0)


@pytest.mark.parametrize("name", GOOD)
def test_bit_identical_to_numpy(tool, images, tmp_path, name):
    flags = [NO_BG_FLAG] if _needs_flag(name) else []
    rgb, x = _preprocess(tool, images[name], tmp_path, *flags)
    want = _golden(name)
    assert rgb.dtype == np.uint8 and rgb.shape == (518, 518, 3)
    assert x.dtype == np.float32 and x.shape == (3, 518, 518)
    diff = np.argwhere(rgb != want)
    assert diff.size == 0, f"{len(diff)} bytes differ, first at {diff[0].tolist()}"
    assert np.array_equal(x.view(np.uint32), G.normalize(want).view(np.uint32))


def test_outputs_are_not_trivial(tool, images, tmp_path):
    # A broken pipeline giving black images would pass the comparisons above
    # only if the golden were broken the same way; check content directly.
    rgb, _ = _preprocess(tool, images["a333x517_blob"], tmp_path)
    assert rgb.max() == 255 and (rgb == 0).all(axis=2).mean() > 0.2  # object and black margin
    rgb, _ = _preprocess(tool, images["a1x1"], tmp_path)
    assert not rgb.any()  # a 0 x 0 crop resizes to black, as in Pillow


def _pillow_trellis(path, no_background_removal):
    """TRELLIS's preprocess_image with Pillow (spec §1.2-§1.5), the rembg call
    replaced by a mask of 255 everywhere for no_background_removal."""
    image = Image.open(path)
    if no_background_removal:
        image = image.convert("RGB")
        if max(image.size) > 1024:
            s = 1024 / max(image.size)
            image = image.resize((int(image.width * s), int(image.height * s)), Image.LANCZOS)
        image = image.convert("RGBA")
    alpha = np.array(image)[:, :, 3]
    bbox = np.argwhere(alpha > 0.8 * 255)
    bbox = np.min(bbox[:, 1]), np.min(bbox[:, 0]), np.max(bbox[:, 1]), np.max(bbox[:, 0])
    center = (bbox[0] + bbox[2]) / 2, (bbox[1] + bbox[3]) / 2
    size = int(max(bbox[2] - bbox[0], bbox[3] - bbox[1]) * 1.2)
    box = center[0] - size // 2, center[1] - size // 2, center[0] + size // 2, center[1] + size // 2
    out = image.crop(box).resize((518, 518), Image.LANCZOS)
    out = np.array(out).astype(np.float32) / 255
    out = out[:, :, :3] * out[:, :, 3:4]
    return (out * 255).astype(np.uint8)


@pytest.mark.skipif(not HAVE_PIL, reason="Pillow (python3-pil) is not installed")
@pytest.mark.parametrize("name", GOOD)
def test_numpy_golden_equals_pillow(images, name):
    want = _pillow_trellis(images[name], _needs_flag(name))
    got = _golden(name)
    assert np.array_equal(got, want), f"{int((got != want).sum())} bytes differ from Pillow"


@pytest.mark.skipif(not HAVE_PIL, reason="Pillow (python3-pil) is not installed")
@pytest.mark.parametrize("mode,subsampling", [("RGB", 2), ("RGB", 0), ("L", 0)])
def test_jpeg_decodes_as_pillow(tool, tmp_path, mode, subsampling):
    rng = np.random.default_rng(7)
    pixels = CASES["a333x517_blob"][0][:, :, :3].copy()
    pixels[100:300, 50:250] = rng.integers(0, 256, (200, 200, 3), dtype=np.uint8) // 2 + 60
    path = tmp_path / "photo.jpg"
    Image.fromarray(pixels).convert(mode).save(path, quality=90, subsampling=subsampling)
    decoded = np.array(Image.open(path).convert("RGBA"))
    rgb, _ = _preprocess(tool, path, tmp_path, NO_BG_FLAG)
    assert np.array_equal(rgb, G.preprocess(decoded, has_alpha=False, no_background_removal=True))


@pytest.mark.parametrize("name", ["rgb_no_alpha", "rgba_alpha_all_255"])
def test_without_usable_alpha_names_the_flag(tool, images, tmp_path, name):
    r = run(tool, images[name], "--out-rgb", tmp_path / "rgb.npy")
    assert r.returncode == 1
    assert str(images[name]) in r.stderr and NO_BG_FLAG in r.stderr and "rembg" in r.stderr
    assert not (tmp_path / "rgb.npy").exists()


def _rgba_with_half_alpha(h=9, w=11):
    px = np.zeros((h, w, 4), np.uint8)
    px[:, :, :3] = 200
    px[:, :, 3] = 255
    px[2:6, 3:8, 3] = 128
    return px


@pytest.mark.parametrize("kind", ["grey_alpha", "palette_trns", "rgb_trns"])
def test_transparency_without_rgba_mode_is_not_trusted(tool, tmp_path, kind):
    # Spec §6.1: LA, palette + tRNS and RGB + tRNS are not Pillow's RGBA mode,
    # so TRELLIS discards their transparency and would run rembg.
    px = _rgba_with_half_alpha()
    if kind == "grey_alpha":
        data = C.png_bytes(px[:, :, [0, 3]], C.GREY_ALPHA)
    elif kind == "palette_trns":
        idx = (px[:, :, 3] == 128).astype(np.uint8)[:, :, None]
        data = C.png_bytes(
            idx, 3, extra_chunks=[(b"PLTE", bytes([200, 200, 200, 10, 20, 30])), (b"tRNS", bytes([255, 0]))]
        )
    else:
        data = C.png_bytes(px[:, :, :3], C.RGB, extra_chunks=[(b"tRNS", struct.pack(">HHH", 200, 200, 200))])
    path = tmp_path / f"{kind}.png"
    path.write_bytes(data)
    r = run(tool, path, "--out-rgb", tmp_path / "rgb.npy")
    assert r.returncode == 1 and NO_BG_FLAG in r.stderr, r.stderr
    # With the flag the colours are used and the transparency dropped.
    rgb, _ = _preprocess(tool, path, tmp_path, NO_BG_FLAG)
    if kind == "palette_trns":
        colours = np.where(idx == 1, np.array([10, 20, 30], np.uint8), np.uint8(200))
        opaque = np.concatenate([colours, np.full(idx.shape, 255, np.uint8)], 2)
    else:
        opaque = px.copy()
        opaque[:, :, 3] = 255
    assert np.array_equal(rgb, G.preprocess(opaque, has_alpha=False, no_background_removal=True))


def _bad(tool, tmp_path, name, data, limit_memory=False):
    path = tmp_path / name
    path.write_bytes(data)
    kw = {}
    if limit_memory:  # refused before allocating: 256 MiB of address space is plenty
        kw["preexec_fn"] = lambda: resource.setrlimit(resource.RLIMIT_AS, (256 << 20, 256 << 20))
    r = run(tool, path, "--out-rgb", tmp_path / "rgb.npy", **kw)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert str(path) in r.stderr
    return r.stderr


def test_truncated_png(tool, images, tmp_path):
    data = images["a333x517_blob"].read_bytes()
    assert "truncated or corrupt PNG" in _bad(tool, tmp_path, "cut.png", data[: len(data) // 2])


def test_header_only_png(tool, tmp_path):
    err = _bad(tool, tmp_path, "header.png", C.png_header_only(16, 16))
    assert "truncated or corrupt PNG" in err


def test_zero_size_png(tool, tmp_path):
    err = _bad(tool, tmp_path, "empty.png", C.png_header_only(0, 0))
    assert "0 x 0 pixels (an empty image)" in err
    err = _bad(tool, tmp_path, "empty_w.png", C.png_bytes(np.zeros((3, 0, 4), np.uint8)))
    assert "0 x 3 pixels (an empty image)" in err


def test_16_bit_png(tool, tmp_path):
    px = np.full((4, 5, 4), 40000, np.uint16)
    err = _bad(tool, tmp_path, "deep.png", C.png_bytes(px, C.RGBA, bit_depth=16))
    assert "16-bit PNG, which is not supported yet" in err


def test_huge_png_refused_before_allocating(tool, tmp_path):
    err = _bad(tool, tmp_path, "huge.png", C.png_header_only(20000, 20000), limit_memory=True)
    assert "20000 x 20000 pixels, larger than the limit of 16384 pixels a side" in err
    err = _bad(tool, tmp_path, "many.png", C.png_header_only(16384, 9000), limit_memory=True)
    assert "more than the limit of 134217728 pixels" in err


@pytest.mark.skipif(not HAVE_PIL, reason="Pillow (python3-pil) is not installed")
def test_cmyk_jpeg(tool, tmp_path):
    buf = io.BytesIO()
    Image.new("CMYK", (8, 8), (10, 20, 30, 40)).save(buf, "JPEG")
    assert "CMYK JPEG, which is not supported" in _bad(tool, tmp_path, "cmyk.jpg", buf.getvalue())


@pytest.mark.skipif(not HAVE_PIL, reason="Pillow (python3-pil) is not installed")
def test_truncated_jpeg(tool, tmp_path):
    buf = io.BytesIO()
    Image.fromarray(CASES["a333x517_blob"][0][:, :, :3]).save(buf, "JPEG", quality=90)
    data = buf.getvalue()
    assert "truncated or corrupt JPEG" in _bad(tool, tmp_path, "cut.jpg", data[: len(data) // 2])


def test_unknown_format_and_empty_file(tool, tmp_path):
    assert "not a PNG or JPEG file" in _bad(tool, tmp_path, "x.gif", b"GIF89a" + bytes(20))
    assert "the file is empty" in _bad(tool, tmp_path, "x.png", b"")


def test_corrupt_png_data(tool, images, tmp_path):
    data = bytearray(images["a333x517_blob"].read_bytes())
    data[60:80] = bytes(20)  # inside IDAT: the chunk CRC no longer matches
    assert "truncated or corrupt PNG" in _bad(tool, tmp_path, "crc.png", bytes(data))


def test_no_foreground(tool, images, tmp_path):
    r = run(tool, images["alpha_max_204"], "--out-rgb", tmp_path / "rgb.npy")
    assert r.returncode == 1
    assert "no foreground" in r.stderr and "largest alpha is 204" in r.stderr
    with pytest.raises(G.NoForeground):
        _golden("alpha_max_204")


def test_missing_file_and_usage(tool, tmp_path):
    r = run(tool, tmp_path / "nope.png", "--out-rgb", tmp_path / "rgb.npy")
    assert r.returncode == 1 and "nope.png: cannot open the image" in r.stderr
    r = run(tool, tmp_path / "nope.png")
    assert r.returncode == 2 and "nothing to write" in r.stderr
    r = run(tool, "--help")
    assert r.returncode == 0 and NO_BG_FLAG in r.stdout and "518" in r.stdout
