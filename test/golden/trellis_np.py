"""NumPy implementations of the trellis ops, written from the TRELLIS v1
inference spec (shared/spec/TRELLIS-v1-inference.md), independently of the C++
reference kernels (runtime/reference). They are the source of the golden values
under test/golden/data/.

Structure differs on purpose from the C++: everything is vectorized, float math
runs in float64 (the caller casts the result to the output dtype, which is the
only rounding), sparse convolution goes through a dense grid (spec App. C.4),
partitions use np.unique. Where the spec pins an fp32 computation whose bits
matter at the tolerance we test (frequency tables), it is reproduced in fp32.

Only Debian's numpy is needed (run with /usr/bin/python3).
"""

import math

import numpy as np

F16 = np.float16
F32 = np.float32


def f64(a):
    return np.asarray(a, dtype=np.float64)


def q16(a):
    """fp16 storage point: round to float16, keep computing in float64."""
    return np.asarray(a).astype(F16).astype(np.float64)


# ---------------------------------------------------------------------------
# Dense elementwise (spec §3.6, §8.1)
# ---------------------------------------------------------------------------

_UNARY_F64 = {
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    # §3.6: GELU tanh approximation, 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3))).
    "gelu": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3))),
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "tanh": np.tanh,
    # PyTorch softplus (beta 1, threshold 20): identity above the threshold.
    "softplus": lambda x: np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0)))),
    "atanh": np.arctanh,
    "exp": np.exp,
    "log": np.log,
    "sin": np.sin,
    "cos": np.cos,
    "neg": np.negative,
    "sqrt": np.sqrt,
    "abs": np.abs,
}

# Every formula is evaluated in float64, whatever the input dtype (NumPy would
# otherwise compute float16 inputs in float16).
UNARY = {name: (lambda f: lambda x: f(f64(x)))(fn) for name, fn in _UNARY_F64.items()}

BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "maximum": np.maximum,
}


def linear(x, w, b=None):
    y = f64(x) @ f64(w).T
    if b is not None:
        y = y + f64(b)
    return y


def layer_norm(x, axis, eps, gamma=None, beta=None):
    """Normalize over one axis, biased variance; optional per-entry affine."""
    x = f64(x)
    mean = x.mean(axis=axis, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axis, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    if gamma is not None:
        y = y * f64(gamma).reshape(shape)
    if beta is not None:
        y = y + f64(beta).reshape(shape)
    return y


def head_rms_norm(x, gamma):
    """§3.6: u / max(||u||, 1e-12) * gamma[h] * sqrt(d) over the last axis."""
    x = f64(x)
    d = x.shape[-1]
    n = np.sqrt((x * x).sum(axis=-1, keepdims=True))
    return x / np.maximum(n, 1e-12) * f64(gamma) * math.sqrt(d)


def softmax(x, axis):
    x = f64(x)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def attention(q, k, v, scale):
    """q [B,Lq,H,d], k [B,Lk,H,d], v [B,Lk,H,dv] -> [B,Lq,H,dv]."""
    s = np.einsum("bqhd,bkhd->bhqk", f64(q), f64(k)) * scale
    p = softmax(s, axis=-1)
    return np.einsum("bhqk,bkhe->bqhe", p, f64(v))


def _per_sample(v, x):
    """[B,C] vectors broadcast over the tokens of x [B,L,C]; else same shape."""
    v = f64(v)
    if v.shape == x.shape:
        return v
    assert v.ndim == 2 and x.ndim == 3 and v.shape == (x.shape[0], x.shape[2])
    return v[:, None, :]


def modulate(x, shift, scale):
    x = f64(x)
    return x * (1.0 + _per_sample(scale, x)) + _per_sample(shift, x)


def gated_residual(x, gate, h):
    x = f64(x)
    return x + _per_sample(gate, x) * f64(h)


# ---------------------------------------------------------------------------
# Embeddings (§3.6)
# ---------------------------------------------------------------------------


def timestep_frequencies(dim=256, max_period=10000):
    """f_j = exp(-ln(max_period) * j / half) as TRELLIS forms it in fp32:
    (fp32(-ln P) * j) / half, then exp. exp is evaluated exactly and rounded
    once to fp32 (a correctly rounded fp32 exp)."""
    half = dim // 2
    j = np.arange(half, dtype=F32)
    a = (F32(-math.log(max_period)) * j) / F32(half)
    return np.exp(a.astype(np.float64)).astype(F32)


def timestep_embedding(tau, dim=256, max_period=10000):
    """[cos(tau f), sin(tau f)] (cosine FIRST), fp32; tau already = 1000 t."""
    f = timestep_frequencies(dim, max_period)
    args = np.asarray(tau, dtype=F32)[:, None] * f[None, :]  # fp32 product
    a = args.astype(np.float64)
    emb = np.concatenate([np.cos(a), np.sin(a)], axis=1)
    if dim % 2:
        emb = np.concatenate([emb, np.zeros_like(emb[:, :1])], axis=1)
    return emb


def ape_frequencies(channels):
    """omega_j = 1 / 10000^(j/F), F = floor(C/6), in fp32 (power rounded once)."""
    F = channels // 3 // 2
    r = np.arange(F, dtype=F32) / F32(F)
    p = np.power(10000.0, r.astype(np.float64)).astype(F32)
    return F32(1.0) / p


def ape(pos, channels):
    """pos [L,3] int -> [L,C]: per axis [sin(x w), cos(x w)] (SINE first), zero pad."""
    w = ape_frequencies(channels)
    L = pos.shape[0]
    parts = []
    for axis in range(3):
        arg = (pos[:, axis].astype(F32)[:, None] * w[None, :]).astype(np.float64)
        parts += [np.sin(arg), np.cos(arg)]
    emb = np.concatenate(parts, axis=1)
    pad = channels - emb.shape[1]
    return np.concatenate([emb, np.zeros((L, pad))], axis=1)


# ---------------------------------------------------------------------------
# Dense conv, pixel shuffle, occupancy (§5)
# ---------------------------------------------------------------------------


def conv3d(x, w, b=None, pad=None):
    """Cross-correlation NCDHW, weight [O,I,k,k,k], stride 1, zero padding."""
    x = f64(x)
    w = f64(w)
    k = w.shape[2]
    pad = k // 2 if pad is None else pad
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pad, pad)] * 3)
    B, I, D, H, W = xp.shape
    Do, Ho, Wo = D - k + 1, H - k + 1, W - k + 1
    out = np.zeros((B, w.shape[0], Do, Ho, Wo))
    for a in range(k):
        for bb in range(k):
            for c in range(k):
                win = xp[:, :, a : a + Do, bb : bb + Ho, c : c + Wo]
                out += np.einsum("oi,bidhw->bodhw", w[:, :, a, bb, c], win)
    if b is not None:
        out += f64(b)[None, :, None, None, None]
    return out


def pixel_shuffle_3d(x, s=2):
    """§5.1: out[b,c',s x+s1, s y+s2, s z+s3] = in[b, c' s^3 + s1 s^2 + s2 s + s3, x,y,z]."""
    B, C, D, H, W = x.shape
    Cp = C // s**3
    y = x.reshape(B, Cp, s, s, s, D, H, W)
    y = y.transpose(0, 1, 5, 2, 6, 3, 7, 4)
    return y.reshape(B, Cp, D * s, H * s, W * s)


def occupancy(logits):
    """§5.3: argwhere(logits > 0) without the channel column, int32."""
    idx = np.argwhere(np.asarray(logits) > 0)
    return idx[:, [0, 2, 3, 4]].astype(np.int32)


# ---------------------------------------------------------------------------
# Sampler (§3.2, §3.3)
# ---------------------------------------------------------------------------


def time_grid(steps, rescale_t):
    t = np.linspace(1, 0, steps + 1)
    return rescale_t * t / (1 + (rescale_t - 1) * t)


def guided_steps(grid, lo, hi):
    return [i for i in range(len(grid) - 1) if lo <= grid[i] <= hi]


def model_time(t):
    return np.float32(1000.0 * t)


def cfg_combine(vc, vu, w):
    return (1.0 + w) * f64(vc) - w * f64(vu)


def euler_update(x, v, dt):
    return f64(x) - dt * f64(v)


# ---------------------------------------------------------------------------
# Sparse (§5.4, §6.3, §6.4, §7.1, §7.4)
# ---------------------------------------------------------------------------

# Child offsets of SparseSubdivide (§7.4): z fastest.
CHILDREN = np.array([[dx, dy, dz] for dx in (0, 1) for dy in (0, 1) for dz in (0, 1)], dtype=np.int32)


def random_coords(rng, batch, res, counts):
    """Unique random voxels per sample, sorted lexicographically (argwhere order)."""
    rows = []
    for b in range(batch):
        flat = np.sort(rng.choice(res**3, size=counts[b], replace=False))
        xyz = np.stack(np.unravel_index(flat, (res, res, res)), axis=1)
        rows.append(np.concatenate([np.full((counts[b], 1), b), xyz], axis=1))
    return np.concatenate(rows).astype(np.int32)


def densify(coords, feats, batch, res):
    """Sparse rows -> dense [B, C, R, R, R] grid (zeros elsewhere)."""
    g = np.zeros((batch, feats.shape[1], res, res, res))
    b, x, y, z = coords.T
    g[b, :, x, y, z] = f64(feats)
    return g


def sparse_conv3d(coords, feats, w_krsc, bias, batch, res):
    """Submanifold conv (§6.4) via App. C.4: densify, dense conv with the KRSC
    weight [O,k,k,k,I] permuted to [O,I,k,k,k], sample at the active sites."""
    w = np.transpose(f64(w_krsc), (0, 4, 1, 2, 3))
    dense = conv3d(densify(coords, feats, batch, res), w, bias)
    b, x, y, z = coords.T
    return dense[b, :, x, y, z]


def sparse_conv1x1_spconv(feats, w_krsc, bias):
    """§6.4 quirk: k=1 uses the flat weight buffer viewed as [c_in, c_out]."""
    O, I = w_krsc.shape[0], w_krsc.shape[4]
    M = f64(w_krsc).reshape(-1).reshape(I, O)
    return f64(feats) @ M + f64(bias)


def neighbor_map(coords, k):
    """[N, k^3]: row of (b, x+a-k/2, y+b'-k/2, z+c-k/2) or -1; offset a k^2 + b' k + c."""
    lookup = {tuple(r): i for i, r in enumerate(coords.tolist())}
    N = coords.shape[0]
    offs = np.array([[a, b, c] for a in range(k) for b in range(k) for c in range(k)]) - k // 2
    out = np.full((N, k**3), -1, dtype=np.int32)
    for n, (bb, x, y, z) in enumerate(coords.tolist()):
        for o, (da, db, dc) in enumerate(offs.tolist()):
            out[n, o] = lookup.get((bb, x + da, y + db, z + dc), -1)
    return out


def coarsen(coords):
    """§6.3 steps 1-2: unique floor(c/2) keys in ascending order, and idx."""
    c = coords.astype(np.int64).copy()
    c[:, 1:] //= 2
    M = c[:, 1:].max(axis=0) + 1
    key = c[:, 0] * (M[0] * M[1] * M[2]) + c[:, 1] * (M[1] * M[2]) + c[:, 2] * M[2] + c[:, 3]
    ukey, idx = np.unique(key, return_inverse=True)
    b = ukey // (M[0] * M[1] * M[2])
    r = ukey % (M[0] * M[1] * M[2])
    coarse = np.stack([b, r // (M[1] * M[2]), (r // M[2]) % M[1], r % M[2]], axis=1)
    return coarse.astype(np.int32), idx.astype(np.int32)


def downsample(feats, idx, n_coarse):
    """§6.3 quirk: scatter-mean with include_self on zeros = sum / (n + 1)."""
    s = np.zeros((n_coarse, feats.shape[1]))
    np.add.at(s, idx, f64(feats))
    n = np.bincount(idx, minlength=n_coarse)
    return s / (n + 1)[:, None]


def upsample(coarse_feats, idx):
    return f64(coarse_feats)[idx]


def subdivide_coords(coords):
    b = np.repeat(coords[:, :1], 8, axis=0)
    xyz = (coords[:, None, 1:] * 2 + CHILDREN[None]).reshape(-1, 3)
    return np.concatenate([b, xyz], axis=1).astype(np.int32)


def subdivide_feats(feats):
    return np.repeat(feats, 8, axis=0)


def sparse_group_norm(coords, feats, batch, groups, eps, gamma, beta):
    """§7.4: per sample, groups of C/G channels over all of that sample's rows."""
    feats = f64(feats)
    out = np.zeros_like(feats)
    N, C = feats.shape
    for b in range(batch):
        sel = coords[:, 0] == b
        if not sel.any():
            continue
        g = feats[sel].reshape(-1, groups, C // groups)
        mean = g.mean(axis=(0, 2), keepdims=True)
        var = ((g - mean) ** 2).mean(axis=(0, 2), keepdims=True)
        out[sel] = ((g - mean) / np.sqrt(var + eps)).reshape(-1, C)
    return out * f64(gamma) + f64(beta)


def batch_broadcast(v, coords):
    return f64(v)[coords[:, 0]]


def window_partition(coords, window, shift):
    """§7.1: ids from shifted coords; n_a over ALL rows; groups in ascending id.
    Returns (ids [N], groups: list of row-index arrays (ascending rows))."""
    c = coords.astype(np.int64).copy()
    c[:, 1:] += shift
    n = -(-(c[:, 1:].max(axis=0) + 1) // window)  # ceil
    w = c[:, 1:] // window
    ids = c[:, 0] * (n[0] * n[1] * n[2]) + w[:, 0] * (n[1] * n[2]) + w[:, 1] * n[2] + w[:, 2]
    uniq, inv = np.unique(ids, return_inverse=True)
    groups = [np.nonzero(inv == g)[0] for g in range(len(uniq))]
    return ids, groups


def batch_groups(coords, batch):
    return [np.nonzero(coords[:, 0] == b)[0] for b in range(batch)]


def grouped_attention(q, k, v, groups, scale):
    """q,k,v [N,H,d]; every row attends within its group; original row order."""
    out = np.zeros(q.shape[:2] + (v.shape[2],))
    for g in groups:
        if len(g) == 0:
            continue
        out[g] = attention(q[g][None], k[g][None], v[g][None], scale)[0]
    return out


def sparse_cross_attention(q, k, v, coords, scale):
    """q [N,H,d] rows; k,v [B,Lc,H,d]; row attends to its own sample's context."""
    out = np.zeros(q.shape[:2] + (v.shape[3],))
    for b in range(k.shape[0]):
        sel = np.nonzero(coords[:, 0] == b)[0]
        if len(sel):
            out[sel] = attention(q[sel][None], k[b : b + 1], v[b : b + 1], scale)[0]
    return out


def unique_mean(keys, values):
    uk, inv, cnt = np.unique(keys, return_inverse=True, return_counts=True)
    s = np.zeros((len(uk), values.shape[1]))
    np.add.at(s, inv, f64(values))
    return uk, s / cnt[:, None]


# ---------------------------------------------------------------------------
# GS head (§7.2, App. B)
# ---------------------------------------------------------------------------


def radical_inverse(g, base):
    r, f = 0.0, 1.0 / base
    while g > 0:
        r += f * (g % base)
        g //= base
        f /= base
    return r


def offset_perturbation(G=32, voxel_size=1.5):
    h = np.array([[g / G, radical_inverse(g, 2), radical_inverse(g, 3)] for g in range(G)])
    return np.arctanh((2 * h - 1) / voxel_size)


SCALE_BIAS = math.log(math.expm1(0.004))  # softplus^-1(0.004)
OPACITY_BIAS = math.log(0.1 / 0.9)  # logit(0.1)


def gs_head(coords, raw, pert, res=64, G=32):
    """raw [N,448] (fp32 out_layer output) -> position, scale, opacity, rotation, f_dc."""
    raw = f64(raw)
    N = raw.shape[0]
    centre = (coords[:, 1:].astype(np.float64) + 0.5) / res
    off = raw[:, 0:96].reshape(N, G, 3) * 1.0 + f64(pert)[None]
    xyz = centre[:, None, :] + np.tanh(off) / res * 0.5 * 1.5
    position = xyz.reshape(-1, 3) * 1.0 - 0.5
    f_dc = raw[:, 96:192].reshape(-1, 3)
    sc = raw[:, 192:288].reshape(-1, 3) + SCALE_BIAS
    sp = np.log1p(np.exp(sc))
    scale = np.sqrt(sp**2 + 9e-4**2)
    rot = raw[:, 288:416].reshape(-1, 4) * 0.1 + np.array([1.0, 0, 0, 0])
    rotation = rot / np.maximum(np.linalg.norm(rot, axis=1, keepdims=True), 1e-12)
    opacity = 1.0 / (1.0 + np.exp(-(raw[:, 416:448].reshape(-1, 1) + OPACITY_BIAS)))
    return position, scale, opacity, rotation, f_dc
