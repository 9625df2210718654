"""Matrix products: ``@`` and ``linear``."""
from .._trace import as_tensor, make_op


def matmul(a, b):
    """``a @ b`` with NumPy matmul semantics (batch dimensions broadcast).

    >>> a = tc.Tensor(np.ones((2, 3), np.float32))
    >>> (a @ tc.Tensor(np.ones((3, 4), np.float32))).eval().shape
    (2, 4)
    """
    if not hasattr(a, "_node"):
        b = as_tensor(b)
        a = as_tensor(a, like=b)
    else:
        b = as_tensor(b, like=a)
    return make_op("matmul", [a, b])


def linear(x, weight, bias=None):
    """``x @ weight.T + bias`` over the last dimension; ``weight`` is
    ``[out, in]`` (PyTorch's layout), ``bias`` ``[out]`` or None.

    >>> x = tc.Tensor(np.ones((2, 3), np.float32))
    >>> w = tc.Tensor(np.full((4, 3), 0.5, np.float32))
    >>> tc.linear(x, w, tc.Tensor(np.ones(4, np.float32))).eval()
    array([[2.5, 2.5, 2.5, 2.5],
           [2.5, 2.5, 2.5, 2.5]], dtype=float32)
    """
    x = as_tensor(x)
    ins = [x, as_tensor(weight, like=x)]
    if bias is not None:
        ins.append(as_tensor(bias, like=x))
    return make_op("linear", ins)
