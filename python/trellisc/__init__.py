"""trellisc for Python: trace functions of lazy tensors, compile them with the
trellisc compiler, run them on NumPy arrays.

    import numpy as np
    import trellisc as tc

    def f(x):
        return tc.gelu(x @ w)

    exe = tc.compile(f, args=[tc.InputInfo(((1, 8, 64), 32), tc.float32)])
    y = exe(np.ones((5, 32), np.float32))

The native libraries (libtrellisc.so, libtrellis_rt.so) are loaded from
``$TRELLISC_BUILD_DIR/lib`` (default: the repository's ``build``). See
docs/guide/python.md.
"""
from . import trellis
from ._errors import TrellisError
from ._trace import Tensor, set_eager_target
from .compile import Executable, compile
from .dtypes import dtype, float16, float32, int32, int64
from .input_info import InputInfo
from .module import (
    Embedding,
    GroupNorm,
    LayerNorm,
    Linear,
    Module,
    ModuleList,
    Parameter,
    Sequential,
    read_safetensors,
)
from .ops.attention import attention
from .ops.conditioning import gated_residual, modulate, timestep_embedding
from .ops.conv import conv3d
from .ops.elementwise import (
    abs,
    add,
    cos,
    div,
    equal,
    exp,
    gelu,
    gelu_erf,
    greater,
    less,
    log,
    maximum,
    mul,
    neg,
    pow,
    rsqrt,
    sigmoid,
    silu,
    sin,
    softplus,
    sqrt,
    sub,
    tanh,
    where,
)
from .ops.linalg import linear, matmul
from .ops.embedding import embedding
from .ops.normalization import group_norm, head_rms_norm, layer_norm, softmax
from .ops.reduction import max, mean, sum
from .ops.shape import cast, concat, narrow, permute, reshape, split, transpose

__all__ = [
    "TrellisError",
    "Tensor",
    "set_eager_target",
    "Executable",
    "compile",
    "dtype",
    "float16",
    "float32",
    "int32",
    "int64",
    "InputInfo",
    "Embedding",
    "GroupNorm",
    "LayerNorm",
    "Linear",
    "Module",
    "ModuleList",
    "Parameter",
    "Sequential",
    "read_safetensors",
    "attention",
    "abs",
    "add",
    "div",
    "exp",
    "gelu",
    "log",
    "maximum",
    "mul",
    "neg",
    "sigmoid",
    "silu",
    "sqrt",
    "sub",
    "tanh",
    "sin",
    "cos",
    "softplus",
    "gelu_erf",
    "rsqrt",
    "pow",
    "greater",
    "less",
    "equal",
    "where",
    "timestep_embedding",
    "modulate",
    "gated_residual",
    "conv3d",
    "head_rms_norm",
    "transpose",
    "narrow",
    "linear",
    "matmul",
    "layer_norm",
    "softmax",
    "group_norm",
    "embedding",
    "sum",
    "mean",
    "max",
    "cast",
    "concat",
    "permute",
    "reshape",
    "split",
    "trellis",
]
