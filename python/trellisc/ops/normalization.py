"""Normalizations: ``layer_norm``, ``group_norm``, ``head_rms_norm``, ``softmax``."""
from .._checks import INT64_MAX, INT64_MIN, check_int
from .._trace import as_tensor, make_op


def layer_norm(x, weight=None, bias=None, eps=1e-5, axis=-1):
    """LayerNorm over ``axis`` (biased variance, f32 statistics), then
    ``* weight + bias`` (float32 ``[C]``, both or neither).

    >>> tc.layer_norm(tc.Tensor([[1.0, 3.0]])).eval().round(3)
    array([[-1.,  1.]], dtype=float32)
    """
    x = as_tensor(x)
    ins = [x]
    if (weight is None) != (bias is None):
        from .._errors import TrellisError, user_location

        raise TrellisError("layer_norm: pass both weight and bias, or neither", user_location())
    if weight is not None:
        ins += [as_tensor(weight), as_tensor(bias)]
    axis = check_int("layer_norm: axis", axis, INT64_MIN, INT64_MAX)
    return make_op("layer_norm", ins, {"eps": float(eps), "axis": axis})


def head_rms_norm(x, gamma):
    """TRELLIS's per-head "RMS norm" of ``x [..., H, d]``: ``x / max(||x||, 1e-12) * gamma * sqrt(d)`` over d, with
    ``gamma`` float32 ``[H, d]`` (the q/k norms of its attention).

    >>> x = tc.Tensor(np.full((1, 1, 4), 2.0, np.float32))
    >>> tc.head_rms_norm(x, tc.Tensor(np.ones((1, 4), np.float32))).eval()
    array([[[1., 1., 1., 1.]]], dtype=float32)
    """
    return make_op("head_rms_norm", [as_tensor(x), as_tensor(gamma)])


def softmax(x, axis=-1):
    """Softmax over ``axis``.

    >>> tc.softmax(tc.Tensor([0.0, 0.0])).eval()
    array([0.5, 0.5], dtype=float32)
    """
    axis = check_int("softmax: axis", axis, INT64_MIN, INT64_MAX)
    return make_op("softmax", [as_tensor(x)], {"axis": axis})


def group_norm(x, num_groups, weight=None, bias=None, eps=1e-5):
    """GroupNorm of ``x [N, C, *]`` (PyTorch's ``torch.nn.functional.group_norm``): each sample's C channels in
    ``num_groups`` groups, each group normalized over its channels and positions (biased variance, f32
    statistics), then ``* weight + bias`` per channel (``[C]`` in x's dtype, both or neither).

    It is a layer norm of the ``[N, G, C / G * positions]`` view (one kernel), reshaped back, then the affine.

    >>> x = tc.Tensor(np.array([[[1.0], [3.0], [5.0], [9.0]]], np.float32))
    >>> tc.group_norm(x, 2).eval().ravel().round(3)
    array([-1.,  1., -1.,  1.], dtype=float32)
    """
    from .._errors import TrellisError, user_location
    from .shape import reshape

    x = as_tensor(x)
    num_groups = check_int("group_norm: num_groups", num_groups, 1, INT64_MAX)
    shape = list(x.shape)
    if len(shape) < 2:
        raise TrellisError(f"group_norm: x must be [N, C, ...], found shape {shape}", user_location())
    channels = shape[1]
    if channels < 0 or channels % num_groups:
        raise TrellisError(
            f"group_norm: {channels} channels do not split into {num_groups} groups", user_location()
        )
    if (weight is None) != (bias is None):
        raise TrellisError("group_norm: pass both weight and bias, or neither", user_location())
    if any(d < 0 for d in shape[1:]):
        raise TrellisError(
            f"group_norm: only dimension 0 may be dynamic, found shape {shape}", user_location()
        )
    grouped = reshape(x, [shape[0], num_groups, -1])
    y = reshape(layer_norm(grouped, eps=eps, axis=-1), shape)
    if weight is None:
        return y
    per_channel = [channels] + [1] * (len(shape) - 2)
    return y * reshape(as_tensor(weight), per_channel) + reshape(as_tensor(bias), per_channel)
