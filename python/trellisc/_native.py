"""ctypes bindings of the two native libraries (no compiled extension).

* ``libtrellisc.so``   the compiler (include/trellis/trellisc.h)
* ``libtrellis_rt.so`` the runtime (include/trellis/trellis_rt.h)

They are found in ``$TRELLISC_BUILD_DIR/lib`` (default: the repository's
``build`` directory).
"""
import ctypes
import json
import sys
import os
from pathlib import Path

import numpy as np

_REPO = Path(__file__).resolve().parents[2]


def build_dir():
    """The build directory the native libraries are loaded from."""
    return Path(os.environ.get("TRELLISC_BUILD_DIR", _REPO / "build"))


def _load(name):
    path = build_dir() / "lib" / name
    if not path.exists():
        raise OSError(
            f"trellisc: cannot find {path}: build it (ninja -C {build_dir()} "
            f"{'TrellisCAPI' if 'trellisc' in name else 'trellis_rt'}) or "
            f"set TRELLISC_BUILD_DIR to the build directory"
        )
    return ctypes.CDLL(str(path))


# --- the compiler -----------------------------------------------------------


class _Diagnostic(ctypes.Structure):
    _fields_ = [
        ("severity", ctypes.c_char_p),
        ("message", ctypes.c_char_p),
        ("file", ctypes.c_char_p),
        ("line", ctypes.c_uint),
        ("column", ctypes.c_uint),
        ("kind", ctypes.c_char_p),
        ("module", ctypes.c_char_p),
        ("config", ctypes.c_char_p),
        ("config_path", ctypes.c_char_p),
    ]


_compiler = None


def compiler():
    global _compiler
    if _compiler is None:
        lib = _load("libtrellisc.so")
        vp = ctypes.c_void_p
        lib.trellisc_compile_trace.argtypes = [
            ctypes.c_char_p,
            ctypes.c_size_t,
            ctypes.c_char_p,
            ctypes.POINTER(vp),
        ]
        lib.trellisc_compile_pipeline.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(vp)]
        lib.trellisc_result_bundle.argtypes = [vp, ctypes.POINTER(ctypes.c_size_t)]
        lib.trellisc_result_bundle.restype = vp
        for fn in ("trellisc_result_ir", "trellisc_result_info", "trellisc_result_diagnostics_json"):
            getattr(lib, fn).argtypes = [vp]
            getattr(lib, fn).restype = ctypes.c_char_p
        lib.trellisc_result_free.argtypes = [vp]
        lib.trellisc_version.restype = ctypes.c_char_p
        _compiler = lib
    return _compiler


class CompileResult:
    """What one compile call returned: code, bundle bytes, IR, info, diagnostics."""

    def __init__(self, code, bundle, ir, info, diagnostics):
        self.code, self.bundle, self.ir = code, bundle, ir
        self.info, self.diagnostics = info, diagnostics


def _take(lib, code, handle):
    try:
        size = ctypes.c_size_t(0)
        ptr = lib.trellisc_result_bundle(handle, ctypes.byref(size))
        bundle = ctypes.string_at(ptr, size.value) if ptr else b""
        ir = lib.trellisc_result_ir(handle).decode()
        info = json.loads(lib.trellisc_result_info(handle).decode())
        diags = json.loads(lib.trellisc_result_diagnostics_json(handle).decode())
    finally:
        lib.trellisc_result_free(handle)
    return CompileResult(code, bundle, ir, info, diags)


def compile_trace(trace, options):
    lib = compiler()
    text = json.dumps(trace).encode()
    handle = ctypes.c_void_p()
    code = lib.trellisc_compile_trace(text, len(text), json.dumps(options).encode(), ctypes.byref(handle))
    return _take(lib, code, handle)


def compile_pipeline(path, options):
    lib = compiler()
    handle = ctypes.c_void_p()
    code = lib.trellisc_compile_pipeline(
        str(path).encode(), json.dumps(options).encode(), ctypes.byref(handle)
    )
    return _take(lib, code, handle)


# --- the runtime ------------------------------------------------------------

MAX_RANK = 8
DTYPE_CODES = {
    np.dtype(np.float32): 0,
    np.dtype(np.float16): 1,
    np.dtype(np.int32): 2,
    np.dtype(np.int64): 3,
    np.dtype(np.uint8): 4,
}
CODE_DTYPES = {v: k for k, v in DTYPE_CODES.items()}


class Tensor(ctypes.Structure):
    _fields_ = [
        ("dtype", ctypes.c_int),
        ("rank", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_RANK),
        ("data", ctypes.c_void_p),
        ("capacity", ctypes.c_size_t),
        ("owned", ctypes.c_int32),
        ("on_device", ctypes.c_int32),
    ]


class Error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("message", ctypes.c_void_p)]


class Weight(ctypes.Structure):
    _fields_ = [("model", ctypes.c_char_p), ("name", ctypes.c_char_p), ("tensor", Tensor)]


class Weights(ctypes.Structure):
    _fields_ = [
        ("entries", ctypes.POINTER(Weight)),
        ("count", ctypes.c_size_t),
        ("model_dir", ctypes.c_char_p),
    ]


class CallOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("check_finite", ctypes.c_int32),
        ("threads", ctypes.c_int32),
    ]


class SamplerSpec(ctypes.Structure):
    _fields_ = [
        ("steps", ctypes.c_int32),
        ("sigma_min", ctypes.c_double),
        ("cfg_strength", ctypes.c_double),
        ("cfg_interval", ctypes.c_double * 2),
        ("rescale_t", ctypes.c_double),
    ]


class Progress(ctypes.Structure):
    _fields_ = [
        ("kind", ctypes.c_int),
        ("stage", ctypes.c_char_p),
        ("step", ctypes.c_int64),
        ("steps", ctypes.c_int64),
        ("seconds", ctypes.c_double),
        ("coords", ctypes.POINTER(Tensor)),
        ("message", ctypes.c_char_p),
    ]


PROGRESS_FN = ctypes.CFUNCTYPE(None, ctypes.POINTER(Progress), ctypes.c_void_p)


class RunSpec(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("program", ctypes.c_void_p),
        ("bundle_path", ctypes.c_char_p),
        ("seed", ctypes.c_uint64),
        ("ss", SamplerSpec),
        ("slat", SamplerSpec),
        ("targets", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("threads", ctypes.c_int32),
        ("ss_noise", ctypes.POINTER(Tensor)),
        ("slat_noise", ctypes.POINTER(Tensor)),
        ("coords", ctypes.POINTER(Tensor)),
        ("out_dir", ctypes.c_char_p),
        ("progress", PROGRESS_FN),
        ("user_data", ctypes.c_void_p),
        ("images", ctypes.POINTER(Tensor)),
        ("num_images", ctypes.c_int32),
        ("no_background_removal", ctypes.c_int32),
    ]


class EngineOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("device", ctypes.c_int32),
        ("threads", ctypes.c_int32),
        ("progress", PROGRESS_FN),
        ("user_data", ctypes.c_void_p),
        ("memory_budget", ctypes.c_uint64),
        ("max_voxels", ctypes.c_int64),
    ]


class Embeddings(ctypes.Structure):
    _fields_ = [("cond", Tensor), ("neg_cond", ctypes.POINTER(Tensor))]


OUTPUT_NAMES = [
    "ss_latent",
    "coords",
    "slat",
    "gs_xyz",
    "gs_features_dc",
    "gs_scaling",
    "gs_rotation",
    "gs_opacity",
    "rf_trivec",
    "rf_density",
    "rf_features_dc",
    "mesh_cubes",
    "mesh_fields",
    "mesh_vertices",
    "mesh_faces",
    "cond",
]


class Outputs(ctypes.Structure):
    _fields_ = [(n, Tensor) for n in OUTPUT_NAMES]


_runtime = None


def runtime():
    global _runtime
    if _runtime is None:
        lib = _load("libtrellis_rt.so")
        vp, err = ctypes.c_void_p, ctypes.POINTER(Error)
        lib.trellis_program_open.argtypes = [ctypes.c_char_p, ctypes.POINTER(vp), err]
        lib.trellis_program_from_memory.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(vp), err]
        lib.trellis_program_close.argtypes = [vp]
        lib.trellis_program_meta.argtypes = [vp]
        lib.trellis_program_meta.restype = ctypes.c_char_p
        lib.trellis_program_call.argtypes = [
            vp,
            ctypes.c_char_p,
            ctypes.POINTER(Tensor),
            ctypes.c_size_t,
            ctypes.POINTER(Weights),
            ctypes.POINTER(CallOptions),
            ctypes.POINTER(Tensor),
            ctypes.c_size_t,
            err,
        ]
        lib.trellis_run_spec_init.argtypes = [ctypes.POINTER(RunSpec)]
        lib.trellis_run.argtypes = [
            ctypes.POINTER(RunSpec),
            ctypes.POINTER(Weights),
            ctypes.POINTER(Embeddings),
            ctypes.POINTER(Outputs),
            err,
        ]
        lib.trellis_engine_options_init.argtypes = [ctypes.POINTER(EngineOptions)]
        lib.trellis_engine_create.argtypes = [
            vp,
            ctypes.POINTER(Weights),
            ctypes.POINTER(EngineOptions),
            ctypes.POINTER(vp),
            err,
        ]
        lib.trellis_engine_run.argtypes = [
            vp,
            ctypes.POINTER(Embeddings),
            ctypes.POINTER(RunSpec),
            ctypes.POINTER(Outputs),
            err,
        ]
        lib.trellis_engine_destroy.argtypes = [vp]
        lib.trellis_session_create.argtypes = [
            vp,
            ctypes.POINTER(Weights),
            ctypes.POINTER(EngineOptions),
            ctypes.POINTER(vp),
            err,
        ]
        lib.trellis_session_call.argtypes = [
            vp,
            ctypes.c_char_p,
            ctypes.POINTER(Tensor),
            ctypes.c_size_t,
            ctypes.POINTER(Tensor),
            ctypes.c_size_t,
            err,
        ]
        lib.trellis_session_backend.argtypes = [vp, ctypes.c_char_p]
        lib.trellis_session_backend.restype = ctypes.c_char_p
        lib.trellis_session_destroy.argtypes = [vp]
        lib.trellis_session_gpu_seconds.argtypes = [vp]
        lib.trellis_session_gpu_seconds.restype = ctypes.c_double
        lib.trellis_session_tensor_free.argtypes = [vp, ctypes.POINTER(Tensor)]
        lib.trellis_session_copy_to_host.argtypes = [
            vp,
            ctypes.POINTER(Tensor),
            ctypes.c_void_p,
            ctypes.c_size_t,
            err,
        ]
        lib.trellis_tensor_free.argtypes = [ctypes.POINTER(Tensor)]
        lib.trellis_outputs_free.argtypes = [ctypes.POINTER(Outputs)]
        lib.trellis_error_clear.argtypes = [err]
        _runtime = lib
    return _runtime


class RuntimeFailure(Exception):
    """A runtime call failed: code and message (turned into TrellisError)."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code, self.message = code, message


def check(status, error):
    if status != 0:
        message = ctypes.string_at(error.message).decode() if error.message else ""
        runtime().trellis_error_clear(ctypes.byref(error))
        raise RuntimeFailure(status, message)


def tensor_of(array):
    """A trellis_tensor viewing a C-contiguous NumPy array (keep it alive)."""
    if array.dtype not in DTYPE_CODES:
        raise TypeError(f"dtype {array.dtype} cannot cross the C ABI")
    if array.ndim > MAX_RANK:
        raise ValueError(f"rank {array.ndim} is above {MAX_RANK}")
    t = Tensor()
    t.dtype = DTYPE_CODES[array.dtype]
    t.rank = array.ndim
    for i, d in enumerate(array.shape):
        t.shape[i] = d
    t.data = array.ctypes.data if array.size else None
    t.capacity = array.nbytes
    return t


def array_of(t, free=True):
    """Copies a runtime tensor into a NumPy array (and frees it)."""
    dtype = CODE_DTYPES[t.dtype]
    shape = tuple(t.shape[i] for i in range(t.rank))
    out = np.empty(shape, dtype)
    if out.nbytes:  # one copy, straight into the array
        ctypes.memmove(out.ctypes.data, t.data, out.nbytes)
    if free:
        runtime().trellis_tensor_free(ctypes.byref(t))
    return out


def engine_options(flags, device, threads, memory_budget=0, max_voxels=0):
    """trellis_engine_options with its defaults, then these (for an engine or a session)."""
    opts = EngineOptions()
    runtime().trellis_engine_options_init(ctypes.byref(opts))
    opts.flags, opts.device, opts.threads = flags, device, threads
    opts.memory_budget, opts.max_voxels = memory_budget, max_voxels
    return opts


class Program:
    """An open bundle (trellis_program)."""

    def __init__(self, *, path=None, data=None):
        lib = runtime()
        self._handle = ctypes.c_void_p()
        err = Error()
        if path is not None:
            check(
                lib.trellis_program_open(str(path).encode(), ctypes.byref(self._handle), ctypes.byref(err)),
                err,
            )
        else:
            check(
                lib.trellis_program_from_memory(
                    data, len(data), ctypes.byref(self._handle), ctypes.byref(err)
                ),
                err,
            )

    @property
    def handle(self):
        return self._handle

    def meta(self):
        return json.loads(runtime().trellis_program_meta(self._handle).decode())

    def call(self, function, arrays, num_outputs, weights=None, check_finite=False, threads=0):
        lib = runtime()
        arrays = [np.ascontiguousarray(a) for a in arrays]
        ins = (Tensor * max(1, len(arrays)))(*[tensor_of(a) for a in arrays])
        outs = (Tensor * max(1, num_outputs))()
        keep = []
        table = weight_table(weights, None, keep)
        opts = CallOptions(ctypes.sizeof(CallOptions), int(check_finite), threads)
        err = Error()
        check(
            lib.trellis_program_call(
                self._handle,
                function.encode(),
                ins,
                len(arrays),
                ctypes.byref(table),
                ctypes.byref(opts),
                outs,
                num_outputs,
                ctypes.byref(err),
            ),
            err,
        )
        return [array_of(outs[i]) for i in range(num_outputs)]

    def __del__(self):
        if getattr(self, "_handle", None) and _runtime is not None:
            _runtime.trellis_program_close(self._handle)
            self._handle = None


def weight_table(weights, model_dir, keep):
    """A trellis_weights of {(model, name): array} + model_dir; the arrays
    and the entry array are appended to `keep` (they must outlive the use)."""
    table = Weights()
    table.model_dir = str(model_dir).encode() if model_dir else None
    if weights:
        entries = (Weight * len(weights))()
        for i, ((model, name), a) in enumerate(weights.items()):
            a = np.ascontiguousarray(a)
            keep.append(a)
            entries[i].model = model.encode()
            entries[i].name = name.encode()
            entries[i].tensor = tensor_of(a)
        table.entries, table.count = entries, len(weights)
        keep.append(entries)
    return table


class Engine:
    """A trellis_engine: the pipeline set up once (backend, staged weights,
    planned memory), run for many generations. Keeps the program and the
    weight arrays alive as long as it lives."""

    def __init__(
        self,
        program,
        weights=None,
        model_dir=None,
        flags=4,
        device=0,
        threads=0,
        memory_budget=0,
        max_voxels=0,
    ):
        lib = runtime()
        self._program = program  # the engine holds a reference to it too
        self._keep = []
        table = weight_table(weights, model_dir, self._keep)
        opts = engine_options(flags, device, threads, memory_budget, max_voxels)
        self._handle = ctypes.c_void_p()
        err = Error()
        check(
            lib.trellis_engine_create(
                program.handle,
                ctypes.byref(table),
                ctypes.byref(opts),
                ctypes.byref(self._handle),
                ctypes.byref(err),
            ),
            err,
        )

    @property
    def handle(self):
        return self._handle

    def close(self):
        if getattr(self, "_handle", None) and _runtime is not None:
            _runtime.trellis_engine_destroy(self._handle)
            self._handle = None

    def __del__(self):
        self.close()


class Session:
    """A trellis_session: a program's entry functions set up once (backend,
    GPU code, staged weights, plans per input shape) and called many times.
    Keeps the program and the weight arrays alive as long as it lives."""

    def __init__(self, program, weights=None, flags=4, device=0, threads=0, model_dir=None):
        lib = runtime()
        self._program = program
        self._keep = []
        table = weight_table(weights, model_dir, self._keep)
        opts = engine_options(flags, device, threads)

        def notice(p, _user):  # the runtime's notices (e.g. no usable GPU)
            p = p.contents
            if p.kind == 4 and p.message:
                sys.stderr.write(f"trellisc: {p.message.decode(errors='replace')}\n")

        self._notice = PROGRESS_FN(notice)
        opts.progress = self._notice
        self._handle = ctypes.c_void_p()
        err = Error()
        check(
            lib.trellis_session_create(
                program.handle,
                ctypes.byref(table),
                ctypes.byref(opts),
                ctypes.byref(self._handle),
                ctypes.byref(err),
            ),
            err,
        )

    def gpu_seconds(self):
        return runtime().trellis_session_gpu_seconds(self._handle)

    def backend(self, function):
        b = runtime().trellis_session_backend(self._handle, function.encode())
        return b.decode() if b else None

    def call(self, function, arrays, num_outputs, on_device=False, out_specs=None):
        """Inputs: NumPy arrays, or Tensor descriptions of device memory (on_device = 1, see _dlpack).
        ``on_device``: ask for the outputs in device memory; those that come back so are returned as
        (Tensor, self) pairs for _dlpack.DeviceArray, the others as NumPy arrays. ``out_specs``: per output,
        (shape, NumPy dtype) when its shape is static, else None: the runtime then writes the result straight
        into a NumPy array of that shape (no allocation and copy of its own)."""
        lib = runtime()
        if isinstance(function, str):
            function = function.encode()
        ins = (Tensor * max(1, len(arrays)))()
        keep = []
        for i, a in enumerate(arrays):
            if isinstance(a, Tensor):
                ins[i] = a
            else:
                a = np.ascontiguousarray(a)
                keep.append(a)
                ins[i] = tensor_of(a)
        outs = (Tensor * max(1, num_outputs))()
        ready = [None] * num_outputs
        for i in range(num_outputs):
            if on_device:
                outs[i].on_device = 1
            elif out_specs is not None and out_specs[i] is not None:
                a = np.empty(*out_specs[i])
                if a.size:
                    ready[i] = a
                    outs[i].data = a.ctypes.data
                    outs[i].capacity = a.nbytes
        err = Error()
        check(
            lib.trellis_session_call(
                self._handle, function, ins, len(arrays), outs, num_outputs, ctypes.byref(err)
            ),
            err,
        )
        results = []
        for i in range(num_outputs):
            o = outs[i]
            if o.on_device:
                results.append((o, self))
            elif ready[i] is not None and not o.owned:
                results.append(ready[i])
            else:
                results.append(array_of(o))
        return results

    def free_tensor(self, t):
        if getattr(self, "_handle", None) and _runtime is not None:
            _runtime.trellis_session_tensor_free(self._handle, ctypes.byref(t))

    def copy_to_host(self, t, array):
        err = Error()
        check(
            runtime().trellis_session_copy_to_host(
                self._handle, ctypes.byref(t), array.ctypes.data, array.nbytes, ctypes.byref(err)
            ),
            err,
        )

    def close(self):
        if getattr(self, "_handle", None) and _runtime is not None:
            _runtime.trellis_session_destroy(self._handle)
            self._handle = None

    def __del__(self):
        self.close()
