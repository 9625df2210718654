"""TRELLIS's image preprocessing in NumPy, written from the spec
(shared/spec/TRELLIS-v1-image-conditioning.md §1.2-§1.6, §5.2, §5.3), not from
Pillow or from the C++ (runtime/image): the golden for trellis-preprocess.

Decoding is not done here: the input is an 8-bit H x W x 4 array and a flag
saying whether the file had an alpha channel. The structure differs from the
C++ on purpose: each Lanczos axis is a dense integer matrix of quantised
weights (computed with Python's math.sin, i.e. libm), applied in int64 to
whole planes along the band of non-zero weights, and the crop is materialised
with NumPy slicing.
"""

import math

import numpy as np

COND_SIZE = 518
BACKGROUND_REMOVAL_MAX_SIDE = 1024
PRECISION_BITS = 22
# Python floats rounded to float32, as torch.as_tensor(..., float32) does.
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float64).astype(np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float64).astype(np.float32)


class NeedsBackgroundRemoval(ValueError):
    """No trusted alpha: TRELLIS would run rembg (§1.2)."""


class NoForeground(ValueError):
    """No pixel with alpha >= 205 (§1.3: TRELLIS crashes)."""


def alpha_trusted(rgba, has_alpha):
    """§1.2: mode RGBA and at least one alpha value other than 255."""
    return bool(has_alpha) and bool((rgba[:, :, 3] != 255).any())


def _sinc(x):
    if x == 0.0:
        return 1.0
    x = x * math.pi
    return math.sin(x) / x


def _lanczos3(x):
    if -3.0 <= x < 3.0:
        return _sinc(x) * _sinc(x / 3)
    return 0.0


def lanczos_matrix(n, m):
    """§5.2 steps 1-5: the [m, n] matrix of quantised weights (as int64)."""
    scale = n / m
    fs = max(scale, 1.0)
    support = 3.0 * fs
    inv = 1.0 / fs
    k = np.zeros((m, n), dtype=np.int64)
    for i in range(m):
        centre = (i + 0.5) * scale
        first = max(int(centre - support + 0.5), 0)
        end = min(int(centre + support + 0.5), n)
        ws = [_lanczos3(((j - centre) + 0.5) * inv) for j in range(first, end)]
        total = 0.0
        for w in ws:
            total += w
        if total != 0.0:
            ws = [w / total for w in ws]
        for j, w in zip(range(first, end), ws):
            s = w * (1 << PRECISION_BITS)
            k[i, j] = int(s + 0.5) if w >= 0 else int(s - 0.5)
    return k


def _apply(k, data, axis):
    """§5.2 step 6 along `axis` of a uint8 array: clamp((2**21 + sum) >> 22),
    in int64, over the band of non-zero weights of each output row."""
    moved = np.moveaxis(data, axis, 0).astype(np.int64)
    m, n = k.shape
    acc = np.full((m,) + moved.shape[1:], 1 << (PRECISION_BITS - 1), dtype=np.int64)
    nz = k != 0
    if nz.any():
        first = np.where(nz.any(axis=1), nz.argmax(axis=1), 0)
        last = np.where(nz.any(axis=1), n - 1 - nz[:, ::-1].argmax(axis=1), -1)
        taps = np.maximum(last - first + 1, 0)
    else:
        first = taps = np.zeros(m, np.int64)
    rows = np.arange(m)
    for t in range(int(taps.max())):
        j = np.minimum(first + t, n - 1)
        w = np.where(t < taps, k[rows, j], 0)
        acc += moved[j] * w.reshape((m,) + (1,) * (moved.ndim - 1))
    out = np.clip(acc >> PRECISION_BITS, 0, 255).astype(np.uint8)
    return np.moveaxis(out, 0, axis)


def resize(img, width, height):
    """Pillow's 8-bit LANCZOS resize of an H x W x C uint8 array (channels
    independent): horizontal pass first, an unchanged axis skipped."""
    h, w = img.shape[:2]
    out = img.copy()
    if width != w:
        out = _apply(lanczos_matrix(w, width), out, 1)
    if height != h:
        out = _apply(lanczos_matrix(h, height), out, 0)
    return out


def resize_rgba(rgba, size):
    """§1.4: Image.resize on RGBA: a copy at the same size, else premultiply,
    Lanczos, un-premultiply (all integer)."""
    if rgba.shape[0] == size and rgba.shape[1] == size:
        return rgba.copy()
    c = rgba[:, :, :3].astype(np.int32)
    a = rgba[:, :, 3:4].astype(np.int32)
    t = c * a + 128
    pre = rgba.copy()
    pre[:, :, :3] = ((t >> 8) + t) >> 8
    out = resize(pre, size, size)
    a = out[:, :, 3:4].astype(np.int32)
    c = out[:, :, :3].astype(np.int32)
    un = np.minimum(255, (255 * c) // np.maximum(a, 1))
    keep = (a == 0) | (a == 255)
    out[:, :, :3] = np.where(keep, c, un).astype(np.uint8)
    return out


def crop_box(rgba):
    """§1.3: (left, top, right, bottom) of the crop around alpha >= 205."""
    ys, xs = np.nonzero(rgba[:, :, 3] > 0.8 * 255)
    if xs.size == 0:
        raise NoForeground("no pixel has alpha >= 205")
    x0, x1, y0, y1 = int(xs.min()), int(xs.max()), int(ys.min()), int(ys.max())
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    s = int(max(x1 - x0, y1 - y0) * 1.2)
    h = s // 2
    return tuple(round(v) for v in (cx - h, cy - h, cx + h, cy + h))


def crop(rgba, box):
    """Pillow's crop: no clamping, outside pixels (0, 0, 0, 0)."""
    left, top, right, bottom = box
    out = np.zeros((bottom - top, right - left, 4), dtype=np.uint8)
    h, w = rgba.shape[:2]
    sx0, sy0 = max(left, 0), max(top, 0)
    sx1, sy1 = min(right, w), min(bottom, h)
    if sx1 > sx0 and sy1 > sy0:
        out[sy0 - top : sy1 - top, sx0 - left : sx1 - left] = rgba[sy0:sy1, sx0:sx1]
    return out


def premultiply_onto_black(rgba):
    """§1.5: float32 c/255 * a/255, then * 255 truncated to uint8."""
    f = rgba.astype(np.float32) / np.float32(255)
    v = f[:, :, :3] * f[:, :, 3:4]
    return (v * np.float32(255)).astype(np.uint8)


def opaque_for_no_background_removal(rgba):
    """trellisc's --no-background-removal: TRELLIS's rembg path with a mask of
    255 everywhere (RGB kept, the 1024 cap, alpha 255)."""
    h, w = rgba.shape[:2]
    rgb = rgba[:, :, :3]
    if max(w, h) > BACKGROUND_REMOVAL_MAX_SIDE:
        s = BACKGROUND_REMOVAL_MAX_SIDE / max(w, h)
        rgb = resize(rgb, int(w * s), int(h * s))
    alpha = np.full(rgb.shape[:2] + (1,), 255, dtype=np.uint8)
    return np.concatenate([rgb, alpha], axis=2)


def preprocess(rgba, has_alpha=True, no_background_removal=False):
    """§1.2-§1.5: H x W x 4 uint8 -> 518 x 518 x 3 uint8."""
    if not alpha_trusted(rgba, has_alpha):
        if not no_background_removal:
            raise NeedsBackgroundRemoval("TRELLIS would run rembg")
        rgba = opaque_for_no_background_removal(rgba)
    cropped = crop(rgba, crop_box(rgba))
    return premultiply_onto_black(resize_rgba(cropped, COND_SIZE))


def normalize(rgb):
    """§1.6: uint8 H x W x 3 -> float32 [3, H, W], (x/255 - mean) / std."""
    x = (rgb.astype(np.float32) / np.float32(255)).transpose(2, 0, 1)
    return (x - MEAN[:, None, None]) / STD[:, None, None]
