// RUN: trellis-opt --trellis-fuse-linear-activation %s | FileCheck %s
// RUN: trellis-opt --trellis-fuse-linear-activation --mlir-print-debuginfo %s | FileCheck %s --check-prefix=LOC

// The MLP's first layer (spec §3.6): the GELU becomes the GEMM epilogue.
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x8xf16>, %[[W1:.*]]: tensor<32x8xf16>, %[[B1:.*]]: tensor<32xf16>, %[[W2:.*]]: tensor<8x32xf16>, %[[B2:.*]]: tensor<8xf16>)
// CHECK-NEXT: %[[H:.*]] = trellis.linear %[[X]], %[[W1]], %[[B1]] {activation = "gelu_tanh"} : (tensor<2x16x8xf16>, tensor<32x8xf16>, tensor<32xf16>) -> tensor<2x16x32xf16>
// CHECK-NEXT: %[[Y:.*]] = trellis.linear %[[H]], %[[W2]], %[[B2]] : (tensor<2x16x32xf16>, tensor<8x32xf16>, tensor<8xf16>) -> tensor<2x16x8xf16>
// CHECK-NEXT: return %[[Y]]
// LOC-LABEL: func.func @mlp
// LOC: {activation = "gelu_tanh"} {{.*}} loc(#[[L:loc[0-9]*]])
// LOC-DAG: #[[A:loc[0-9]+]] = loc("fc1")
// LOC-DAG: #[[G:loc[0-9]+]] = loc("act")
// LOC-DAG: #[[L]] = loc(fused[#[[A]], #[[G]]])
func.func @mlp(%x: tensor<2x16x8xf16>, %w1: tensor<32x8xf16>, %b1: tensor<32xf16>, %w2: tensor<8x32xf16>, %b2: tensor<8xf16>) -> tensor<2x16x8xf16> {
  %h = trellis.linear %x, %w1, %b1 : (tensor<2x16x8xf16>, tensor<32x8xf16>, tensor<32xf16>) -> tensor<2x16x32xf16> loc("fc1")
  %g = trellis.gelu %h : tensor<2x16x32xf16> loc("act")
  %y = trellis.linear %g, %w2, %b2 : (tensor<2x16x32xf16>, tensor<8x32xf16>, tensor<8xf16>) -> tensor<2x16x8xf16>
  return %y : tensor<2x16x8xf16>
}

// Negative: the linear has another user; the GELU's input is not a linear.
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT: activation
// CHECK: trellis.gelu
// CHECK: trellis.gelu
// CHECK: return
func.func @not_fused(%x: tensor<4x8xf16>, %w: tensor<16x8xf16>) -> (tensor<4x16xf16>, tensor<4x16xf16>, tensor<4x8xf16>) {
  %h = trellis.linear %x, %w : (tensor<4x8xf16>, tensor<16x8xf16>) -> tensor<4x16xf16>
  %g = trellis.gelu %h : tensor<4x16xf16>
  %s = trellis.silu %x : tensor<4x8xf16>
  %g2 = trellis.gelu %s : tensor<4x8xf16>
  return %h, %g, %g2 : tensor<4x16xf16>, tensor<4x16xf16>, tensor<4x8xf16>
}
