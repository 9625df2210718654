#!/usr/bin/env python3
"""PyTorch form of TRELLIS's image-conditioning model (DINOv2 ViT-L/14 with registers, the tokens TRELLIS keeps),
from Hugging Face's ``model.safetensors`` layout (issue 26, bench/image_gpu).

Written from shared/spec/TRELLIS-v1-image-conditioning.md §2-§3.2 (not from DINOv2 or transformers code): the
patch embedding as a stride-14 conv, CLS + position, 4 registers without position, 24 pre-norm blocks with
LayerScale and the exact (erf) GELU, then a LayerNorm without affine parameters (eps 1e-5) over the last block's
tokens.

  dinov2.py --model-dir DIR --image cond_image.npy --out-tokens ref.npy   # the f32 reference (parity)
  dinov2.py --model-dir DIR --bench [--reps 20] [--compile]               # eager / torch.compile timings

``--image`` takes the preprocessed uint8 [N, 518, 518, 3] images trellis.exe writes with ``--save-cond``
(cond_image.npy), normalized here as spec §1.6 says. The reference runs in IEEE f32: TF32 off for matmuls and
convolutions, attention as an explicit f32 softmax. The timings run the same math as PyTorch would by default
(f32, cuDNN TF32 on, matmul TF32 off, SDPA), then with matmul TF32 on (trellisc's GEMM precision), eager and
(``--compile``) torch.compile, each timed with CUDA events after warm-up, medians.
"""
import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from trellisc import read_safetensors  # noqa: E402  (NumPy only; no native library is loaded)

MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def read_weights(path):
    """{name: f32 tensor on the GPU} of a safetensors file (trellisc's reader: mapped, then copied)."""
    return {k: torch.from_numpy(a.astype(np.float32)).cuda() for k, a in read_safetensors(path).items()}


def normalize(rgb):
    """Spec §1.6: uint8 [N, S, S, 3] -> f32 [N, 3, S, S], (x / 255 - mean) / std in float32."""
    x = rgb.astype(np.float32) / np.float32(255)
    x = (x - MEAN) / STD
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def attention(q, k, v, exact):
    if exact:
        s = (q @ k.transpose(-1, -2)) * (q.shape[-1] ** -0.5)
        return torch.softmax(s, dim=-1) @ v
    return F.scaled_dot_product_attention(q, k, v)


def block(h, W, p, cfg, exact):
    c, heads, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    n, t, d = h.shape[0], h.shape[1], c // heads
    y = F.layer_norm(h, (c,), W[p + "norm1.weight"], W[p + "norm1.bias"], eps)

    def heads_of(name):
        w = W[p + f"attention.attention.{name}.weight"]
        b = W[p + f"attention.attention.{name}.bias"]
        return F.linear(y, w, b).view(n, t, heads, d).transpose(1, 2)

    a = attention(heads_of("query"), heads_of("key"), heads_of("value"), exact)
    a = a.transpose(1, 2).reshape(n, t, c)
    a = F.linear(a, W[p + "attention.output.dense.weight"], W[p + "attention.output.dense.bias"])
    h = h + a * W[p + "layer_scale1.lambda1"]
    y = F.layer_norm(h, (c,), W[p + "norm2.weight"], W[p + "norm2.bias"], eps)
    y = F.gelu(F.linear(y, W[p + "mlp.fc1.weight"], W[p + "mlp.fc1.bias"]))
    y = F.linear(y, W[p + "mlp.fc2.weight"], W[p + "mlp.fc2.bias"])
    return h + y * W[p + "layer_scale2.lambda1"]


def forward(x, W, cfg, exact=False):
    """x f32 [N, 3, S, S] -> cond [N, 1 + R + G², C]."""
    c, patch = cfg["hidden_size"], cfg["patch_size"]
    n = x.shape[0]
    h = F.conv2d(
        x,
        W["embeddings.patch_embeddings.projection.weight"],
        W["embeddings.patch_embeddings.projection.bias"],
        stride=patch,
    )
    h = h.flatten(2).transpose(1, 2)
    pos = W["embeddings.position_embeddings"]
    cls = (W["embeddings.cls_token"] + pos[:, :1]).expand(n, -1, -1)
    parts = [cls]
    if cfg.get("num_register_tokens", 0):
        parts.append(W["embeddings.register_tokens"].expand(n, -1, -1))
    h = torch.cat(parts + [h + pos[:, 1:]], 1)
    for i in range(cfg["num_hidden_layers"]):
        h = block(h, W, f"encoder.layer.{i}.", cfg, exact)
    return F.layer_norm(h, (c,), eps=1e-5)


def set_tf32(matmul, cudnn):
    torch.backends.cuda.matmul.allow_tf32 = matmul
    torch.backends.cudnn.allow_tf32 = cudnn


def time_ms(fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times), min(times), max(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-dir", required=True, help="folder with config.json and model.safetensors")
    ap.add_argument("--image", help="uint8 [N, 518, 518, 3] .npy (trellis.exe --save-cond's cond_image.npy)")
    ap.add_argument("--out-tokens", help="write the f32 reference tokens here")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--compile", action="store_true", help="with --bench: also torch.compile")
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    d = Path(a.model_dir)
    cfg = json.loads((d / "config.json").read_text())
    W = read_weights(d / "model.safetensors")
    s = cfg["image_size"]
    if a.image:
        x = torch.from_numpy(normalize(np.load(a.image))).cuda()
    else:
        x = torch.randn(1, 3, s, s, generator=torch.Generator().manual_seed(1)).cuda()
    torch.set_grad_enabled(False)
    if a.out_tokens:
        set_tf32(False, False)
        ref = forward(x, W, cfg, exact=True)
        np.save(a.out_tokens, ref.cpu().numpy())
        set_tf32(True, True)
        tf32 = forward(x, W, cfg)
        rel = (torch.linalg.norm(tf32 - ref) / torch.linalg.norm(ref)).item()
        print(
            f"reference tokens {list(ref.shape)} -> {a.out_tokens}; PyTorch TF32 + SDPA vs it: rel L2 {rel:.3e}"
        )
    if a.bench:
        flops = 2 * sum(w.numel() for k, w in W.items() if k.endswith("weight") and w.dim() >= 2) * x.shape[0]
        t = 1 + cfg.get("num_register_tokens", 0) + (s // cfg["patch_size"]) ** 2
        flops = flops * t + 4 * t * t * cfg["hidden_size"] * cfg["num_hidden_layers"] * x.shape[0]
        print(
            f"device {torch.cuda.get_device_name()}; torch {torch.__version__}; batch {x.shape[0]}; "
            f"{flops / 1e12:.3f} TFLOP per forward"
        )
        rows = []
        for name, matmul in (
            ("eager f32 (PyTorch defaults: matmul TF32 off, cuDNN TF32 on)", False),
            ("eager, matmul TF32 on", True),
        ):
            set_tf32(matmul, True)
            rows.append((name, time_ms(lambda: forward(x, W, cfg), a.reps)))
        if a.compile:
            for name, matmul in (
                ("torch.compile f32 (defaults)", False),
                ("torch.compile, matmul TF32 on", True),
            ):
                set_tf32(matmul, True)
                torch._dynamo.reset()
                compiled = torch.compile(lambda x: forward(x, W, cfg))
                rows.append((name, time_ms(lambda: compiled(x), a.reps)))
        print("| PyTorch | median ms | min / max ms | TFLOP/s |\n|---|---|---|---|")
        for name, (med, lo, hi) in rows:
            print(f"| {name} | {med:.2f} | {lo:.2f} / {hi:.2f} | {flops / med / 1e9:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
