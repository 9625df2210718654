"""Number arguments of the Python API are checked in Python (the C ABI's
ranges): integers as integers (2.5, 2.0 and True refused), seeds as u64,
steps 0..10000, guidance finite and >= 0, batch / images / token counts,
threads, devices and shapes; each refusal is a TrellisError at the user's
line naming the argument, the range and the value."""
import math
from pathlib import Path

import numpy as np
import pytest

import _tc_env  # noqa: F401
from _tc_env import tiny_cpu_program
import trellisc as tc

THIS = str(Path(__file__).resolve())


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("numbers")
    model, exe = tiny_cpu_program(d)
    return model, exe


def raises(message):
    """pytest.raises for a TrellisError whose text holds `message` verbatim
    and points at this file."""

    class Check:
        def __enter__(self):
            self.cm = pytest.raises(tc.TrellisError)
            self.info = self.cm.__enter__()
            return self.info

        def __exit__(self, *exc):
            handled = self.cm.__exit__(*exc)
            text = str(self.info.value)
            assert message in text, text
            assert THIS in text, text
            return handled

    return Check()


RUN_CASES = [
    ({"seed": 2.5}, "seed must be an integer in 0..18446744073709551615, found 2.5"),
    ({"seed": 7.0}, "seed must be an integer in 0..18446744073709551615, found 7.0"),
    ({"seed": -1}, "seed must be an integer in 0..18446744073709551615, found -1"),
    ({"seed": 2**64}, "found 18446744073709551616"),
    ({"seed": True}, "seed must be an integer in 0..18446744073709551615, found True"),
    ({"seed": "7"}, "seed must be an integer in 0..18446744073709551615, found '7'"),
    ({"ss_steps": 2.5}, "ss_steps must be an integer in 0..10000 (0: the compiled value), found 2.5"),
    ({"ss_steps": 10001}, "ss_steps must be an integer in 0..10000 (0: the compiled value), found 10001"),
    ({"slat_steps": -3}, "slat_steps must be an integer in 0..10000 (0: the compiled value), found -3"),
    ({"slat_steps": 2**31}, "found 2147483648"),
    ({"ss_cfg": math.nan}, "ss_cfg must be a finite number >= 0 (None: the compiled value), found nan"),
    ({"ss_cfg": -0.5}, "ss_cfg must be a finite number >= 0 (None: the compiled value), found -0.5"),
    ({"slat_cfg": math.inf}, "slat_cfg must be a finite number >= 0 (None: the compiled value), found inf"),
    ({"slat_cfg": True}, "slat_cfg must be a finite number >= 0 (None: the compiled value), found True"),
    ({"threads": 1.5}, "threads must be an integer in 0..4096 (0: all cores), found 1.5"),
    ({"threads": 5000}, "threads must be an integer in 0..4096 (0: all cores), found 5000"),
    ({"formats": "gs"}, "formats must be a sequence of 'gs', 'rf', 'mesh', found 'gs'"),
]


@pytest.mark.parametrize("kw, message", RUN_CASES)
def test_run_numbers(tiny, kw, message):
    model, exe = tiny
    cond = np.load(model / "cond.npy")
    with raises(message):
        tc.trellis.run(None, cond, bundle_path=exe, model_dir=model, **kw)


@pytest.mark.parametrize(
    "kw, message",
    RUN_CASES
    + [
        ({"device": -1}, "device must be an integer in 0..2147483647, found -1"),
        ({"device": 0.5}, "device must be an integer in 0..2147483647, found 0.5"),
    ],
)
def test_pipeline_run_numbers(tiny, kw, message):
    """Refused before an engine is made (none is)."""
    model, exe = tiny
    from test_engine import exe_bundle

    pipe = tc.trellis.Pipeline(exe_bundle(exe), model_dir=model)
    with raises(message):
        pipe.run(np.load(model / "cond.npy"), **kw)
    assert pipe._engine is None


def test_good_numbers_still_run(tiny):
    """NumPy integers and floats are numbers too; a seed of 2^64 - 1 runs."""
    model, exe = tiny
    out = tc.trellis.run(
        None,
        np.load(model / "cond.npy"),
        bundle_path=exe,
        model_dir=model,
        seed=np.uint64(2**64 - 1),
        ss_steps=np.int32(1),
        slat_steps=1,
        ss_cfg=np.float32(2),
        slat_cfg=0,
        formats=("gs",),
    )
    assert out["coords"].shape[1] == 4


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"batch": 0}, "batch must be an integer in 1..64, found 0"),
        ({"batch": 2.5}, "batch must be an integer in 1..64, found 2.5"),
        ({"batch": True}, "batch must be an integer in 1..64, found True"),
        ({"images": 65}, "images must be an integer in 1..64, found 65"),
        (
            {"cond_tokens": -5},
            "cond_tokens must be an integer in 0..16384 (0: the model's default), found -5",
        ),
        (
            {"cond_tokens": 21.0},
            "cond_tokens must be an integer in 0..16384 (0: the model's default), found 21.0",
        ),
    ],
)
def test_compile_pipeline_numbers(tiny, kw, message):
    model, _ = tiny
    with raises(message):
        tc.trellis.compile_pipeline(model / "pipeline.json", **kw)


def test_shape_numbers():
    x = tc.Tensor(np.zeros((2, 3), np.float32))
    with raises("reshape: shape[1] must be an integer in -1..9223372036854775807 (-1: inferred), found 1.5"):
        tc.reshape(x, (4, 1.5))
    with raises("reshape: shape[0] must be an integer in -1..9223372036854775807 (-1: inferred), found -2"):
        tc.reshape(x, (-2, 3))
    with raises("permute: perm[0] must be an integer in"):
        tc.permute(x, (True, 0))
    with raises("split: sizes[1] must be an integer in 0..9223372036854775807, found 2.0"):
        tc.split(x, [1, 2.0], axis=1)
    with raises("split: axis must be an integer in"):
        tc.split(x, [1, 2], axis=1.0)
    with raises("concat: axis must be an integer in"):
        tc.concat([x, x], axis="0")
    with raises("softmax: axis must be an integer in"):
        tc.softmax(x, axis=0.5)
    with raises("InputInfo: dimension 1 must be an int or (min, opt, max), found 2.5"):
        tc.InputInfo((2, 2.5))
    with raises("InputInfo: dimension 0 must be an int or (min, opt, max), found (1, True, 4)"):
        tc.InputInfo(((1, True, 4), 3))
    with raises("InputInfo: dimension 0 is 18446744073709551616; sizes must be in 1..9223372036854775807"):
        tc.InputInfo((2**64, 3))
    # NumPy integers are integers.
    assert tc.reshape(x, (np.int64(3), 2)).shape == (3, 2)
    assert tc.InputInfo((np.int32(2), 3)).shape == (2, 3)


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_comparisons_and_where_match_numpy(target):
    """Comparisons give 1/0 in the operands' dtype (NaN compares false); where does not let the side it does not
    take leak a NaN: where(x > 0, log(x), -1) is finite for negative x."""
    rng = np.random.default_rng(2)
    x = np.round(rng.standard_normal((3, 16)) * 2).astype(np.float32)
    x[0, 0] = np.nan
    y = np.round(rng.standard_normal(16) * 2).astype(np.float32)

    def f(x, y):
        return (
            tc.greater(x, y),
            tc.less(x, y),
            tc.equal(x, y),
            tc.where(tc.greater(x, 0.0), tc.log(x), -1.0),
        )

    exe = tc.compile(f, args=[tc.InputInfo((3, 16)), tc.InputInfo((16,))], target=target)
    gt, lt, eq, safe = exe(x, y)
    with np.errstate(invalid="ignore", divide="ignore"):
        np.testing.assert_array_equal(gt, (x > y).astype(np.float32))
        np.testing.assert_array_equal(lt, (x < y).astype(np.float32))
        np.testing.assert_array_equal(eq, (x == y).astype(np.float32))
        np.testing.assert_allclose(safe, np.where(x > 0, np.log(np.where(x > 0, x, 1)), -1.0), rtol=1e-6)
    assert np.isfinite(safe).all()


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_slicing_matches_numpy(target):
    """x[1:, -1], x[..., 2:5] and tc.narrow lower to splits (views where the compiler can) and match NumPy."""
    x = np.arange(3 * 4 * 6, dtype=np.float32).reshape(3, 4, 6)

    def f(x):
        return x[1:, -1], x[..., 2:5], tc.narrow(x, 1, 1, 2), x[2]

    a, b, c, d = tc.compile(f, args=[tc.InputInfo((3, 4, 6))], target=target)(x)
    np.testing.assert_array_equal(a, x[1:, -1])
    np.testing.assert_array_equal(b, x[..., 2:5])
    np.testing.assert_array_equal(c, x[:, 1:3])
    np.testing.assert_array_equal(d, x[2])


def test_unsupported_indexing_is_named_at_the_users_line():
    t = tc.Tensor(np.zeros((3, 4), np.float32))
    with pytest.raises(
        tc.TrellisError, match=r"test_tc_numbers.py:\d+:\d+: error: indexing: slices with a step"
    ):
        t[::2]
    with pytest.raises(tc.TrellisError, match=r"index 3 is out of range for dimension 0 of size 3"):
        t[3]
    with pytest.raises(tc.TrellisError, match=r"the slice 2:2 of dimension 1 is empty"):
        t[:, 2:2]
    with pytest.raises(tc.TrellisError, match=r"list indices are not supported"):
        t[[0, 1]]


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_pow_matches_numpy(target):
    rng = np.random.default_rng(5)
    x = np.abs(rng.standard_normal((4, 8))).astype(np.float32) + 0.1
    y = rng.standard_normal(8).astype(np.float32)
    exe = tc.compile(
        lambda x, y: (x**y, x**2.0, tc.pow(x, 0.5)),
        args=[tc.InputInfo((4, 8)), tc.InputInfo((8,))],
        target=target,
    )
    a, b, c = exe(x, y)
    np.testing.assert_allclose(a, x**y, rtol=2e-6)
    np.testing.assert_allclose(b, x**2, rtol=2e-6)
    np.testing.assert_allclose(c, np.sqrt(x), rtol=2e-6)
