// RUN: trellis-opt --trellis-gpu-codegen %s --split-input-file --verify-diagnostics -o /dev/null

// An op without a GPU implementation in a CUDA function fails at its location.
func.func @foreign(%a: tensor<16xf32>) -> tensor<16xf32> attributes {trellis.device = "cuda"} {
  // expected-error @+1 {{'arith.addf' has no GPU implementation (in CUDA function @foreign)}}
  %0 = arith.addf %a, %a : tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

// Only dimension 0 (the voxel rows) may be dynamic.
func.func @dynamic(%x: tensor<8x?xf16, #trellis.bounds<[64]>>) -> tensor<8x?xf16, #trellis.bounds<[64]>>
    attributes {trellis.device = "cuda"} {
  // expected-error @+2 {{has no GPU implementation for the dynamic shape}}
  // expected-note @+1 {{in CUDA function @dynamic}}
  %0 = trellis.silu %x : tensor<8x?xf16, #trellis.bounds<[64]>>
  return %0 : tensor<8x?xf16, #trellis.bounds<[64]>>
}

// -----

// A permute of dynamic rows moves the dynamic dimension.
func.func @dynamic_permute(%x: tensor<?x8xf16, #trellis.bounds<[64]>>) -> tensor<8x?xf16, #trellis.bounds<[64]>>
    attributes {trellis.device = "cuda"} {
  // expected-error @+2 {{has no GPU implementation for the dynamic shape}}
  // expected-note @+1 {{in CUDA function @dynamic_permute}}
  %0 = trellis.permute %x {perm = array<i64: 1, 0>} : (tensor<?x8xf16, #trellis.bounds<[64]>>) -> tensor<8x?xf16, #trellis.bounds<[64]>>
  return %0 : tensor<8x?xf16, #trellis.bounds<[64]>>
}

// -----

// Dynamic rows only for the ops of the contract (not, e.g., softmax).
func.func @softmax_rows(%x: tensor<?x8xf16, #trellis.bounds<[64]>>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
    attributes {trellis.device = "cuda"} {
  // expected-error @+2 {{has no GPU implementation for dynamic rows}}
  // expected-note @+1 {{in CUDA function @softmax_rows}}
  %0 = trellis.softmax %x : (tensor<?x8xf16, #trellis.bounds<[64]>>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  return %0 : tensor<?x8xf16, #trellis.bounds<[64]>>
}

// -----

// A reduction over the dynamic dimension 0 (it would loop over the rows).
func.func @reduce_rows(%x: tensor<?x8xf32, #trellis.bounds<[64]>>) -> tensor<8xf32>
    attributes {trellis.device = "cuda"} {
  // expected-error @+2 {{has no GPU implementation for dynamic rows}}
  // expected-note @+1 {{in CUDA function @reduce_rows}}
  %0 = trellis.reduce %x {kind = "sum", axis = 0 : i64} : (tensor<?x8xf32, #trellis.bounds<[64]>>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// The same op outside a CUDA function is not looked at.
func.func @cpu(%p: tensor<16x3xi32>) -> tensor<16x12xf32> {
  %0 = trellis.ape %p {channels = 12 : i64} : (tensor<16x3xi32>) -> tensor<16x12xf32>
  return %0 : tensor<16x12xf32>
}
