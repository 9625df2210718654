"""trellisc for Python: a small model (linear -> GELU -> attention) with a
bounded dimension, traced, compiled through libtrellisc.so and run on the CPU
reference through libtrellis_rt.so, against NumPy; save/load; eager
evaluation; parameters from safetensors."""
import math

import numpy as np
import pytest

import _tc_env  # noqa: F401  (sets TRELLISC_BUILD_DIR)
import trellisc as tc
from trellisc import _bundle


def gelu_np(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def attention_np(q, k, v, scale):
    s = np.einsum("blhd,bmhd->bhlm", q, k) * scale
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhlm,bmhd->blhd", p, v)


class Block(tc.Module):
    """linear -> GELU -> multi-head self-attention -> linear."""

    def __init__(self, dim, heads):
        super().__init__()
        self.fc = tc.Linear(dim, 3 * dim)
        self.out = tc.Linear(dim, dim)
        self.heads = heads
        self.dim = dim

    def forward(self, x):
        h = tc.gelu(self.fc(x))
        q, k, v = tc.split(h, [self.dim] * 3, axis=-1)
        shape = (x.shape[0], -1, self.heads, self.dim // self.heads)
        o = tc.attention(q.reshape(shape), k.reshape(shape), v.reshape(shape))
        return self.out(o.reshape((x.shape[0], -1, self.dim)))


def block_np(params, x, heads):
    dim = x.shape[-1]
    h = gelu_np(x @ params["fc.weight"].T + params["fc.bias"])
    q, k, v = np.split(h, 3, axis=-1)
    shape = (x.shape[0], x.shape[1], heads, dim // heads)
    o = attention_np(q.reshape(shape), k.reshape(shape), v.reshape(shape), 1 / math.sqrt(dim // heads))
    return o.reshape(x.shape) @ params["out.weight"].T + params["out.bias"]


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(3)
    m = Block(16, 4)
    params = {n: (rng.standard_normal(p.shape) * 0.3).astype(np.float32) for n, p in m.named_parameters()}
    m.load_state_dict(params)
    return m, params


@pytest.fixture(scope="module")
def exe(model):
    m, _ = model
    return tc.compile(m, args=[tc.InputInfo((2, (1, 8, 32), 16), tc.float32)], target="cpu")


@pytest.mark.parametrize("tokens", [1, 7, 32])
def test_block_matches_numpy_for_every_length_in_bounds(model, exe, tokens):
    m, params = model
    x = np.random.default_rng(tokens).standard_normal((2, tokens, 16)).astype(np.float32)
    y = exe(x)
    ref = block_np(params, x, 4)
    assert y.shape == (2, tokens, 16) and y.dtype == np.float32
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


def test_the_bound_is_in_the_compiled_program(exe):
    # The dynamic token dimension is bounded by max=32: the signature says so.
    assert exe.input_infos[0].shape == (2, (1, 8, 32), 16)
    sections = _bundle.parse(exe.bundle)
    assert b'"bounds":[32]' in sections["program"].replace(b" ", b"")


def test_save_and_load_round_trip(model, exe, tmp_path):
    path = tmp_path / "block.tcx"
    exe.save(path)
    loaded = tc.Executable.load(path)
    x = np.random.default_rng(9).standard_normal((2, 5, 16)).astype(np.float32)
    np.testing.assert_array_equal(loaded(x), exe(x))


def test_parameters_from_safetensors(model, tmp_path):
    m, params = model
    path = tmp_path / "block.safetensors"
    path.write_bytes(_bundle.safetensors_bytes(params))
    fresh = Block(16, 4)
    fresh.load_safetensors(path)
    exe = tc.compile(fresh, args=[tc.InputInfo((2, 3, 16))], target="cpu")
    x = np.ones((2, 3, 16), np.float32)
    np.testing.assert_allclose(exe(x), block_np(params, x, 4), rtol=1e-4, atol=1e-5)


def test_several_outputs_and_fp16():
    def f(x):
        h = tc.cast(x, tc.float16)
        return tc.cast(h, tc.float32) * 2.0, tc.softmax(x, axis=-1)

    exe = tc.compile(f, args=[tc.InputInfo((3, 4))])
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    a, b = exe(x)
    np.testing.assert_allclose(a, x.astype(np.float16).astype(np.float32) * 2)
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(b, e / e.sum(-1, keepdims=True), rtol=1e-6)


def test_eager_evaluation_and_shapes():
    x = tc.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = tc.layer_norm(tc.concat([x, x * 2.0], axis=1))
    assert y.shape == (2, 6)
    ref = np.concatenate([x.eval(), x.eval() * 2], axis=1)
    ref = (ref - ref.mean(1, keepdims=True)) / np.sqrt(ref.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(np.asarray(y), ref, rtol=1e-5, atol=1e-5)
    assert tc.permute(tc.Tensor(np.zeros((2, 3, 4))), (1, 2, 0)).shape == (3, 4, 2)


def test_bounded_dim_shows_as_minus_one_while_tracing():
    seen = {}

    def f(x):
        seen["shape"] = tc.gelu(x).shape
        return x

    tc.compile(f, args=[tc.InputInfo(((1, 4, 8), 3))])
    assert seen["shape"] == (-1, 3)


def test_repeated_scalars_and_duplicate_ops():
    # Equal constants on several lines and duplicate ops (CSE'd by the graph
    # phase) keep a source location, in f32 and f16.
    def f(x, y):
        h = tc.cast(x, tc.float16) * 2.0 + tc.cast(x, tc.float16) * 2.0
        return y * 1.0 + 1.0, tc.gelu(x) + tc.gelu(x), tc.cast(h, tc.float32)

    exe = tc.compile(f, args=[tc.InputInfo((2,)), tc.InputInfo((3,))])
    a, b, c = exe(np.ones(2, np.float32), np.ones(3, np.float32))
    np.testing.assert_array_equal(a, [2, 2, 2])
    np.testing.assert_allclose(b, 2 * gelu_np(np.ones(2)), rtol=1e-6)
    np.testing.assert_array_equal(c, [4, 4])


def _gelu_linear(x, w):
    return tc.gelu(tc.linear(x, w)) * 2.0


_GL_ARGS = [tc.InputInfo((4, 64)), tc.InputInfo((128, 64))]


def _gl_inputs():
    rng = np.random.default_rng(1)
    return rng.standard_normal((4, 64)).astype(np.float32), (rng.standard_normal((128, 64)) * 0.1).astype(
        np.float32
    )


def test_compile_for_cuda_without_a_gpu_and_reuse_the_session(tmp_path):
    """target="cuda" goes through fusion, tiling, partition and codegen to PTX with or without a GPU; where there
    is none the executable runs on the CPU reference (with the runtime's notice), and calls reuse one session.
    """
    x, w = _gl_inputs()
    cuda = tc.compile(_gelu_linear, args=_GL_ARGS, target="cuda")
    cpu = tc.compile(_gelu_linear, args=_GL_ARGS, target="cpu")
    assert cuda.target == "cuda" and cpu.target == "cpu"
    sections = _bundle.parse(cuda.bundle)
    assert b".entry" in sections["ptx.sm_90a"] and "ptx.sm_90a" not in _bundle.parse(cpu.bundle)
    ref = gelu_np(x @ w.T) * 2.0
    y = cuda(x, w)
    np.testing.assert_allclose(y, ref, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(cpu(x, w), ref, rtol=1e-5, atol=1e-6)
    session = cuda._session
    cuda(x, w)
    assert cuda._session is session  # set up once
    assert cuda.backend in ("cuda", "cpu") and cpu.backend == "cpu"
    path = tmp_path / "gl.tcx"
    cuda.save(path)
    loaded = tc.Executable.load(path)
    assert loaded.target == "cuda"
    np.testing.assert_array_equal(loaded(x, w), y)
    if cuda.backend == "cpu":  # no usable GPU here: "require" says so
        strict = tc.compile(_gelu_linear, args=_GL_ARGS, target="cuda", gpu="require")
        with pytest.raises(tc.TrellisError, match="no usable GPU"):
            strict(x, w)


def test_auto_target_falls_back_to_the_cpu_reference_with_the_reason():
    # Head dim 4 has no attention kernel: "auto" compiles for the CPU reference and warns why, at the user's line.
    with pytest.warns(UserWarning, match=r"compiled for the CPU reference, not CUDA: .*head dim 4"):
        exe = tc.compile(Block(16, 4), args=[tc.InputInfo((2, 3, 16))])
    assert exe.target == "cpu"
    with pytest.raises(tc.TrellisError, match=r"head dim 4"):
        tc.compile(Block(16, 4), args=[tc.InputInfo((2, 3, 16))], target="cuda")
    with pytest.raises(tc.TrellisError, match=r"target must be 'auto', 'cuda' or 'cpu', found 'gpu'"):
        tc.compile(_gelu_linear, args=_GL_ARGS, target="gpu")
    with pytest.raises(tc.TrellisError, match=r"gpu must be 'auto', 'off' or 'require'"):
        tc.compile(_gelu_linear, args=_GL_ARGS, gpu="yes")


def test_save_without_parameters_and_load_them_from_a_checkpoint(model, exe, tmp_path):
    m, params = model
    path, ckpt = tmp_path / "code.tcx", tmp_path / "weights.safetensors"
    exe.save(path, params=False)
    ckpt.write_bytes(_bundle.safetensors_bytes(params))
    assert path.stat().st_size < len(exe.bundle) + 4096  # no parameters inside
    x = np.random.default_rng(4).standard_normal((2, 3, 16)).astype(np.float32)
    np.testing.assert_array_equal(tc.Executable.load(path, params=ckpt)(x), exe(x))
    with pytest.raises(tc.TrellisError, match=r"no tensor 'fc.weight' of model 'params'"):
        tc.Executable.load(path)(x)


class _DLPackOnly:
    """Any DLPack producer (not an ndarray): host memory, or (claims_cuda) a descriptor claiming CUDA memory."""

    def __init__(self, array, claims_cuda=False):
        self.array, self.claims_cuda = array, claims_cuda

    def __dlpack__(self, stream=None, **kw):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return (2, 0) if self.claims_cuda else (1, 0)


def test_dlpack_inputs_and_outputs_without_a_gpu():
    x, w = _gl_inputs()
    exe = tc.compile(_gelu_linear, args=_GL_ARGS, target="cuda")
    want = exe(x, w)
    # A host DLPack tensor is read through NumPy; out="device" without a GPU gives NumPy.
    np.testing.assert_array_equal(exe(_DLPackOnly(x), w), want)
    if exe.backend == "cpu":
        np.testing.assert_array_equal(exe(x, w, out="device"), want)
        # A tensor in GPU memory needs the GPU: named, at the call.
        with pytest.raises(
            tc.TrellisError, match=r"argument 0 of 'main' is in GPU memory, but 'main' runs on the CPU"
        ):
            exe(_DLPackOnly(x, claims_cuda=True), w)
    with pytest.raises(tc.TrellisError, match=r"input 1 \(.w.\) has 64 in dimension 0 \(\[64, 64\]\)"):
        exe(x, _DLPackOnly(np.zeros((64, 64), np.float32)))
    with pytest.raises(tc.TrellisError, match="out must be 'auto', 'numpy' or 'device'"):
        exe(x, w, out="gpu")


def test_an_unconsumed_dlpack_export_releases_the_array():
    """DeviceArray.__dlpack__ keeps the array alive until the consumer's deleter runs, or, for a capsule dropped
    unconsumed, until the capsule goes (DLPack's producer rule)."""
    import gc

    from trellisc import _dlpack, _native

    freed = []

    class Session:  # stands in for the session that owns the device buffer
        def free_tensor(self, t):
            freed.append(t.data)

    host = np.arange(6, dtype=np.float32)  # (never read as device memory here)
    t = _native.tensor_of(host)
    t.on_device = 1
    y = _dlpack.DeviceArray(t, Session())
    assert y.__dlpack_device__() == (2, 0) and y.shape == (6,)
    capsule = y.__dlpack__()
    del y
    gc.collect()
    assert not freed  # the export holds it
    del capsule
    gc.collect()
    assert len(freed) == 1 and not _dlpack._exports
