"""Checks of the NumPy golden implementations (test/golden/trellis_np.py,
fp8_np.py) against the values the spec prints, against second, loop-based
implementations, and that the committed golden data is what generate.py
produces today."""

import filecmp
import math
import os
import subprocess
import sys

import numpy as np

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden")
sys.path.insert(0, GOLDEN)

import fp8_np  # noqa: E402
import trellis_np as T  # noqa: E402

# Spec §3.2: the printed t-grid for 25 steps, r = 3 (5 decimals).
SPEC_GRID = [
    1.0,
    0.98630,
    0.97183,
    0.95652,
    0.94030,
    0.92308,
    0.90476,
    0.88525,
    0.86441,
    0.84211,
    0.81818,
    0.79245,
    0.76471,
    0.73469,
    0.70213,
    0.66667,
    0.62791,
    0.58537,
    0.53846,
    0.48649,
    0.42857,
    0.36364,
    0.29032,
    0.20690,
    0.11111,
    0.0,
]


def test_time_grid_matches_spec():
    grid = T.time_grid(25, 3.0)
    assert len(grid) == 26
    np.testing.assert_allclose(grid, SPEC_GRID, atol=5e-6)


def test_guided_step_counts():
    # §3.3: 19 guided of 25 (44 forwards); [0.5, 0.95] -> 15; 12 steps -> 10; 50 steps -> 38.
    assert T.guided_steps(T.time_grid(25, 3.0), 0.5, 1.0) == list(range(19))
    assert len(T.guided_steps(T.time_grid(25, 3.0), 0.5, 0.95)) == 15
    assert len(T.guided_steps(T.time_grid(12, 3.0), 0.5, 1.0)) == 10
    assert len(T.guided_steps(T.time_grid(50, 3.0), 0.5, 1.0)) == 38


def test_downsample_divides_by_n_plus_1():
    # §6.3: scatter-mean of {1,2,3} and {10} into zeros -> 1.5 and 5.0.
    out = T.downsample(np.array([[1.0], [2.0], [3.0], [10.0]]), np.array([0, 0, 0, 1]), 2)
    np.testing.assert_array_equal(out[:, 0], [1.5, 5.0])


def test_ape_sine_first_and_padding():
    e = T.ape(np.array([[0, 0, 0], [5, 1, 2]]), 1024)
    assert e.shape == (2, 1024)
    F = 170
    np.testing.assert_array_equal(e[0, 0:F], 0.0)  # sin(0)
    np.testing.assert_array_equal(e[0, F : 2 * F], 1.0)  # cos(0)
    np.testing.assert_array_equal(e[:, 1020:], 0.0)  # 4 zeros of padding
    assert abs(e[1, 1] - math.sin(5 * 10000 ** (-1 / 170))) < 1e-6
    assert T.ape(np.zeros((1, 3), int), 768).shape == (1, 768)


def test_timestep_cosine_first():
    e = T.timestep_embedding(np.array([0.0, 1000.0], dtype=np.float32))
    np.testing.assert_array_equal(e[0, :128], 1.0)
    np.testing.assert_array_equal(e[0, 128:], 0.0)
    assert abs(e[1, 0] - math.cos(1000.0)) < 1e-6 and abs(e[1, 128] - math.sin(1000.0)) < 1e-6


def test_gelu_is_tanh_form():
    # App. B prints 0.84119201 (8 digits, from an fp32 run); the erf form gives 0.84134471.
    g = T.UNARY["gelu"](np.array(1.0))
    assert abs(g - 0.84119201) < 5e-8 and abs(g - 0.84134471) > 1e-4


def test_offset_perturbation_and_biases():
    p = T.offset_perturbation()
    expected = [
        (-0.80472, -0.80472, -0.80472),
        (-0.73317, 0.0, -0.22599),
        (-0.66750, -0.34657, 0.22599),
        (-0.60651, 0.34657, -0.57431),
    ]
    np.testing.assert_allclose(p[:4], expected, atol=5e-6)
    assert abs(T.SCALE_BIAS - (-5.519460251195668)) < 1e-12
    assert abs(T.OPACITY_BIAS - (-2.197224577336219)) < 1e-12


def test_sparse_conv_densify_matches_loop():
    rng = np.random.default_rng(0)
    coords = T.random_coords(rng, 2, 5, [30, 17])
    feats = rng.standard_normal((coords.shape[0], 3))
    w = rng.standard_normal((4, 3, 3, 3, 3))
    b = rng.standard_normal(4)
    nb = T.neighbor_map(coords, 3)
    loop = np.tile(b, (coords.shape[0], 1))
    for n in range(coords.shape[0]):
        for o in range(27):
            if nb[n, o] >= 0:
                a, bb, c = o // 9, (o // 3) % 3, o % 3
                loop[n] += w[:, a, bb, c, :] @ feats[nb[n, o]]
    np.testing.assert_allclose(T.sparse_conv3d(coords, feats, w, b, 2, 5), loop, rtol=1e-12, atol=1e-12)


def test_conv1x1_is_reinterpretation_not_transpose():
    w = np.arange(6, dtype=np.float64).reshape(3, 1, 1, 1, 2)  # O=3, I=2
    x = np.array([[1.0, 0.0]])
    # M = flat viewed as [I=2, O=3]: row 0 = flat[0:3] = 0, 1, 2.
    np.testing.assert_array_equal(T.sparse_conv1x1_spconv(x, w, np.zeros(3)), [[0.0, 1.0, 2.0]])


def test_pixel_shuffle_formula():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 16, 2, 2, 3))
    y = T.pixel_shuffle_3d(x)
    for c in range(2):
        for s1 in range(2):
            for s2 in range(2):
                for s3 in range(2):
                    np.testing.assert_array_equal(
                        y[0, c, s1::2, s2::2, s3::2], x[0, 8 * c + 4 * s1 + 2 * s2 + s3]
                    )


def test_window_partition_properties():
    rng = np.random.default_rng(2)
    coords = T.random_coords(rng, 2, 24, [300, 200])
    parts = {}
    for s in (0, 4):
        _, groups = T.window_partition(coords, 8, s)
        rows = np.concatenate(groups)
        assert sorted(rows.tolist()) == list(range(coords.shape[0]))  # each voxel exactly once
        for g in groups:
            c = coords[g]
            assert len(set(c[:, 0].tolist())) == 1  # never spans two samples
            shifted = c[:, 1:] + s
            assert ((shifted.max(0) - shifted.min(0)) < 8).all()
            assert (shifted // 8 == shifted[0] // 8).all()
        parts[s] = {tuple(g.tolist()) for g in groups}
    assert parts[0] != parts[4]


def test_coarsen_sorted_and_consistent():
    rng = np.random.default_rng(3)
    coords = T.random_coords(rng, 2, 8, [50, 40])
    coarse, idx = T.coarsen(coords)
    keys = [tuple(r) for r in coarse.tolist()]
    assert keys == sorted(set(keys))
    np.testing.assert_array_equal(coarse[idx][:, 1:], coords[:, 1:] // 2)
    np.testing.assert_array_equal(coarse[idx][:, 0], coords[:, 0])


# --- FP8 E4M3 -----------------------------------------------------------------


def e4m3(v):
    return int(fp8_np.to_e4m3(np.float32(v)))


def test_e4m3_format_facts():
    V = fp8_np.VALUES
    assert V[0x7E] == 448.0 and V[0xFE] == -448.0  # max finite
    assert V[0x08] == 2.0**-6  # min normal
    assert V[0x01] == 2.0**-9  # min subnormal
    assert V[0x38] == 1.0 and V[0x39] == 1.125
    assert math.isnan(V[0x7F]) and math.isnan(V[0xFF])
    assert np.isnan(V).sum() == 2  # no infinities, one NaN per sign
    assert len(fp8_np.finite_values()) == 127


def test_e4m3_rounding_facts():
    assert e4m3(448.0) == 0x7E and e4m3(2.0**-6) == 0x08 and e4m3(2.0**-9) == 0x01
    assert e4m3(449.0) == 0x7E and e4m3(1e6) == 0x7E  # satfinite
    assert e4m3(-1e6) == 0xFE and e4m3(math.inf) == 0x7E and e4m3(-math.inf) == 0xFE
    assert e4m3(464.0) == 0x7E  # midpoint of 448 and the next, nonexistent value
    assert e4m3(2.0**-10) == 0x00  # half the min subnormal: a tie, to the even 0
    assert e4m3(3 * 2.0**-10) == 0x02  # 1.5 · 2^-9: a tie, to the even 2
    assert e4m3(1.0625) == 0x38  # between 1.0 (0x38) and 1.125 (0x39): to even
    assert e4m3(1.1875) == 0x3A  # between 0x39 and 0x3A: to even
    assert e4m3(-0.0) == 0x80 and e4m3(0.0) == 0x00
    assert e4m3(math.nan) == 0x7F and e4m3(-math.nan) == 0x7F


def e4m3_loop(x):
    """Second implementation: decompose with math.frexp, count steps of the
    spacing at x's binade (subnormals share the spacing of the min normal)."""
    x = float(x)
    if math.isnan(x):
        return 0x7F
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    a = abs(x)
    if a >= 448.0:
        return sign | 0x7E
    if a == 0.0:
        return sign
    _, e = math.frexp(a)  # a = m · 2^e, 0.5 <= m < 1
    binade = max(e - 1, -6)
    steps = a / 2.0 ** (binade - 3)  # exact: a power-of-two scaling
    k = math.floor(steps)
    frac = steps - k
    if frac > 0.5 or (frac == 0.5 and k % 2 == 1):
        k += 1
    # Value k · 2^(binade - 3), 8 <= k <= 16 for normals (16 carries into the
    # next binade), 0 <= k <= 8 below 2^-6; one code formula covers both.
    return sign | ((binade + 7) * 8 + k - 8)


def test_e4m3_loop_matches_table_on_golden_inputs():
    d = os.path.join(GOLDEN, "data", "fp8_e4m3_rounding")
    x = np.load(os.path.join(d, "x.npy"))
    expected = np.load(os.path.join(d, "expected.npy"))
    assert x.dtype == np.float32 and expected.dtype == np.uint8
    np.testing.assert_array_equal(fp8_np.to_e4m3(x), expected)
    loop = np.array([e4m3_loop(v) for v in x], dtype=np.uint8)
    np.testing.assert_array_equal(loop, expected)
    rng = np.random.default_rng(4)
    r = (rng.standard_normal(4000) * np.exp2(rng.uniform(-14, 12, 4000))).astype(np.float32)
    np.testing.assert_array_equal(fp8_np.to_e4m3(r), [e4m3_loop(v) for v in r])


def test_e4m3_every_value_round_trips():
    codes = np.array([c for c in range(256) if c & 0x7F != 0x7F], dtype=np.uint8)
    np.testing.assert_array_equal(fp8_np.to_e4m3(fp8_np.from_e4m3(codes)), codes)


def test_fp8_linear_matches_loop():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 7)).astype(np.float32)
    x[1, 2] = 30.0
    w = (rng.standard_normal((4, 7)) * 0.3).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    y, ax, aw, xq, wq = fp8_np.linear(x, w, b)
    assert ax == np.float32(30.0) and aw == np.abs(w).max()
    sx = np.float32(448.0) / np.float32(30.0)
    sw = np.float32(448.0) / aw
    dq = (np.float32(30.0) / np.float32(448.0)) * (aw / np.float32(448.0))
    for r in range(3):
        for o in range(4):
            acc = sum(
                fp8_np.VALUES[e4m3_loop(np.float32(x[r, k] * sx))]
                * fp8_np.VALUES[e4m3_loop(np.float32(w[o, k] * sw))]
                for k in range(7)
            )
            assert y[r, o] == acc * float(dq) + float(b[o])
    # amax 0 (an all-zero tensor): unit scales, zero products, y = b.
    y0 = fp8_np.linear(np.zeros((2, 7), np.float32), w, b)[0]
    np.testing.assert_array_equal(y0, np.tile(b.astype(np.float64), (2, 1)))


def test_committed_data_is_current(tmp_path):
    out = tmp_path / "data"
    subprocess.run([sys.executable, os.path.join(GOLDEN, "generate.py"), "--out", str(out)], check=True)
    committed = os.path.join(GOLDEN, "data")
    fresh = sorted(os.path.relpath(os.path.join(d, f), out) for d, _, fs in os.walk(out) for f in fs)
    have = sorted(
        os.path.relpath(os.path.join(d, f), committed) for d, _, fs in os.walk(committed) for f in fs
    )
    assert fresh == have
    for rel in fresh:
        assert filecmp.cmp(os.path.join(out, rel), os.path.join(committed, rel), shallow=False), rel
