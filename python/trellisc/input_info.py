"""``tc.InputInfo``: the shape and dtype of a compiled function's input."""
import numbers

from . import dtypes as _dt
from ._checks import INT64_MAX
from ._errors import TrellisError, user_location


class InputInfo:
    """Shape and element type of one input of :func:`trellisc.compile`.

    A dimension is an int (static) or ``(min, opt, max)`` (dynamic, bounded by
    ``max``: the program accepts any size in ``[min, max]``; ``opt`` is the
    size to tune for).

    >>> info = tc.InputInfo((2, (1, 8, 16), 64), tc.float32)
    >>> info.shape_str()
    '[2, 1..16, 64]'
    """

    def __init__(self, shape, dtype=_dt.float32, name=None):
        self.loc = user_location()
        if not isinstance(dtype, _dt.dtype):
            raise TrellisError(
                f"InputInfo: dtype must be a tc dtype (tc.float32, "
                f"tc.float16, tc.int32), found {dtype!r}",
                self.loc,
            )
        if not isinstance(shape, (tuple, list)):
            raise TrellisError(f"InputInfo: shape must be a tuple, found {shape!r}", self.loc)
        dims = []
        for i, d in enumerate(shape):
            if isinstance(d, numbers.Integral) and not isinstance(d, bool):
                if not 1 <= d <= INT64_MAX:
                    raise TrellisError(
                        f"InputInfo: dimension {i} is {d}; sizes " f"must be in 1..{INT64_MAX}", self.loc
                    )
                dims.append(int(d))
                continue
            if (
                not isinstance(d, (tuple, list))
                or len(d) != 3
                or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in d)
            ):
                raise TrellisError(
                    f"InputInfo: dimension {i} must be an int or " f"(min, opt, max), found {d!r}", self.loc
                )
            lo, opt, hi = (int(v) for v in d)
            if not 1 <= lo <= opt <= hi <= INT64_MAX:
                raise TrellisError(
                    f"InputInfo: dimension {i} is (min={lo}, "
                    f"opt={opt}, max={hi}); expected "
                    f"1 <= min <= opt <= max <= {INT64_MAX}",
                    self.loc,
                )
            dims.append((lo, opt, hi))
        self.shape, self.dtype, self.name = tuple(dims), dtype, name
        self._static = self.shape if all(isinstance(d, int) for d in dims) else None

    def trace_shape(self):
        return [d if isinstance(d, int) else -1 for d in self.shape]

    def bounds(self):
        return [d[2] for d in self.shape if not isinstance(d, int)]

    def shape_str(self):
        return "[" + ", ".join(str(d) if isinstance(d, int) else f"{d[0]}..{d[2]}" for d in self.shape) + "]"

    def check(self, array, what):
        """None, or why ``array`` does not fit (``what`` names it; an int i: "input i")."""
        if array.dtype == self.dtype.numpy and array.shape == self._static:
            return None  # the fast path of a warm call
        if isinstance(what, int):
            what = f"input {what}"
        if array.dtype != self.dtype.numpy:
            return (
                f"{what} is {array.dtype.name} {list(array.shape)}, the "
                f"program expects {self.dtype.name} {self.shape_str()}"
            )
        if array.ndim != len(self.shape):
            return (
                f"{what} has rank {array.ndim} {list(array.shape)}, the "
                f"program expects {self.dtype.name} {self.shape_str()}"
            )
        for i, (n, d) in enumerate(zip(array.shape, self.shape)):
            lo, hi = (d, d) if isinstance(d, int) else (d[0], d[2])
            if not lo <= n <= hi:
                return (
                    f"{what} has {n} in dimension {i} ({list(array.shape)}), "
                    f"the program expects {self.dtype.name} {self.shape_str()}"
                )
        return None

    def to_json(self):
        return {
            "shape": [d if isinstance(d, int) else list(d) for d in self.shape],
            "dtype": self.dtype.code,
            "name": self.name,
            "loc": [self.loc.file, self.loc.line, self.loc.col, self.loc.end_col],
        }

    @classmethod
    def from_json(cls, j):
        from ._errors import SourceLoc

        info = cls.__new__(cls)
        info.shape = tuple(d if isinstance(d, int) else tuple(d) for d in j["shape"])
        info.dtype, info.name = _dt.from_code(j["dtype"]), j.get("name")
        info._static = info.shape if all(isinstance(d, int) for d in info.shape) else None
        info.loc = SourceLoc(*j["loc"])
        return info

    def __repr__(self):
        return f"tc.InputInfo({self.shape_str()}, {self.dtype!r})"
