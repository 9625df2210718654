"""DINOv2 ViT with registers as TRELLIS runs it, in NumPy float64, from the image conditioning spec
(shared/spec/TRELLIS-v1-image-conditioning.md §2, Hugging Face's tensor names §3.2): an independent reference for
the compiled image_stage. Written from the spec, not from our C++ builder.
"""

import math

import numpy as np


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _layer_norm(x, eps, w=None, b=None):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    return y * w + b if w is not None else y


def forward(weights, config, image):
    """image: float [N, 3, S, S] (normalized) -> cond float64 [N, 1 + R + G², C] (§2.5)."""
    w = {k: np.asarray(v, np.float64) for k, v in weights.items()}
    c, heads = config["hidden_size"], config["num_attention_heads"]
    p, eps = config["patch_size"], config["layer_norm_eps"]
    x = np.asarray(image, np.float64)
    n, _, s, _ = x.shape
    g = s // p
    # §2.3.1: Conv2d(k = stride = P) over patches p = G·row + col.
    pw = w["embeddings.patch_embeddings.projection.weight"]
    patches = np.zeros((n, g * g, c))
    for row in range(g):
        for col in range(g):
            window = x[:, :, row * p : (row + 1) * p, col * p : (col + 1) * p]
            patches[:, row * g + col] = np.einsum("nchw,ochw->no", window, pw)
    patches += w["embeddings.patch_embeddings.projection.bias"]
    pos = w["embeddings.position_embeddings"][0]
    cls = np.broadcast_to(w["embeddings.cls_token"][0] + pos[:1], (n, 1, c))
    reg = np.broadcast_to(
        w["embeddings.register_tokens"][0], (n,) + w["embeddings.register_tokens"].shape[1:]
    )
    h = np.concatenate([cls, reg, patches + pos[1:]], axis=1)  # §2.3.3: registers get no position
    d = c // heads
    for i in range(config["num_hidden_layers"]):
        l = f"encoder.layer.{i}."
        y = _layer_norm(h, eps, w[l + "norm1.weight"], w[l + "norm1.bias"])

        def proj(name):
            t = y @ w[l + f"attention.attention.{name}.weight"].T + w[l + f"attention.attention.{name}.bias"]
            return t.reshape(n, -1, heads, d).transpose(0, 2, 1, 3)

        q, k, v = proj("query"), proj("key"), proj("value")
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        a = (scores / scores.sum(-1, keepdims=True)) @ v
        a = a.transpose(0, 2, 1, 3).reshape(n, -1, c)
        a = a @ w[l + "attention.output.dense.weight"].T + w[l + "attention.output.dense.bias"]
        h = h + w[l + "layer_scale1.lambda1"] * a
        y = _layer_norm(h, eps, w[l + "norm2.weight"], w[l + "norm2.bias"])
        y = y @ w[l + "mlp.fc1.weight"].T + w[l + "mlp.fc1.bias"]
        y = 0.5 * y * (1.0 + _erf(y / math.sqrt(2.0)))  # nn.GELU(): the erf form (§2.4)
        y = y @ w[l + "mlp.fc2.weight"].T + w[l + "mlp.fc2.bias"]
        h = h + w[l + "layer_scale2.lambda1"] * y
    # x_prenorm (DINOv2's own final norm unused) through TRELLIS's LayerNorm: no affine, eps 1e-5.
    return _layer_norm(h, 1e-5)
