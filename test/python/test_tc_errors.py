"""Contract tests: every error kind of trellisc for Python names the user's
file and line (and shows the code), at trace, compile and run time."""
import re
from pathlib import Path

import numpy as np
import pytest

import _tc_env  # noqa: F401
import trellisc as tc

THIS = str(Path(__file__).resolve())
SOURCE = Path(THIS).read_text().splitlines()


def line_of(marker):
    """The line (1-based) holding `# <marker>` in this file."""
    hits = [i + 1 for i, l in enumerate(SOURCE) if l.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, marker
    return hits[0]


def assert_points_at(err, marker):
    line = line_of(marker)
    text = str(err.value)
    assert f"{THIS}:{line}:" in text, text
    assert err.value.line == line
    # The code line itself, with carets under it.
    code = SOURCE[line - 1].split("#")[0].strip()
    assert code in text and "^" in text, text


def test_shape_mismatch_at_compile():
    def f(x):
        w = tc.Tensor(np.ones((3, 4), np.float32))
        return x @ w  # matmul-shapes

    with pytest.raises(tc.TrellisError) as err:
        tc.compile(f, args=[tc.InputInfo((2, 8))])
    assert_points_at(err, "matmul-shapes")
    assert "matmul (@)" in str(err.value) and "8" in str(err.value)
    assert "trellis.matmul" not in str(err.value)


def test_dtype_mismatch_at_compile():
    def f(x):
        return x + tc.cast(x, tc.float16)  # add-dtypes

    with pytest.raises(tc.TrellisError) as err:
        tc.compile(f, args=[tc.InputInfo((2, 8))])
    assert_points_at(err, "add-dtypes")
    assert "f16" in str(err.value) and "f32" in str(err.value)


def test_unsupported_combination_at_compile():
    def f(x):
        return tc.attention(x, x, x, scale=1.0)  # attention-rank

    with pytest.raises(tc.TrellisError) as err:
        tc.compile(f, args=[tc.InputInfo((2, 8, 4))])  # rank 3, needs [B,L,H,d]
    assert_points_at(err, "attention-rank")


def test_error_inside_a_module_names_the_module_path():
    class Inner(tc.Module):
        def __init__(self):
            super().__init__()
            self.w = tc.Parameter(np.ones((5, 5), np.float32))

        def forward(self, x):
            return x @ self.w  # inner-matmul

    class Outer(tc.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            return self.inner(x)

    with pytest.raises(tc.TrellisError) as err:
        tc.compile(Outer(), args=[tc.InputInfo((2, 3))])
    assert_points_at(err, "inner-matmul")
    assert "in module: inner" in str(err.value)


def test_error_while_tracing_through_shape():
    def f(x):
        y = tc.reshape(x, (5, 5))  # bad-reshape
        return y * float(y.shape[0])

    with pytest.raises(tc.TrellisError) as err:
        tc.compile(f, args=[tc.InputInfo((2, 8))])
    assert_points_at(err, "bad-reshape")


@pytest.mark.parametrize("shape", [(2, 0), (2, (4, 2, 8)), (2, (1, 2)), "2x3"])
def test_bad_input_info(shape):
    with pytest.raises(tc.TrellisError) as err:
        tc.InputInfo(shape)  # bad-input-info
    assert_points_at(err, "bad-input-info")
    assert "InputInfo" in str(err.value)


@pytest.fixture(scope="module")
def exe():
    def f(x):
        return tc.log(x) * 2.0  # log-op

    info = tc.InputInfo(((1, 2, 4), 3), tc.float32)  # the-input-info
    return tc.compile(f, args=[info], check_finite=True)


def test_runtime_wrong_shape_names_the_input_and_its_declaration(exe):
    with pytest.raises(tc.TrellisError) as err:
        exe(np.ones((5, 3), np.float32))  # above the bound 4
    assert_points_at(err, "the-input-info")
    assert "input 0 ('x')" in str(err.value) and "[5, 3]" in str(err.value)
    assert "1..4" in str(err.value)


def test_runtime_wrong_dtype_names_the_input(exe):
    with pytest.raises(tc.TrellisError) as err:
        exe(np.ones((2, 3), np.float64))
    assert_points_at(err, "the-input-info")
    assert "float64" in str(err.value) and "float32" in str(err.value)


def test_runtime_non_finite_names_the_op_and_the_user_line(exe):
    np.testing.assert_allclose(exe(np.ones((2, 3), np.float32)), 0)
    with pytest.raises(tc.TrellisError) as err:
        exe(np.full((2, 3), -1.0, np.float32))
    assert_points_at(err, "log-op")
    assert "non-finite" in str(err.value) and "log" in str(err.value)


def test_eager_runtime_error_points_at_the_op():
    x = tc.Tensor(np.array([1.0, 2.0], np.float32))
    y = x @ tc.Tensor(np.ones((3, 3), np.float32))  # eager-matmul
    with pytest.raises(tc.TrellisError) as err:
        y.eval()
    assert_points_at(err, "eager-matmul")


def test_pipeline_config_error_names_the_config_line(tmp_path):
    cfg = tmp_path / "pipeline.json"
    cfg.write_text('{\n  "name": "TrellisImageTo3DPipeline",\n  "args": {\n' '    "models": 7\n  }\n}\n')
    with pytest.raises(tc.TrellisError) as err:
        tc.trellis.compile_pipeline(cfg)
    assert re.search(re.escape(str(cfg)) + r":\d+:\d+", str(err.value)), str(err.value)


def test_pipeline_weight_mismatch_names_the_config_value(tmp_path):
    import subprocess
    from _tc_env import BUILD

    model = tmp_path / "model"
    r = subprocess.run(
        [
            str(BUILD / "bin/trellis-mkmodel"),
            "--preset",
            "tiny",
            "--seed",
            "1",
            "--out",
            str(model),
            "--quiet",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    sidecar = model / "ckpts/slat_dec_gs_tiny.json"
    text = sidecar.read_text()
    assert '"mlp_ratio": 2,' in text
    sidecar.write_text(text.replace('"mlp_ratio": 2,', '"mlp_ratio": 3,'))
    line = next(i + 1 for i, l in enumerate(text.splitlines()) if '"mlp_ratio"' in l)
    with pytest.raises(tc.TrellisError) as err:
        tc.trellis.compile_pipeline(model / "pipeline.json", cond_tokens=21)
    message = str(err.value)
    assert f"{sidecar}:{line}:" in message and '"mlp_ratio": 3' in message, message
    assert "in module: slat_decoder_gs/blocks.0.mlp" in message
