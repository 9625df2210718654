"""``tc.Module`` and ``tc.Parameter``: named parameters, safetensors."""
import json
import mmap

import numpy as np

from . import dtypes as _dt
from ._errors import TrellisError, user_location
from ._trace import Node, Tensor, _module_stack
from .ops.linalg import linear
from .ops.embedding import embedding
from .ops.normalization import group_norm, layer_norm


class Parameter(Tensor):
    """A named tensor of a :class:`Module`, passed to the compiled program
    as a weight (so new values need no recompile of the graph).

    >>> p = tc.Parameter(np.zeros((2, 2), np.float32))
    >>> p.shape
    (2, 2)
    """

    def __init__(self, data=None, shape=None, dtype=_dt.float32):
        if data is None:
            data = np.zeros(shape, dtype.numpy)
        array = np.ascontiguousarray(np.asarray(data))
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        node = Node("data", loc=user_location(), dtypes=[_dt.from_numpy(array.dtype)])
        node.value = array
        self._node, self._index = node, 0
        self._owner, self._attr = None, None

    @property
    def name(self):
        """The dotted name in the module tree ("fc1.weight")."""
        if self._owner is None:
            return None
        prefix = self._owner._qualname()
        return f"{prefix}.{self._attr}" if prefix else self._attr

    def _set(self, array, what):
        array = np.asarray(array)
        old = self._node.value
        if array.shape != old.shape or array.dtype != old.dtype:
            raise TrellisError(
                f"{what} is {array.dtype.name} {list(array.shape)}, "
                f"the module declares {old.dtype.name} "
                f"{list(old.shape)}",
                self._node.loc,
            )
        self._node.value = np.ascontiguousarray(array)


class Module:
    """Base class of models: assign :class:`Parameter` and ``Module``
    attributes in ``__init__``, compute in ``forward``. Ops traced inside a
    module name its path (``"block.fc1"``) in errors.

    >>> class Scale(tc.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.s = tc.Parameter(np.full(2, 3.0, np.float32))
    ...     def forward(self, x):
    ...         return x * self.s
    >>> m = Scale()
    >>> [n for n, _ in m.named_parameters()]
    ['s']
    >>> m(tc.Tensor([1.0, 2.0])).eval()
    array([3., 6.], dtype=float32)
    """

    def __init__(self):
        object.__setattr__(self, "_params", {})
        object.__setattr__(self, "_children", {})
        object.__setattr__(self, "_parent", None)
        object.__setattr__(self, "_attr", None)

    def __setattr__(self, name, value):
        if "_params" not in self.__dict__:
            Module.__init__(self)
        if isinstance(value, Parameter):
            value._owner, value._attr = self, name
            value._node.name = None
            self._params[name] = value
        elif isinstance(value, Module):
            object.__setattr__(value, "_parent", self)
            object.__setattr__(value, "_attr", name)
            self._children[name] = value
        object.__setattr__(self, name, value)

    def _qualname(self):
        parts, m = [], self
        while m is not None and m._attr is not None:
            parts.append(m._attr)
            m = m._parent
        return ".".join(reversed(parts))

    def named_parameters(self):
        """(dotted name, Parameter) pairs, depth first."""
        for name, p in self._params.items():
            p._node.name = p.name
            yield p.name, p
        for child in self._children.values():
            yield from child.named_parameters()

    def state_dict(self):
        """{name: NumPy array}."""
        return {n: p._node.value for n, p in self.named_parameters()}

    def load_state_dict(self, state, strict=True):
        """Sets parameters from {name: array}; shapes and dtypes must match.
        ``strict``: every parameter must be given and no other name."""
        params = dict(self.named_parameters())
        if strict:
            missing = sorted(set(params) - set(state))
            extra = sorted(set(state) - set(params))
            if missing or extra:
                raise TrellisError(
                    "load_state_dict: "
                    + (f"missing {missing}" if missing else "")
                    + ("; " if missing and extra else "")
                    + (f"unexpected {extra}" if extra else ""),
                    user_location(),
                )
        for name, array in state.items():
            if name in params:
                params[name]._set(array, f"'{name}'")

    def load_safetensors(self, path, strict=True):
        """Loads parameters from a .safetensors file (mapped, not read whole)."""
        self.load_state_dict(read_safetensors(path), strict=strict)

    def __call__(self, *args, **kwargs):
        for _ in self.named_parameters():
            pass  # names for the trace
        _module_stack.append(self._qualname() or "")
        try:
            return self.forward(*args, **kwargs)
        finally:
            _module_stack.pop()

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}.forward")


class ModuleList(Module):
    """Sub-modules named ``0``, ``1``, ... (``blocks.3.fc.weight``), as PyTorch's ``nn.ModuleList``.

    >>> blocks = tc.ModuleList([tc.Linear(2, 2), tc.Linear(2, 2)])
    >>> [n for n, _ in blocks.named_parameters()]
    ['0.weight', '0.bias', '1.weight', '1.bias']
    """

    def __init__(self, modules=()):
        super().__init__()
        self._items = []
        for m in modules:
            self.append(m)

    def append(self, module):
        if not isinstance(module, Module):
            raise TrellisError(
                f"ModuleList takes tc.Module items, found {type(module).__name__}", user_location()
            )
        setattr(self, str(len(self._items)), module)
        self._items.append(module)
        return self

    def __getitem__(self, i):
        return self._items[i]

    def __len__(self):
        return len(self._items)

    def __iter__(self):
        return iter(self._items)


class Sequential(ModuleList):
    """Applies its modules in order: ``Sequential(a, b)(x) == b(a(x))``.

    >>> seq = tc.Sequential(tc.Linear(2, 3), tc.Linear(3, 1))
    >>> seq(tc.Tensor(np.ones((1, 2), np.float32))).shape
    (1, 1)
    """

    def __init__(self, *modules):
        super().__init__(modules)

    def forward(self, x):
        for m in self._items:
            x = m(x)
        return x


class Linear(Module):
    """``x @ weight.T + bias`` with ``weight [out, in]``, ``bias [out]``.

    >>> fc = tc.Linear(3, 2)
    >>> fc(tc.Tensor(np.ones((1, 3), np.float32))).shape
    (1, 2)
    """

    def __init__(self, in_features, out_features, bias=True, dtype=_dt.float32):
        super().__init__()
        self.weight = Parameter(shape=(out_features, in_features), dtype=dtype)
        self.bias = Parameter(shape=(out_features,), dtype=dtype) if bias else None

    def forward(self, x):
        return linear(x, self.weight, self.bias)


class LayerNorm(Module):
    """LayerNorm over the last dimension with f32 ``weight``/``bias`` [C].

    >>> tc.LayerNorm(2)(tc.Tensor([[1.0, 3.0]])).eval().round(3)
    array([[-1.,  1.]], dtype=float32)
    """

    def __init__(self, channels, eps=1e-5):
        super().__init__()
        self.weight = Parameter(np.ones(channels, np.float32))
        self.bias = Parameter(np.zeros(channels, np.float32))
        self.eps = eps

    def forward(self, x):
        return layer_norm(x, self.weight, self.bias, self.eps)


class GroupNorm(Module):
    """GroupNorm of ``[N, C, *]`` with ``weight``/``bias`` [C] (ones / zeros) in ``dtype``.

    >>> tc.GroupNorm(2, 4)(tc.Tensor(np.array([[[1.0], [3.0], [5.0], [9.0]]], np.float32))).shape
    (1, 4, 1)
    """

    def __init__(self, num_groups, channels, eps=1e-5, dtype=_dt.float32):
        super().__init__()
        self.weight = Parameter(np.ones(channels, dtype.numpy))
        self.bias = Parameter(np.zeros(channels, dtype.numpy))
        self.num_groups, self.eps = num_groups, eps

    def forward(self, x):
        return group_norm(x, self.num_groups, self.weight, self.bias, self.eps)


class Embedding(Module):
    """A lookup table ``weight [num, dim]``: ``forward(indices)`` is :func:`trellisc.embedding`.

    >>> tc.Embedding(10, 4)(tc.Tensor(np.array([1, 2, 3], np.int32))).shape
    (3, 4)
    """

    def __init__(self, num_embeddings, embedding_dim, dtype=_dt.float32):
        super().__init__()
        self.weight = Parameter(shape=(num_embeddings, embedding_dim), dtype=dtype)

    def forward(self, indices):
        return embedding(indices, self.weight)


_ST_DTYPES = {
    "F32": np.float32,
    "F16": np.float16,
    "I32": np.int32,
    "I64": np.int64,
    "U8": np.uint8,
    "BF16": None,
}


def read_safetensors(path):
    """{name: read-only NumPy array mapped from the file}."""
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    n = int.from_bytes(mm[:8], "little")
    header = json.loads(mm[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        dt = _ST_DTYPES.get(e["dtype"])
        if dt is None:
            raise TrellisError(
                f"{path}: tensor '{name}' has dtype {e['dtype']}, " f"which trellisc cannot load"
            )
        begin, end = e["data_offsets"]
        out[name] = np.frombuffer(
            mm, dtype=dt, count=(end - begin) // np.dtype(dt).itemsize, offset=base + begin
        ).reshape(e["shape"])
    return out
