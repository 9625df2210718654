"""The general ops for Python models against NumPy, on both targets ("cuda" compiles to PTX and runs on the GPU
when there is one, else on the CPU reference): reductions (sum / mean / max over an axis, several, or all),
group_norm (against an independent float64 NumPy GroupNorm), embedding, and their errors at the user's line."""
from pathlib import Path

import numpy as np
import pytest

import _tc_env  # noqa: F401
import trellisc as tc

THIS = str(Path(__file__).resolve())
TARGETS = ["cpu", "cuda"]


def rel_l2(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


@pytest.mark.parametrize("target", TARGETS)
def test_reductions_match_numpy(target):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 70, 5)).astype(np.float32)

    def f(x):
        return (
            tc.sum(x, axis=1),
            x.mean(axis=-1, keepdim=True),
            tc.max(x, axis=0),
            tc.sum(x, axis=(0, 2)),
            x.mean(),
            tc.max(x, keepdim=True),
        )

    outs = tc.compile(f, args=[tc.InputInfo((3, 70, 5))], target=target)(x)
    want = [
        x.sum(axis=1),
        x.mean(axis=-1, keepdims=True),
        x.max(axis=0),
        x.sum(axis=(0, 2)),
        np.float32(x.mean()),
        x.max(keepdims=True),
    ]
    for got, ref in zip(outs, want):
        assert got.shape == np.shape(ref), (got.shape, np.shape(ref))
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    # max is exact.
    np.testing.assert_array_equal(outs[2], x.max(axis=0))


@pytest.mark.parametrize("target", TARGETS)
def test_reductions_in_float16_accumulate_in_float32(target):
    """A 4096-long f16 row of 1.0 sums to 4096 (an f16 accumulator would stop at 2048); max propagates NaN."""
    x = np.ones((2, 4096), np.float16)
    x[1, 7] = np.nan
    s, m = tc.compile(
        lambda x: (tc.sum(x, axis=-1), tc.max(x, axis=-1)),
        args=[tc.InputInfo((2, 4096), tc.float16)],
        target=target,
    )(x)
    assert s.dtype == np.float16 and s[0] == 4096
    assert m[0] == 1 and np.isnan(m[1])


def group_norm_np(x, groups, w, b, eps):
    x = x.astype(np.float64)
    n, c = x.shape[:2]
    g = x.reshape(n, groups, -1)
    mean = g.mean(axis=-1, keepdims=True)
    var = ((g - mean) ** 2).mean(axis=-1, keepdims=True)
    y = ((g - mean) / np.sqrt(var + eps)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    return y * w.reshape(shape) + b.reshape(shape)


@pytest.mark.parametrize("target", TARGETS)
def test_group_norm_matches_numpy(target):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((2, 8, 4, 4, 4)) * 3 + 1).astype(np.float32)
    norm = tc.GroupNorm(4, 8)
    norm.load_state_dict(
        {
            "weight": rng.standard_normal(8).astype(np.float32),
            "bias": rng.standard_normal(8).astype(np.float32),
        }
    )
    y = tc.compile(norm, args=[tc.InputInfo((2, 8, 4, 4, 4))], target=target)(x)
    want = group_norm_np(x, 4, norm.weight.eval(), norm.bias.eval(), 1e-5)
    assert rel_l2(y, want) < 1e-6
    # Without the affine, and in float16 (f32 statistics).
    y16 = tc.compile(
        lambda x: tc.group_norm(x, 2), args=[tc.InputInfo((2, 8, 4, 4, 4), tc.float16)], target=target
    )(x.astype(np.float16))
    assert y16.dtype == np.float16
    assert rel_l2(y16, group_norm_np(x.astype(np.float16), 2, np.ones(8), np.zeros(8), 1e-5)) < 1e-3


@pytest.mark.parametrize("target", TARGETS)
def test_embedding_matches_numpy(target):
    rng = np.random.default_rng(5)
    emb = tc.Embedding(10, 6)
    table = rng.standard_normal((10, 6)).astype(np.float32)
    emb.load_state_dict({"weight": table})
    idx = np.array([[3, 0, 9], [9, 9, 1]], np.int32)
    y = tc.compile(emb, args=[tc.InputInfo((2, 3), tc.int32)], target=target)(idx)
    np.testing.assert_array_equal(y, table[idx])


def test_embedding_index_out_of_range_names_the_line():
    """On the CPU reference an index outside the table is an error at the user's line (the GPU gives NaN rows:
    test/gpu, bench/python)."""
    table = tc.Tensor(np.zeros((4, 2), np.float32))

    def f(i):
        return tc.embedding(i, table)  # embedding-line

    exe = tc.compile(f, args=[tc.InputInfo((3,), tc.int32)], target="cpu")
    with pytest.raises(tc.TrellisError) as err:
        exe(np.array([0, 4, 1], np.int32))
    text = str(err.value)
    assert "index 4" in text and "4 rows" in text, text
    line = next(
        i + 1 for i, l in enumerate(Path(THIS).read_text().splitlines()) if l.endswith("# embedding-line")
    )
    assert f"{THIS}:{line}:" in text, text


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda x: tc.sum(x, axis=3), "sum: axis 3 is out of range for rank 2"),
        (lambda x: tc.mean(x, axis=(1, -1)), "mean: axis 1 is given twice"),
        (lambda x: tc.max(tc.Tensor(np.ones(3, np.int32))), "max: x must be float16 or float32, found int32"),
        (lambda x: tc.group_norm(x, 3), "group_norm: 4 channels do not split into 3 groups"),
        (lambda x: tc.group_norm(tc.reshape(x, (8,)), 2), "group_norm: x must be [N, C, ...]"),
        (lambda x: tc.embedding(x, x), "embedding: indices must be int32, found float32"),
        (
            lambda x: tc.embedding(tc.Tensor(np.zeros(3, np.int32)), tc.reshape(x, (8,))),
            "embedding: weight must be [V, D]",
        ),
    ],
)
def test_op_errors_point_at_the_caller(build, message):
    with pytest.raises(tc.TrellisError) as err:
        build(tc.Tensor(np.ones((2, 4), np.float32)))
    text = str(err.value)
    assert message in text, text
    assert THIS in text, text
