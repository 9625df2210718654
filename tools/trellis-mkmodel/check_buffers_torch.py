#!/usr/bin/env python3
"""Cross-checks a trellis-mkmodel directory with PyTorch and safetensors.

Loads every checkpoint with the reference safetensors library, recomputes
pos_emb and offset_perturbation exactly as TRELLIS's code does in torch
(AbsolutePositionEmbedder; SLatGaussianDecoder._build_perturbation; spec
Appendix C checks 2 and 3) and compares them with the stored buffers, and
counts zeros in the learned tensors (there must be none).

    python3 check_buffers_torch.py MODEL_DIR
"""
import sys, json, torch, numpy as np
from safetensors.torch import load_file

d = sys.argv[1]
pipe = json.load(open(f"{d}/pipeline.json"))["args"]["models"]
ss = load_file(f"{d}/{pipe['sparse_structure_flow_model']}.safetensors")
args = json.load(open(f"{d}/{pipe['sparse_structure_flow_model']}.json"))["args"]
# TRELLIS AbsolutePositionEmbedder, as in trellis/modules/transformer/blocks.py
C, R = args["model_channels"], args["resolution"] // args["patch_size"]
F_ = C // 3 // 2
freqs = torch.arange(F_, dtype=torch.float32) / F_
freqs = 1.0 / (10000**freqs)
coords = torch.stack(torch.meshgrid(*[torch.arange(R)] * 3, indexing="ij"), -1).reshape(-1, 3)
x = coords.reshape(-1)
out = torch.outer(x, freqs)
emb = torch.cat([torch.sin(out), torch.cos(out)], -1).reshape(coords.shape[0], -1)
emb = torch.cat([emb, torch.zeros(coords.shape[0], C - emb.shape[1])], -1)
pe = ss["pos_emb"]
print(
    "pos_emb",
    tuple(pe.shape),
    pe.dtype,
    "exact",
    (pe == emb).float().mean().item(),
    "max|diff|",
    (pe - emb).abs().max().item(),
)
if "slat_decoder_gs" in pipe:
    gs = load_file(f"{d}/{pipe['slat_decoder_gs']}.safetensors")
    rep = json.load(open(f"{d}/{pipe['slat_decoder_gs']}.json"))["args"]["representation_config"]

    def radinv(b, n):
        v, inv = 0, 1.0 / b
        f = inv
        while n > 0:
            v += (n % b) * f
            n //= b
            f *= inv
        return v

    G = rep["num_gaussians"]
    p = torch.tensor([[n / G, radinv(2, n), radinv(3, n)] for n in range(G)]).float() * 2 - 1
    p = torch.atanh(p / rep["voxel_size"])
    op = gs["offset_perturbation"]
    print(
        "offset_perturbation",
        tuple(op.shape),
        "exact",
        (op == p).float().mean().item(),
        "max|diff|",
        (op - p).abs().max().item(),
    )
zeros = 0
for key, rel in pipe.items():
    t = load_file(f"{d}/{rel}.safetensors")
    for n, v in t.items():
        if n in ("pos_emb", "offset_perturbation"):
            continue
        zeros += int((v == 0).sum())
print("zeros in learned tensors of all checkpoints:", zeros)
