// RUN: trellis-opt --trellis-partition-cuda=entries=rows %s --split-input-file --verify-diagnostics | FileCheck %s

// Dynamic rows (dimension 0) are what the sparse stages have: marked.
// CHECK-LABEL: func.func @rows
// CHECK-SAME: trellis.device = "cuda"
func.func @rows(%x: tensor<?x8xf16, #trellis.bounds<[64]>>) -> tensor<?x8xf16, #trellis.bounds<[64]>> {
  %0 = trellis.silu %x : tensor<?x8xf16, #trellis.bounds<[64]>>
  return %0 : tensor<?x8xf16, #trellis.bounds<[64]>>
}

// -----

// Any other dynamic dimension is rejected (here at the argument; an op's
// operand or result type at the op).
// expected-error @+1 {{cannot run on the GPU: argument type 'tensor<4x?xf16, #trellis.bounds<[64]>>' of @rows is dynamic in a dimension other than 0}}
func.func @rows(%x: tensor<4x8xf16>, %y: tensor<4x?xf16, #trellis.bounds<[64]>>) -> tensor<4x?xf16, #trellis.bounds<[64]>> {
  %0 = trellis.silu %y : tensor<4x?xf16, #trellis.bounds<[64]>>
  return %0 : tensor<4x?xf16, #trellis.bounds<[64]>>
}

// -----

// Sparse attention: the attention kernels' head dims (64, 80, 128; fp16).
func.func @rows(%q: tensor<?x2x32xf16, #trellis.bounds<[64]>>, %c: tensor<?x4xi32, #trellis.bounds<[64]>>) -> tensor<?x2x32xf16, #trellis.bounds<[64]>> {
  %co = trellis.sparse.from_tensor %c {resolution = 16 : i64} : (tensor<?x4xi32, #trellis.bounds<[64]>>) -> !trellis.coords<resolution = 16, bound = 64>
  %s = trellis.sparse.batch_segments %co : (!trellis.coords<resolution = 16, bound = 64>) -> !trellis.segments<max_length = 64, bound = 64>
  // expected-error @+1 {{'trellis.sparse.attention' op cannot run on the GPU: the attention kernels take fp16 [N, H, d] with head dim 64, 80 or 128, found 'tensor<?x2x32xf16, #trellis.bounds<[64]>>'}}
  %a = trellis.sparse.attention %q, %q, %q, %s {scale = 1.250000e-01 : f64} : (tensor<?x2x32xf16, #trellis.bounds<[64]>>, tensor<?x2x32xf16, #trellis.bounds<[64]>>, tensor<?x2x32xf16, #trellis.bounds<[64]>>, !trellis.segments<max_length = 64, bound = 64>) -> tensor<?x2x32xf16, #trellis.bounds<[64]>>
  return %a : tensor<?x2x32xf16, #trellis.bounds<[64]>>
}

// -----

func.func @rows(%q: tensor<?x2x64xf32, #trellis.bounds<[64]>>, %k: tensor<1x7x2x64xf32>, %c: tensor<?x4xi32, #trellis.bounds<[64]>>) -> tensor<?x2x64xf32, #trellis.bounds<[64]>> {
  %co = trellis.sparse.from_tensor %c {resolution = 16 : i64} : (tensor<?x4xi32, #trellis.bounds<[64]>>) -> !trellis.coords<resolution = 16, bound = 64>
  // expected-error @+1 {{'trellis.sparse.cross_attention' op cannot run on the GPU: the attention kernels take fp16 [N, H, d] with head dim 64, 80 or 128, found 'tensor<?x2x64xf32, #trellis.bounds<[64]>>'}}
  %a = trellis.sparse.cross_attention %q, %k, %k, %co {scale = 1.250000e-01 : f64} : (tensor<?x2x64xf32, #trellis.bounds<[64]>>, tensor<1x7x2x64xf32>, tensor<1x7x2x64xf32>, !trellis.coords<resolution = 16, bound = 64>) -> tensor<?x2x64xf32, #trellis.bounds<[64]>>
  return %a : tensor<?x2x64xf32, #trellis.bounds<[64]>>
}
