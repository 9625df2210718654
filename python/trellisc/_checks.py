"""Number arguments checked in Python, before anything reaches the C APIs.

Integers must be integers (``int`` or a NumPy integer; not ``2.5``, not
``2.0``, not ``True``) within a range; seeds are u64; guidance strengths are
finite and >= 0. The ranges are those of the C ABI (``trellis_rt.h``,
``trellisc.h``) and of trellis.exe's options. Each refusal is a
:class:`TrellisError` at the user's line naming the argument, the range and
the value.
"""
import math
import numbers

from ._errors import TrellisError, user_location

U64_MAX = 2**64 - 1
INT32_MAX = 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_STEPS = 10000  # pipeline.json's cap on sampler steps
MAX_BATCH = MAX_IMAGES = 64
MAX_COND_TOKENS = 16384
MAX_THREADS = 4096


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_int(name, value, lo, hi, note=""):
    """``value`` as an ``int`` in ``lo..hi``; else a TrellisError naming
    ``name``, the range (and ``note``) and the value."""
    if not _is_int(value) or not lo <= int(value) <= hi:
        raise TrellisError(
            f"{name} must be an integer in {lo}..{hi}{note}, " f"found {value!r}", user_location()
        )
    return int(value)


def check_ints(name, values, lo, hi, note=""):
    """A sequence of integers, each in ``lo..hi`` (``name[i]`` in errors)."""
    try:
        items = list(values)
    except TypeError:
        raise TrellisError(
            f"{name} must be a sequence of integers, found " f"{values!r}", user_location()
        ) from None
    return [check_int(f"{name}[{i}]", v, lo, hi, note) for i, v in enumerate(items)]


def check_seed(name, value):
    return check_int(name, value, 0, U64_MAX)


def check_steps(name, value):
    """Sampler steps: 0 keeps the compiled value, else 1..10000."""
    return check_int(name, value, 0, MAX_STEPS, " (0: the compiled value)")


def check_cfg(name, value):
    """A guidance strength: None keeps the compiled value, else a finite
    number >= 0."""
    if value is None:
        return None
    if (
        not isinstance(value, numbers.Real)
        or isinstance(value, bool)
        or not math.isfinite(float(value))
        or float(value) < 0
    ):
        raise TrellisError(
            f"{name} must be a finite number >= 0 (None: the " f"compiled value), found {value!r}",
            user_location(),
        )
    return float(value)
