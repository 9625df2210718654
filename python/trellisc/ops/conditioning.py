"""The conditioning ops of diffusion transformers: timestep embeddings, adaLN modulation, gated residuals."""
from .._checks import INT64_MAX, check_int
from .._trace import as_tensor, make_op


def timestep_embedding(t, dim=256, max_period=10000.0):
    """``[cos(t f), sin(t f)]`` with ``f_i = max_period ** (-i / (dim / 2))``, of ``t [B]`` (already x 1000, as
    TRELLIS scales it): f32 ``[B, dim]``.

    >>> tc.timestep_embedding(tc.Tensor([0.0]), dim=4).eval()
    array([[1., 1., 0., 0.]], dtype=float32)
    """
    dim = check_int("timestep_embedding: dim", dim, 2, INT64_MAX)
    return make_op("timestep_embedding", [as_tensor(t)], {"dim": dim, "max_period": float(max_period)})


def modulate(x, shift, scale):
    """``x * (1 + scale) + shift`` with ``shift``, ``scale [B, C]`` broadcast over the tokens of ``x [B, L, C]``
    (adaLN; one rounding to x's dtype).

    >>> x = tc.Tensor(np.ones((1, 2, 2), np.float32))
    >>> tc.modulate(x, tc.Tensor([[1.0, 0.0]]), tc.Tensor([[1.0, 1.0]])).eval()
    array([[[3., 2.],
            [3., 2.]]], dtype=float32)
    """
    return make_op("modulate", [as_tensor(x), as_tensor(shift), as_tensor(scale)])


def gated_residual(x, h, gate):
    """``x + gate * h`` with ``gate [B, C]`` broadcast over the tokens (adaLN-Zero's gate; one rounding).

    >>> x = tc.Tensor(np.ones((1, 1, 2), np.float32))
    >>> tc.gated_residual(x, x, tc.Tensor([[2.0, 0.0]])).eval()
    array([[[3., 1.]]], dtype=float32)
    """
    return make_op("gated_residual", [as_tensor(x), as_tensor(h), as_tensor(gate)])
