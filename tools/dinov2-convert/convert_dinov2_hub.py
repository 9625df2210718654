#!/usr/bin/env python3
"""Converts DINOv2's torch-hub checkpoint (dinov2_vitl14_reg4_pretrain.pth, the model TRELLIS loads through
torch.hub) into the Hugging Face dinov2-with-registers folder trellisc reads: config.json + model.safetensors,
f32, with the renames of the image conditioning spec §3.3 (q/k/v cut out of the fused qkv rows; values unchanged).

    tools/dinov2-convert/convert_dinov2_hub.py dinov2_vitl14_reg4_pretrain.pth MODEL_DIR/image_cond_model
    tools/dinov2-convert/convert_dinov2_hub.py hub_names.safetensors OUT_DIR

A .pth needs PyTorch (torch.load) on the machine that converts; trellisc and trellis.exe never do. A .safetensors
with the hub's tensor names needs only NumPy. The number of heads is not in the tensors: --heads (default: 16,
ViT-L; the tiny test model has 2).
"""

import argparse
import json
import os
import re
import sys

import numpy as np


def read_safetensors(path):
    data = open(path, "rb").read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    dtypes = {"F16": np.float16, "BF16": None, "F32": np.float32, "F64": np.float64}
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        dt = dtypes.get(e["dtype"])
        if dt is None:
            sys.exit(f"{path}: tensor {name!r} is {e['dtype']}; expected F16, F32 or F64")
        a, b = e["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + a : 8 + n + b], dtype=dt).reshape(e["shape"])
    return out


def write_safetensors(path, tensors):
    """The layout Python's safetensors library writes (sorted names, 8-byte aligned header), f32."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype=np.float32)
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def read_hub(path):
    if path.endswith(".safetensors"):
        return read_safetensors(path)
    try:
        import torch  # only for a .pth
    except ImportError:
        sys.exit(f"{path}: reading a .pth needs PyTorch; on a machine with it, or give a .safetensors")
    state = torch.load(path, map_location="cpu", weights_only=True)
    return {k: v.float().numpy() for k, v in state.items()}


def hub_to_hf(hub):
    """Spec §3.3, tensor by tensor; every hub tensor must be used."""
    out, used = {}, set()

    def take(src, dst, value=None):
        if src not in hub:
            sys.exit(f"the checkpoint has no tensor {src!r}: expected DINOv2's torch-hub names (spec §3.1)")
        out[dst] = hub[src] if value is None else value
        used.add(src)

    for name in ("cls_token", "mask_token", "register_tokens"):
        take(name, "embeddings." + name)
    take("pos_embed", "embeddings.position_embeddings")
    for p in ("weight", "bias"):
        take(f"patch_embed.proj.{p}", f"embeddings.patch_embeddings.projection.{p}")
        take(f"norm.{p}", f"layernorm.{p}")
    layers = sorted({int(m.group(1)) for k in hub for m in [re.match(r"blocks\.(\d+)\.", k)] if m})
    if layers != list(range(len(layers))):
        sys.exit(f"expected blocks.0 .. blocks.N-1, found {layers}")
    for i in layers:
        b, l = f"blocks.{i}.", f"encoder.layer.{i}."
        for p in ("weight", "bias"):
            for n in ("norm1", "norm2", "mlp.fc1", "mlp.fc2"):
                take(b + f"{n}.{p}", l + f"{n}.{p}")
            if b + f"attn.qkv.{p}" not in hub:
                sys.exit(f"the checkpoint has no tensor {b + f'attn.qkv.{p}'!r}")
            qkv = hub[b + f"attn.qkv.{p}"]
            c = qkv.shape[0] // 3
            for k, part in enumerate(("query", "key", "value")):
                take(b + f"attn.qkv.{p}", l + f"attention.attention.{part}.{p}", qkv[k * c : (k + 1) * c])
            take(b + f"attn.proj.{p}", l + f"attention.output.dense.{p}")
        take(b + "ls1.gamma", l + "layer_scale1.lambda1")
        take(b + "ls2.gamma", l + "layer_scale2.lambda1")
    unused = sorted(set(hub) - used)
    if unused:
        sys.exit(f"unexpected tensors in the hub checkpoint: {unused[:5]}")
    return out, len(layers)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint", help="the hub state dict: .pth (needs PyTorch) or .safetensors")
    ap.add_argument("out_dir", help="where config.json and model.safetensors go (created)")
    ap.add_argument("--heads", type=int, default=16, help="attention heads (16 for ViT-L/14)")
    a = ap.parse_args()
    hf, layers = hub_to_hf(read_hub(a.checkpoint))
    c = hf["embeddings.cls_token"].shape[-1]
    grid2 = hf["embeddings.position_embeddings"].shape[1] - 1
    patch = hf["embeddings.patch_embeddings.projection.weight"].shape[-1]
    if c % a.heads:
        sys.exit(f"--heads {a.heads} does not divide the width {c}")
    config = {
        "architectures": ["Dinov2WithRegistersModel"],
        "model_type": "dinov2_with_registers",
        "hidden_size": c,
        "num_hidden_layers": layers,
        "num_attention_heads": a.heads,
        "mlp_ratio": hf["encoder.layer.0.mlp.fc1.weight"].shape[0] // c,
        "hidden_act": "gelu",
        "layer_norm_eps": 1e-6,
        "image_size": int(round(grid2**0.5)) * patch,
        "patch_size": patch,
        "num_channels": 3,
        "num_register_tokens": hf["embeddings.register_tokens"].shape[1],
        "qkv_bias": True,
        "use_swiglu_ffn": False,
        "layerscale_value": 1.0,
        "torch_dtype": "float32",
    }
    os.makedirs(a.out_dir, exist_ok=True)
    with open(os.path.join(a.out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(a.out_dir, "model.safetensors"), hf)
    print(f"{a.out_dir}: config.json, model.safetensors ({len(hf)} tensors, {layers} blocks, width {c})")


if __name__ == "__main__":
    main()
