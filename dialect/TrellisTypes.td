//===- TrellisTypes.td - Types of the trellis dialect ------*- tablegen -*-===//
#ifndef TRELLIS_TYPES_TD
#define TRELLIS_TYPES_TD

include "TrellisDialect.td"
include "mlir/IR/BuiltinTypeInterfaces.td"

class Trellis_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Trellis_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def Trellis_CoordsType : Trellis_Type<"Coords", "coords"> {
  let summary = "A set of active voxels of a sparse tensor";
  let description = [{
    N rows of int32 (batch, x, y, z), with 0 <= x, y, z < resolution and the
    rows of each batch item contiguous; N <= bound. The row order is part of
    the value (TRELLIS's outputs and noise rows follow it). The runtime keeps
    the batch layout (per-sample row ranges) with the rows.

    ```mlir
    !trellis.coords<resolution = 64, bound = 32768>
    ```
  }];
  let parameters = (ins "int64_t":$resolution, "int64_t":$bound);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Trellis_NeighborMapType : Trellis_Type<"NeighborMap", "neighbor_map"> {
  let summary = "Neighbour table of a coordinate set for a submanifold conv";
  let description = [{
    For each of N voxels and each of kernel³ offsets, the row of the active
    neighbour at that offset or -1. Built once per coordinate set from a hash
    of the coordinates and shared by every convolution on that set.

    ```mlir
    !trellis.neighbor_map<kernel = 3, bound = 32768>
    ```
  }];
  let parameters = (ins "int64_t":$kernel, "int64_t":$bound);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Trellis_SegmentsType : Trellis_Type<"Segments", "segments"> {
  let summary = "A partition of a coordinate set's rows into attention groups";
  let description = [{
    A permutation of the N rows and the offsets of S contiguous groups in it
    (like flash-attention's cu_seqlens). Every row of a group attends to every
    row of the same group. `max_length` bounds the group size: the whole
    sample for per-sample attention, window³ for Swin-3D windows.

    ```mlir
    !trellis.segments<max_length = 512, bound = 32768>
    ```
  }];
  let parameters = (ins "int64_t":$max_length, "int64_t":$bound);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // TRELLIS_TYPES_TD
