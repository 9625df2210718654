"""Lazy tensors and the trace they record (the "trellisc-trace" JSON).

A :class:`Tensor` is a node of a graph: an input placeholder, data (a NumPy
array: parameters and constants, passed to the program as weights), or an op
on other tensors. Nothing runs until the graph is compiled
(:func:`trellisc.compile`) or a tensor is evaluated (:meth:`Tensor.eval`);
the C++ compiler replays the trace through its tracing API, so shape and
dtype rules are the dialect's, and every error points at the user line that
created the op.
"""
import numpy as np

from . import _native
from . import dtypes as _dt
from ._errors import SourceLoc, TrellisError, combine, user_location, user_terms

# The module path of the tc.Module being called (Module.__call__ pushes).
_module_stack = []


def current_module():
    return ".".join(n for n in _module_stack if n)


class Node:
    __slots__ = ("op", "inputs", "attrs", "n_out", "loc", "dtypes", "value", "name", "info", "index", "types")

    def __init__(self, op, inputs=(), attrs=None, n_out=1, loc=None, dtypes=()):
        self.op, self.inputs, self.attrs = op, list(inputs), attrs or {}
        self.n_out, self.loc, self.dtypes = n_out, loc, list(dtypes)
        self.value = self.name = self.info = self.index = None
        self.types = None  # inferred {"dtype","shape","bounds"} per output


_EAGER = {"target": "cpu"}


def set_eager_target(target):
    """Where :meth:`Tensor.eval` (and printing a tensor) runs: ``"cpu"`` (the
    CPU reference; the default: each evaluation compiles a small program, and
    for ``"cuda"`` that includes ptxas, about 0.1 s), ``"cuda"`` (compiled to
    PTX and run on the GPU; without a usable GPU it falls back to the CPU
    reference with a notice) or ``"auto"`` (as ``tc.compile``'s target).
    Returns the previous setting.

    >>> old = tc.set_eager_target("cpu")
    """
    if target not in ("cpu", "cuda", "auto"):
        raise TrellisError(
            f"set_eager_target: target must be 'cpu', 'cuda' or 'auto', found {target!r}", user_location()
        )
    old, _EAGER["target"] = _EAGER["target"], target
    return old


class Tensor:
    """A lazily evaluated tensor.

    ``tc.Tensor(array)`` wraps data (a NumPy array or nested lists; float64
    becomes float32); ops on tensors build a graph that runs when compiled or
    evaluated.

    >>> x = tc.Tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> (x @ x + 1.0).eval()
    array([[ 8., 11.],
           [16., 23.]], dtype=float32)
    """

    __array_priority__ = 1000  # NumPy defers `ndarray op Tensor` to us

    def __init__(self, data=None, dtype=None):
        if data is None:
            return  # internal construction (_make)
        array = np.asarray(data)
        if dtype is not None and not isinstance(dtype, _dt.dtype):
            dtype = _dt.from_numpy(dtype)
        target = dtype if dtype is not None else _dt.from_numpy(array.dtype)
        array = np.ascontiguousarray(array.astype(target.numpy, copy=False))
        node = Node("data", loc=user_location(current_module()), dtypes=[target])
        node.value = array
        self._node, self._index = node, 0

    @classmethod
    def _make(cls, node, index=0):
        t = cls.__new__(cls)
        t._node, t._index = node, index
        return t

    # --- properties -------------------------------------------------------
    @property
    def dtype(self):
        """The element type (known without evaluating)."""
        return self._node.dtypes[self._index]

    @property
    def shape(self):
        """The shape, as the compiler infers it; a bounded dynamic dimension
        is ``-1``. Raises :class:`TrellisError` if an op on the way is invalid.

        >>> tc.Tensor(np.zeros((2, 3))).reshape((3, 2)).shape
        (3, 2)
        """
        return tuple(self._type()["shape"])

    @property
    def rank(self):
        return len(self.shape)

    def _type(self):
        if self._node.types is None:
            value = getattr(self._node, "value", None)
            if self._node.op == "data" and value is not None:  # an array: its own shape, no compiler needed
                return {"shape": list(value.shape)}
            _infer([self])
        return self._node.types[self._index]

    # --- evaluation -------------------------------------------------------
    def eval(self):
        """Compiles the graph that produces this tensor, runs it where
        :func:`trellisc.set_eager_target` says (the CPU reference unless set)
        and returns a NumPy array (cached).

        >>> tc.gelu(tc.Tensor([0.0, 1.0])).eval().round(4)
        array([0.    , 0.8412], dtype=float32)
        """
        if self._node.op == "data":
            return self._node.value
        if getattr(self, "_value", None) is None:
            if _collect([self])[0]:
                raise TrellisError(
                    "cannot evaluate a tensor that depends on a compile input; "
                    "call the compiled Executable instead",
                    self._node.loc,
                )
            from .compile import _compile_graph

            exe = _compile_graph([self], [], name="eval", target=_EAGER["target"])
            self._value = exe()
        return self._value

    def numpy(self):
        """Same as :meth:`eval`."""
        return self.eval()

    def __array__(self, dtype=None, copy=None):
        a = self.eval()
        return a.astype(dtype) if dtype is not None else a

    def __repr__(self):
        if self._node.op == "input":
            return f"tc.Tensor(input {self._node.index}, dtype={self.dtype})"
        try:
            return f"tc.Tensor({np.array2string(self.eval())}, dtype={self.dtype})"
        except TrellisError:
            return f"tc.Tensor(<invalid>, dtype={self.dtype})"

    def __bool__(self):
        raise TypeError("the truth value of a trellisc Tensor is not defined while tracing")

    # --- operators (the functions live in trellisc/ops) -------------------
    def __matmul__(self, other):
        from .ops.linalg import matmul

        return matmul(self, other)

    def __rmatmul__(self, other):
        from .ops.linalg import matmul

        return matmul(other, self)

    def __add__(self, other):
        from .ops.elementwise import add

        return add(self, other)

    def __radd__(self, other):
        from .ops.elementwise import add

        return add(other, self)

    def __sub__(self, other):
        from .ops.elementwise import sub

        return sub(self, other)

    def __rsub__(self, other):
        from .ops.elementwise import sub

        return sub(other, self)

    def __mul__(self, other):
        from .ops.elementwise import mul

        return mul(self, other)

    def __rmul__(self, other):
        from .ops.elementwise import mul

        return mul(other, self)

    def __truediv__(self, other):
        from .ops.elementwise import div

        return div(self, other)

    def __rtruediv__(self, other):
        from .ops.elementwise import div

        return div(other, self)

    def __neg__(self):
        from .ops.elementwise import neg

        return neg(self)

    def __pow__(self, other):
        from .ops.elementwise import pow

        return pow(self, other)

    def __rpow__(self, other):
        from .ops.elementwise import pow

        return pow(other, self)

    def __getitem__(self, key):
        """Ints, step-1 slices and one ``...`` (see :func:`trellisc.ops.shape.getitem`)."""
        from .ops.shape import getitem

        return getitem(self, key)

    def sum(self, axis=None, keepdim=False):
        """Same as :func:`trellisc.sum`."""
        from .ops.reduction import sum

        return sum(self, axis, keepdim)

    def mean(self, axis=None, keepdim=False):
        """Same as :func:`trellisc.mean`."""
        from .ops.reduction import mean

        return mean(self, axis, keepdim)

    def max(self, axis=None, keepdim=False):
        """Same as :func:`trellisc.max`."""
        from .ops.reduction import max

        return max(self, axis, keepdim)

    def reshape(self, shape):
        """Same as :func:`trellisc.reshape`."""
        from .ops.shape import reshape

        return reshape(self, shape)

    def permute(self, perm):
        """Same as :func:`trellisc.permute`."""
        from .ops.shape import permute

        return permute(self, perm)

    def cast(self, dtype):
        """Same as :func:`trellisc.cast`."""
        from .ops.shape import cast

        return cast(self, dtype)


def as_tensor(x, like=None):
    """A Tensor for x; Python numbers become scalar constants of like's dtype."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        dtype = like.dtype if like is not None else _dt.float32
        node = Node(
            "constant",
            attrs={
                "dtype": dtype.code,
                "shape": [],
                "values": [float(x) if dtype.code[0] == "f" else int(x)],
            },
            loc=user_location(current_module()),
            dtypes=[dtype],
        )
        return Tensor._make(node)
    if isinstance(x, (np.ndarray, list, tuple)):
        t = Tensor.__new__(Tensor)
        Tensor.__init__(t, x, like.dtype if like is not None and isinstance(x, (list, tuple)) else None)
        return t
    raise TypeError(f"expected a trellisc Tensor, found {type(x).__name__}")


def make_op(op, inputs, attrs=None, dtype=None, n_out=1):
    """Records op `op` on `inputs` at the user's current line."""
    inputs = list(inputs)
    out_dtype = dtype if dtype is not None else inputs[0].dtype
    node = Node(op, inputs, attrs, n_out, user_location(current_module()), [out_dtype] * n_out)
    if n_out == 1:
        return Tensor._make(node)
    return [Tensor._make(node, i) for i in range(n_out)]


def _collect(outputs):
    """The graph behind `outputs`: (inputs, data, ops) in trace order."""
    seen, order = set(), []
    stack = [(t._node, False) for t in reversed(outputs)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for t in reversed(node.inputs):
            if id(t._node) not in seen:
                stack.append((t._node, False))
    inputs = sorted((n for n in order if n.op == "input"), key=lambda n: n.index)
    data = [n for n in order if n.op == "data"]
    ops = [n for n in order if n.op not in ("input", "data")]
    return inputs, data, ops


class Trace:
    """The JSON trace of a graph plus what is needed to run it."""

    def __init__(self, outputs, inputs, name="main", loc=None):
        found, data, ops = _collect(outputs)
        known = {id(n) for n in inputs}
        for n in found:
            if id(n) not in known:
                raise TrellisError("the function uses an input placeholder of another trace", n.loc)
        self.locs, self._loc_ids, self.weights = [], {}, {}
        ids = {}
        trace_inputs, trace_weights, trace_ops = [], [], []
        for node in inputs:
            ids[(id(node), 0)] = len(ids)
            info = node.info
            trace_inputs.append(
                {
                    "name": info.name or f"input{node.index}",
                    "dtype": info.dtype.code,
                    "shape": info.trace_shape(),
                    "bounds": info.bounds(),
                    "loc": self._loc(node.loc),
                }
            )
        used_names = set()
        for node in data:
            ids[(id(node), 0)] = len(ids)
            wname = node.name or f"const.{len(trace_weights)}"
            base, k = wname, 1
            while wname in used_names:
                wname, k = f"{base}_{k}", k + 1
            used_names.add(wname)
            self.weights[("params", wname)] = node.value
            trace_weights.append(
                {
                    "name": wname,
                    "dtype": node.dtypes[0].code,
                    "shape": list(node.value.shape),
                    "loc": self._loc(node.loc),
                }
            )
        for node in ops:
            rec = {
                "op": node.op,
                "in": [ids[(id(t._node), t._index)] for t in node.inputs],
                "loc": self._loc(node.loc),
            }
            if node.attrs:
                rec["attrs"] = node.attrs
            if node.n_out != 1:
                rec["n_out"] = node.n_out
            for i in range(node.n_out):
                ids[(id(node), i)] = len(ids)
            trace_ops.append(rec)
        self.nodes = [n for n in inputs] + data + ops
        self.output_ids = [ids[(id(t._node), t._index)] for t in outputs]
        self.json = {
            "format": "trellisc-trace",
            "version": 1,
            "name": name,
            "source": outputs[0]._node.loc.file if outputs and outputs[0]._node.loc else "<python>",
            "locs": self.locs,
            "inputs": trace_inputs,
            "weights": trace_weights,
            "ops": trace_ops,
            "outputs": self.output_ids,
        }
        where = loc or (outputs[0]._node.loc if outputs else None)
        if where is not None:
            self.json["loc"] = self._loc(where)
        self._ids = ids

    def _loc(self, loc):
        if loc is None:
            loc = SourceLoc("<unknown>", 0)
        key = (loc.file, loc.line, loc.col, loc.module)
        if key not in self._loc_ids:
            self._loc_ids[key] = len(self.locs)
            self.locs.append(
                {
                    "file": loc.file,
                    "line": loc.line,
                    "col": loc.col,
                    "end_col": loc.end_col,
                    "module": loc.module,
                }
            )
        return self._loc_ids[key]

    def record_types(self, info):
        """Stores inferred types on the nodes (values in id order)."""
        values = info.get("values", [])
        by_node = {}
        for (node_id, index), vid in self._ids.items():
            by_node.setdefault(node_id, {})[index] = values[vid] if vid < len(values) else None
        for node in self.nodes:
            got = by_node.get(id(node))
            if got and all(v is not None for v in got.values()):
                node.types = [got[i] for i in range(node.n_out)]

    def errors(self, diagnostics):
        """TrellisError for the compiler's diagnostics (user locations)."""
        errors = []
        for d in diagnostics:
            if d["severity"] != "error":
                continue
            loc = None
            if d.get("file") and d.get("line"):
                end_col = None
                for l in self.locs:
                    if (l["file"], l["line"], l["col"]) == (d["file"], d["line"], d["column"]):
                        end_col = l["end_col"]
                loc = SourceLoc(d["file"], d["line"], d["column"], end_col, d.get("module", ""))
            errors.append(TrellisError(user_terms(d["message"]), loc))
        if not errors:
            errors.append(TrellisError("the compiler failed without a diagnostic"))
        return combine(errors)


def _infer(tensors):
    """Asks the compiler for the types of everything behind `tensors`."""
    inputs, _, _ = _collect(tensors)
    trace = Trace(tensors, inputs, name="infer")
    result = _native.compile_trace(trace.json, {"target": "cpu", "infer_only": True})
    if result.code == 2:
        raise TrellisError(
            "internal error in the trace: " + "; ".join(d["message"] for d in result.diagnostics)
        )
    trace.record_types(result.info)
    if result.code != 0:
        raise trace.errors(result.diagnostics)
