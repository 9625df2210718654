//===- Passes.td - Passes of the trellis dialect -----------*- tablegen -*-===//
//
// Every transformation of the compiler is a pass declared here, with its
// registration generated (trellis-opt lists them under --help).
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_PASSES_TD
#define TRELLIS_PASSES_TD

include "mlir/Pass/PassBase.td"

def TrellisVerifyLocations : Pass<"trellis-verify-locations", "ModuleOp"> {
  let summary = "Reject operations without a source location";
  let description = [{
    Every operation must say where it came from (the model key and module
    path, the config position, the builder or Python line; DESIGN.md §4).
    This pass fails on any operation whose location is `unknown`, naming the
    op and its nearest located parent. The compiler runs it after every phase
    in debug builds and at the end of the graph phase always.
  }];
}

def TrellisSpecializeGuidance : Pass<"trellis-specialize-guidance", "ModuleOp"> {
  let summary = "Give trellis.flow_sample its two-region (cond / uncond) form";
  let description = [{
    For every `trellis.flow_sample` in multi-image mode `none` whose body is
    a single `func.call` of the velocity model (plus the yield), and whose
    cond and neg_cond have the body's [B, Lc, Cc] type or batch 1 (then
    repeated with `trellis.broadcast_rows` above the op): inlines the callee
    twice, once into the body with the condition replaced by `cond` used
    from above (the conditional velocity), once into a new second region
    with `neg_cond` (the unconditional velocity). Both regions take (x, τ).
    Work that depends on the condition alone (its cast, the cross-attention
    K/V projections) then no longer depends on a region argument, and
    `loop-invariant-code-motion` (the op is LoopLike) hoists it out of the
    sampler loop; `trellis-fold-zero-conditioning` simplifies region 1
    when neg_cond is the zero constant. Inlined ops keep their callee
    locations. A velocity-model function that nothing calls any more is
    erased. Other flow_samples (stochastic or multidiffusion modes, which
    pick condition rows per step; other body shapes) are left unchanged.
  }];
  let dependentDialects = ["mlir::func::FuncDialect"];
}

def TrellisHoistTime : Pass<"trellis-hoist-time", "ModuleOp"> {
  let summary = "Compute what depends only on τ once for the whole time grid";
  let description = [{
    In every region of a `trellis.flow_sample`, finds the τ-only slice: ops
    whose operands are the τ argument, other slice results, or values
    defined above the sampler (weights, constants), and which are row-wise
    over dimension 0 (the timestep embedding, linear of a slice value with
    weights from above, unary elementwise ops and casts, split/concat along
    an axis ≥ 1, reshapes, binary ops whose other operand broadcasts over
    dimension 0). The time grid is static: the slice is cloned above the op
    with τ [B] replaced by `trellis.time_grid` [steps] (the τ of every step),
    so each cloned op computes the rows of all steps at once. The slice
    results the rest of the body uses become columns of one table [steps, W]
    per element type (`trellis.concat`, reshaped to rank 2 where needed);
    the body selects its step's row with `trellis.time_row` (→ [B, W], every
    sample's τ looked up) and splits it back (`trellis.split`, reshapes), so
    consumers see the shapes they saw before. The same ops run on the same
    values, only batched over the steps: the CPU reference gives bit-identical
    results. Cloned ops keep their locations; the grid, tables and row
    selections take the sampler's. Both regions of a specialized sampler
    compute the same tables; CSE merges them.
    The tables have max(steps, `max-steps`) rows (time_grid rows past the
    compiled steps are 0 until a run-time steps override uses them), so a
    program compiled for 25 steps still runs `--steps-ss 50`.
  }];
  let options = [Option<"maxSteps", "max-steps", "int64_t", "64",
                         "rows of the time tables at least (the largest "
                         "run-time steps override the program accepts)">];
}

def TrellisFoldZeroConditioning
    : Pass<"trellis-fold-zero-conditioning", "ModuleOp"> {
  let summary = "Fold the cross-attention of the zero negative condition";
  let description = [{
    With neg_cond the zero splat constant (spec §2.1) the unconditional
    cross-attention is constant in the tokens. Rewrites, to a fixed point:
    `trellis.linear` of a zero splat (through casts and reshapes) →
    its bias repeated (`trellis.broadcast_rows`) or zero; reshapes and
    splits of repeated rows → repeated reshaped / split rows; attention
    whose v is one row repeated over the keys → that row repeated over the
    queries (the softmax weights sum to one; k does not matter), for
    `trellis.sparse.cross_attention` too (its N voxel rows, a bounded
    dynamic dimension, come from the queries at run time: the `like`
    operand of `trellis.broadcast_rows`); a linear
    of repeated rows → the linear of the row (one GEMV), repeated; an
    elementwise add/sub/mul with repeated rows → the op with the row
    (NumPy broadcasting). Locations of the replaced ops are kept (fused).
  }];
}

def TrellisSinkUpsample : Pass<"trellis-sink-upsample", "ModuleOp"> {
  let summary = "Row-wise ops and convs of upsampled features on the coarse rows";
  let description = [{
    `trellis.sparse.upsample` copies every coarse row to its children. A
    row-wise consumer of the copies (elementwise unary ops, casts, a
    LayerNorm of the last axis, a linear without residual, a 1×1×1 sparse
    conv) computes the same row for every child: `f(upsample(h))` becomes
    `upsample(f(h))`. A 3×3×3 sparse conv of the copies becomes a conv of
    the coarse rows through `trellis.sparse.parent_neighbor_map`, which the
    GPU runs with the products on the coarse rows (taps first, then each
    fine row sums its neighbours' parents' products). Both rewrites are
    exact: the same products and sums on the CPU reference.

    In the SLat flow's upsampling block (spec §6.2: resample, LayerNorm,
    SiLU, conv1; skip linear) this moves the 2048-channel LayerNorm, the
    2048 → 128 conv's products and the skip projection from N to N' rows;
    only 128-channel results are upsampled. Runs before
    trellis-fuse-linear-residual (an upsampled skip is no linear any more)
    and before loop-invariant-code-motion (which hoists the parent maps out
    of the sampler).
  }];
}

def TrellisFuseNormModulate : Pass<"trellis-fuse-norm-modulate", "ModuleOp"> {
  let summary = "layer_norm (last axis, no affine) + modulate → layer_norm_modulate";
  let description = [{
    Replaces `trellis.modulate(trellis.layer_norm(x) {axis = -1}, shift,
    scale)` where the LayerNorm has no weight/bias, normalizes the last
    axis and has no other user, by `trellis.layer_norm_modulate x, shift,
    scale {eps}` at the fused location of both. The fused op rounds once
    (see its description): about one f16 ulp from the unfused pair.
  }];
}

def TrellisFuseLinearActivation
    : Pass<"trellis-fuse-linear-activation", "ModuleOp"> {
  let summary = "linear + gelu → linear {activation = \"gelu_tanh\"}";
  let description = [{
    Replaces `trellis.gelu(trellis.linear(...))` where the linear has no
    activation yet and no other user by the linear with
    `activation = "gelu_tanh"` (the cuBLASLt GELU epilogue), at the fused
    location of both.
  }];
}

def TrellisFuseLinearResidual
    : Pass<"trellis-fuse-linear-residual", "ModuleOp"> {
  let summary = "add(x, linear(h, W, b)) → linear(h, W, b) residual x";
  let description = [{
    A residual addition of a linear's result (the ungated residual after the
    blocks' cross-attention, spec §3.6), with both addends of the result's
    type, becomes the linear's `residual`: the GEMM's β·C term (β = 1) on
    the GPU. Applies when the linear has a bias, no activation and no other
    user. Runs after trellis-chunk-mlp. The gated residuals
    `x + g·linear(…)` are not fused: cuBLASLt has no per-row α for fp16
    GEMMs, and scaling W's rows by g per call instead moved as many bytes as
    it saved (bench/ss_gpu/README.md).
  }];
}

def TrellisFuseResidualNorm : Pass<"trellis-fuse-residual-norm", "ModuleOp"> {
  let summary = "gated_residual [+ row] + LayerNorm(-modulate) → gated_residual_norm";
  let description = [{
    A gated residual of an adaLN block (spec §3.6) — with the unconditional
    branch's folded cross-attention row added to it, if so — and the
    LayerNorm-modulate or last-axis LayerNorm that reads it next become one
    `trellis.gated_residual_norm` (one kernel reading x, h and the vectors
    once, writing the residual and the normalized rows): the norm no longer
    reads the residual back, and the added row needs no kernel of its own.
    The residual keeps its other users (the residual path onwards) through
    the fused op's first result, so it applies when they all follow the norm
    in its block. A LayerNorm of the residual cast to f32 (the SS flow's f32
    output layer) takes the cast in too (`f32_result`). Exact: both results
    are the unfused ops'. Runs after trellis-fuse-norm-modulate.
  }];
}

def TrellisFuseLinearNorm : Pass<"trellis-fuse-linear-norm", "ModuleOp"> {
  let summary = "linear + residual + LayerNorm(-modulate) → linear_residual_norm";
  let description = [{
    The GEMM before a residual-stream norm goes into the norm's op, so that
    the GPU runs the projection, the residual and the LayerNorm as one
    kernel (a GEMM with the row op as its epilogue):

    * `trellis.gated_residual_norm(x, h, gate, …)` without `f32_result`,
      where h (of x's type) is a `trellis.linear` with a bias, no activation
      and no residual whose only user is this op, becomes
      `trellis.linear_residual_norm(a, W, b, residual x, gate, …)` (plus,
      modulate or affine kept);
    * a `trellis.layer_norm_modulate` or last-axis `trellis.layer_norm` of a
      `trellis.linear … residual x` (bias, no activation) becomes the
      ungated form; the linear's other users (the residual path onwards)
      read the fused op's first result, so it applies when they all follow
      the norm in its block. A norm of a cast of the sum does not fuse.

    The fused op goes where the norm was, at the fused location of the
    merged ops. Exact: both results are the unfused ops'. Meant to run
    after trellis-fuse-residual-norm and before
    trellis-share-guidance-prefix; not in the fusion pipeline yet (the
    runtime has no command for the op: bench/gemm_norm/README.md).
  }];
}

def TrellisShareGuidancePrefix
    : Pass<"trellis-share-guidance-prefix", "ModuleOp"> {
  let summary = "Compute what both guidance branches compute alike once per step";
  let description = [{
    On a guided step both regions of a specialized `trellis.flow_sample`
    get the same (x, τ): their work before the condition enters — the SLat
    flow's input blocks, the first block's self-attention, the time-table
    rows — is computed twice. An op of the unconditional region matches an
    op of the conditional region when it has the same name, attributes and
    result types and its operands are the same values from above or the
    block arguments x, τ or results of matched ops. The matched ops of the
    conditional region move into the sampler's `shared` region, which ends
    in `trellis.shared_yield` of the values the branches still read; both
    branches take them as block arguments after (x, τ), and the matched ops
    of the unconditional region are erased. Nothing changes when only free
    ops (reshapes, splits, time-table rows) match. Exact: each branch reads
    the values it computed before. Runs last among the fusion passes, so
    that the matched ops are the fused ones.
  }];
}

def TrellisFormAttention : Pass<"trellis-form-attention", "ModuleOp"> {
  let summary = "Fold head_rms_norm of q and k into trellis.attention";
  let description = [{
    A `trellis.head_rms_norm` (single user) feeding q or k of a
    `trellis.attention` that has no gain for that operand yet becomes the
    attention's `q_gamma` / `k_gamma` operand; the attention takes the
    un-normalized tensor. Locations of the merged ops are fused.
  }];
}

//===----------------------------------------------------------------------===//
// The tiling phase (buildTilingPipeline): how big a piece of work each kernel
// takes. It runs after the fusion phase, so it tiles the fused ops.
//===----------------------------------------------------------------------===//

def TrellisChunkMlp : Pass<"trellis-chunk-mlp", "ModuleOp"> {
  let summary = "Split the token axis of the MLPs into chunks (low-memory mode)";
  let description = [{
    Rewrites every MLP `linear → gelu → linear` (or `linear {activation =
    "gelu_tanh"} → linear`, the second linear possibly with a `residual`)
    whose input has more tokens along its token axis (the second to last,
    static) than a chunk into `trellis.split` of the input (and of the
    residual) into chunks, the MLP on each chunk, and `trellis.concat` of the
    results: the 4×-wide hidden activation then only lives for one chunk at
    a time. A chunk holds `chunk-tokens` tokens, or as many as keep one
    chunk's hidden activation within `hidden-bytes`, whichever is fewer (an
    option of 0 is unset; the last chunk is shorter). Every row is computed
    by the same kernels in the same order, so the result is bit-identical.
    The chunk ops keep the locations of the MLP ops they copy; the splits
    and the concat take the fused location of the MLP.
  }];
  let options = [
    Option<"chunkTokens", "chunk-tokens", "int64_t", /*default=*/"0",
           "Tokens per chunk (0: not bounded by a count)">,
    Option<"hiddenBytes", "hidden-bytes", "int64_t", /*default=*/"0",
           "Bytes of one chunk's hidden activation at most (0: no budget)">
  ];
}

def TrellisTileAttention : Pass<"trellis-tile-attention", "ModuleOp"> {
  let summary = "Choose the attention kernels' tile configurations";
  let description = [{
    Sets `tiles` on every `trellis.attention`, `trellis.sparse.attention`
    and `trellis.sparse.cross_attention`: for each kernel family the bundle
    carries (sm_90a, then the portable compute_80 and compute_75 images)
    the configurations of runtime/kernels/attention.h the runtime may launch
    for the op's head dim. Per family the first is the short-sequence
    default (trellis_attn_default_config). On sm_90a, d = 64 queries of
    1024 rows or more run better with 192 or 256 rows per CTA, whichever
    fills the waves of `multiprocessors` SMs better (trellis_attn_choose):
    where the query length is static (the dense flow) the pass makes that
    choice and lists one kernel; where it is known only at run time (sparse
    attention, bounded by the segments' `max_length` or the coordinate
    set's bound) it lists the default and the long-sequence candidates and
    the runtime chooses by the same model. A head dim without a kernel in
    some family is an error at the op. Existing `tiles` are replaced.
  }];
  let options = [
    Option<"multiprocessors", "multiprocessors", "int64_t",
           /*default=*/"132",
           "SMs the static choices plan for (132: H100 SXM, H200)">
  ];
}

def TrellisApplyFp8Scales : Pass<"trellis-apply-fp8-scales", "ModuleOp"> {
  let summary = "Static FP8 activation scales from a calibration file";
  let description = [{
    Sets `activation_amax` on every `trellis.linear {precision =
    "fp8_e4m3"}` from the file `scales-file`, which `trellis.exe
    --calibrate N` writes (docs/fp8.md): a JSON object with `"format":
    "trellis-fp8-activation-scales"`, `"version": 1` and `"amax"`, a map
    from a linear's weight — `<model key>/<checkpoint name>`, e.g.
    `sparse_structure_flow_model/blocks.0.mlp.fc1.weight` — to the largest
    `|x|` its input reached over the calibration runs. The FP8 GEMM then
    quantizes with that scale instead of one computed at every call (no
    amax pass; values beyond it saturate at ±448). Where the file has
    `"v_amax"` (a map from an FP8 attention's q_gamma weight to the largest
    `|v|` of each head), it sets `v_amax` on every FP8 `trellis.attention`
    / `trellis.sparse.attention` likewise; a file without it leaves their
    v scales dynamic.

    Errors: the file unreadable or malformed (naming the file and the
    entry), an FP8 linear whose weight is not a `trellis.weight` or has no
    entry (at the op, naming the key), with "v_amax" an FP8 attention
    without an entry or with another head count, and entries no FP8 op of
    the module reads (a file calibrated for another program). Part of the graph
    phase: the fusions and the MLP chunks after it keep the attribute on
    the linears they rewrite (the chunks of one MLP share its scale).
  }];
  let options = [
    Option<"scalesFile", "scales-file", "std::string", /*default=*/"\"\"",
           "The calibration file (trellis.exe --calibrate)">
  ];
}

#endif // TRELLIS_PASSES_TD
