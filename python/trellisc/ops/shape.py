"""Shape ops: ``reshape``, ``permute``, ``concat``, ``split``, ``cast``."""
from .. import dtypes as _dt
from .._checks import INT64_MAX, INT64_MIN, check_int, check_ints
from .._trace import as_tensor, make_op


def reshape(x, shape):
    """The same elements in another shape; one entry may be ``-1`` (inferred;
    a bounded dynamic dimension when the input has one).

    >>> tc.reshape(tc.Tensor(np.arange(6, dtype=np.float32)), (2, -1)).eval()
    array([[0., 1., 2.],
           [3., 4., 5.]], dtype=float32)
    """
    shape = check_ints("reshape: shape", shape, -1, INT64_MAX, " (-1: inferred)")
    return make_op("reshape", [as_tensor(x)], {"shape": shape})


def permute(x, perm):
    """Transposes dimensions: output dim ``i`` is input dim ``perm[i]``.

    >>> tc.permute(tc.Tensor(np.zeros((2, 3, 4), np.float32)), (2, 0, 1)).shape
    (4, 2, 3)
    """
    perm = check_ints("permute: perm", perm, INT64_MIN, INT64_MAX)
    return make_op("permute", [as_tensor(x)], {"perm": perm})


def concat(tensors, axis=0):
    """Joins tensors along ``axis``.

    >>> tc.concat([tc.Tensor([1.0]), tc.Tensor([2.0, 3.0])]).eval()
    array([1., 2., 3.], dtype=float32)
    """
    tensors = [as_tensor(t) for t in tensors]
    axis = check_int("concat: axis", axis, INT64_MIN, INT64_MAX)
    return make_op("concat", tensors, {"axis": axis})


def split(x, sizes, axis=0):
    """Splits ``x`` along ``axis`` into pieces of the given sizes: a list, one tensor per size.

    >>> a, b = tc.split(tc.Tensor([1.0, 2.0, 3.0]), [1, 2])
    >>> b.eval()
    array([2., 3.], dtype=float32)
    """
    sizes = check_ints("split: sizes", sizes, 0, INT64_MAX)
    axis = check_int("split: axis", axis, INT64_MIN, INT64_MAX)
    pieces = make_op("split", [as_tensor(x)], {"axis": axis, "sizes": sizes}, n_out=len(sizes))
    return pieces if isinstance(pieces, list) else [pieces]


def cast(x, dtype):
    """Converts the element type (f32 <-> f16, i32 -> f32).

    >>> tc.cast(tc.Tensor([1.5]), tc.float16).eval().dtype
    dtype('float16')
    """
    if not isinstance(dtype, _dt.dtype):
        dtype = _dt.from_numpy(dtype)
    return make_op("cast", [as_tensor(x)], {"dtype": dtype.code}, dtype=dtype)


def transpose(x, dim0, dim1):
    """``x`` with dimensions ``dim0`` and ``dim1`` swapped (a :func:`permute`).

    >>> tc.transpose(tc.Tensor(np.zeros((2, 3), np.float32)), 0, 1).shape
    (3, 2)
    """
    rank = len(x.shape)
    perm = list(range(rank))
    perm[dim0 % rank], perm[dim1 % rank] = perm[dim1 % rank], perm[dim0 % rank]
    return permute(x, perm)
