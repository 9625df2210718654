// RUN: trellis-opt --trellis-fuse-linear-residual %s | FileCheck %s
// RUN: trellis-opt --trellis-fuse-linear-residual --mlir-print-debuginfo %s | FileCheck %s --check-prefix=LOC

// The ungated residual after a block's cross-attention (spec §3.6):
// x + (h·Wᵀ + b) becomes one GEMM with x as C, in either operand order.
// CHECK-LABEL: func.func @residual
// CHECK-SAME: (%[[X:.*]]: tensor<1x16x8xf16>, %[[H:.*]]: tensor<1x16x32xf16>, %[[W:.*]]: tensor<8x32xf16>, %[[B:.*]]: tensor<8xf16>)
// CHECK-NEXT: %[[Y:.*]] = trellis.linear %[[H]], %[[W]], %[[B]] residual %[[X]] : (tensor<1x16x32xf16>, tensor<8x32xf16>, tensor<8xf16>, tensor<1x16x8xf16>) -> tensor<1x16x8xf16>
// CHECK-NEXT: %[[Z:.*]] = trellis.linear %[[H]], %[[W]], %[[B]] residual %[[Y]] : (tensor<1x16x32xf16>, tensor<8x32xf16>, tensor<8xf16>, tensor<1x16x8xf16>) -> tensor<1x16x8xf16>
// CHECK-NEXT: return %[[Z]]
// LOC-LABEL: func.func @residual
// LOC: trellis.linear {{.*}} residual {{.*}} loc(#[[L:loc[0-9]*]])
// LOC-DAG: #[[F:loc[0-9]+]] = loc("out")
// LOC-DAG: #[[R:loc[0-9]+]] = loc("res")
// LOC-DAG: #[[L]] = loc(fused[#[[F]], #[[R]]])
func.func @residual(%x: tensor<1x16x8xf16>, %h: tensor<1x16x32xf16>, %w: tensor<8x32xf16>, %b: tensor<8xf16>) -> tensor<1x16x8xf16> {
  %y = trellis.linear %h, %w, %b : (tensor<1x16x32xf16>, tensor<8x32xf16>, tensor<8xf16>) -> tensor<1x16x8xf16> loc("out")
  %r = trellis.add %x, %y : (tensor<1x16x8xf16>, tensor<1x16x8xf16>) -> tensor<1x16x8xf16> loc("res")
  %y2 = trellis.linear %h, %w, %b : (tensor<1x16x32xf16>, tensor<8x32xf16>, tensor<8xf16>) -> tensor<1x16x8xf16>
  %r2 = trellis.add %y2, %r : (tensor<1x16x8xf16>, tensor<1x16x8xf16>) -> tensor<1x16x8xf16>
  return %r2 : tensor<1x16x8xf16>
}

// Voxel rows (the SLat flow): a dynamic number of rows.
// CHECK-LABEL: func.func @rows
// CHECK-NEXT: trellis.linear %{{.*}}, %{{.*}}, %{{.*}} residual %{{.*}} : (tensor<?x32xf16, #trellis.bounds<[64]>>, tensor<8x32xf16>, tensor<8xf16>, tensor<?x8xf16, #trellis.bounds<[64]>>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
// CHECK-NEXT: return
func.func @rows(%x: tensor<?x8xf16, #trellis.bounds<[64]>>, %h: tensor<?x32xf16, #trellis.bounds<[64]>>, %w: tensor<8x32xf16>, %b: tensor<8xf16>) -> tensor<?x8xf16, #trellis.bounds<[64]>> {
  %y = trellis.linear %h, %w, %b : (tensor<?x32xf16, #trellis.bounds<[64]>>, tensor<8x32xf16>, tensor<8xf16>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  %r = trellis.add %x, %y : (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  return %r : tensor<?x8xf16, #trellis.bounds<[64]>>
}

// Negative: a broadcast addend, a linear without bias, a linear with
// another user, a GELU linear, a gated residual.
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT: residual
// CHECK-COUNT-4: trellis.add
// CHECK: trellis.gated_residual
// CHECK: return
func.func @not_fused(%x: tensor<1x16x8xf16>, %row: tensor<1x1x8xf16>, %h: tensor<1x16x32xf16>, %w: tensor<8x32xf16>, %b: tensor<8xf16>, %g: tensor<1x8xf16>) -> (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>) {
  %y = trellis.linear %h, %w, %b : (tensor<1x16x32xf16>, tensor<8x32xf16>, tensor<8xf16>) -> tensor<1x16x8xf16>
  %r = trellis.add %y, %row : (tensor<1x16x8xf16>, tensor<1x1x8xf16>) -> tensor<1x16x8xf16>
  %y1 = trellis.linear %h, %w : (tensor<1x16x32xf16>, tensor<8x32xf16>) -> tensor<1x16x8xf16>
  %r1 = trellis.add %x, %y1 : (tensor<1x16x8xf16>, tensor<1x16x8xf16>) -> tensor<1x16x8xf16>
  %y2 = trellis.linear %h, %w, %b : (tensor<1x16x32xf16>, tensor<8x32xf16>, tensor<8xf16>) -> tensor<1x16x8xf16>
  %r2 = trellis.add %x, %y2 : (tensor<1x16x8xf16>, tensor<1x16x8xf16>) -> tensor<1x16x8xf16>
  %y3 = trellis.linear %h, %w, %b {activation = "gelu_tanh"} : (tensor<1x16x32xf16>, tensor<8x32xf16>, tensor<8xf16>) -> tensor<1x16x8xf16>
  %r3 = trellis.add %x, %y3 : (tensor<1x16x8xf16>, tensor<1x16x8xf16>) -> tensor<1x16x8xf16>
  %y4 = trellis.linear %h, %w, %b : (tensor<1x16x32xf16>, tensor<8x32xf16>, tensor<8xf16>) -> tensor<1x16x8xf16>
  %r4 = trellis.gated_residual %x, %y4, %g : (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16>
  return %r, %r1, %r2, %y2, %r3, %r4 : tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>
}

// A TF32 linear (the image-conditioning model's) keeps its precision.
// CHECK-LABEL: func.func @tf32
// CHECK-NEXT: trellis.linear %{{.*}}, %{{.*}}, %{{.*}} residual %{{.*}} {precision = "tf32"}
// CHECK-NEXT: return
func.func @tf32(%x: tensor<1x16x8xf32>, %h: tensor<1x16x32xf32>, %w: tensor<8x32xf32>, %b: tensor<8xf32>) -> tensor<1x16x8xf32> {
  %y = trellis.linear %h, %w, %b {precision = "tf32"} : (tensor<1x16x32xf32>, tensor<8x32xf32>, tensor<8xf32>) -> tensor<1x16x8xf32>
  %r = trellis.add %x, %y : (tensor<1x16x8xf32>, tensor<1x16x8xf32>) -> tensor<1x16x8xf32>
  return %r : tensor<1x16x8xf32>
}
