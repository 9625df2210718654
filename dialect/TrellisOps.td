//===- TrellisOps.td - Operations of the trellis dialect ---*- tablegen -*-===//
//
// Every operation of the TRELLIS v1 inference math (spec §8). Conventions:
//  * Assembly is uniform: operands, attributes, then the functional type.
//    Elementwise unary ops print `$input attr-dict : type($input)`.
//  * Dense layouts follow PyTorch: Linear weights [out, in], Conv3d weights
//    [out, in, k, k, k], sparse conv weights [out, k, k, k, in] (spconv KRSC).
//  * Token-major attention layout [B, L, H, d] (as TRELLIS's qkv reshape).
//  * Element types: f16 inside fp16 regions, f32 elsewhere (spec §11); ops do
//    not mix them silently: `trellis.cast` is explicit.
//  * Every op computes its normalization statistics, softmax and reductions
//    in f32, whatever its storage type.
//  * A dynamic dimension matches only a dynamic dimension (the runtime checks
//    the actual sizes); a result's dynamic dimension gets the upper bound
//    stated in the op's description.
//
// Every op has a C++ verifier (TrellisOps.cpp, TrellisSparseOps.cpp) whose
// rules are listed in its description, and a round-trip and negative test
// in test/lit/Dialect.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_OPS_TD
#define TRELLIS_OPS_TD

include "TrellisDialect.td"
include "TrellisAttrs.td"
include "TrellisTypes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/LoopLikeInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Traits and type constraints
//===----------------------------------------------------------------------===//

// Every dynamic dimension of every tensor operand and result has an upper
// bound (a #trellis.bounds encoding with one entry per `?`).
def Trellis_BoundedShapes : NativeOpTrait<"BoundedShapes"> {
  let cppNamespace = "::mlir::trellis::OpTrait";
}

// Result types equal the inferred ones (one clear message). Must precede
// InferTypeOpAdaptor in the trait list.
def Trellis_ResultsMatchInference : NativeOpTrait<"ResultsMatchInference"> {
  let cppNamespace = "::mlir::trellis::OpTrait";
}

// What the compiler's phases do with an op, asked with hasTrait (the
// codegen's classify(), lib/Codegen/Classify.cpp; docs/design/gpu-backend.md
// "Op classes"). Ops of none of these (and not one of the ops with a family
// of their own: conv3d, sparse.conv3d, flow_sample) have no GPU
// implementation.

// Its GPU kernel is generated (lib/Codegen, one family per file).
def Trellis_GeneratedKernel : NativeOpTrait<"GeneratedKernel"> {
  let cppNamespace = "::mlir::trellis::OpTrait";
}
// Its generated kernel takes dynamic rows (a `?` dimension 0; split and
// concat only along another axis).
def Trellis_DynamicRowsKernel : NativeOpTrait<"DynamicRowsKernel"> {
  let cppNamespace = "::mlir::trellis::OpTrait";
}
// Runs as a runtime command of a library or the runtime's own kernels
// (cuBLASLt GEMMs, the attention kernels, the time tables).
def Trellis_LibraryCall : NativeOpTrait<"LibraryCall"> {
  let cppNamespace = "::mlir::trellis::OpTrait";
}
// A function of the voxel coordinates alone, evaluated on the host when the
// runtime binds a sparse function to its voxel set; the codegen marks it
// its class in the host program ("host_bound").
def Trellis_HostBound : NativeOpTrait<"HostBound"> {
  let cppNamespace = "::mlir::trellis::OpTrait";
}
// Run by the runtime's own code, no generated kernel: coordinate structures
// its commands build on the device (neighbour maps, window partitions), the
// occupancy compaction, the mesh extraction.
def Trellis_RuntimeOp : NativeOpTrait<"RuntimeOp"> {
  let cppNamespace = "::mlir::trellis::OpTrait";
}
// No code of its own: a view of its operand's storage, a weight or constant,
// a region's yield.
def Trellis_StorageOnly : NativeOpTrait<"StorageOnly"> {
  let cppNamespace = "::mlir::trellis::OpTrait";
}

def Trellis_Float : AnyTypeOf<[F16, F32]>;
def Trellis_FloatTensor : RankedTensorOf<[F16, F32]>;
def Trellis_F32Tensor : RankedTensorOf<[F32]>;
def Trellis_IntTensor : RankedTensorOf<[I32, I64]>;
def Trellis_I32Tensor : RankedTensorOf<[I32]>;
def Trellis_I64Tensor : RankedTensorOf<[I64]>;
def Trellis_AnyTensor : RankedTensorOf<[F16, F32, I32, I64]>;

// Base class: pure, bounded shapes, inferred result types checked.
class Trellis_PureOp<string mnemonic, list<Trait> traits = []>
    : Trellis_Op<mnemonic, !listconcat([Pure, Trellis_BoundedShapes,
                                        Trellis_ResultsMatchInference],
                                       traits)>;

//===----------------------------------------------------------------------===//
// Documentation groups (sections of the op reference)
//===----------------------------------------------------------------------===//

def Trellis_ConstantGroup : OpDocGroup {
  let summary = "Weights, constants and casts";
  let description = [{
    Checkpoint tensors enter the IR by name only; small constants (e.g. the
    SLat normalization vectors) are literal; element types change only
    through an explicit cast.
  }];
}

def Trellis_ElementwiseGroup : OpDocGroup {
  let summary = "Elementwise operations";
  let description = [{
    Elementwise math on dense tensors (also used on the [N, C] features of
    sparse tensors). Unary ops keep shape and type; binary ops broadcast as
    in NumPy; modulation ops broadcast per-sample [B, C] vectors over tokens.
  }];
}

def Trellis_LinalgGroup : OpDocGroup {
  let summary = "Linear algebra, normalization and attention";
  let description = [{
    GEMMs, the normalizations of the transformer blocks and the SS decoder,
    softmax and dense multi-head attention (spec §3.6, §8.1). Statistics,
    softmax and accumulation are f32 whatever the storage type.
  }];
}

def Trellis_EmbeddingGroup : OpDocGroup {
  let summary = "Embeddings";
  let description = [{
    The sinusoidal timestep embedding and absolute position embedding of
    spec §3.6. Both compute in f32.
  }];
}

def Trellis_LayoutGroup : OpDocGroup {
  let summary = "Dense convolution and layout";
  let description = [{
    The dense NCDHW convolution and pixel shuffle of the sparse-structure
    decoder (spec §5.1), and the shape-only ops (patchify/unpatchify, chunk,
    concatenation).
  }];
}

def Trellis_SamplerGroup : OpDocGroup {
  let summary = "Flow sampler";
  let description = [{
    The Euler flow sampler with classifier-free guidance and guidance
    interval (spec §3.2, §3.3, §2.3) as one region-holding op, and its
    elementwise building blocks. Sampler arithmetic is f32.
  }];
}

def Trellis_CoordsGroup : OpDocGroup {
  let summary = "Sparse coordinate sets";
  let description = [{
    Ops producing or transforming `!trellis.coords` values and the structures
    derived from them (neighbour maps, attention segments). A sparse voxel
    tensor is a coordinate set plus an [N, C] feature tensor whose dynamic
    dimension 0 has the coordinate set's bound.
  }];
}

def Trellis_SparseGroup : OpDocGroup {
  let summary = "Sparse feature operations";
  let description = [{
    Ops on the [N, C] features of sparse voxel tensors that need the
    coordinates (or a structure derived from them): submanifold convolution,
    down/upsampling, subdivision, group norm, per-sample broadcast and
    variable-length attention (spec §6, §7). Feature operands must have a
    dynamic dimension 0 whose bound equals the bound of the coordinate set
    (or neighbour map, or segments) they belong to.
  }];
}

def Trellis_MeshGroup : OpDocGroup {
  let summary = "Mesh extraction";
  let description = [{
    Post-network geometry of the mesh decoder (spec §7.4, §8.3).
  }];
}

//===----------------------------------------------------------------------===//
// Weights, constants and casts
//===----------------------------------------------------------------------===//

let opDocGroup = Trellis_ConstantGroup in {

def Trellis_WeightOp : Trellis_PureOp<"weight", [Trellis_StorageOnly]> {
  let summary = "A named checkpoint tensor, bound by the runtime";
  let description = [{
    Refers to tensor `name` of the checkpoint of model `model` (a key of
    pipeline.json's `args.models`). The compiler knows only its name, shape
    and element type (from the safetensors header); the bytes never enter the
    IR. The runtime binds the mapped file's bytes to it.

    Verifier: `name` and `model` are non-empty; the shape is static.

    ```mlir
    %w = trellis.weight "blocks.0.self_attn.to_qkv.weight" of "sparse_structure_flow_model"
           : tensor<3072x1024xf16>
    ```
  }];
  let arguments = (ins StrAttr:$name, StrAttr:$model);
  let results = (outs Trellis_AnyTensor:$result);
  let assemblyFormat = "$name `of` $model attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Trellis_ConstantOp : Trellis_PureOp<"constant",
    [Trellis_StorageOnly, ConstantLike, InferTypeOpAdaptor]> {
  let summary = "A small literal tensor";
  let description = [{
    A tensor literal, for the few constants of the pipeline that are not
    checkpoint tensors: the SLat de-normalization mean and std (spec §3.5),
    the zero negative condition (a splat), bias constants of the heads. The
    result type is the type of `value`.

    Verifier: `value` is a static tensor of f16, f32, i32 or i64; a
    non-splat value holds at most 65536 elements (weights are never in the
    IR: use `trellis.weight`).

    ```mlir
    %mean = trellis.constant dense<[-2.16875458, -0.00434704637, -0.133523494, -0.0841807276, -0.52712065, 0.723868906, -1.14144504, 1.20393634]> : tensor<8xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Trellis_AnyTensor:$result);
  let assemblyFormat = "$value attr-dict";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Trellis_CastOp : Trellis_PureOp<"cast", [Trellis_GeneratedKernel, Trellis_DynamicRowsKernel]> {
  let summary = "Element type conversion (f16 ↔ f32, i32 → f32)";
  let description = [{
    Converts every element to the result's element type: f32 → f16 rounds to
    nearest even (overflow to ±inf, as PyTorch's `.half()`); f16 → f32 is
    exact; i32 → f32 is exact up to magnitude 2²⁴ and rounds to nearest even
    beyond.
    These are the casts of spec §11 (and the integer coordinates entering
    f32 math).

    Verifier: the result has the input's shape and bounds; the conversion is
    one of f16 → f32, f32 → f16, i32 → f32.

    ```mlir
    %h = trellis.cast %x : (tensor<2x4096x1024xf32>) -> tensor<2x4096x1024xf16>
    ```
  }];
  let arguments = (ins Trellis_AnyTensor:$input);
  let results = (outs Trellis_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

} // Trellis_ConstantGroup

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

let opDocGroup = Trellis_ElementwiseGroup in {

// Elementwise unary ops: same shape and type in and out, f32 math.
class Trellis_UnaryOp<string mnemonic, string formula, string notes = "">
    : Trellis_PureOp<mnemonic, [SameOperandsAndResultType,
                                Trellis_GeneratedKernel,
                                Trellis_DynamicRowsKernel]> {
  let summary = "Elementwise " # formula;
  let description = [{
    Elementwise }] # formula # [{, computed in f32 and rounded to the
    operand's element type (f16 or f32). }] # notes # [{

    ```mlir
    %y = trellis.}] # mnemonic # [{ %x : tensor<4x8xf16>
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$input);
  let results = (outs Trellis_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Trellis_SiluOp : Trellis_UnaryOp<"silu", "x·sigmoid(x)">;
def Trellis_GeluOp : Trellis_UnaryOp<"gelu", "GELU (tanh approximation)",
    [{The **tanh approximation**
    gelu(x) = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), i.e. PyTorch's
    `gelu(approximate="tanh")`: the only GELU of TRELLIS (every FFN, dense
    and sparse; spec §3.6, §8.1), not the erf form.}]>;
def Trellis_GeluErfOp : Trellis_UnaryOp<"gelu_erf", "GELU (exact erf form)",
    [{The **exact** form gelu(x) = 0.5·x·(1 + erf(x/√2)), PyTorch's default
    `gelu` (approximate="none"): the MLP of the image-conditioning model
    (DINOv2, image conditioning spec §2.4). Never fused into a cuBLASLt
    epilogue, whose GELU is the tanh form.}]>;
def Trellis_SigmoidOp : Trellis_UnaryOp<"sigmoid", "1 / (1 + exp(−x))">;
def Trellis_TanhOp : Trellis_UnaryOp<"tanh", "tanh(x)">;
def Trellis_SoftplusOp : Trellis_UnaryOp<"softplus", "softplus log(1 + exp(x))",
    [{As PyTorch's `softplus` (β = 1, threshold 20): the result is x where
    x > 20.}]>;
def Trellis_AtanhOp : Trellis_UnaryOp<"atanh", "atanh(x) = ½·log((1 + x)/(1 − x))",
    [{±inf at ±1, NaN outside [−1, 1].}]>;
def Trellis_ExpOp : Trellis_UnaryOp<"exp", "exp(x)">;
def Trellis_LogOp : Trellis_UnaryOp<"log", "natural logarithm log(x)",
    [{−inf at 0, NaN for x < 0.}]>;
def Trellis_SinOp : Trellis_UnaryOp<"sin", "sin(x)">;
def Trellis_CosOp : Trellis_UnaryOp<"cos", "cos(x)">;
def Trellis_NegOp : Trellis_UnaryOp<"neg", "negation −x">;
def Trellis_SqrtOp : Trellis_UnaryOp<"sqrt", "square root √x",
    [{NaN for x < 0.}]>;
def Trellis_AbsOp : Trellis_UnaryOp<"abs", "absolute value |x|">;

// Elementwise binary ops with NumPy broadcasting of static dimensions.
class Trellis_BinaryOp<string mnemonic, string formula,
                       Type operandType = Trellis_AnyTensor, string notes = "">
    : Trellis_PureOp<mnemonic, [InferTypeOpAdaptor, Trellis_GeneratedKernel,
                                Trellis_DynamicRowsKernel]> {
  let summary = "Elementwise " # formula # " with broadcasting";
  let description = [{
    Elementwise }] # formula # [{ of two tensors of one element type.
    Shapes broadcast as in NumPy (trailing dimensions aligned, size-1
    dimensions stretched); a dynamic dimension broadcasts only against itself
    (the result keeps the lhs bound) or 1. }] # notes # [{

    Verifier: one element type; the shapes broadcast.

    ```mlir
    %z = trellis.}] # mnemonic # [{ %x, %y : (tensor<2x4096x1024xf16>, tensor<2x1x1024xf16>) -> tensor<2x4096x1024xf16>
    ```
  }];
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs operandType:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_AddOp : Trellis_BinaryOp<"add", "a + b">;
def Trellis_SubOp : Trellis_BinaryOp<"sub", "a − b">;
def Trellis_MulOp : Trellis_BinaryOp<"mul", "a · b">;
def Trellis_DivOp : Trellis_BinaryOp<"div", "a / b", Trellis_FloatTensor,
    "IEEE division in f32, rounded to the operand type.">;
def Trellis_MaximumOp : Trellis_BinaryOp<"maximum", "max(a, b)",
    Trellis_AnyTensor, "NaN propagates (as torch.maximum).">;
def Trellis_PowOp : Trellis_BinaryOp<"pow", "a^b", Trellis_FloatTensor,
    "f32 pow (C's powf: a negative base with a non-integer exponent is NaN), "
    "rounded to the operand type.">;
def Trellis_GreaterOp : Trellis_BinaryOp<"greater", "a > b",
    Trellis_AnyTensor, "The result is 1 where the comparison holds, else 0, in "
    "the operands' type (a mask for `trellis.where`, or a factor); a NaN "
    "compares false.">;
def Trellis_LessOp : Trellis_BinaryOp<"less", "a < b",
    Trellis_AnyTensor, "The result is 1 where the comparison holds, else 0, in "
    "the operands' type; a NaN compares false.">;
def Trellis_EqualOp : Trellis_BinaryOp<"equal", "a == b",
    Trellis_AnyTensor, "The result is 1 where the comparison holds, else 0, in "
    "the operands' type; a NaN compares false.">;

def Trellis_WhereOp : Trellis_PureOp<"where", [InferTypeOpAdaptor,
    Trellis_GeneratedKernel, Trellis_DynamicRowsKernel]> {
  let summary = "Elementwise selection: cond ≠ 0 ? a : b, with broadcasting";
  let description = [{
    Takes `a` where `cond` is not 0 and `b` elsewhere (a NaN cond selects
    a); the other operand is not read there, so a NaN or Inf in it does not
    reach the result. `cond` is a mask as the comparisons make it (1 or 0 in
    the operands' type). The three shapes broadcast as in NumPy (see
    `trellis.add`).

    Verifier: one float element type; the shapes broadcast.

    ```mlir
    %y = trellis.where %m, %x, %z : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<1xf32>) -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$cond, Trellis_FloatTensor:$a,
                       Trellis_FloatTensor:$b);
  let results = (outs Trellis_FloatTensor:$result);
  let assemblyFormat = "$cond `,` $a `,` $b attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_ModulateOp : Trellis_PureOp<"modulate", [Trellis_GeneratedKernel, Trellis_DynamicRowsKernel, InferTypeOpAdaptor]> {
  let summary = "adaLN modulation x·(1 + scale) + shift";
  let description = [{
    `x·(1 + scale) + shift`, elementwise (spec §3.6, §6.2). `shift` and
    `scale` either have x's exact type, or, when x is [B, L, C], are
    per-sample vectors [B, C] broadcast over the L tokens of each sample. For
    sparse features, broadcast the [B, C] vectors to rows first with
    `trellis.sparse.batch_broadcast`. The result has x's type.

    Verifier: x, shift and scale share one element type; shift and scale
    are each x-shaped or [B, C] for x [B, L, C].

    ```mlir
    %h = trellis.modulate %x, %shift, %scale
           : (tensor<2x4096x1024xf16>, tensor<2x1024xf16>, tensor<2x1024xf16>)
           -> tensor<2x4096x1024xf16>
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$input, Trellis_FloatTensor:$shift,
                       Trellis_FloatTensor:$scale);
  let results = (outs Trellis_FloatTensor:$result);
  let assemblyFormat = "$input `,` $shift `,` $scale attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_GatedResidualOp : Trellis_PureOp<"gated_residual",
    [Trellis_GeneratedKernel, Trellis_DynamicRowsKernel, InferTypeOpAdaptor]> {
  let summary = "Gated residual x + gate·h";
  let description = [{
    `x + gate·h`, elementwise: the gated residual of the adaLN blocks
    (spec §3.6). `h` has x's type; `gate` has x's type or, when x is
    [B, L, C], is a per-sample [B, C] vector broadcast over tokens. The
    result has x's type.

    Verifier: one element type; h has x's type; gate is x-shaped or [B, C]
    for x [B, L, C].

    ```mlir
    %y = trellis.gated_residual %x, %h, %gate
           : (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>, tensor<2x1024xf16>)
           -> tensor<2x4096x1024xf16>
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$input, Trellis_FloatTensor:$h,
                       Trellis_FloatTensor:$gate);
  let results = (outs Trellis_FloatTensor:$result);
  let assemblyFormat = "$input `,` $h `,` $gate attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

} // Trellis_ElementwiseGroup

//===----------------------------------------------------------------------===//
// Linear algebra, normalization and attention
//===----------------------------------------------------------------------===//

let opDocGroup = Trellis_LinalgGroup in {

def Trellis_LinearOp : Trellis_PureOp<"linear",
    [Trellis_LibraryCall, AttrSizedOperandSegments, InferTypeOpAdaptor]> {
  let summary = "Fully connected layer y = x·Wᵀ + b over the last dimension";
  let description = [{
    `input` [..., K], `weight` [O, K] (PyTorch layout), optional `bias` [O];
    result [..., O] with the input's element type and bounds. Input, weight
    and bias share one element type; accumulation is f32.

    The optional `activation` (only `"gelu_tanh"`, set by
    `trellis-fuse-linear-activation`) applies GELU (tanh approximation) to
    the result: `gelu_tanh(x·Wᵀ + b)`, the GEMM epilogue on the GPU. The CPU
    reference rounds y to the result type before the GELU, as the unfused
    `trellis.linear` + `trellis.gelu` pair does.

    The optional `residual` (set by `trellis-fuse-linear-residual`; only
    with a bias and without an activation) is added to the result:
    `x·Wᵀ + b + residual`, the GEMM's β·C term on the GPU (β = 1, one
    rounding). The CPU reference rounds x·Wᵀ + b to the result type before
    the addition, as the unfused `trellis.linear` + `trellis.add` pair does
    (bit for bit).

    The optional `precision` (only `"tf32"`, only on f32) lets the product
    round its operands to TF32 (10-bit mantissa) and run on tensor cores,
    accumulating in f32: on the GPU, cuBLASLt's
    `CUBLAS_COMPUTE_32F_FAST_TF32`, PyTorch's
    `torch.backends.cuda.matmul.allow_tf32`. Set by a model builder (the
    image-conditioning model, `Tracer::F32MatmulPrecision`); the CPU
    reference computes in f32 regardless.

    `precision = "fp8_e4m3"` (only on f16; `trellisc --precision=fp8` sets it
    on the flow transformers' block linears) quantizes both operands to FP8
    E4M3 with per-tensor scales — s = amax(|t|) / 448, t_q = E4M3(t · 448 /
    amax), saturating — multiplies the E4M3 values exactly, accumulates in
    f32 and scales back by s_x · s_w before the bias (W8A8, what cuBLASLt's
    FP8 GEMM computes on Hopper). The CPU reference emulates it bit for bit
    up to the f32 summation order (include/trellis/Reference/Fp8.h).

    The optional `activation_amax` (only with `precision = "fp8_e4m3"`; set
    by `trellis-apply-fp8-scales` from a calibration run's file) makes the
    input's scale static: amax is that value instead of the input's own
    `max |x|`, and inputs beyond it saturate at ±448 in E4M3. Without it
    the scale is dynamic, computed at every call.

    Verifier: weight of rank 2 with K matching the input's last dimension;
    one element type; bias [O]; activation, when present, is "gelu_tanh";
    a residual has the result's type and comes with a bias and no
    activation; precision, when present, is "tf32" on f32 operands or
    "fp8_e4m3" on f16 ones; activation_amax comes with "fp8_e4m3" and is
    positive and finite.

    ```mlir
    %y = trellis.linear %x, %w, %b
           : (tensor<2x4096x1024xf16>, tensor<3072x1024xf16>, tensor<3072xf16>)
           -> tensor<2x4096x3072xf16>
    ```

    ```mlir
    %g = trellis.linear %x, %w, %b {activation = "gelu_tanh"}
           : (tensor<2x4096x1024xf16>, tensor<3072x1024xf16>, tensor<3072xf16>)
           -> tensor<2x4096x3072xf16>
    ```

    ```mlir
    %r = trellis.linear %h, %w, %b residual %x
           : (tensor<1x4096x1024xf16>, tensor<1024x1024xf16>, tensor<1024xf16>,
              tensor<1x4096x1024xf16>) -> tensor<1x4096x1024xf16>
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$input, Trellis_FloatTensor:$weight,
                       Optional<Trellis_FloatTensor>:$bias,
                       Optional<Trellis_FloatTensor>:$residual,
                       OptionalAttr<StrAttr>:$activation,
                       OptionalAttr<StrAttr>:$precision,
                       OptionalAttr<F32Attr>:$activation_amax);
  let builders = [
    OpBuilder<(ins "TypeRange":$resultTypes, "Value":$input, "Value":$weight,
                   "Value":$bias), [{
      build($_builder, $_state, resultTypes, input, weight, bias, Value(),
            StringAttr(), StringAttr(), FloatAttr());
    }]>
  ];
  let results = (outs Trellis_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight (`,` $bias^)? (`residual` $residual^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_MatmulOp : Trellis_PureOp<"matmul", [Trellis_LibraryCall, InferTypeOpAdaptor]> {
  let summary = "Batched matrix product [..., M, K] @ [..., K, N]";
  let description = [{
    NumPy `matmul` of operands of rank ≥ 2: the last two dimensions are the
    matrices, the leading (batch) dimensions broadcast as in
    `trellis.add`. Result [broadcast batch..., M, N] with f32 accumulation,
    rounded to the operands' element type. M keeps lhs's bound, N rhs's.

    Verifier: rank ≥ 2 each; one element type; K agrees; batch dimensions
    broadcast.

    ```mlir
    %s = trellis.matmul %a, %b
           : (tensor<2x16x4096x64xf16>, tensor<2x16x64x1374xf16>)
           -> tensor<2x16x4096x1374xf16>
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$lhs, Trellis_FloatTensor:$rhs);
  let results = (outs Trellis_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_LayerNormOp : Trellis_PureOp<"layer_norm",
    [Trellis_GeneratedKernel, Trellis_DynamicRowsKernel, AttrSizedOperandSegments, InferTypeOpAdaptor]> {
  let summary = "LayerNorm over one axis (LN32 / ChannelLN)";
  let description = [{
    Normalizes x over the single dimension `axis` (default −1, the last):
    with μ and σ² the mean and biased variance of that dimension's C values
    (computed in f32),

        y = (x − μ) / √(σ² + eps) · weight + bias

    then rounded to x's element type (spec §3.6 LN32 and final LN). `weight`
    and `bias` are the optional f32 affine parameters [C]; they come
    together (both or neither). `axis = 1` on an NCDHW tensor is the SS
    decoder's ChannelLayerNorm32 (spec §5.1). The result has x's type.

    Verifier: `axis` in [−rank, rank); eps > 0; weight and bias both given
    or both absent; each f32 [C] with C the (static) size of the normalized
    dimension.

    ```mlir
    %h = trellis.layer_norm %x {eps = 1.0e-06 : f64}
           : (tensor<2x4096x1024xf16>) -> tensor<2x4096x1024xf16>
    %c = trellis.layer_norm %v, %gamma, %beta {axis = 1 : i64, eps = 1.0e-05 : f64}
           : (tensor<1x32x64x64x64xf32>, tensor<32xf32>, tensor<32xf32>)
           -> tensor<1x32x64x64x64xf32>
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$input,
                       Optional<Trellis_F32Tensor>:$weight,
                       Optional<Trellis_F32Tensor>:$bias,
                       F64Attr:$eps,
                       DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs Trellis_FloatTensor:$result);
  let assemblyFormat = "$input (`,` $weight^ `,` $bias)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_HeadRmsNormOp : Trellis_PureOp<"head_rms_norm",
    [Trellis_GeneratedKernel, Trellis_DynamicRowsKernel, InferTypeOpAdaptor]> {
  let summary = "Per-head L2 normalization times γ·√d (MultiHeadRMSNorm)";
  let description = [{
    For x [..., H, d] and every head vector u = x[..., h, :]:

        u' = u / max(‖u‖₂, 1e-12) · gamma[h, :] · √d

    computed in f32 and rounded to x's element type (spec §3.6, §12.5). The
    1e-12 clamp is on the norm (F.normalize), there is no mean-square eps.
    `gamma` [H, d] is f32. The result has x's type.

    Verifier: x has rank ≥ 2; gamma is [H, d] equal to x's last two
    (static) dimensions.

    ```mlir
    %qn = trellis.head_rms_norm %q, %gamma
            : (tensor<2x4096x16x64xf16>, tensor<16x64xf32>) -> tensor<2x4096x16x64xf16>
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$input, Trellis_F32Tensor:$gamma);
  let results = (outs Trellis_FloatTensor:$result);
  let assemblyFormat = "$input `,` $gamma attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_SoftmaxOp : Trellis_PureOp<"softmax", [Trellis_GeneratedKernel, InferTypeOpAdaptor]> {
  let summary = "Softmax over one axis";
  let description = [{
    y = exp(x − max) / Σ exp(x − max) over dimension `axis` (default −1),
    computed in f32 and rounded to x's element type. The result has x's
    type.

    Verifier: `axis` in [−rank, rank).

    ```mlir
    %p = trellis.softmax %s {axis = -1 : i64}
           : (tensor<2x16x4096x1374xf16>) -> tensor<2x16x4096x1374xf16>
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$input,
                       DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs Trellis_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_ReduceOp : Trellis_PureOp<"reduce", [Trellis_GeneratedKernel,
    Trellis_DynamicRowsKernel, InferTypeOpAdaptor]> {
  let summary = "Sum, mean or maximum over one axis";
  let description = [{
    Reduces dimension `axis` (default −1) of x with `kind`: `"sum"`,
    `"mean"` (the sum divided by the axis' size) or `"max"` (NaN
    propagates, as torch.amax; −inf for an empty axis). Accumulates in f32
    whatever the element type and rounds once to it. The result drops the
    axis, or keeps it with size 1 when `keepdim` is set; other dimensions
    keep their bounds.

    Verifier: `kind` is one of the three; `axis` in [−rank, rank).

    ```mlir
    %m = trellis.reduce %x {kind = "mean", axis = -1 : i64, keepdim = true}
           : (tensor<2x16x64xf16>) -> tensor<2x16x1xf16>
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$input, StrAttr:$kind,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<BoolAttr, "false">:$keepdim);
  let results = (outs Trellis_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_AttentionOp : Trellis_PureOp<"attention",
    [Trellis_LibraryCall, AttrSizedOperandSegments, InferTypeOpAdaptor]> {
  let summary = "Dense multi-head attention softmax(q·kᵀ·scale)·v";
  let description = [{
    Token-major multi-head attention without mask or dropout (spec §3.6,
    §8.1): q [B, Lq, H, d], k [B, Lk, H, d], v [B, Lk, H, dv] →
    out [B, Lq, H, dv] with

        out[b, i, h, :] = Σ_j softmax_j(scale · q[b, i, h, :]·k[b, j, h, :]) · v[b, j, h, :]

    Scores, softmax and accumulation are f32; the result has q's element
    type. TRELLIS uses scale = 1/√d = 0.125. Serves self-attention (Lk = Lq)
    and cross-attention (Lk = Lc).

    Optional `q_gamma` / `k_gamma` ([H, d], f32; set by
    `trellis-form-attention`) first apply the head RMS norm of
    `trellis.head_rms_norm` to q / k, rounded to q's element type as that op
    does, then the attention above.

    Optional `tiles` (set by `trellis-tile-attention`, the tiling phase):
    the names of the attention kernels (runtime/kernels/attention.h) this
    op may run, per kernel family the short-sequence default first, then
    the long-sequence candidates the runtime chooses among by the wave
    model when the query length is only known at run time. The CPU
    reference ignores it.

    `precision = "fp8_e4m3"` (traced under `trellisc --precision=fp8` on the
    flow transformers' self-attention, head dim 64, with its head norms'
    q_gamma and k_gamma, which set the scales) runs Q, K, V and the softmax
    weights P in FP8 E4M3 with f32 accumulation: q' and k' (after the head
    RMS norm, rounded to f16 as ever) times 448 / (8 · max|gamma_h|) per
    head, v times 448 / max|v[:, h, :]| per head (over every token of the
    op), and P = E4M3(2^(x − ref_i)) with x the scaled logits in log2 units
    and ref_i = min(the largest x over the row's first 64 keys,
    bound_i − 8), where bound_i bounds the row's logits (Cauchy–Schwarz on
    the normalized k); the result is Σ P·v8 / (Σ P · v-scale). A row with a
    P above 2^8 (a later key more than 8 above the first 64 keys' largest)
    gets the plain attention instead (docs/fp8.md). The optional `v_amax`
    (only with that precision; set by `trellis-apply-fp8-scales` from a
    calibration, `trellisc --fp8-scales`) replaces max|v[:, h, :]| by the
    calibrated per-head value: a static scale, no amax pass; values of v
    beyond it saturate at ±448.

    Verifier: rank 4 each; one element type; B and H agree across q, k, v;
    d agrees between q and k; Lk agrees between k and v; scale > 0;
    q_gamma and k_gamma, when present, are f32 [H, d];
    `tiles`, when present, is not empty and names no kernel twice;
    precision, when present, is "fp8_e4m3", with head dims of 64 for q, k
    and v, both q_gamma and k_gamma, and Lq = Lk when both are static;
    v_amax, when present, comes with that precision and holds H positive
    finite values.

    ```mlir
    %o = trellis.attention %q, %k, %v {scale = 1.250000e-01 : f64}
           : (tensor<2x4096x16x64xf16>, tensor<2x1374x16x64xf16>, tensor<2x1374x16x64xf16>)
           -> tensor<2x4096x16x64xf16>
    ```

    ```mlir
    %s = trellis.attention %q, %q, %q q_gamma %gq k_gamma %gk {scale = 1.250000e-01 : f64}
           : (tensor<2x4096x16x64xf16>, tensor<2x4096x16x64xf16>, tensor<2x4096x16x64xf16>,
              tensor<16x64xf32>, tensor<16x64xf32>)
           -> tensor<2x4096x16x64xf16>
    ```

    ```mlir
    %f = trellis.attention %q, %q, %q q_gamma %gq k_gamma %gk {precision = "fp8_e4m3", scale = 1.250000e-01 : f64}
           : (tensor<2x4096x16x64xf16>, tensor<2x4096x16x64xf16>, tensor<2x4096x16x64xf16>,
              tensor<16x64xf32>, tensor<16x64xf32>)
           -> tensor<2x4096x16x64xf16>
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$q, Trellis_FloatTensor:$k,
                       Trellis_FloatTensor:$v,
                       Optional<Trellis_F32Tensor>:$q_gamma,
                       Optional<Trellis_F32Tensor>:$k_gamma, F64Attr:$scale,
                       OptionalAttr<StrArrayAttr>:$tiles,
                       OptionalAttr<StrAttr>:$precision,
                       OptionalAttr<DenseF32ArrayAttr>:$v_amax);
  let results = (outs Trellis_FloatTensor:$result);
  let builders = [
    OpBuilder<(ins "TypeRange":$resultTypes, "Value":$q, "Value":$k,
                   "Value":$v, "FloatAttr":$scale), [{
      build($_builder, $_state, resultTypes, q, k, v, Value(), Value(), scale,
            ArrayAttr(), StringAttr(), DenseF32ArrayAttr());
    }]>
  ];
  let assemblyFormat = [{
    $q `,` $k `,` $v (`q_gamma` $q_gamma^)? (`k_gamma` $k_gamma^)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Trellis_LayerNormModulateOp : Trellis_PureOp<"layer_norm_modulate",
    [Trellis_GeneratedKernel, Trellis_DynamicRowsKernel, InferTypeOpAdaptor]> {
  let summary = "LayerNorm (last axis, no affine) then adaLN modulation";
  let description = [{
    `trellis.layer_norm` over the last axis without weight and bias,
    followed by `trellis.modulate`: with μ and σ² the mean and biased
    variance of each row of C values (f32),

        y = (x − μ) / √(σ² + eps) · (1 + scale) + shift

    computed in f32 and rounded once to x's element type (made by
    `trellis-fuse-norm-modulate`). `shift` and `scale` are x-shaped or, for x
    [B, L, C], per-sample [B, C] vectors broadcast over the tokens. The
    unfused pair rounds the normalized value to x's type before modulating;
    this op does not, so for f16 the two differ by about one f16 ulp of the
    result. The result has x's type.

    Verifier: eps > 0; x, shift and scale share one element type; shift and
    scale are each x-shaped or [B, C] for x [B, L, C].

    ```mlir
    %h = trellis.layer_norm_modulate %x, %shift, %scale {eps = 1.0e-06 : f64}
           : (tensor<2x4096x1024xf16>, tensor<2x1024xf16>, tensor<2x1024xf16>)
           -> tensor<2x4096x1024xf16>
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$input, Trellis_FloatTensor:$shift,
                       Trellis_FloatTensor:$scale, F64Attr:$eps);
  let results = (outs Trellis_FloatTensor:$result);
  let assemblyFormat = "$input `,` $shift `,` $scale attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_GatedResidualNormOp : Trellis_PureOp<"gated_residual_norm",
    [Trellis_GeneratedKernel, Trellis_DynamicRowsKernel, AttrSizedOperandSegments, InferTypeOpAdaptor]> {
  let summary = "Gated residual (plus a row), then a LayerNorm of the sum";
  let description = [{
    The end of one adaLN block's sub-layer and the norm that reads its
    residual stream next (spec §3.6), in one pass over the rows:

        residual = trellis.gated_residual(x, h, gate)
        residual = trellis.add(residual, plus)                 (with `plus`)
        result   = trellis.layer_norm_modulate(residual, shift, scale) {eps}
                     (with `modulate`), or
                   trellis.layer_norm(residual[, weight, bias]) {eps}
                     (last axis; `affine` gives the f32 weight and bias)

    Each step rounds to x's element type as the unfused op does and the norm
    reads the rounded residual, so both results equal the unfused ops' bit
    for bit on the CPU reference (which runs them); the GPU kernel uses the
    unfused kernels' expressions. Made by `trellis-fuse-residual-norm`.
    `gate`, `plus`, `shift` and `scale` are x-shaped or, for x [B, L, C],
    per-sample [B, C] vectors. Both results have x's type, except that with
    `f32_result` the LayerNorm reads the residual widened to f32 and its
    result is f32 (a flow model's f32 output layer: `trellis.cast` to f32,
    then the norm).

    Verifier: h has x's type; eps > 0; not both `modulate` and `affine`;
    gate, plus, shift and scale each x-shaped or [B, C] for x [B, L, C];
    weight and bias f32 [C]; `f32_result` only for the LayerNorm form of a
    narrower x.

    ```mlir
    %r, %y = trellis.gated_residual_norm %x, %h, %gate modulate %shift, %scale {eps = 1.0e-06 : f64}
               : (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>, tensor<2x1024xf16>,
                  tensor<2x1024xf16>, tensor<2x1024xf16>)
               -> (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>)
    %r2, %n = trellis.gated_residual_norm %x, %h, %gate affine %w, %b {eps = 1.0e-06 : f64}
                : (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>, tensor<2x1024xf16>,
                   tensor<1024xf32>, tensor<1024xf32>)
                -> (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>)
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$input, Trellis_FloatTensor:$h,
                       Trellis_FloatTensor:$gate,
                       Optional<Trellis_FloatTensor>:$plus,
                       Optional<Trellis_FloatTensor>:$shift,
                       Optional<Trellis_FloatTensor>:$scale,
                       Optional<Trellis_F32Tensor>:$weight,
                       Optional<Trellis_F32Tensor>:$bias, F64Attr:$eps,
                       UnitAttr:$f32_result);
  let results = (outs Trellis_FloatTensor:$residual,
                      Trellis_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $h `,` $gate (`plus` $plus^)? (`modulate` $shift^ `,` $scale)?
    (`affine` $weight^ `,` $bias)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Trellis_LinearResidualNormOp : Trellis_PureOp<"linear_residual_norm",
    [Trellis_LibraryCall, AttrSizedOperandSegments, InferTypeOpAdaptor]> {
  let summary = "Linear into the residual stream, then a LayerNorm of the sum";
  let description = [{
    A sub-layer's output projection, the residual addition (gated or not,
    plus a row) and the LayerNorm that reads the residual stream next (spec
    §3.6): `trellis.linear` followed by `trellis.gated_residual_norm` (or
    `trellis.linear … residual` followed by the norm) as one op. For input
    a [..., K], weight [N, K], bias [N] and the residual stream x [..., N]
    (a's leading dimensions):

        h        = trellis.linear(a, weight, bias)
        residual = trellis.gated_residual(x, h, gate)          (with `gate`), or
                   trellis.add(x, h)                            (without)
        residual = trellis.add(residual, plus)                  (with `plus`)
        result   = trellis.layer_norm_modulate(residual, shift, scale) {eps}
                     (with `modulate`), or
                   trellis.layer_norm(residual[, norm_weight, norm_bias]) {eps}
                     (last axis; `affine` gives the f32 weight and bias)

    Each step rounds to x's element type as the unfused op does (h included:
    the GEMM's f32 accumulator plus bias is rounded before the residual),
    and the norm reads the rounded residual, so both results equal the
    unfused ops' bit for bit on the CPU reference (which runs them). Made by
    `trellis-fuse-linear-norm` from a `gated_residual_norm` whose h is a
    linear's result, or from a `linear … residual` and the norm that reads
    it; `plus` comes only with a gate. The GPU runtime runs it as one GEMM
    whose epilogue does the residual and the LayerNorm (sm_90a), elsewhere as
    the cuBLASLt GEMM and a row kernel. `gate`, `plus`, `shift` and `scale`
    are x-shaped or per-sample vectors as for `gated_residual_norm`. Both
    results have x's type.

    Verifier: input, weight, bias and x share one element type; weight
    [N, K] with K the input's last dimension; bias [N]; x has the input's
    shape (and bounds) with the last dimension N; not both `modulate` and
    `affine`; `plus` needs a gate; eps > 0; gate, plus, shift and scale each
    x-shaped or [B, N] for x [B, L, N] ([1, N] for x [M, N]); norm weight
    and bias f32 [N].

    ```mlir
    %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x gate %gate
               modulate %shift, %scale {eps = 1.0e-06 : f64}
               : (tensor<1x4096x4096xf16>, tensor<1024x4096xf16>, tensor<1024xf16>,
                  tensor<1x4096x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>,
                  tensor<1x1024xf16>)
               -> (tensor<1x4096x1024xf16>, tensor<1x4096x1024xf16>)
    %r2, %n = trellis.linear_residual_norm %a2, %w2, %b residual %r
                modulate %shift, %scale {eps = 1.0e-06 : f64}
                : (tensor<1x4096x1024xf16>, tensor<1024x1024xf16>, tensor<1024xf16>,
                   tensor<1x4096x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>)
                -> (tensor<1x4096x1024xf16>, tensor<1x4096x1024xf16>)
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$input, Trellis_FloatTensor:$weight,
                       Trellis_FloatTensor:$bias, Trellis_FloatTensor:$x,
                       Optional<Trellis_FloatTensor>:$gate,
                       Optional<Trellis_FloatTensor>:$plus,
                       Optional<Trellis_FloatTensor>:$shift,
                       Optional<Trellis_FloatTensor>:$scale,
                       Optional<Trellis_F32Tensor>:$norm_weight,
                       Optional<Trellis_F32Tensor>:$norm_bias, F64Attr:$eps);
  let results = (outs Trellis_FloatTensor:$residual,
                      Trellis_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias `residual` $x (`gate` $gate^)?
    (`plus` $plus^)? (`modulate` $shift^ `,` $scale)?
    (`affine` $norm_weight^ `,` $norm_bias)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

} // Trellis_LinalgGroup

//===----------------------------------------------------------------------===//
// Embeddings
//===----------------------------------------------------------------------===//

let opDocGroup = Trellis_EmbeddingGroup in {

def Trellis_TimestepEmbeddingOp : Trellis_PureOp<"timestep_embedding",
    [Trellis_GeneratedKernel, InferTypeOpAdaptor]> {
  let summary = "Sinusoidal timestep features [cos | sin]";
  let description = [{
    For t [B] (the model time τ = 1000·t, f32) and half = dim/2:

        f_j = exp(−ln(max_period) · j / half),  j = 0..half−1
        out[b] = [cos(t_b·f_0), …, cos(t_b·f_{half−1}), sin(t_b·f_0), …, sin(t_b·f_{half−1})]

    **Cosine first** (spec §3.6, §12.4). All f32; result [B, dim] f32. The
    TimestepEmbedder's MLP is separate (`trellis.linear`, `trellis.silu`).

    Verifier: t is f32 of rank 1; dim is even and ≥ 2; max_period > 0.

    ```mlir
    %e = trellis.timestep_embedding %t {dim = 256 : i64, max_period = 1.000000e+04 : f64}
           : (tensor<2xf32>) -> tensor<2x256xf32>
    ```
  }];
  let arguments = (ins Trellis_F32Tensor:$t,
                       DefaultValuedAttr<I64Attr, "256">:$dim,
                       DefaultValuedAttr<F64Attr, "10000.0">:$max_period);
  let results = (outs Trellis_F32Tensor:$result);
  let assemblyFormat = "$t attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_ApeOp : Trellis_PureOp<"ape", [Trellis_HostBound, InferTypeOpAdaptor]> {
  let summary = "Absolute position embedding [sin | cos] per axis";
  let description = [{
    For integer positions pos [L, 3] = (x, y, z), F = ⌊channels/6⌋ and
    ω_j = 10000^(−j/F), j = 0..F−1 (f32):

        out[l] = [sin(x·ω), cos(x·ω), sin(y·ω), cos(y·ω), sin(z·ω), cos(z·ω), 0…]

    each part F long, **sine first** (unlike the timestep embedding), zero
    padded at the end to `channels` (spec §3.6 AbsolutePositionEmbedder;
    1024 channels give F = 170 and 4 zeros). Coordinates are plain integers
    (not normalized). Result [L, channels] f32, L's bound kept.

    Verifier: pos is i32 [L, 3]; channels ≥ 6.

    ```mlir
    %pe = trellis.ape %xyz {channels = 1024 : i64}
            : (tensor<?x3xi32, #trellis.bounds<[32768]>>)
            -> tensor<?x1024xf32, #trellis.bounds<[32768]>>
    ```
  }];
  let arguments = (ins Trellis_I32Tensor:$pos, I64Attr:$channels);
  let results = (outs Trellis_F32Tensor:$result);
  let assemblyFormat = "$pos attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

} // Trellis_EmbeddingGroup

//===----------------------------------------------------------------------===//
// Dense convolution and layout
//===----------------------------------------------------------------------===//

let opDocGroup = Trellis_LayoutGroup in {

def Trellis_Conv3dOp : Trellis_PureOp<"conv3d", [InferTypeOpAdaptor]> {
  let summary = "Dense 3-D convolution (NCDHW, stride 1, zero padding)";
  let description = [{
    Cross-correlation of x [B, I, D, H, W] with weight [O, I, k, k, k]
    (PyTorch layout), stride 1, zero padding `padding` (default 1) on every
    side, optional bias [O]:

        out[b, o, x, y, z] = bias[o] + Σ_{i, a, β, γ} w[o, i, a, β, γ] · in[b, i, x+a−p, y+β−p, z+γ−p]

    (out-of-range inputs are zero). Result [B, O, D', H', W'] with
    D' = D + 2p − k + 1; f32 accumulation (spec §5.1).

    Verifier: x rank 5, weight rank 5 with a cubic kernel, I agrees, one
    element type, bias [O], padding ≥ 0, output sizes ≥ 1.

    ```mlir
    %y = trellis.conv3d %x, %w, %b {padding = 1 : i64}
           : (tensor<1x512x16x16x16xf16>, tensor<1024x512x3x3x3xf16>, tensor<1024xf16>)
           -> tensor<1x1024x16x16x16xf16>
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$input, Trellis_FloatTensor:$weight,
                       Optional<Trellis_FloatTensor>:$bias,
                       DefaultValuedAttr<I64Attr, "1">:$padding);
  let results = (outs Trellis_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_PixelShuffle3dOp : Trellis_PureOp<"pixel_shuffle_3d",
    [Trellis_GeneratedKernel, InferTypeOpAdaptor]> {
  let summary = "3-D pixel shuffle [B, C·f³, D, H, W] → [B, C, fD, fH, fW]";
  let description = [{
    With f = `factor` (default 2):

        out[b, c, f·x + s1, f·y + s2, f·z + s3] = in[b, c·f³ + s1·f² + s2·f + s3, x, y, z]

    i.e. for f = 2 channel c·8 + 4·s1 + 2·s2 + s3 goes to sub-voxel
    (s1, s2, s3) (spec §5.1, trellis/modules/spatial.py). A pure data move.

    Verifier: x of rank 5; factor ≥ 1; the (static) channel count is
    divisible by factor³.

    ```mlir
    %y = trellis.pixel_shuffle_3d %x {factor = 2 : i64}
           : (tensor<1x1024x16x16x16xf16>) -> tensor<1x128x32x32x32xf16>
    ```
  }];
  let arguments = (ins Trellis_AnyTensor:$input,
                       DefaultValuedAttr<I64Attr, "2">:$factor);
  let results = (outs Trellis_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_ReshapeOp : Trellis_PureOp<"reshape", [Trellis_StorageOnly]> {
  let summary = "Row-major reshape (result type given)";
  let description = [{
    Reinterprets x's elements in row-major order with the result's shape
    (PyTorch `reshape` of a contiguous tensor): patchify/unpatchify of the
    SS flow, head splitting [.., C] → [.., H, d].

    With static shapes the element counts are equal. With a bounded dynamic
    dimension, input and result each have exactly one, and the maximal
    element counts (bound × static sizes) are equal; the runtime checks that
    the actual count divides by the result's static sizes.

    Folds to x when the types are equal, and a reshape of a reshape to one
    reshape of the first input (row-major order is kept by both).

    Verifier: one element type; both static with equal element counts, or
    both with one dynamic dimension and equal maximal element counts.

    ```mlir
    %t = trellis.reshape %x : (tensor<2x8x16x16x16xf32>) -> tensor<2x8x4096xf32>
    ```
  }];
  let arguments = (ins Trellis_AnyTensor:$input);
  let results = (outs Trellis_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Trellis_PermuteOp : Trellis_PureOp<"permute", [Trellis_GeneratedKernel, InferTypeOpAdaptor]> {
  let summary = "Dimension permutation (torch.permute)";
  let description = [{
    out.shape[k] = x.shape[perm[k]], and out at index i is x at the index j
    with j[perm[k]] = i[k] for every k (PyTorch `permute`).
    Bounds follow their dimensions.

    Verifier: `perm` is a permutation of 0..rank−1.

    ```mlir
    %t = trellis.permute %x {perm = array<i64: 0, 2, 1>}
           : (tensor<2x8x4096xf32>) -> tensor<2x4096x8xf32>
    ```
  }];
  let arguments = (ins Trellis_AnyTensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Trellis_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_ConcatOp : Trellis_PureOp<"concat", [Trellis_GeneratedKernel, Trellis_DynamicRowsKernel, InferTypeOpAdaptor]> {
  let summary = "Concatenation along one axis";
  let description = [{
    Concatenates the inputs in order along `axis` (torch.cat); e.g. the SLat
    flow's skip concatenation [h | skip], h first (spec §6.1). The result's
    `axis` size is the sum (dynamic if any input's is, with the sum of the
    bounds); other dimensions are those of the first input.

    Verifier: at least one input; one element type and rank; `axis` in
    [−rank, rank); all other dimensions agree.

    ```mlir
    %c = trellis.concat %h, %skip {axis = 1 : i64}
           : (tensor<?x1024xf16, #trellis.bounds<[32768]>>, tensor<?x1024xf16, #trellis.bounds<[32768]>>)
           -> tensor<?x2048xf16, #trellis.bounds<[32768]>>
    ```
  }];
  let arguments = (ins Variadic<Trellis_AnyTensor>:$inputs, I64Attr:$axis);
  let results = (outs Trellis_AnyTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_BroadcastRowsOp : Trellis_PureOp<"broadcast_rows", [Trellis_GeneratedKernel]> {
  let summary = "Repeats one row over leading dimensions";
  let description = [{
    `row` is [1, R...] and the result [N..., R...] (one or more leading
    dimensions N, then row's trailing dimensions R): every
    result[n..., r...] = row[0, r...]. In the common case row is [1, C] and
    the result [B, L, C] with every token row equal to `row`. Made by
    `trellis-fold-zero-conditioning` for values that are one row repeated
    (the projections of the zero negative condition); the result has row's
    element type.

    A result with bounded dynamic leading dimensions (the N voxel rows of
    the SLat stage) takes their sizes at run time from the optional `like`
    operand: the leading dimensions N... of the result are those of `like`
    (e.g. the queries of the `trellis.sparse.cross_attention` that the
    repeated rows replace); its other dimensions and its element type do not
    matter. A static result has no `like`.

    Folds to `row` when the result has row's type (a single row).

    Verifier: row has rank ≥ 2 and dimension 0 of size 1; the result has
    row's element type, rank ≥ row's rank, and ends with row's dimensions
    1.. (static); `like` is present exactly when the result has a dynamic
    dimension, and then has at least as many dimensions as the result has
    leading ones, agreeing with them (dynamic with dynamic, same bound).

    ```mlir
    %b = trellis.broadcast_rows %row : (tensor<1x1024xf16>) -> tensor<2x1374x1024xf16>
    ```

    ```mlir
    %o = trellis.broadcast_rows %row, %q
           : (tensor<1x16x64xf16>, tensor<?x16x64xf16, #trellis.bounds<[32768]>>)
           -> tensor<?x16x64xf16, #trellis.bounds<[32768]>>
    ```
  }];
  let arguments = (ins Trellis_AnyTensor:$row,
                       Optional<Trellis_AnyTensor>:$like);
  let results = (outs Trellis_AnyTensor:$result);
  let assemblyFormat = "$row (`,` $like^)? attr-dict `:` functional-type(operands, results)";
  let builders = [
    OpBuilder<(ins "Type":$resultType, "Value":$row), [{
      build($_builder, $_state, resultType, row, Value());
    }]>
  ];
  let hasVerifier = 1;
  let hasFolder = 1;
  let extraClassDeclaration = [{
    /// The number of leading (repeated) dimensions of the result.
    int64_t getNumLeadingDims() {
      return getResult().getType().getRank() - getRow().getType().getRank() + 1;
    }
  }];
}

def Trellis_SplitOp : Trellis_PureOp<"split", [Trellis_GeneratedKernel, Trellis_DynamicRowsKernel, InferTypeOpAdaptor]> {
  let summary = "Split along one axis into consecutive chunks";
  let description = [{
    Splits x along `axis` into consecutive pieces of the given `sizes`
    (torch.split with a list): result i holds indices
    [Σ_{j<i} sizes[j], Σ_{j≤i} sizes[j]) of that axis. E.g. the adaLN chunks
    (shift, scale, gate, …) and the [q | k | v] channel split.

    A split into one piece is its input: canonicalized to x (or to a
    `trellis.reshape` of x where the types differ).

    Verifier: `axis` in [−rank, rank) with a static size equal to
    Σ sizes; every size ≥ 1.

    ```mlir
    %q, %k, %v = trellis.split %qkv {axis = 2 : i64, sizes = array<i64: 1024, 1024, 1024>}
           : (tensor<2x4096x3072xf16>)
           -> (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>)
    ```
  }];
  let arguments = (ins Trellis_AnyTensor:$input, I64Attr:$axis,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<Trellis_AnyTensor>:$results);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasCanonicalizeMethod = 1;
}

} // Trellis_LayoutGroup

//===----------------------------------------------------------------------===//
// Flow sampler
//===----------------------------------------------------------------------===//

let opDocGroup = Trellis_SamplerGroup in {

def Trellis_FlowSampleOp : Trellis_Op<"flow_sample", [
    Trellis_BoundedShapes, RecursiveMemoryEffects, SingleBlock,
    Trellis_ResultsMatchInference, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<LoopLikeOpInterface>]> {
  let summary = "Euler flow sampler with CFG and guidance interval";
  let description = [{
    Integrates the flow ODE from `noise` (t = 1) to t = 0 with the velocity
    model in `body` (spec §3.2, §3.3, §2.3). The body is called with
    (x, τ, c) and yields the velocity v (x's type) with `trellis.yield`:

    * `x`: the current sample, of `noise`'s type (dense [B, 8, 16, 16, 16] for
      the sparse-structure stage; the [N, 8] features for the SLat stage,
      whose coordinates the body uses from above: the region is not
      isolated);
    * `τ`: tensor<B×f32>, the model time 1000·t, the same for every sample
      (formed in f64, stored as f32);
    * `c`: the condition [B, Lc, Cc] for this call.

    B, the model batch, is c's dimension 0. With `t̃_i = 1 − i/steps` and
    r = `rescale_t` the time grid is `t_i = r·t̃_i / (1 + (r − 1)·t̃_i)`,
    i = 0..steps (in f64). With w = `cfg_strength` and
    [lo, hi] = `cfg_interval`, step i = 0..steps−1 is:

        t = t_i, t_prev = t_{i+1}
        v_c = body(x, 1000·t, cond_i)                 (see multi_image)
        if lo ≤ t ≤ hi:   v̂ = (1 + w)·v_c − w·body(x, 1000·t, neg_cond)
        else:             v̂ = v_c
        x ← x − (t − t_prev)·v̂

    The guidance test is inclusive on both ends and uses the unscaled
    t ∈ [0, 1]. All sampler arithmetic is f32. The result is x after the
    last step. `sigma_min` (default 1e-5) is recorded for the x̂₀/ε̂
    predictions of the reference sampler; it does not enter the update.

    Conditions: a condition of batch 1 is repeated to B (as TRELLIS's
    sampler does); `neg_cond` has batch 1 or B. `multi_image`:

    * `none` (default): cond_i = cond, of batch 1 or B.
    * `stochastic`: cond holds N_img image rows; step i uses row
      i mod N_img, repeated to B (images beyond `steps` are never used).
    * `multidiffusion`: v_c = (1/N_img)·Σ_j body(x, 1000·t, cond[j] repeated to B),
      N_img conditional calls per step; guidance as above.

    Each body call is an independent evaluation (calls of one step may run
    batched as 2B). The op does not implement RegionBranchOpInterface: the
    yielded velocity is neither forwarded to the results nor to the next
    call's arguments (x is updated from it), which that interface cannot
    express; analyses see the op through RecursiveMemoryEffects.

    Two-region (specialized) form, made by `trellis-specialize-guidance`
    for mode `none`: the body (region 0) computes the conditional velocity
    v_c and the second region, after the `uncond` keyword, the
    unconditional one; each takes (x, τ) only and uses the condition it
    needs from above (cond in region 0, neg_cond in region 1, repeated to
    batch B above the op where it has batch 1).
    The recurrence is the one above with body(x, 1000·t, cond) replaced by
    region 0 and body(x, 1000·t, neg_cond) by region 1. The op is then
    LoopLike: values computed from the condition alone (the cross-attention
    K/V projections) are invariant across the steps and
    `loop-invariant-code-motion` hoists them above the op. cond and
    neg_cond stay operands (the sampler's interface and B).

    Shared-prefix form, made by `trellis-share-guidance-prefix` from the
    two-region form: the third region, after the `shared` keyword, takes
    (x, τ) and ends in `trellis.shared_yield` of the values both branches
    compute identically (the work before the first use of the condition:
    the SLat flow's input blocks, the first block's self-attention). Each
    step evaluates it once, before region 0 and (on guided steps) region 1;
    those take (x, τ, s_0, …, s_k−1) with s_i the i-th shared value of the
    same step. The recurrence is unchanged.

    Verifier: noise is f32; cond and neg_cond are static [·, Lc, Cc] with one
    element type; the body has one block with arguments (x: noise's type,
    τ: tensor<B×f32>, c: [B, Lc, Cc] of cond's element type) and ends in
    `trellis.yield` of a value of noise's type; cond's batch is 1 or B in
    mode `none`; neg_cond's batch is 1 or B; a static noise dimension 0 (the
    dense stage) equals B; steps ≥ 1, rescale_t > 0, sigma_min ≥ 0,
    cfg_strength ≥ 0, cfg_interval = [lo, hi] with lo ≤ hi. In the
    two-region form: mode `none`; both regions have one block with the
    arguments (x, τ) and yield a value of noise's type; cond and neg_cond
    have batch 1 or B. With a shared region: it has the arguments (x, τ) of
    the other regions' types and ends in `trellis.shared_yield`; the other
    two regions take (x, τ) followed by one argument per shared value, of
    its type.

    ```mlir
    %x0 = trellis.flow_sample %noise, %cond, %neg
            {cfg_interval = array<f64: 5.000000e-01, 1.000000e+00>, cfg_strength = 7.500000e+00 : f64,
             rescale_t = 3.000000e+00 : f64, steps = 25 : i64}
            : (tensor<1x8x16x16x16xf32>, tensor<1x1374x1024xf32>, tensor<1x1374x1024xf32>)
            -> tensor<1x8x16x16x16xf32> {
    ^bb0(%x: tensor<1x8x16x16x16xf32>, %tau: tensor<1xf32>, %c: tensor<1x1374x1024xf32>):
      %v = trellis.neg %x : tensor<1x8x16x16x16xf32>
      trellis.yield %v : tensor<1x8x16x16x16xf32>
    }
    ```

    The two-region form (cond and neg_cond used from above):

    ```mlir
    %x1 = trellis.flow_sample %noise, %cond, %neg
            {cfg_interval = array<f64: 5.000000e-01, 1.000000e+00>, cfg_strength = 7.500000e+00 : f64,
             rescale_t = 3.000000e+00 : f64, steps = 25 : i64}
            : (tensor<1x8x16x16x16xf32>, tensor<1x1374x1024xf32>, tensor<1x1374x1024xf32>)
            -> tensor<1x8x16x16x16xf32> {
    ^bb0(%x: tensor<1x8x16x16x16xf32>, %tau: tensor<1xf32>):
      %v = trellis.neg %x : tensor<1x8x16x16x16xf32>
      trellis.yield %v : tensor<1x8x16x16x16xf32>
    } uncond {
    ^bb0(%x: tensor<1x8x16x16x16xf32>, %tau: tensor<1xf32>):
      trellis.yield %x : tensor<1x8x16x16x16xf32>
    }
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$noise, Trellis_FloatTensor:$cond,
                       Trellis_FloatTensor:$neg_cond,
                       I64Attr:$steps, F64Attr:$rescale_t,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$sigma_min,
                       F64Attr:$cfg_strength, DenseF64ArrayAttr:$cfg_interval,
                       DefaultValuedAttr<Trellis_MultiImageModeAttr,
                                         "MultiImageMode::none">:$multi_image);
  let results = (outs Trellis_FloatTensor:$result);
  let regions = (region SizedRegion<1>:$body, MaxSizedRegion<1>:$uncond_body,
                 MaxSizedRegion<1>:$shared_body);
  let assemblyFormat = [{
    $noise `,` $cond `,` $neg_cond attr-dict `:` functional-type(operands, results) $body
    (`uncond` $uncond_body^)? (`shared` $shared_body^)?
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The two-region form of trellis-specialize-guidance.
    bool isSpecialized() { return !getUncondBody().empty(); }
    /// The shared-prefix form of trellis-share-guidance-prefix.
    bool hasSharedPrefix() { return !getSharedBody().empty(); }
  }];
}

// Not ReturnLike: that would claim RegionBranchTerminatorOpInterface, which
// the parent does not implement (see trellis.flow_sample).
def Trellis_YieldOp : Trellis_Op<"yield", [Trellis_StorageOnly, Pure, Terminator,
    HasParent<"FlowSampleOp">]> {
  let summary = "Returns the velocity from a trellis.flow_sample body";
  let description = [{
    Terminates the velocity model of `trellis.flow_sample` with the
    predicted velocity (the type of the sampler's x).

    Verifier: the parent is `trellis.flow_sample` (type checked there).

    ```mlir
    trellis.yield %v : tensor<1x8x16x16x16xf32>
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

// The shared prefix's values (trellis-share-guidance-prefix).
def Trellis_SharedYieldOp : Trellis_Op<"shared_yield", [Trellis_StorageOnly, Pure, Terminator,
    HasParent<"FlowSampleOp">]> {
  let summary = "Returns a sampler step's shared values to both branches";
  let description = [{
    Terminates the `shared` region of `trellis.flow_sample`: its operands
    are the values of the step that both guidance branches use, passed to
    them as their block arguments after (x, τ).

    Verifier: the parent is `trellis.flow_sample` (region and types checked
    there).

    ```mlir
    trellis.shared_yield %h : tensor<1x8x16x16x16xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

def Trellis_CfgCombineOp : Trellis_PureOp<"cfg_combine",
    [Trellis_GeneratedKernel, InferTypeOpAdaptor]> {
  let summary = "Classifier-free guidance (1 + w)·v_c − w·v_u";
  let description = [{
    Elementwise (1 + w)·vc − w·vu with w = `strength`, in f32 (spec §3.3).
    The result has vc's type.

    Verifier: vc and vu have one f32 type; strength ≥ 0.

    ```mlir
    %v = trellis.cfg_combine %vc, %vu {strength = 7.500000e+00 : f64}
           : (tensor<1x8x16x16x16xf32>, tensor<1x8x16x16x16xf32>) -> tensor<1x8x16x16x16xf32>
    ```
  }];
  let arguments = (ins Trellis_F32Tensor:$vc, Trellis_F32Tensor:$vu,
                       F64Attr:$strength);
  let results = (outs Trellis_F32Tensor:$result);
  let assemblyFormat = "$vc `,` $vu attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_EulerUpdateOp : Trellis_PureOp<"euler_update",
    [Trellis_GeneratedKernel, InferTypeOpAdaptor]> {
  let summary = "Euler step x − dt·v";
  let description = [{
    Elementwise x − dt·v in f32, with dt = t − t_prev (spec §3.2). The
    result has x's type.

    Verifier: x and v have one f32 type.

    ```mlir
    %x1 = trellis.euler_update %x, %v {dt = 0.01369863 : f64}
            : (tensor<1x8x16x16x16xf32>, tensor<1x8x16x16x16xf32>) -> tensor<1x8x16x16x16xf32>
    ```
  }];
  let arguments = (ins Trellis_F32Tensor:$input, Trellis_F32Tensor:$v,
                       F64Attr:$dt);
  let results = (outs Trellis_F32Tensor:$result);
  let assemblyFormat = "$input `,` $v attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_TimeGridOp : Trellis_PureOp<"time_grid", [Trellis_LibraryCall]> {
  let summary = "The model times τ_i of a sampler's static time grid";
  let description = [{
    The τ values the velocity model of a `trellis.flow_sample` with these
    `steps` and `rescale_t` is called with: result [R] f32 (R ≥ steps, the
    capacity of the time tables), row i = 1000·t_i of the sampler's grid
    (t_i = r·t̃_i / (1 + (r − 1)·t̃_i), t̃_i = 1 − i/steps, formed in f64 and
    stored as f32 exactly as the sampler forms τ) for i < steps, 0 for the
    rows after. Made by `trellis-hoist-time` as the rows of the time tables
    it hoists out of the sampler loop.

    A run-time override of the sampler's steps (`trellis.exe --steps-ss N`)
    applies to the time_grid ops of the same function too: rows i < N are
    then the N-step grid and the others 0 (never looked up); N > R is a
    run-time error (the tables have R rows; `trellis-hoist-time` makes
    R = max(steps, its max-steps option, 64 by default)).

    Verifier: steps ≥ 1, rescale_t > 0; the result is a static rank-1 f32
    tensor of at least `steps` rows.

    ```mlir
    %g = trellis.time_grid {rescale_t = 3.000000e+00 : f64, steps = 25 : i64} : () -> tensor<64xf32>
    ```
  }];
  let arguments = (ins I64Attr:$steps, F64Attr:$rescale_t);
  let results = (outs Trellis_F32Tensor:$result);
  let assemblyFormat = "attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_TimeRowOp : Trellis_PureOp<"time_row", [Trellis_LibraryCall, InferTypeOpAdaptor]> {
  let summary = "Selects the row of a time table that belongs to τ";
  let description = [{
    `table` [S, D...] holds one row per model time of `grid` [S] f32 (a
    `trellis.time_grid`): row k was computed from τ = grid[k] by row-wise
    ops (`trellis-hoist-time` batches what a sampler body computes from τ
    alone over the whole grid, once). For τ [B] f32 the result [B, D...]
    has row b = table[k] with k the first index where grid[k] == τ[b]
    (exact f32 equality: the sampler forms τ the same way as time_grid). A
    τ that is not on the grid is a run-time error.

    Why a lookup by value and not a step-index argument of the sampler
    body: the body keeps its (x, τ) signature, so the sampler, guidance
    specialization and both executors are unchanged; the CPU reference
    scans S ≤ a few dozen floats, and the GPU runtime, which knows τ on the
    host before it launches a step, resolves k there and copies the row
    into the result with one device-to-device copy ahead of the step's CUDA
    graph (no kernel, nothing per step inside the graph).

    Verifier: grid is f32 [S] (static), table is [S, D...] of rank ≥ 2,
    τ is f32 of rank 1; the result is [B, D...] of table's element type.

    ```mlir
    %r = trellis.time_row %table, %grid, %tau
           : (tensor<64x6144xf16>, tensor<64xf32>, tensor<1xf32>) -> tensor<1x6144xf16>
    ```
  }];
  let arguments = (ins Trellis_AnyTensor:$table, Trellis_F32Tensor:$grid,
                       Trellis_F32Tensor:$tau);
  let results = (outs Trellis_AnyTensor:$result);
  let assemblyFormat = "$table `,` $grid `,` $tau attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

} // Trellis_SamplerGroup

//===----------------------------------------------------------------------===//
// Sparse coordinate sets
//===----------------------------------------------------------------------===//

let opDocGroup = Trellis_CoordsGroup in {

def Trellis_OccupancyOp : Trellis_PureOp<"occupancy", [Trellis_RuntimeOp, InferTypeOpAdaptor]> {
  let summary = "Active voxels of dense logits: argwhere(logits > 0)";
  let description = [{
    For logits [B, 1, R, R, R] f32, the coordinate set of every (b, x, y, z)
    with logits[b, 0, x, y, z] > 0 (strictly), in argwhere order:
    lexicographic in (b, x, y, z), z fastest, hence batch-contiguous
    (spec §5.3). No dilation or pruning; the set may be empty. Result
    `!trellis.coords<resolution = R, bound = B·R³>`. The voxel count is
    known only at run time (the host reads it back at the stage boundary).

    Verifier: logits is f32 [B, 1, R, R, R] with static, equal spatial sizes
    R ≤ 1024.

    ```mlir
    %c = trellis.occupancy %logits
           : (tensor<1x1x64x64x64xf32>) -> !trellis.coords<resolution = 64, bound = 262144>
    ```
  }];
  let arguments = (ins Trellis_F32Tensor:$logits);
  let results = (outs Trellis_CoordsType:$result);
  let assemblyFormat = "$logits attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_SparseNeighborMapOp : Trellis_PureOp<"sparse.neighbor_map",
    [Trellis_RuntimeOp, InferTypeOpAdaptor]> {
  let summary = "Neighbour table of a coordinate set (submanifold conv)";
  let description = [{
    For every voxel p = (b, x, y, z) of `coords` and every kernel offset
    (a, β, γ) ∈ {0..k-1}³ (offset index a·k² + β·k + γ), the row of the voxel
    (b, x+a-k/2, y+β-k/2, z+γ-k/2) if it is active, else -1. Built from a hash
    of the coordinates; one table serves every conv on the same set.

    Verifier: kernel is odd and ≥ 1.

    ```mlir
    %nb = trellis.sparse.neighbor_map %c {kernel = 3 : i64}
            : (!trellis.coords<resolution = 64, bound = 32768>)
            -> !trellis.neighbor_map<kernel = 3, bound = 32768>
    ```
  }];
  let arguments = (ins Trellis_CoordsType:$coords, I64Attr:$kernel);
  let results = (outs Trellis_NeighborMapType:$result);
  let assemblyFormat = "$coords attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_SparseParentNeighborMapOp
    : Trellis_PureOp<"sparse.parent_neighbor_map", [Trellis_RuntimeOp, InferTypeOpAdaptor]> {
  let summary = "Neighbour table of a fine set that points at the parents' rows";
  let description = [{
    `neighbors` (a neighbour map of `fine`) with every active entry q replaced
    by the row of q's parent (b, ⌊x/2⌋, ⌊y/2⌋, ⌊z/2⌋) in `coarse`; -1 stays -1.
    A `trellis.sparse.conv3d` through this table reads coarse rows:

        conv3d(upsample(h, coarse, fine), W, b, nb)
          == conv3d(h, W, b, parent_neighbor_map(nb, coarse, fine))

    exactly (the same products and sums), so the conv's work per tap scales
    with the coarse rows when the products are formed before the gather
    (trellis-sink-upsample; the SLat flow's upsampling block, spec §6.2).
    `coarse` must be `trellis.sparse.coarsen` of `fine`.

    Verifier: fine.resolution = 2·coarse.resolution; the map is bounded like
    `fine`. The result has the map's type.

    ```mlir
    %pm = trellis.sparse.parent_neighbor_map %nb, %c32, %c64
            : (!trellis.neighbor_map<kernel = 3, bound = 32768>,
               !trellis.coords<resolution = 32, bound = 32768>,
               !trellis.coords<resolution = 64, bound = 32768>)
            -> !trellis.neighbor_map<kernel = 3, bound = 32768>
    ```
  }];
  let arguments = (ins Trellis_NeighborMapType:$neighbors,
                       Trellis_CoordsType:$coarse, Trellis_CoordsType:$fine);
  let results = (outs Trellis_NeighborMapType:$result);
  let assemblyFormat = [{
    $neighbors `,` $coarse `,` $fine attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Trellis_SparseCoarsenOp : Trellis_PureOp<"sparse.coarsen",
    [Trellis_HostBound, InferTypeOpAdaptor]> {
  let summary = "Coarse coordinate set unique(⌊c / factor⌋)";
  let description = [{
    The set of distinct (b, ⌊x/f⌋, ⌊y/f⌋, ⌊z/f⌋) over the rows of `coords`,
    f = `factor` (default 2), in ascending (b, x', y', z') order (TRELLIS
    sorts the keys b·MxMyMz + x'·MyMz + y'·Mz + z'; spec §6.3 steps 1–2).
    The coarse rows of `trellis.sparse.downsample` and
    `trellis.sparse.upsample`. Result
    `!trellis.coords<resolution = R/f, bound = bound>`.

    Verifier: factor ≥ 2 and divides the resolution.

    ```mlir
    %cc = trellis.sparse.coarsen %c {factor = 2 : i64}
            : (!trellis.coords<resolution = 64, bound = 32768>)
            -> !trellis.coords<resolution = 32, bound = 32768>
    ```
  }];
  let arguments = (ins Trellis_CoordsType:$coords,
                       DefaultValuedAttr<I64Attr, "2">:$factor);
  let results = (outs Trellis_CoordsType:$result);
  let assemblyFormat = "$coords attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_SparseSubdivideOp : Trellis_PureOp<"sparse.subdivide",
    [Trellis_HostBound, InferTypeOpAdaptor]> {
  let summary = "Eight children per voxel at twice the resolution";
  let description = [{
    Every row (b, x, y, z) becomes the 8 rows (b, 2x+δx, 2y+δy, 2z+δz) in
    child order (δx, δy, δz) = (0,0,0), (0,0,1), (0,1,0), (0,1,1), (1,0,0),
    (1,0,1), (1,1,0), (1,1,1) (z fastest), parent-major: child k of parent
    row n is row 8n + k (spec §7.4 Subdivide). Batch contiguity is kept;
    the rows are not globally sorted. Result
    `!trellis.coords<resolution = 2R, bound = 8·bound>`; the features follow
    with `trellis.sparse.subdivide_features`.

    Verifier: 2R ≤ 1024.

    ```mlir
    %f = trellis.sparse.subdivide %c
           : (!trellis.coords<resolution = 64, bound = 32768>)
           -> !trellis.coords<resolution = 128, bound = 262144>
    ```
  }];
  let arguments = (ins Trellis_CoordsType:$coords);
  let results = (outs Trellis_CoordsType:$result);
  let assemblyFormat = "$coords attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_SparseXyzOp : Trellis_PureOp<"sparse.xyz", [Trellis_HostBound, InferTypeOpAdaptor]> {
  let summary = "Spatial columns (x, y, z) of a coordinate set";
  let description = [{
    The [N, 3] i32 tensor of columns 1..3 of the coordinate rows, in row
    order (the APE's input; spec §6.7, §7.1). Result
    `tensor<?x3xi32, #trellis.bounds<[bound]>>`.

    ```mlir
    %xyz = trellis.sparse.xyz %c
             : (!trellis.coords<resolution = 64, bound = 32768>)
             -> tensor<?x3xi32, #trellis.bounds<[32768]>>
    ```
  }];
  let arguments = (ins Trellis_CoordsType:$coords);
  let results = (outs Trellis_I32Tensor:$result);
  let assemblyFormat = "$coords attr-dict `:` functional-type(operands, results)";
}

def Trellis_SparseToTensorOp : Trellis_PureOp<"sparse.to_tensor",
    [Trellis_HostBound, InferTypeOpAdaptor]> {
  let summary = "Coordinate rows as an [N, 4] i32 tensor";
  let description = [{
    The coordinate rows (b, x, y, z) as an [N, 4] i32 tensor in row order,
    e.g. to write `coords.npy`. Result
    `tensor<?x4xi32, #trellis.bounds<[bound]>>`.

    ```mlir
    %t = trellis.sparse.to_tensor %c
           : (!trellis.coords<resolution = 64, bound = 32768>)
           -> tensor<?x4xi32, #trellis.bounds<[32768]>>
    ```
  }];
  let arguments = (ins Trellis_CoordsType:$coords);
  let results = (outs Trellis_I32Tensor:$result);
  let assemblyFormat = "$coords attr-dict `:` functional-type(operands, results)";
}

def Trellis_SparseFromTensorOp : Trellis_PureOp<"sparse.from_tensor",
    [Trellis_HostBound, InferTypeOpAdaptor]> {
  let summary = "Coordinate set from an [N, 4] i32 tensor";
  let description = [{
    Takes rows (b, x, y, z) as they are (no sorting, no de-duplication) as a
    coordinate set of the given `resolution`; bound = the upper bound of
    dimension 0. The runtime checks that 0 ≤ x, y, z < resolution, b ≥ 0,
    and that the rows of each batch item are contiguous, and fails with the
    op's location otherwise.

    Verifier: t is i32 [N, 4]; 1 ≤ resolution ≤ 1024.

    ```mlir
    %c = trellis.sparse.from_tensor %t {resolution = 64 : i64}
           : (tensor<?x4xi32, #trellis.bounds<[32768]>>)
           -> !trellis.coords<resolution = 64, bound = 32768>
    ```
  }];
  let arguments = (ins Trellis_I32Tensor:$input, I64Attr:$resolution);
  let results = (outs Trellis_CoordsType:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_SparseBatchSegmentsOp : Trellis_PureOp<"sparse.batch_segments",
    [Trellis_HostBound, InferTypeOpAdaptor]> {
  let summary = "One attention group per batch item";
  let description = [{
    The partition of the rows into one group per batch item, in batch order
    (flash-attention's cu_seqlens from the batch layout): full per-sample
    attention of the SLat flow (spec §6.5). Result
    `!trellis.segments<max_length = bound, bound = bound>`.

    ```mlir
    %s = trellis.sparse.batch_segments %c
           : (!trellis.coords<resolution = 32, bound = 32768>)
           -> !trellis.segments<max_length = 32768, bound = 32768>
    ```
  }];
  let arguments = (ins Trellis_CoordsType:$coords);
  let results = (outs Trellis_SegmentsType:$result);
  let assemblyFormat = "$coords attr-dict `:` functional-type(operands, results)";
}

def Trellis_SparseWindowSegmentsOp : Trellis_PureOp<"sparse.window_segments",
    [Trellis_RuntimeOp, InferTypeOpAdaptor]> {
  let summary = "Swin-3D window partition of a coordinate set";
  let description = [{
    The window partition of spec §7.1, with w = `window` (default 8) and
    s = `shift` (default 0; TRELLIS uses 4 on odd blocks):

    1. c' = c + s on x, y and z: a positive shift, no wrap-around (no cyclic
       roll).
    2. Window index per axis W_a = ⌊c'_a / w⌋; windows per axis
       n_a = ⌈(max over ALL rows of the batch of c'_a + 1) / w⌉.
    3. id = b·(n_x·n_y·n_z) + W_x·(n_y·n_z) + W_y·n_z + W_z.
    4. Rows are grouped by id in ascending order (empty windows skipped);
       each group holds every row of its window (1..w³ rows). The order
       inside a group is unspecified (attention is permutation-equivariant).

    A window never spans two samples. Result
    `!trellis.segments<max_length = w³, bound = bound>`.

    Verifier: window ≥ 1; 0 ≤ shift < window.

    ```mlir
    %s = trellis.sparse.window_segments %c {shift = 4 : i64, window = 8 : i64}
           : (!trellis.coords<resolution = 64, bound = 32768>)
           -> !trellis.segments<max_length = 512, bound = 32768>
    ```
  }];
  let arguments = (ins Trellis_CoordsType:$coords,
                       DefaultValuedAttr<I64Attr, "8">:$window,
                       DefaultValuedAttr<I64Attr, "0">:$shift);
  let results = (outs Trellis_SegmentsType:$result);
  let assemblyFormat = "$coords attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

} // Trellis_CoordsGroup

//===----------------------------------------------------------------------===//
// Sparse feature operations
//===----------------------------------------------------------------------===//

let opDocGroup = Trellis_SparseGroup in {

def Trellis_SparseConv3dOp : Trellis_PureOp<"sparse.conv3d",
    [AttrSizedOperandSegments, InferTypeOpAdaptor]> {
  let summary = "Submanifold sparse convolution (spconv SubMConv3d)";
  let description = [{
    feats [N, I] → [N, O] on the same coordinates and row order; weight
    [O, k, k, k, I] (spconv KRSC), optional bias [O]; f32 accumulation
    (spec §6.4). With a map from `trellis.sparse.parent_neighbor_map`, feats
    are the coarse set's rows [N', I] and the result has the map's N rows.

    * k ≥ 3 (odd): needs `neighbors`, the neighbour map of kernel k of the
      feature's coordinate set. For each row p and offset (a, β, γ) whose
      neighbour q = map[p, a·k² + β·k + γ] is active:

          out[p] = bias + Σ W[:, a, β, γ, :] · feats[q]

      (q = (b, x+a−k/2, y+β−k/2, z+γ−k/2); inactive neighbours count as zero,
      batches never mix): a dense padded cross-correlation restricted to the
      active sites.
    * k = 1: takes no neighbour map and has **spconv's 1×1 fast-path
      semantics** (spec §6.4 quirk, §12.16): out = feats · M + bias where M is
      the weight's row-major buffer reinterpreted as an [I, O] row-major
      matrix, M[i, j] = flat[i·O + j] with flat[o·I + i] = W[o, 0, 0, 0, i].
      This is a reshape, *not* the transpose of W[:, 0, 0, 0, :]; TRELLIS's
      mesh decoder skip connections were trained through it.

    Verifier: feats [N, I]; weight static of rank 5 with a cubic odd kernel
    and I agreeing; one element type; bias [O]; a neighbour map iff k > 1,
    of kernel k, with feats' N dynamic and bounded like the map.

    ```mlir
    %y = trellis.sparse.conv3d %h, %w, %b neighbors %nb
           : (tensor<?x128xf16, #trellis.bounds<[32768]>>, tensor<1024x3x3x3x128xf16>, tensor<1024xf16>,
              !trellis.neighbor_map<kernel = 3, bound = 32768>)
           -> tensor<?x1024xf16, #trellis.bounds<[32768]>>
    %s = trellis.sparse.conv3d %h, %w1, %b1
           : (tensor<?x128xf16, #trellis.bounds<[32768]>>, tensor<96x1x1x1x128xf16>, tensor<96xf16>)
           -> tensor<?x96xf16, #trellis.bounds<[32768]>>
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$feats, Trellis_FloatTensor:$weight,
                       Optional<Trellis_FloatTensor>:$bias,
                       Optional<Trellis_NeighborMapType>:$neighbors);
  let results = (outs Trellis_FloatTensor:$result);
  let assemblyFormat = [{
    $feats `,` $weight (`,` $bias^)? (`neighbors` $neighbors^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Trellis_SparseDownsampleOp : Trellis_PureOp<"sparse.downsample",
    [InferTypeOpAdaptor]> {
  let summary = "2× sparse downsample of features: Σ children / (n + 1)";
  let description = [{
    feats [N, C] on `fine` → [N', C] on `coarse`, where `coarse` must be
    `trellis.sparse.coarsen` of `fine` (factor 2). For each coarse row,

        out = (Σ_{children} feats) / (n_children + 1)

    **not the true mean** (spec §6.3 quirk, §12.3: PyTorch's scatter_reduce
    "mean" with include_self = True into zeros counts the zero). Sums in f32.

    Verifier: fine.resolution = 2·coarse.resolution; feats [N, C] with N
    dynamic and bounded like `fine`. The result's N' has coarse's bound.

    ```mlir
    %d = trellis.sparse.downsample %h, %c64, %c32
           : (tensor<?x128xf16, #trellis.bounds<[32768]>>,
              !trellis.coords<resolution = 64, bound = 32768>, !trellis.coords<resolution = 32, bound = 32768>)
           -> tensor<?x128xf16, #trellis.bounds<[32768]>>
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$feats, Trellis_CoordsType:$fine,
                       Trellis_CoordsType:$coarse);
  let results = (outs Trellis_FloatTensor:$result);
  let assemblyFormat = "$feats `,` $fine `,` $coarse attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_SparseUpsampleOp : Trellis_PureOp<"sparse.upsample",
    [InferTypeOpAdaptor]> {
  let summary = "2× sparse upsample of features: copy the parent row";
  let description = [{
    feats [N', C] on `coarse` → [N, C] on `fine`: every fine row gets the
    features of its parent (b, ⌊x/2⌋, ⌊y/2⌋, ⌊z/2⌋) (nearest neighbour;
    spec §6.3 SparseUpsample). `coarse` must be `trellis.sparse.coarsen` of
    `fine`; the result follows fine's row order.

    Verifier: fine.resolution = 2·coarse.resolution; feats [N', C] with N'
    dynamic and bounded like `coarse`. The result's N has fine's bound.

    ```mlir
    %u = trellis.sparse.upsample %h, %c32, %c64
           : (tensor<?x2048xf16, #trellis.bounds<[32768]>>,
              !trellis.coords<resolution = 32, bound = 32768>, !trellis.coords<resolution = 64, bound = 32768>)
           -> tensor<?x2048xf16, #trellis.bounds<[32768]>>
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$feats, Trellis_CoordsType:$coarse,
                       Trellis_CoordsType:$fine);
  let results = (outs Trellis_FloatTensor:$result);
  let assemblyFormat = "$feats `,` $coarse `,` $fine attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_SparseSubdivideFeaturesOp : Trellis_PureOp<"sparse.subdivide_features",
    [Trellis_GeneratedKernel, InferTypeOpAdaptor]> {
  let summary = "Features of `trellis.sparse.subdivide`: each row copied 8×";
  let description = [{
    feats [N, C] → [8N, C] with row 8n + k = feats[n], k = 0..7: the
    features of the children of `trellis.sparse.subdivide` (parent-major,
    spec §7.4). A dynamic N gets bound 8·bound.

    Verifier: feats has rank 2.

    ```mlir
    %f = trellis.sparse.subdivide_features %h
           : (tensor<?x768xf16, #trellis.bounds<[32768]>>) -> tensor<?x768xf16, #trellis.bounds<[262144]>>
    ```
  }];
  let arguments = (ins Trellis_AnyTensor:$feats);
  let results = (outs Trellis_AnyTensor:$result);
  let assemblyFormat = "$feats attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_SparseGroupNormOp : Trellis_PureOp<"sparse.group_norm",
    [Trellis_GeneratedKernel, InferTypeOpAdaptor]> {
  let summary = "GroupNorm with per-sample statistics (SparseGroupNorm32)";
  let description = [{
    For each batch item separately, its n rows × C channels are treated as a
    [1, C, n] tensor: each of the `groups` groups of C/groups consecutive
    channels is normalized with the mean and biased variance over (its
    channels × the n rows of that sample), in f32:

        y = (x − μ_{b,g}) / √(σ²_{b,g} + eps) · weight[c] + bias[c]

    then rounded to feats' element type (spec §7.4; eps 1e-5 there). weight
    and bias are f32 [C]. The result has feats' type.

    Verifier: feats [N, C] with N dynamic and bounded like `coords`;
    groups ≥ 1 dividing C; weight and bias f32 [C]; eps > 0.

    ```mlir
    %g = trellis.sparse.group_norm %h, %c, %gamma, %beta {eps = 1.000000e-05 : f64, groups = 32 : i64}
           : (tensor<?x768xf16, #trellis.bounds<[32768]>>, !trellis.coords<resolution = 64, bound = 32768>,
              tensor<768xf32>, tensor<768xf32>)
           -> tensor<?x768xf16, #trellis.bounds<[32768]>>
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$feats, Trellis_CoordsType:$coords,
                       Trellis_F32Tensor:$weight, Trellis_F32Tensor:$bias,
                       DefaultValuedAttr<I64Attr, "32">:$groups, F64Attr:$eps);
  let results = (outs Trellis_FloatTensor:$result);
  let assemblyFormat = [{
    $feats `,` $coords `,` $weight `,` $bias attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Trellis_SparseBatchBroadcastOp : Trellis_PureOp<"sparse.batch_broadcast",
    [InferTypeOpAdaptor]> {
  let summary = "Per-sample vectors [B, C] to rows [N, C]";
  let description = [{
    out[n] = values[b_n] with b_n the batch index of row n of `coords`
    (spec §5.4): the modulation vectors of the SLat flow's res blocks. The
    runtime checks b_n < B. Result [N, C] with coords' bound and values'
    element type.

    Verifier: values has rank 2.

    Canonicalization: with one sample (values [1, C]) every row is that row,
    so `modulate` / `layer_norm_modulate` (shift, scale) and `gated_residual`
    (gate) take `values` itself, broadcast over their input's rows, instead of
    the [N, C] copy.

    ```mlir
    %r = trellis.sparse.batch_broadcast %scale, %c
           : (tensor<2x128xf16>, !trellis.coords<resolution = 64, bound = 32768>)
           -> tensor<?x128xf16, #trellis.bounds<[32768]>>
    ```
  }];
  let arguments = (ins Trellis_AnyTensor:$values, Trellis_CoordsType:$coords);
  let results = (outs Trellis_AnyTensor:$result);
  let assemblyFormat = "$values `,` $coords attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def Trellis_SparseParentRowsOp : Trellis_PureOp<"sparse.parent_rows",
    [Trellis_HostBound, InferTypeOpAdaptor]> {
  let summary = "Row of each fine voxel's parent in the coarse set";
  let description = [{
    For every row n of `fine`, the row of `coarse` holding its parent
    (b, ⌊x/2⌋, ⌊y/2⌋, ⌊z/2⌋): an i32 [N] tensor bounded like `fine`. The index
    array of `trellis.sparse.upsample` once trellis-partition-cuda has
    rewritten it into `trellis.gather_rows` (an index computed from
    coordinates: evaluated when the runtime binds the voxel set). `coarse`
    must be `trellis.sparse.coarsen` of `fine`.

    Verifier: fine.resolution = 2·coarse.resolution.

    ```mlir
    %p = trellis.sparse.parent_rows %c64, %c32
           : (!trellis.coords<resolution = 64, bound = 32768>, !trellis.coords<resolution = 32, bound = 32768>)
           -> tensor<?xi32, #trellis.bounds<[32768]>>
    ```
  }];
  let arguments = (ins Trellis_CoordsType:$fine, Trellis_CoordsType:$coarse);
  let results = (outs Trellis_I32Tensor:$result);
  let assemblyFormat = "$fine `,` $coarse attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_SparseChildRowsOp : Trellis_PureOp<"sparse.child_rows",
    [Trellis_HostBound, InferTypeOpAdaptor]> {
  let summary = "The fine rows of each coarse voxel, as a CSR index";
  let description = [{
    The children of coarse row r are fine rows
    `children[offsets[r] .. offsets[r+1])`, in ascending row order: `offsets`
    i32 [N' + 1] (bound coarse.bound + 1), `children` i32 [N] (fine's bound).
    The index of `trellis.sparse.downsample` once trellis-partition-cuda has
    rewritten it into `trellis.segment_mean`. `coarse` must be
    `trellis.sparse.coarsen` of `fine`.

    Verifier: fine.resolution = 2·coarse.resolution.

    ```mlir
    %o, %ch = trellis.sparse.child_rows %c64, %c32
           : (!trellis.coords<resolution = 64, bound = 32768>, !trellis.coords<resolution = 32, bound = 32768>)
           -> (tensor<?xi32, #trellis.bounds<[32769]>>, tensor<?xi32, #trellis.bounds<[32768]>>)
    ```
  }];
  let arguments = (ins Trellis_CoordsType:$fine, Trellis_CoordsType:$coarse);
  let results = (outs Trellis_I32Tensor:$offsets, Trellis_I32Tensor:$children);
  let assemblyFormat = "$fine `,` $coarse attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_SparseBatchIndexOp : Trellis_PureOp<"sparse.batch_index",
    [Trellis_HostBound, InferTypeOpAdaptor]> {
  let summary = "The batch column of a coordinate set";
  let description = [{
    b_n of every row (b, x, y, z) of `coords`, an i32 [N] tensor bounded like
    `coords`: the index of `trellis.sparse.batch_broadcast` once
    trellis-partition-cuda has rewritten it into `trellis.gather_rows`.

    ```mlir
    %b = trellis.sparse.batch_index %c
           : (!trellis.coords<resolution = 64, bound = 32768>) -> tensor<?xi32, #trellis.bounds<[32768]>>
    ```
  }];
  let arguments = (ins Trellis_CoordsType:$coords);
  let results = (outs Trellis_I32Tensor:$result);
  let assemblyFormat = "$coords attr-dict `:` functional-type(operands, results)";
}

def Trellis_GatherRowsOp : Trellis_PureOp<"gather_rows", [Trellis_GeneratedKernel, InferTypeOpAdaptor]> {
  let summary = "Rows of a tensor picked by an index: out[i] = x[index[i]]";
  let description = [{
    x [M, ...] and an i32 index [N] with entries in [0, M) → [N, ...] of x's
    element type; dimension 0 as the index's (dynamic and bounded, or
    static). The GPU form of the sparse resampling copies (upsample, batch
    broadcast) after trellis-partition-cuda; a generated kernel.

    Verifier: index has rank 1; x has rank ≥ 1.

    ```mlir
    %u = trellis.gather_rows %h, %p
           : (tensor<?x128xf16, #trellis.bounds<[4096]>>, tensor<?xi32, #trellis.bounds<[32768]>>)
           -> tensor<?x128xf16, #trellis.bounds<[32768]>>
    ```
  }];
  let arguments = (ins Trellis_AnyTensor:$x, Trellis_I32Tensor:$index);
  let results = (outs Trellis_AnyTensor:$result);
  let assemblyFormat = "$x `,` $index attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_SegmentMeanOp : Trellis_PureOp<"segment_mean", [Trellis_GeneratedKernel, InferTypeOpAdaptor]> {
  let summary = "Mean of the rows of each CSR segment, plus extra counts";
  let description = [{
    x [M, C], offsets i32 [S + 1], rows i32 [K] → [S, C]:

        out[s] = (Σ_{j ∈ [offsets[s], offsets[s+1])} x[rows[j]]) / (n_s + extra_count)

    with n_s = offsets[s+1] − offsets[s], summed in f32 in ascending j order,
    rounded to x's element type. With `extra_count = 1` it is the sparse
    downsample's Σ children / (n + 1) (spec §6.3 quirk) after
    trellis-partition-cuda; a generated kernel. Dimension 0 of the result is
    offsets' minus one (a bound one less).

    Verifier: offsets and rows have rank 1; x has rank 2; extra_count ≥ 0.

    ```mlir
    %d = trellis.segment_mean %h, %o, %ch {extra_count = 1 : i64}
           : (tensor<?x32xf16, #trellis.bounds<[32768]>>, tensor<?xi32, #trellis.bounds<[32769]>>,
              tensor<?xi32, #trellis.bounds<[32768]>>)
           -> tensor<?x32xf16, #trellis.bounds<[32768]>>
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$x, Trellis_I32Tensor:$offsets,
                       Trellis_I32Tensor:$rows,
                       DefaultValuedAttr<I64Attr, "0">:$extra_count);
  let results = (outs Trellis_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $offsets `,` $rows attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Trellis_SparseAttentionOp : Trellis_PureOp<"sparse.attention",
    [Trellis_LibraryCall, AttrSizedOperandSegments, InferTypeOpAdaptor]> {
  let summary = "Variable-length self-attention within segments";
  let description = [{
    q, k [N, H, d], v [N, H, dv] → [N, H, dv]: every row attends to every
    row of its own group of `segments` (and to no other):

        out[i, h, :] = Σ_{j ∈ group(i)} softmax_j(scale · q[i, h, :]·k[j, h, :]) · v[j, h, :]

    Scores, softmax and accumulation in f32; the output keeps the original
    row order (spec §6.5 full attention with `trellis.sparse.batch_segments`,
    §7.1 Swin windows with `trellis.sparse.window_segments`). No mask, no
    relative position bias.

    Optional `q_gamma` / `k_gamma` ([H, d], f32; set by
    `trellis-form-attention`): the head RMS norm of `trellis.head_rms_norm`
    on q / k first, rounded to q's element type as that op does.

    Optional `tiles` (set by `trellis-tile-attention`, the tiling phase):
    the names of the attention kernels (runtime/kernels/attention.h) this
    op may run, per kernel family the short-sequence default first, then
    the long-sequence candidates the runtime chooses among by the wave
    model when the query length is only known at run time. The CPU
    reference ignores it.

    `precision = "fp8_e4m3"` (traced under `trellisc --precision=fp8` on the
    SLat flow transformer's self-attention, head dim 64, with q_gamma and
    k_gamma) runs Q, K, V and the softmax weights P in FP8 E4M3 exactly as
    for `trellis.attention`, each segment a sequence (its first 64 rows the
    reference's keys) and v's per-head scale over every row of the op (or
    the calibrated `v_amax`, as for `trellis.attention`).

    Verifier: rank 3 each; one element type; N dynamic and bounded like
    `segments`; H agrees; d agrees between q and k; scale > 0; q_gamma and
    k_gamma, when present, are [H, d];
    `tiles` as for `trellis.attention`; precision, when present, is
    "fp8_e4m3", with head dims of 64 for q, k and v and both q_gamma and
    k_gamma; v_amax as for `trellis.attention`.

    ```mlir
    %o = trellis.sparse.attention %q, %k, %v, %s {scale = 1.250000e-01 : f64}
           : (tensor<?x12x64xf16, #trellis.bounds<[32768]>>, tensor<?x12x64xf16, #trellis.bounds<[32768]>>,
              tensor<?x12x64xf16, #trellis.bounds<[32768]>>, !trellis.segments<max_length = 512, bound = 32768>)
           -> tensor<?x12x64xf16, #trellis.bounds<[32768]>>
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$q, Trellis_FloatTensor:$k,
                       Trellis_FloatTensor:$v, Trellis_SegmentsType:$segments,
                       Optional<Trellis_F32Tensor>:$q_gamma,
                       Optional<Trellis_F32Tensor>:$k_gamma, F64Attr:$scale,
                       OptionalAttr<StrArrayAttr>:$tiles,
                       OptionalAttr<StrAttr>:$precision,
                       OptionalAttr<DenseF32ArrayAttr>:$v_amax);
  let results = (outs Trellis_FloatTensor:$result);
  let builders = [
    OpBuilder<(ins "TypeRange":$resultTypes, "Value":$q, "Value":$k,
                   "Value":$v, "Value":$segments, "FloatAttr":$scale), [{
      build($_builder, $_state, resultTypes, q, k, v, segments, Value(),
            Value(), scale, ArrayAttr(), StringAttr(), DenseF32ArrayAttr());
    }]>
  ];
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $segments (`q_gamma` $q_gamma^)? (`k_gamma` $k_gamma^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Trellis_SparseCrossAttentionOp : Trellis_PureOp<"sparse.cross_attention",
    [Trellis_LibraryCall, InferTypeOpAdaptor]> {
  let summary = "Cross-attention of sparse rows to their sample's context";
  let description = [{
    q [N, H, d] (rows of `coords`), k [B, Lc, H, d], v [B, Lc, H, dv] →
    [N, H, dv]: row i of batch item b_i attends to the Lc context tokens of
    sample b_i:

        out[i, h, :] = Σ_j softmax_j(scale · q[i, h, :]·k[b_i, j, h, :]) · v[b_i, j, h, :]

    f32 scores, softmax and accumulation (spec §6.5 cross). The runtime
    checks b_i < B.

    Optional `tiles` (set by `trellis-tile-attention`, the tiling phase):
    the names of the attention kernels (runtime/kernels/attention.h) this
    op may run, per kernel family the short-sequence default first, then
    the long-sequence candidates the runtime chooses among by the wave
    model when the query length is only known at run time. The CPU
    reference ignores it.

    Verifier: q rank 3 with N dynamic and bounded like `coords`; k, v rank
    4 with B and Lc agreeing; one element type; H agrees; d agrees between q
    and k; scale > 0;
    `tiles` as for `trellis.attention`.

    ```mlir
    %o = trellis.sparse.cross_attention %q, %k, %v, %c {scale = 1.250000e-01 : f64}
           : (tensor<?x16x64xf16, #trellis.bounds<[32768]>>, tensor<2x1374x16x64xf16>, tensor<2x1374x16x64xf16>,
              !trellis.coords<resolution = 32, bound = 32768>)
           -> tensor<?x16x64xf16, #trellis.bounds<[32768]>>
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$q, Trellis_FloatTensor:$k,
                       Trellis_FloatTensor:$v, Trellis_CoordsType:$coords,
                       F64Attr:$scale, OptionalAttr<StrArrayAttr>:$tiles);
  let results = (outs Trellis_FloatTensor:$result);
  let builders = [
    OpBuilder<(ins "TypeRange":$resultTypes, "Value":$q, "Value":$k,
                   "Value":$v, "Value":$coords, "FloatAttr":$scale), [{
      build($_builder, $_state, resultTypes, q, k, v, coords, scale,
            ArrayAttr());
    }]>
  ];
  let assemblyFormat = "$q `,` $k `,` $v `,` $coords attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Trellis_SparseUniqueMeanOp : Trellis_PureOp<"sparse.unique_mean",
    [Trellis_RuntimeOp, InferTypeOpAdaptor]> {
  let summary = "Unique keys and the true mean of their values";
  let description = [{
    keys [M] i64, values [M, K] f32 → (unique [U] i64, means [U, K] f32):
    `unique` holds the distinct keys in ascending order and
    means[u] = (Σ_{m: keys[m] = unique[u]} values[m]) / count — the true
    mean (scatter-mean with include_self = False), as the mesh extraction's
    cube-corner → lattice-vertex averaging (spec §7.4 step 2, §8.2). Both
    results have a dynamic U bounded by M's upper bound.

    Verifier: keys rank 1; values rank 2 with M agreeing.

    ```mlir
    %u, %m = trellis.sparse.unique_mean %keys, %vals
           : (tensor<?xi64, #trellis.bounds<[16777216]>>, tensor<?x10xf32, #trellis.bounds<[16777216]>>)
           -> (tensor<?xi64, #trellis.bounds<[16777216]>>, tensor<?x10xf32, #trellis.bounds<[16777216]>>)
    ```
  }];
  let arguments = (ins Trellis_I64Tensor:$keys, Trellis_F32Tensor:$values);
  let results = (outs Trellis_I64Tensor:$unique, Trellis_F32Tensor:$means);
  let assemblyFormat = "$keys `,` $values attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

} // Trellis_SparseGroup

//===----------------------------------------------------------------------===//
// Mesh extraction
//===----------------------------------------------------------------------===//

let opDocGroup = Trellis_MeshGroup in {

def Trellis_MeshFlexiCubesOp : Trellis_PureOp<"mesh.flexicubes",
    [Trellis_RuntimeOp, InferTypeOpAdaptor]> {
  let summary = "FlexiCubes mesh extraction from the mesh decoder's head";
  let description = [{
    SparseFeatures2Mesh of spec §7.4 in inference mode, per batch item, on
    the cubes `coords` (at `resolution`, default 256) with the 101-channel
    head `fields` [N, 101] f32 (sdf [0, 8), deform [8, 32), weights
    [32, 53), colour [53, 101); corner k = (k&1, (k>>1)&1, (k>>2)&1)):

    1. sdf ← sdf − 1/R.
    2. Lattice vertices (cube + corner_k on the (R+1)³ lattice) are
       de-duplicated; each vertex's [sdf, deform(3), colour(6)] is the true
       mean over the cubes sharing it.
    3. Unfilled lattice vertices have sdf = 1 (outside), deform and colour
       0; cubes outside the set have weights 0.
    4. p = v/R − 0.5 + ((1 − 1e-8)/(2R))·tanh(deform).
    5. FlexiCubes over the candidate cubes (the active cubes and every cube
       sharing a lattice vertex with one; no other cube can have mixed signs)
       with weight_scale 0.99: β = tanh(w[0:12])·0.99 + 1,
       α = tanh(w[12:20])·0.99 + 1, γ = sigmoid(w[20])·0.99 + 0.005; surface
       cubes have mixed corner signs (sdf < 0 inside); case id
       Σ inside_k·2^k with ambiguous cases resolved by the check table; dual
       vertices are β-weighted means of the α-weighted edge zero crossings
       (colours through a sigmoid, interpolated alike); every surface edge
       shared by 4 surface cubes gives a quad (cubes in ascending flat index,
       winding (0,1,3,2) if the sdf at the edge's first vertex is > 0 else
       (2,3,1,0)), split along the diagonal with the larger γ product.
    6. Results: `vertices` [V, 3] f32 (world coordinates, z up),
       `faces` [F, 3] i32 (vertex rows; TRELLIS returns int64, the verifier
       guarantees V fits i32), `vertex_attrs` [V, 6] f32 in [0, 1] (colour,
       then 3 normal-like channels). Face normals are not a result (a
       cross product of the vertices, when needed).

    Processing the candidates in ascending flat-index order reproduces
    TRELLIS's vertex and face order. The meshes of the batch items are
    concatenated in batch order; faces index the concatenated vertex rows,
    and the runtime keeps each item's vertex and face row ranges (as it
    keeps a coordinate set's batch layout). An item without surface cubes
    contributes no rows.

    Bounds, with n the coords bound: there are at most 27n candidate cubes
    (3×3×3 neighbourhood of each active cube), each yields at most 4 dual
    vertices, so V ≤ 108n; each quad edge is one of the 12 edges of 4
    surface cubes, so there are at most 3·27n quads and F ≤ 162n triangles.

    Verifier: fields is f32 [N, 101] with N dynamic and bounded like
    `coords`; resolution equals the coordinate set's resolution; 108n fits
    the i32 face indices.

    ```mlir
    %v, %f, %a = trellis.mesh.flexicubes %c, %fields {resolution = 256 : i64}
           : (!trellis.coords<resolution = 256, bound = 65536>, tensor<?x101xf32, #trellis.bounds<[65536]>>)
           -> (tensor<?x3xf32, #trellis.bounds<[7077888]>>, tensor<?x3xi32, #trellis.bounds<[10616832]>>,
               tensor<?x6xf32, #trellis.bounds<[7077888]>>)
    ```
  }];
  let arguments = (ins Trellis_CoordsType:$coords, Trellis_F32Tensor:$fields,
                       DefaultValuedAttr<I64Attr, "256">:$resolution);
  let results = (outs Trellis_F32Tensor:$vertices, Trellis_I32Tensor:$faces,
                      Trellis_F32Tensor:$vertex_attrs);
  let assemblyFormat = "$coords `,` $fields attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

} // Trellis_MeshGroup

#endif // TRELLIS_OPS_TD
