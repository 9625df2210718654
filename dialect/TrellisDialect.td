//===- TrellisDialect.td - The trellis dialect -------------*- tablegen -*-===//
//
// The tensor-level dialect of trellisc: every operation of the TRELLIS v1
// inference math (spec §8), dense and sparse, plus the flow sampler.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_DIALECT_TD
#define TRELLIS_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Trellis_Dialect : Dialect {
  let name = "trellis";
  let cppNamespace = "::mlir::trellis";
  let summary = "Tensor-level operations of the TRELLIS image-to-3D pipeline";
  let description = [{
    Dense tensors are builtin ranked tensors of f16, f32, i32 or i64. The voxel
    dimension is the only data-dependent size: it is written `?` and carries
    its upper bound in a `#trellis.bounds` encoding, e.g.
    `tensor<?x1024xf16, #trellis.bounds<[32768]>>`.

    A sparse voxel tensor is the pair of a coordinate set (`!trellis.coords`:
    int32 rows (batch, x, y, z), batch-contiguous) and a feature tensor whose
    first dimension is the voxel dimension of that set. Structures derived
    from a coordinate set (neighbour maps, attention segments) are values of
    their own types, so that an analysis can see which convolutions and
    attentions share them.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let extraClassDeclaration = [{
    /// Registers the types and attributes (defined in TrellisTypes.cpp, where
    /// their storage classes are complete).
    void registerTypesAndAttributes();
  }];
}

class Trellis_Op<string mnemonic, list<Trait> traits = []>
    : Op<Trellis_Dialect, mnemonic, traits>;

#endif // TRELLIS_DIALECT_TD
