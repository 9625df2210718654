"""Reductions: ``sum``, ``mean``, ``max`` over one axis, several, or all.

Each is ``trellis.reduce`` per axis: f32 accumulation whatever the element type, one rounding to it. Several axes
reduce one after another (highest first); all axes of a static tensor reduce in two steps through a
``[k, n / k]`` view, so that the GPU has k rows to work on.
"""
import math

from .._checks import INT64_MAX, INT64_MIN, check_int
from .._errors import TrellisError, user_location
from .._trace import as_tensor, make_op
from .shape import reshape


def _axes(name, axis, rank):
    """The normalized axes to reduce, highest first (None: all)."""
    if axis is None:
        return list(range(rank - 1, -1, -1))
    items = axis if isinstance(axis, (tuple, list)) else (axis,)
    axes = []
    for a in items:
        a = check_int(f"{name}: axis", a, INT64_MIN, INT64_MAX)
        if not -rank <= a < rank:
            raise TrellisError(f"{name}: axis {a} is out of range for rank {rank}", user_location())
        a %= rank
        if a in axes:
            raise TrellisError(f"{name}: axis {a} is given twice", user_location())
        axes.append(a)
    return sorted(axes, reverse=True)


def _near_sqrt_divisor(n):
    """The largest divisor of n not above sqrt(n)."""
    for k in range(int(math.isqrt(n)), 0, -1):
        if n % k == 0:
            return k
    return 1


def _reduce(kind, x, axis, keepdim):
    x = as_tensor(x)
    if not x.dtype.code.startswith("f"):
        raise TrellisError(f"{kind}: x must be float16 or float32, found {x.dtype.name}", user_location())
    shape = x.shape
    axes = _axes(kind, axis, len(shape))
    if len(shape) > 1 and len(axes) == len(shape) and all(d >= 0 for d in shape):
        n = math.prod(shape)
        k = _near_sqrt_divisor(n)
        y = make_op("reduce", [reshape(x, (k, n // k))], {"kind": kind, "axis": 1, "keepdim": False})
        y = make_op("reduce", [y], {"kind": kind, "axis": 0, "keepdim": False})
        return reshape(y, [1] * len(shape)) if keepdim else y
    for a in axes:
        x = make_op("reduce", [x], {"kind": kind, "axis": a, "keepdim": bool(keepdim)})
    return x


def sum(x, axis=None, keepdim=False):
    """Sum over ``axis`` (an int, a tuple of ints, or None: all), dropping the reduced dimensions unless
    ``keepdim``. Float tensors; f32 accumulation, the result in x's dtype.

    >>> tc.sum(tc.Tensor([[1.0, 2.0], [3.0, 4.0]]), axis=1).eval()
    array([3., 7.], dtype=float32)
    """
    return _reduce("sum", x, axis, keepdim)


def mean(x, axis=None, keepdim=False):
    """Mean over ``axis`` (as :func:`sum`): the f32 sum divided by the number of elements reduced.

    >>> tc.mean(tc.Tensor([[1.0, 2.0], [3.0, 4.0]]), axis=0, keepdim=True).eval()
    array([[2., 3.]], dtype=float32)
    """
    return _reduce("mean", x, axis, keepdim)


def max(x, axis=None, keepdim=False):
    """Maximum over ``axis`` (as :func:`sum`); values only, like ``numpy.max`` and ``torch.amax`` (no indices).
    A NaN propagates.

    >>> tc.max(tc.Tensor([[1.0, 5.0], [3.0, 4.0]]), axis=-1).eval()
    array([5., 4.], dtype=float32)
    """
    return _reduce("max", x, axis, keepdim)
