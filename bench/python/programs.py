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


class OpsMix(tc.Module):
    """The general ops of Python models in one program, for GPU-vs-CPU parity (not timed): a GroupNorm of a
    conv's output, reductions over several axes, an embedding lookup, comparisons + where, pow, sin."""

    def __init__(self):
        super().__init__()
        self.conv_w = tc.Parameter(shape=(16, 8, 3, 3, 3))
        self.norm = tc.GroupNorm(4, 16)
        self.emb = tc.Embedding(64, 32)

    def forward(self, x):  # x [1, 8, 8, 8, 8] (the GPU conv3d takes batch 1)
        h = tc.silu(self.norm(tc.conv3d(x, self.conv_w)))
        pooled = tc.mean(h, axis=(2, 3, 4))  # [1, 16]
        peak = tc.max(h, axis=1)  # [1, 8, 8, 8]
        idx = tc.Tensor(np.array([[3, 0, 63, 7], [1, 1, 2, 40]], np.int32))
        e = tc.sum(self.emb(idx), axis=1)  # [2, 32]
        mixed = tc.where(tc.greater(e, 0.0), e**2.0, tc.sin(e))
        return pooled, peak, mixed, tc.sum(h)


def embedding_of(indices, table):
    """A lookup with the indices as an input: an index outside the table gives a NaN row on the GPU."""
    return tc.embedding(indices, table)


def log_of(x):
    """NaN for negative inputs: with check_finite the run stops at this op, naming this line."""
    return tc.log(x) * 2.0


PROGRAMS = {
    "attention": (AttentionHalf, ((1, TOKENS, C), F16)),
    "mlp": (MlpHalf, ((1, TOKENS, C), F16)),
    "small": (Small, ((4, 64), tc.float32)),
}
# Programs checked GPU against CPU only (no PyTorch form, not timed).
PARITY = {"ops": (OpsMix, ((1, 8, 8, 8, 8), tc.float32))}


def params(module, seed=0):
    """{name: array}: weights ~ N(0, 1/fan_in), biases ~ N(0, 0.02²), in the parameters' dtypes."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, p in module.named_parameters():
        scale = 1.0 / np.sqrt(p.shape[-1]) if len(p.shape) == 2 else 0.02
        out[name] = (rng.standard_normal(p.shape) * scale).astype(p.dtype.numpy)
    return out


def example_input(name, seed=1):
    shape, dtype = {**PROGRAMS, **PARITY}[name][1]
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype.numpy)
