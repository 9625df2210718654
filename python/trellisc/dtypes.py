"""Element types: ``tc.float32``, ``tc.float16``, ``tc.int32``."""
import numpy as np


class dtype:
    """An element type of a :class:`trellisc.Tensor`.

    >>> tc.float16.name, tc.float16.numpy
    ('float16', dtype('float16'))
    """

    def __init__(self, name, code, numpy):
        self.name, self.code, self.numpy = name, code, np.dtype(numpy)

    def __repr__(self):
        return f"tc.{self.name}"


float32 = dtype("float32", "f32", np.float32)
float16 = dtype("float16", "f16", np.float16)
int32 = dtype("int32", "i32", np.int32)
int64 = dtype("int64", "i64", np.int64)

_BY_CODE = {d.code: d for d in (float32, float16, int32, int64)}
_BY_NUMPY = {d.numpy: d for d in (float32, float16, int32, int64)}


def from_code(code):
    return _BY_CODE[code]


def from_numpy(np_dtype):
    """The tc dtype of a NumPy dtype (float64 -> float32)."""
    np_dtype = np.dtype(np_dtype)
    if np_dtype == np.float64:
        return float32
    if np_dtype not in _BY_NUMPY:
        raise TypeError(f"trellisc has no element type for NumPy {np_dtype}")
    return _BY_NUMPY[np_dtype]
