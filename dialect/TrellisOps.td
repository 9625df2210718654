//===- TrellisOps.td - Operations of the trellis dialect ---*- tablegen -*-===//
//
// Every operation of the TRELLIS v1 inference math (spec §8). Conventions:
//  * Assembly is uniform: operands, attributes, then the functional type.
//  * Dense layouts follow PyTorch: Linear weights [out, in], Conv3d weights
//    [out, in, k, k, k], sparse conv weights [out, k, k, k, in] (spconv KRSC).
//  * Token-major attention layout [B, L, H, d] (as TRELLIS's qkv reshape).
//  * Element types: f16 inside fp16 regions, f32 elsewhere (spec §11); ops do
//    not mix them silently: `trellis.cast` is explicit.
//  * Every op computes its normalization statistics, softmax and reductions
//    in f32, whatever its storage type.
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
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

//===----------------------------------------------------------------------===//
// Traits and type constraints
//===----------------------------------------------------------------------===//

// Every dynamic dimension of every tensor operand and result has an upper
// bound (a #trellis.bounds encoding with one entry per `?`).
def Trellis_BoundedShapes : NativeOpTrait<"BoundedShapes"> {
  let cppNamespace = "::mlir::trellis::OpTrait";
}

def Trellis_Float : AnyTypeOf<[F16, F32]>;
def Trellis_FloatTensor : RankedTensorOf<[F16, F32]>;
def Trellis_F32Tensor : RankedTensorOf<[F32]>;
def Trellis_IntTensor : RankedTensorOf<[I32, I64]>;
def Trellis_I32Tensor : RankedTensorOf<[I32]>;
def Trellis_AnyTensor : RankedTensorOf<[F16, F32, I32, I64]>;

// Base class: pure, bounded shapes.
class Trellis_PureOp<string mnemonic, list<Trait> traits = []>
    : Trellis_Op<mnemonic, !listconcat([Pure, Trellis_BoundedShapes], traits)>;

//===----------------------------------------------------------------------===//
// Weights and constants
//===----------------------------------------------------------------------===//

def Trellis_WeightOp : Trellis_PureOp<"weight"> {
  let summary = "A named checkpoint tensor, bound by the runtime";
  let description = [{
    Refers to tensor `name` of the checkpoint of model `model` (a key of
    pipeline.json's `args.models`). The compiler knows only its name, shape
    and element type (from the safetensors header); the bytes never enter the
    IR. The runtime binds the mapped file's bytes to it.

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

//===----------------------------------------------------------------------===//
// Dense ops
//===----------------------------------------------------------------------===//

def Trellis_LinearOp : Trellis_PureOp<"linear",
    [InferTypeOpAdaptor]> {
  let summary = "y = x·Wᵀ + b over the last dimension";
  let description = [{
    `input` [..., K], `weight` [O, K] (PyTorch layout), optional `bias` [O];
    result [..., O] with the input's element type and bounds. Input, weight
    and bias share one element type; accumulation is f32.

    ```mlir
    %y = trellis.linear %x, %w, %b
           : (tensor<2x4096x1024xf16>, tensor<3072x1024xf16>, tensor<3072xf16>)
           -> tensor<2x4096x3072xf16>
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$input, Trellis_FloatTensor:$weight,
                       Optional<Trellis_FloatTensor>:$bias);
  let results = (outs Trellis_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

// Elementwise unary ops: same shape and type in and out, f32 math.
class Trellis_UnaryOp<string mnemonic, string formula>
    : Trellis_PureOp<mnemonic, [SameOperandsAndResultType]> {
  let summary = "Elementwise " # formula;
  let description = [{
    Elementwise }] # formula # [{, computed in f32 and rounded to the
    operand's element type.

    ```mlir
    %y = trellis.}] # mnemonic # [{ %x : tensor<4x8xf16>
    ```
  }];
  let arguments = (ins Trellis_FloatTensor:$input);
  let results = (outs Trellis_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Trellis_SiluOp : Trellis_UnaryOp<"silu", "x·sigmoid(x)">;

// Elementwise binary ops with NumPy broadcasting of static dimensions.
class Trellis_BinaryOp<string mnemonic, string formula>
    : Trellis_PureOp<mnemonic, [InferTypeOpAdaptor]> {
  let summary = "Elementwise " # formula # " with broadcasting";
  let description = [{
    Elementwise }] # formula # [{ of two tensors of one element type.
    Shapes broadcast as in NumPy (trailing dimensions aligned, size-1
    dimensions stretched); a dynamic dimension broadcasts only against itself
    or 1.

    ```mlir
    %z = trellis.}] # mnemonic # [{ %x, %y : (tensor<2x4096x1024xf16>, tensor<2x1x1024xf16>) -> tensor<2x4096x1024xf16>
    ```
  }];
  let arguments = (ins Trellis_AnyTensor:$lhs, Trellis_AnyTensor:$rhs);
  let results = (outs Trellis_AnyTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
}

def Trellis_AddOp : Trellis_BinaryOp<"add", "a + b">;

//===----------------------------------------------------------------------===//
// Sparse ops
//===----------------------------------------------------------------------===//

def Trellis_NeighborMapOp : Trellis_PureOp<"sparse.neighbor_map",
    [InferTypeOpAdaptor]> {
  let summary = "Neighbour table of a coordinate set (submanifold conv)";
  let description = [{
    For every voxel p = (b, x, y, z) of `coords` and every kernel offset
    (a, β, γ) ∈ {0..k-1}³ (offset index a·k² + β·k + γ), the row of the voxel
    (b, x+a-k/2, y+β-k/2, z+γ-k/2) if it is active, else -1. Built from a hash
    of the coordinates; one table serves every conv on the same set.

    ```mlir
    %nb = trellis.sparse.neighbor_map %c {kernel = 3}
            : (!trellis.coords<resolution = 64, bound = 32768>)
            -> !trellis.neighbor_map<kernel = 3, bound = 32768>
    ```
  }];
  let arguments = (ins Trellis_CoordsType:$coords, ConfinedAttr<I64Attr, [IntPositive]>:$kernel);
  let results = (outs Trellis_NeighborMapType:$result);
  let assemblyFormat = "$coords attr-dict `:` functional-type(operands, results)";
}

#endif // TRELLIS_OPS_TD
