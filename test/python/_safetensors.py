"""A minimal safetensors reader for the tests, independent of the C++ one (F16 and F32 tensors)."""

import json
from pathlib import Path

import numpy as np


def read_safetensors(path):
    data = Path(path).read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        dt = {"F16": np.float16, "F32": np.float32}[e["dtype"]]
        out[name] = np.frombuffer(data[8 + n + a : 8 + n + b], dtype=dt).reshape(e["shape"])
    return out
