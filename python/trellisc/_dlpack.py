"""DLPack at the boundary of an Executable: device tensors of other frameworks (torch, CuPy, anything with
``__dlpack__``) as inputs, read on the device; results in device memory as :class:`DeviceArray`, which exports
``__dlpack__`` (``torch.from_dlpack(y)`` takes the buffer without a copy) and converts to NumPy on request.

The structs are DLPack's (dlpack.h, version 0.8 ABI: DLManagedTensor, capsule name "dltensor").
"""
import ctypes

import numpy as np

from . import _native

KDL_CPU, KDL_CUDA = 1, 2


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]

# (DLPack code, bits) <-> NumPy dtype
_DL_TO_NP = {
    (2, 32): np.dtype(np.float32),
    (2, 16): np.dtype(np.float16),
    (0, 32): np.dtype(np.int32),
    (0, 64): np.dtype(np.int64),
    (1, 8): np.dtype(np.uint8),
}
_NP_TO_DL = {v: k for k, v in _DL_TO_NP.items()}

_capsule_get = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get.restype, _capsule_get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
# The capsule destructor gets a capsule being destroyed: raw pointers, no new references.
_capsule_is_valid_raw = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid_raw.restype, _capsule_is_valid_raw.argtypes = ctypes.c_int, [
    ctypes.c_void_p,
    ctypes.c_char_p,
]
_capsule_get_raw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)
CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule):
    """A capsule dropped unconsumed (still named "dltensor"): its DLManagedTensor's deleter runs, as DLPack
    asks of producers; a consumer renames the capsule and calls the deleter itself."""
    if _capsule_is_valid_raw(capsule, b"dltensor"):
        _exports.pop(_capsule_get_raw(capsule, b"dltensor"), None)


def on_cuda(obj):
    """Whether `obj` is a DLPack tensor in CUDA memory."""
    dev = getattr(obj, "__dlpack_device__", None)
    return dev is not None and int(dev()[0]) == KDL_CUDA


def device_input(obj, what):
    """A CUDA DLPack tensor as a trellis_tensor describing device memory (on_device = 1), and what keeps the
    memory alive. Only compact row-major tensors of the C ABI's dtypes. The producer's stream is not waited for
    here: the runtime synchronizes the context before reading device inputs."""
    capsule = obj.__dlpack__()
    ptr = _capsule_get(capsule, b"dltensor")
    if not ptr:
        raise ValueError(f"{what}: the DLPack capsule was already consumed")
    managed = ctypes.cast(ptr, ctypes.POINTER(DLManagedTensor)).contents
    t = managed.dl_tensor
    shape = tuple(t.shape[i] for i in range(t.ndim))
    key = (t.dtype.code, t.dtype.bits)
    if t.dtype.lanes != 1 or key not in _DL_TO_NP:
        raise ValueError(
            f"{what}: DLPack dtype (code {t.dtype.code}, {t.dtype.bits} bits) has no trellis dtype"
        )
    if t.strides:
        expected, step = [], 1
        for d in reversed(shape):
            expected.append(step)
            step *= d
        if any(t.strides[i] != s for i, s in zip(range(t.ndim), reversed(expected)) if shape[i] > 1):
            raise ValueError(
                f"{what}: only compact row-major device tensors are read in place (call .contiguous())"
            )
    desc = _native.Tensor()
    desc.dtype = _native.DTYPE_CODES[_DL_TO_NP[key]]
    desc.rank = t.ndim
    for i, d in enumerate(shape):
        desc.shape[i] = d
    desc.data = t.data + t.byte_offset
    desc.on_device = 1
    return desc, (capsule, obj), _DL_TO_NP[key], shape


class DeviceArray:
    """A result of an Executable in the GPU's memory: ``torch.from_dlpack(y)`` (or any DLPack consumer) takes it
    without a copy; ``np.asarray(y)`` / ``y.numpy()`` copy it to the host. The buffer belongs to the executable's
    session and lives as long as this object or a consumer's tensor made from it."""

    def __init__(self, tensor, session, device=0):
        self._t, self._session, self._device = tensor, session, device
        self.shape = tuple(tensor.shape[i] for i in range(tensor.rank))
        self.dtype = _native.CODE_DTYPES[tensor.dtype]

    def __del__(self):
        session = getattr(self, "_session", None)
        if session is not None:
            session.free_tensor(self._t)
            self._session = None

    def numpy(self):
        out = np.empty(self.shape, self.dtype)
        self._session.copy_to_host(self._t, out)
        return out

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __repr__(self):
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, device=cuda:{self._device})"

    def __dlpack_device__(self):
        return (KDL_CUDA, self._device)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLManagedTensor capsule viewing this buffer; its deleter drops the reference that keeps this array
        (and so the buffer) alive. The data is complete when the call that made it returned."""
        m = DLManagedTensor()
        shape = (ctypes.c_int64 * max(1, len(self.shape)))(*self.shape)
        m.dl_tensor.data = self._t.data
        m.dl_tensor.device = DLDevice(KDL_CUDA, self._device)
        m.dl_tensor.ndim = len(self.shape)
        code, bits = _NP_TO_DL[np.dtype(self.dtype)]
        m.dl_tensor.dtype = DLDataType(code, bits, 1)
        m.dl_tensor.shape = shape
        m.dl_tensor.strides = None
        m.dl_tensor.byte_offset = 0
        holder = [self, m, shape]  # alive until the consumer calls the deleter
        m.deleter = DELETER(lambda _p: _exports.pop(key, None))
        holder.append(m.deleter)
        key = ctypes.addressof(m)
        _exports[key] = holder
        return _capsule_new(key, b"dltensor", ctypes.cast(_capsule_destructor, ctypes.c_void_p))


_exports = {}  # address of an exported DLManagedTensor -> what keeps it alive
