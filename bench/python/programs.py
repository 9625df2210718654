"""The traced programs of bench/python: a TRELLIS transformer block's attention half and MLP half at image-large
sizes (1024 channels, 16 heads of 64, 4096 tokens, fp16 as TRELLIS runs its blocks; the weights are tc.Module
parameters, staged once), and a small program for the per-call overhead. The same math in PyTorch is in
run_device.py; params() gives both the same values."""
import numpy as np

import trellisc as tc

C, HEADS, TOKENS, HIDDEN = 1024, 16, 4096, 4096
F16 = tc.float16


class AttentionHalf(tc.Module):
    """x + out(attention(qkv(layer_norm(x))))."""

    def __init__(self):
        super().__init__()
        self.qkv = tc.Linear(C, 3 * C, dtype=F16)
        self.out = tc.Linear(C, C, dtype=F16)

    def forward(self, x):
        q, k, v = tc.split(self.qkv(tc.layer_norm(x, eps=1e-6)), [C, C, C], axis=-1)
        shape = (1, TOKENS, HEADS, C // HEADS)
        o = tc.attention(q.reshape(shape), k.reshape(shape), v.reshape(shape))
        return x + self.out(o.reshape((1, TOKENS, C)))


class MlpHalf(tc.Module):
    """x + fc2(gelu_tanh(fc1(layer_norm(x))))."""

    def __init__(self):
        super().__init__()
        self.fc1 = tc.Linear(C, HIDDEN, dtype=F16)
        self.fc2 = tc.Linear(HIDDEN, C, dtype=F16)

    def forward(self, x):
        return x + self.fc2(tc.gelu(self.fc1(tc.layer_norm(x, eps=1e-6))))


class Small(tc.Module):
    def __init__(self):
        super().__init__()
        self.fc = tc.Linear(64, 128, bias=False)

    def forward(self, x):
        return tc.gelu(self.fc(x)) * 2.0


def log_of(x):
    """NaN for negative inputs: with check_finite the run stops at this op, naming this line."""
    return tc.log(x) * 2.0


PROGRAMS = {
    "attention": (AttentionHalf, ((1, TOKENS, C), F16)),
    "mlp": (MlpHalf, ((1, TOKENS, C), F16)),
    "small": (Small, ((4, 64), tc.float32)),
}


def params(module, seed=0):
    """{name: array}: weights ~ N(0, 1/fan_in), biases ~ N(0, 0.02²), in the parameters' dtypes."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, p in module.named_parameters():
        scale = 1.0 / np.sqrt(p.shape[-1]) if len(p.shape) == 2 else 0.02
        out[name] = (rng.standard_normal(p.shape) * scale).astype(p.dtype.numpy)
    return out


def example_input(name, seed=1):
    shape, dtype = PROGRAMS[name][1]
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype.numpy)
