"""``embedding``: rows of a table picked by integer indices (``trellis.gather_rows``)."""
from .. import dtypes as _dt
from .._errors import TrellisError, user_location
from .._trace import as_tensor, make_op
from .shape import reshape


def embedding(indices, weight):
    """``weight[indices]``: ``indices`` int32 of any shape, ``weight [V, D]`` of any dtype; the result is
    ``indices.shape + (D,)`` in weight's dtype. An index outside ``[0, V)`` is an error naming it on the CPU
    reference; on the GPU its row is NaN (0 for an integer table).

    >>> table = tc.Tensor(np.arange(6, dtype=np.float32).reshape(3, 2))
    >>> tc.embedding(tc.Tensor(np.array([2, 0], np.int32)), table).eval()
    array([[4., 5.],
           [0., 1.]], dtype=float32)
    """
    indices, weight = as_tensor(indices), as_tensor(weight)
    if indices.dtype != _dt.int32:
        raise TrellisError(f"embedding: indices must be int32, found {indices.dtype.name}", user_location())
    wshape = weight.shape
    if len(wshape) != 2:
        raise TrellisError(f"embedding: weight must be [V, D], found shape {list(wshape)}", user_location())
    shape = indices.shape
    flat = indices if len(shape) == 1 else reshape(indices, (-1,))
    rows = make_op("gather_rows", [weight, flat], dtype=weight.dtype)
    return rows if len(shape) == 1 else reshape(rows, list(shape) + [wshape[1]])
