"""``tc.compile``: trace a function, compile it, get an Executable."""
import inspect
import json
import warnings

import numpy as np

from . import _bundle, _dlpack, _native
from . import dtypes as _dt
from ._errors import SourceLoc, TrellisError, runtime_error, user_location
from ._trace import Node, Tensor, Trace
from .input_info import InputInfo


def compile(fn, args, check_finite=False, name="main", target="auto", gpu="auto", sync_ops=False):
    """Traces ``fn`` on placeholders described by ``args`` (a list of
    :class:`InputInfo`), compiles it with the trellisc phases and returns an
    :class:`Executable`.

    ``target``: ``"cuda"`` (fusion, tiling, partition, codegen to PTX and the
    sm_90a cubin, as ``trellisc --target=cuda``; works without a GPU),
    ``"cpu"`` (the CPU reference backend) or ``"auto"`` (cuda when this build
    has the CUDA toolkit's kernels, else cpu). ``gpu``: where a CUDA program
    runs: ``"auto"`` (the GPU when one is usable, else the CPU reference with
    a notice on stderr), ``"off"`` or ``"require"``. ``check_finite``: stop at
    the first op whose result has a NaN or Inf, naming it and its line.
    ``sync_ops``: on the GPU, wait for every op (no CUDA graphs), so that a GPU
    fault names the op and its line (slow; for debugging).

    >>> def f(x):
    ...     return tc.gelu(x) * 2.0
    >>> exe = tc.compile(f, args=[tc.InputInfo(((1, 2, 4),), tc.float32)])
    >>> exe(np.array([0.0, 1.0, 2.0], np.float32)).round(3)
    array([0.   , 1.682, 3.909], dtype=float32)
    """
    where = user_location()
    if not isinstance(args, (list, tuple)) or not all(isinstance(a, InputInfo) for a in args):
        raise TrellisError("compile: args must be a list of tc.InputInfo", where)
    try:
        from .module import Module

        traced = fn.forward if isinstance(fn, Module) else fn
        names = list(inspect.signature(traced).parameters)
    except (TypeError, ValueError):
        names = []
    placeholders = []
    for i, info in enumerate(args):
        node = Node("input", loc=info.loc, dtypes=[info.dtype])
        node.info, node.index = info, i
        if info.name is None and i < len(names):
            info.name = names[i]
        placeholders.append(Tensor._make(node))
    out = fn(*placeholders)
    single = isinstance(out, Tensor)
    outs = [out] if single else list(out)
    if not outs or not all(isinstance(t, Tensor) for t in outs):
        raise TrellisError("compile: the function must return a tc.Tensor or a tuple of them", where)
    if gpu not in _GPU_FLAGS:
        raise TrellisError(f"compile: gpu must be 'auto', 'off' or 'require', found {gpu!r}", where)
    exe = _compile_graph(
        outs,
        [p._node for p in placeholders],
        name=name,
        check_finite=check_finite,
        single=single,
        loc=where,
        target=target,
        sync_ops=sync_ops,
    )
    exe.gpu = gpu
    return exe


_GPU_FLAGS = {"auto": 0, "off": 16, "require": 32}  # TRELLIS_FLAG_CPU_ONLY, _REQUIRE_GPU
_FLAG_GRAPHS, _FLAG_CHECK_FINITE, _FLAG_SYNC_OPS = 4, 8, 128  # trellis_rt.h's TRELLIS_FLAG_*


def _compile_graph(
    outputs, input_nodes, name="main", check_finite=False, single=True, loc=None, target="cpu", sync_ops=False
):
    trace = Trace(outputs, input_nodes, name=name, loc=loc)
    if target not in ("auto", "cuda", "cpu"):
        raise TrellisError(f"compile: target must be 'auto', 'cuda' or 'cpu', found {target!r}", loc)
    result = _native.compile_trace(trace.json, {"target": target})
    if result.code == 2 and result.diagnostics and result.diagnostics[0]["message"].startswith("target"):
        raise TrellisError(result.diagnostics[0]["message"], loc)  # e.g. cuda in a build without the toolkit
    if result.code == 2:
        raise TrellisError(
            "internal error in the trace: " + "; ".join(d["message"] for d in result.diagnostics)
        )
    if result.code != 0:
        raise trace.errors(result.diagnostics)
    for d in result.diagnostics:
        if d["severity"] == "warning":  # e.g. target "auto" fell back to the CPU reference
            at = f" ({d['file']}:{d['line']})" if d.get("file") and d.get("line") else ""
            warnings.warn(d["message"] + at, stacklevel=3)
    signature = {
        "function": name,
        "single": single,
        "inputs": [n.info.to_json() for n in input_nodes],
        "outputs": result.info.get("outputs", []),
        "locs": trace.locs,
        "check_finite": check_finite,
        "sync_ops": bool(sync_ops),
    }
    params = {n: a for (_, n), a in trace.weights.items()}
    return Executable(result.bundle, signature, params)


def _input_name(i, info):
    return f"input {i}" + (f" ('{info.name}')" if info.name else "")


class Executable:
    """A compiled function: call it on NumPy arrays; ``save``/``load`` it.

    The first call sets up a session (libtrellis_rt's trellis_session: the
    backend, the GPU code, the staged parameters) that later calls reuse;
    ``exe.backend`` says where the function runs ("cuda" or "cpu") and
    ``exe.target`` what it was compiled for. Setting ``exe.gpu`` ("auto",
    "off", "require"), ``exe.check_finite`` or ``exe.sync_ops`` makes a new
    session at the next call.

    >>> exe = tc.compile(lambda x: x + 1.0, args=[tc.InputInfo((2,))])
    >>> exe(np.zeros(2, np.float32))
    array([1., 1.], dtype=float32)
    """

    def __init__(self, bundle, signature, params):
        self._bundle, self._sig, self._params = bundle, signature, params
        self._program = _native.Program(data=bundle)
        self.input_infos = [InputInfo.from_json(j) for j in signature["inputs"]]
        self.check_finite = signature.get("check_finite", False)
        self.sync_ops = signature.get("sync_ops", False)
        self.gpu = "auto"
        self._session, self._session_key = None, None
        self._function = signature["function"].encode()
        self._single = signature.get("single", True)
        # Static outputs come back in NumPy arrays made here (out_specs of _native.Session.call).
        self._out_specs = [
            (tuple(o["shape"]), _dt.from_code(o["dtype"]).numpy) if all(d >= 0 for d in o["shape"]) else None
            for o in signature["outputs"]
        ]

    @property
    def target(self):
        """What the bundle was compiled for: "cuda" or "cpu"."""
        return self._program.meta().get("target", "cpu")

    @property
    def last_gpu_seconds(self):
        """The GPU time of the last call (CUDA events around its commands, no host copies), in seconds; NaN when
        it ran on the CPU."""
        return self._session.gpu_seconds() if self._session is not None else float("nan")

    @property
    def backend(self):
        """Where the function runs in this process: "cuda" or "cpu"."""
        return self._session_for().backend(self._sig["function"])

    def _session_for(self):
        key = (self.gpu, bool(self.check_finite), bool(self.sync_ops))
        if self._session is None or self._session_key != key:
            if self.gpu not in _GPU_FLAGS:
                raise TrellisError(
                    f"gpu must be 'auto', 'off' or 'require', found {self.gpu!r}", user_location()
                )
            # (The old session goes when its last DeviceArray does.)
            self._session = None
            flags = (
                _FLAG_GRAPHS
                | _GPU_FLAGS[self.gpu]
                | (_FLAG_CHECK_FINITE if self.check_finite else 0)
                | (_FLAG_SYNC_OPS if self.sync_ops else 0)
            )
            weights = {("params", n): a for n, a in self._params.items()}
            try:
                self._session = _native.Session(self._program, weights, flags=flags)
            except _native.RuntimeFailure as f:
                raise TrellisError(f.message, user_location()) from None
            self._session_key = key
        return self._session

    @property
    def bundle(self):
        """The compiled bundle (bytes)."""
        return self._bundle

    def _locs(self):
        return [
            SourceLoc(l["file"], l["line"], l["col"], l.get("end_col")) for l in self._sig.get("locs", [])
        ]

    def __call__(self, *arrays, out="auto"):
        """Runs the function. Inputs: NumPy arrays, or any DLPack tensor (``__dlpack__``): one in GPU memory
        (torch, CuPy) is read on the device, one in host memory through NumPy. ``out``: ``"numpy"``;
        ``"device"`` (:class:`DeviceArray` results in GPU memory, exporting ``__dlpack__``); ``"auto"`` (the
        default): device results when the function runs on the GPU and an input came from GPU memory, else
        NumPy."""
        # (The caller's location only on the error paths: finding it costs more than a warm call.)
        infos = self.input_infos
        if len(arrays) != len(infos):
            raise TrellisError(
                f"the executable takes {len(infos)} inputs, " f"{len(arrays)} given", user_location()
            )
        if out not in ("auto", "numpy", "device"):
            raise TrellisError(f"out must be 'auto', 'numpy' or 'device', found {out!r}", user_location())
        checked, keep, any_device = [], [], False
        for i, (a, info) in enumerate(zip(arrays, infos)):
            if type(a) is np.ndarray:  # the common case first: no DLPack probing
                problem = info.check(a, i)
                value = a
            elif _dlpack.on_cuda(a):
                try:
                    desc, alive, dtype, shape = _dlpack.device_input(a, _input_name(i, info))
                except ValueError as e:
                    raise TrellisError(str(e), user_location()) from None
                keep.append(alive)
                described = np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape, [0] * len(shape))
                problem = info.check(described, i)
                value = desc
                any_device = True
            else:
                a = np.from_dlpack(a) if hasattr(a, "__dlpack__") and not isinstance(a, np.ndarray) else a
                a = np.asarray(a)
                problem = info.check(a, i)
                value = a
            if problem:
                raise TrellisError(
                    problem.replace(f"input {i}", _input_name(i, info), 1) + " (declared by this InputInfo)",
                    info.loc,
                    details=f"  called at {user_location()}",
                )
            checked.append(value)
        session = self._session_for()
        on_device = out == "device" or (out == "auto" and any_device)
        try:
            outs = session.call(
                self._function, checked, len(self._out_specs), on_device=on_device, out_specs=self._out_specs
            )
        except _native.RuntimeFailure as f:
            raise runtime_error(f.message, self._locs()) from None
        if on_device:
            outs = [_dlpack.DeviceArray(*o) if isinstance(o, tuple) else o for o in outs]
        return outs[0] if self._single else tuple(outs)

    def save(self, path, params=True):
        """Writes one file: the bundle plus the signature and (``params=True``) the parameters; without them,
        :meth:`load` takes them from a checkpoint (``params=``), as trellis.exe reads a model directory."""
        sections = _bundle.parse(self._bundle)
        sections["tc.signature"] = json.dumps(self._sig).encode()
        if params:
            sections["tc.params"] = _bundle.safetensors_bytes(self._params)
        with open(path, "wb") as f:
            f.write(_bundle.serialize(sections))

    @staticmethod
    def load(path, params=None):
        """Reads what :meth:`save` wrote. ``params``: {name: array} or a ``.safetensors`` path (mapped) giving
        the parameters by name, over the saved ones; a missing or mistyped one is named at the first call."""
        with open(path, "rb") as f:
            data = f.read()
        try:
            sections = _bundle.parse(data)
        except ValueError as e:
            raise TrellisError(f"{path}: {e}") from None
        if "tc.signature" not in sections:
            raise TrellisError(f"{path}: not saved by Executable.save (no signature)")
        sig = json.loads(sections.pop("tc.signature"))
        saved = _bundle.read_safetensors_bytes(sections.pop("tc.params", (2).to_bytes(8, "little") + b"{}"))
        if params is not None and not isinstance(params, dict):
            from .module import read_safetensors

            params = read_safetensors(params)
        return Executable(_bundle.serialize(sections), sig, {**saved, **(params or {})})
