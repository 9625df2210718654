"""Dense convolution."""
from .._checks import check_int
from .._trace import as_tensor, make_op


def conv3d(x, weight, bias=None, padding=1):
    """3D convolution, stride 1: ``x [B, Cin, D, H, W]``, ``weight [Cout, Cin, k, k, k]``, ``bias [Cout]``,
    zero ``padding`` on each side.

    >>> x = tc.Tensor(np.ones((1, 1, 2, 2, 2), np.float32))
    >>> tc.conv3d(x, tc.Tensor(np.ones((1, 1, 3, 3, 3), np.float32))).eval()[0, 0, 0, 0]
    array([8., 8.], dtype=float32)
    """
    padding = check_int("conv3d: padding", padding, 0, 64)
    ins = [as_tensor(x), as_tensor(weight)] + ([as_tensor(bias)] if bias is not None else [])
    return make_op("conv3d", ins, {"padding": padding})
