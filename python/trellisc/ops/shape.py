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


def narrow(x, axis, start, length):
    """``length`` elements of ``x`` along ``axis`` from ``start`` (as ``torch.narrow``): a :func:`split`, which the
    compiler turns into a view where it can. The dimension must be static.

    >>> tc.narrow(tc.Tensor([1.0, 2.0, 3.0, 4.0]), 0, 1, 2).eval()
    array([2., 3.], dtype=float32)
    """
    from .._errors import TrellisError, user_location

    x = as_tensor(x)
    shape = x.shape
    axis = check_int("narrow: axis", axis, -len(shape), len(shape) - 1) % len(shape)
    n = shape[axis]
    if n < 0:
        raise TrellisError(
            f"narrow: dimension {axis} is dynamic; slicing needs a static one", user_location()
        )
    start = check_int("narrow: start", start, 0, n - 1)
    length = check_int("narrow: length", length, 1, n - start)
    sizes = [s for s in (start, length, n - start - length) if s > 0]
    return split(x, sizes, axis)[1 if start > 0 else 0]


def getitem(x, key):
    """``x[key]`` for ints and step-1 slices (and one ``...``): each a :func:`narrow`, an int also dropping its
    dimension. Tensor indices, steps and ``None`` are not supported.

    >>> t = tc.Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    >>> t[1:, -1].eval()
    array([ 7., 11.], dtype=float32)
    """
    from .._errors import TrellisError, user_location

    x = as_tensor(x)
    shape = list(x.shape)
    key = key if isinstance(key, tuple) else (key,)
    if sum(k is Ellipsis for k in key) > 1:
        raise TrellisError("indexing: at most one '...'", user_location())
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (len(shape) - len(key) + 1) + key[i + 1 :]
    if len(key) > len(shape):
        raise TrellisError(f"indexing: {len(key)} indices for a tensor of rank {len(shape)}", user_location())
    drop = []
    for axis, k in enumerate(key):
        n = shape[axis]
        if isinstance(k, int) and not isinstance(k, bool):
            if not -n <= k < n:
                raise TrellisError(
                    f"indexing: index {k} is out of range for dimension {axis} of size {n}", user_location()
                )
            x = narrow(x, axis, k % n, 1) if n > 1 else x
            drop.append(axis)
        elif isinstance(k, slice):
            if k.step not in (None, 1):
                raise TrellisError(
                    f"indexing: slices with a step ({k.step}) are not supported", user_location()
                )
            start, stop, _ = k.indices(n)
            if stop <= start:
                raise TrellisError(
                    f"indexing: the slice {start}:{stop} of dimension {axis} is empty", user_location()
                )
            if (start, stop) != (0, n):
                x = narrow(x, axis, start, stop - start)
        else:
            raise TrellisError(
                f"indexing: {type(k).__name__} indices are not supported (ints, step-1 slices and '...' are)",
                user_location(),
            )
    if drop:
        kept = [d for i, d in enumerate(x.shape) if i not in drop]
        x = reshape(x, kept)
    return x
