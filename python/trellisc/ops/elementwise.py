"""Elementwise ops with NumPy broadcasting: ``+ - * /``, activations, comparisons, ``where``."""
from .._trace import as_tensor, make_op


def _binary(op, a, b):
    if not hasattr(a, "_node"):
        b = as_tensor(b)
        a = as_tensor(a, like=b)
    else:
        b = as_tensor(b, like=a)
    return make_op(op, [a, b])


def add(a, b):
    """``a + b`` with NumPy broadcasting (same element type).

    >>> (tc.Tensor([1.0, 2.0]) + tc.Tensor([[10.0], [20.0]])).eval()
    array([[11., 12.],
           [21., 22.]], dtype=float32)
    """
    return _binary("add", a, b)


def sub(a, b):
    """``a - b`` with NumPy broadcasting.

    >>> (tc.Tensor([5.0, 7.0]) - 1.0).eval()
    array([4., 6.], dtype=float32)
    """
    return _binary("sub", a, b)


def mul(a, b):
    """``a * b`` with NumPy broadcasting.

    >>> (tc.Tensor([1.0, 2.0]) * 3.0).eval()
    array([3., 6.], dtype=float32)
    """
    return _binary("mul", a, b)


def div(a, b):
    """``a / b`` with NumPy broadcasting.

    >>> (tc.Tensor([1.0, 3.0]) / 2.0).eval()
    array([0.5, 1.5], dtype=float32)
    """
    return _binary("div", a, b)


def maximum(a, b):
    """Elementwise maximum.

    >>> tc.maximum(tc.Tensor([1.0, -2.0]), 0.0).eval()
    array([1., 0.], dtype=float32)
    """
    return _binary("maximum", a, b)


def _unary(op, x):
    return make_op(op, [as_tensor(x)])


def gelu(x):
    """GELU, tanh approximation (as TRELLIS uses):
    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``.

    >>> tc.gelu(tc.Tensor([-1.0, 0.0, 2.0])).eval().round(4)
    array([-0.1588,  0.    ,  1.9546], dtype=float32)
    """
    return _unary("gelu", x)


def silu(x):
    """SiLU: ``x * sigmoid(x)``.

    >>> tc.silu(tc.Tensor([0.0, 1.0])).eval().round(4)
    array([0.    , 0.7311], dtype=float32)
    """
    return _unary("silu", x)


def sigmoid(x):
    """Logistic sigmoid.

    >>> tc.sigmoid(tc.Tensor([0.0])).eval()
    array([0.5], dtype=float32)
    """
    return _unary("sigmoid", x)


def tanh(x):
    """Hyperbolic tangent.

    >>> tc.tanh(tc.Tensor([0.0])).eval()
    array([0.], dtype=float32)
    """
    return _unary("tanh", x)


def exp(x):
    """Elementwise e**x.

    >>> tc.exp(tc.Tensor([0.0])).eval()
    array([1.], dtype=float32)
    """
    return _unary("exp", x)


def log(x):
    """Natural logarithm (NaN below 0: see ``check_finite``).

    >>> tc.log(tc.Tensor([1.0])).eval()
    array([0.], dtype=float32)
    """
    return _unary("log", x)


def sqrt(x):
    """Square root.

    >>> tc.sqrt(tc.Tensor([4.0])).eval()
    array([2.], dtype=float32)
    """
    return _unary("sqrt", x)


def abs(x):
    """Absolute value.

    >>> tc.abs(tc.Tensor([-3.0])).eval()
    array([3.], dtype=float32)
    """
    return _unary("abs", x)


def neg(x):
    """``-x``.

    >>> (-tc.Tensor([1.0])).eval()
    array([-1.], dtype=float32)
    """
    return _unary("neg", x)


def sin(x):
    """Sine (f32 math, the result in x's dtype).

    >>> tc.sin(tc.Tensor([0.0, 1.5707964])).eval().round(4)
    array([0., 1.], dtype=float32)
    """
    return _unary("sin", x)


def cos(x):
    """Cosine (f32 math, the result in x's dtype).

    >>> tc.cos(tc.Tensor([0.0])).eval()
    array([1.], dtype=float32)
    """
    return _unary("cos", x)


def softplus(x):
    """``log(1 + e**x)``.

    >>> tc.softplus(tc.Tensor([0.0])).eval().round(4)
    array([0.6931], dtype=float32)
    """
    return _unary("softplus", x)


def gelu_erf(x):
    """GELU, exact: ``0.5 x (1 + erf(x / sqrt(2)))`` (DINOv2's; :func:`gelu` is the tanh form).

    >>> tc.gelu_erf(tc.Tensor([1.0])).eval().round(4)
    array([0.8413], dtype=float32)
    """
    return _unary("gelu_erf", x)


def rsqrt(x):
    """``1 / sqrt(x)`` (a division of the square root: two roundings).

    >>> tc.rsqrt(tc.Tensor([4.0])).eval()
    array([0.5], dtype=float32)
    """
    return div(1.0, sqrt(x))


def pow(a, b):
    """``a ** b`` (float; f32 ``powf``, so a negative base with a non-integer exponent is NaN). Also ``x ** y``.

    >>> (tc.Tensor([2.0, 3.0]) ** 2.0).eval()
    array([4., 9.], dtype=float32)
    """
    return _binary("pow", a, b)


def greater(a, b):
    """``a > b`` elementwise: 1 where it holds, else 0, in the operands' dtype (a NaN compares false).

    >>> tc.greater(tc.Tensor([1.0, 2.0, 3.0]), 2.0).eval()
    array([0., 0., 1.], dtype=float32)
    """
    return _binary("greater", a, b)


def less(a, b):
    """``a < b`` elementwise: 1 where it holds, else 0, in the operands' dtype (a NaN compares false).

    >>> tc.less(tc.Tensor([1.0, 2.0, 3.0]), 2.0).eval()
    array([1., 0., 0.], dtype=float32)
    """
    return _binary("less", a, b)


def equal(a, b):
    """``a == b`` elementwise: 1 where it holds, else 0, in the operands' dtype (a NaN compares false).

    >>> tc.equal(tc.Tensor([1.0, 2.0]), 2.0).eval()
    array([0., 1.], dtype=float32)
    """
    return _binary("equal", a, b)


def where(cond, a, b):
    """``a`` where ``cond`` is not 0, else ``b`` (float; the three shapes broadcast). The side not taken is
    not read there, so a NaN in it does not leak: ``where(x > 0, log(x), 0)`` is finite.

    >>> x = tc.Tensor([-1.0, 4.0])
    >>> tc.where(tc.greater(x, 0.0), tc.log(x), 0.0).eval().round(4)
    array([0.    , 1.3863], dtype=float32)
    """
    cond = as_tensor(cond)
    a = as_tensor(a, like=cond)
    b = as_tensor(b, like=a)
    return make_op("where", [cond, a, b], dtype=a.dtype)
