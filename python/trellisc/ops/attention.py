"""Scaled dot-product attention."""
import math

from .._trace import as_tensor, make_op


def attention(q, k, v, scale=None):
    """``softmax(q @ k^T * scale) @ v`` per batch and head, token-major
    ``[B, L, H, d]`` (k, v: ``[B, Lk, H, d]``); ``scale`` defaults to
    ``1/sqrt(d)``. The token dimension may be dynamic (bounded).

    >>> q = tc.Tensor(np.ones((1, 3, 2, 4), np.float32))
    >>> tc.attention(q, q, q).eval().shape
    (1, 3, 2, 4)
    """
    q = as_tensor(q)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    return make_op("attention", [q, as_tensor(k), as_tensor(v)], {"scale": float(scale)})
