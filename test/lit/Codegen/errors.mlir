// RUN: trellis-opt --trellis-gpu-codegen %s --split-input-file --verify-diagnostics -o /dev/null

// An op without a GPU implementation in a CUDA function fails at its location.
func.func @ape(%p: tensor<16x3xi32>) -> tensor<16x12xf32> attributes {trellis.device = "cuda"} {
  // expected-error @+1 {{'trellis.ape' has no GPU implementation (in CUDA function @ape)}}
  %0 = trellis.ape %p {channels = 12 : i64} : (tensor<16x3xi32>) -> tensor<16x12xf32>
  return %0 : tensor<16x12xf32>
}

// -----

// Dynamic (sparse) shapes have no generated kernel.
func.func @dynamic(%x: tensor<?x8xf16, #trellis.bounds<[64]>>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
    attributes {trellis.device = "cuda"} {
  // expected-error @+1 {{has no GPU implementation for the dynamic shape}}
  %0 = trellis.silu %x : tensor<?x8xf16, #trellis.bounds<[64]>>
  return %0 : tensor<?x8xf16, #trellis.bounds<[64]>>
}

// -----

// The same op outside a CUDA function is not looked at.
func.func @cpu(%p: tensor<16x3xi32>) -> tensor<16x12xf32> {
  %0 = trellis.ape %p {channels = 12 : i64} : (tensor<16x3xi32>) -> tensor<16x12xf32>
  return %0 : tensor<16x12xf32>
}
