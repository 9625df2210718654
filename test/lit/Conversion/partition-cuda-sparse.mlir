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

// -----

// The sparse resampling ops become an index computed from the coordinates
// (placed after the coordinates' definitions, one per coordinate pair, so
// that both upsamples share it) and a gather / segment-mean kernel.
// CHECK-LABEL: func.func @rows
// CHECK: %[[FINE:.*]] = trellis.sparse.from_tensor
// CHECK-NEXT: %[[B:.*]] = trellis.sparse.batch_index %[[FINE]]
// CHECK-NEXT: %[[COARSE:.*]] = trellis.sparse.coarsen %[[FINE]]
// CHECK-NEXT: %[[PAR:.*]] = trellis.sparse.parent_rows %[[FINE]], %[[COARSE]]
// CHECK-NEXT: %[[OFF:.*]], %[[CH:.*]] = trellis.sparse.child_rows %[[FINE]], %[[COARSE]]
// CHECK-NEXT: %[[D:.*]] = trellis.segment_mean %arg1, %[[OFF]], %[[CH]] {extra_count = 1 : i64}
// CHECK-NEXT: %[[U:.*]] = trellis.gather_rows %[[D]], %[[PAR]]
// CHECK-NEXT: %[[U2:.*]] = trellis.gather_rows %[[D]], %[[PAR]]
// CHECK-NEXT: %[[V:.*]] = trellis.gather_rows %arg2, %[[B]]
// CHECK-NOT: trellis.sparse.upsample
// CHECK-NOT: trellis.sparse.downsample
// CHECK-NOT: trellis.sparse.batch_broadcast
func.func @rows(%c: tensor<?x4xi32, #trellis.bounds<[64]>>, %x: tensor<?x8xf16, #trellis.bounds<[64]>>, %v: tensor<2x8xf16>)
    -> (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>) {
  %fine = trellis.sparse.from_tensor %c {resolution = 16 : i64} : (tensor<?x4xi32, #trellis.bounds<[64]>>) -> !trellis.coords<resolution = 16, bound = 64>
  %coarse = trellis.sparse.coarsen %fine : (!trellis.coords<resolution = 16, bound = 64>) -> !trellis.coords<resolution = 8, bound = 64>
  %d = trellis.sparse.downsample %x, %fine, %coarse : (tensor<?x8xf16, #trellis.bounds<[64]>>, !trellis.coords<resolution = 16, bound = 64>, !trellis.coords<resolution = 8, bound = 64>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  %u = trellis.sparse.upsample %d, %coarse, %fine : (tensor<?x8xf16, #trellis.bounds<[64]>>, !trellis.coords<resolution = 8, bound = 64>, !trellis.coords<resolution = 16, bound = 64>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  %u2 = trellis.sparse.upsample %d, %coarse, %fine : (tensor<?x8xf16, #trellis.bounds<[64]>>, !trellis.coords<resolution = 8, bound = 64>, !trellis.coords<resolution = 16, bound = 64>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  %b = trellis.sparse.batch_broadcast %v, %fine : (tensor<2x8xf16>, !trellis.coords<resolution = 16, bound = 64>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  return %u, %u2, %b : tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>
}
