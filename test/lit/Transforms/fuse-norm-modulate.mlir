// RUN: trellis-opt --trellis-fuse-norm-modulate %s | FileCheck %s
// RUN: trellis-opt --trellis-fuse-norm-modulate --mlir-print-debuginfo %s | FileCheck %s --check-prefix=LOC

// adaLN: LayerNorm without affine over the channels, then modulate.
// CHECK-LABEL: func.func @adaln
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x8xf16>, %[[SH:.*]]: tensor<2x8xf16>, %[[SC:.*]]: tensor<2x8xf16>)
// CHECK-NEXT: %[[H:.*]] = trellis.layer_norm_modulate %[[X]], %[[SH]], %[[SC]] {eps = 9.9999999999999995E-7 : f64} : (tensor<2x16x8xf16>, tensor<2x8xf16>, tensor<2x8xf16>) -> tensor<2x16x8xf16>
// CHECK-NEXT: return %[[H]]
// LOC-LABEL: func.func @adaln
// LOC: trellis.layer_norm_modulate {{.*}} loc(#[[L:loc[0-9]*]])
// LOC-DAG: #[[N:loc[0-9]+]] = loc("norm1")
// LOC-DAG: #[[M:loc[0-9]+]] = loc("modulate")
// LOC-DAG: #[[L]] = loc(fused[#[[N]], #[[M]]])
func.func @adaln(%x: tensor<2x16x8xf16>, %shift: tensor<2x8xf16>, %scale: tensor<2x8xf16>) -> tensor<2x16x8xf16> {
  %n = trellis.layer_norm %x {eps = 1.0e-06 : f64} : (tensor<2x16x8xf16>) -> tensor<2x16x8xf16> loc("norm1")
  %h = trellis.modulate %n, %shift, %scale : (tensor<2x16x8xf16>, tensor<2x8xf16>, tensor<2x8xf16>) -> tensor<2x16x8xf16> loc("modulate")
  return %h : tensor<2x16x8xf16>
}

// Negative: an affine LayerNorm, a LayerNorm over another axis, a LayerNorm
// with a second user.
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT: layer_norm_modulate
// CHECK: return
func.func @not_fused(%x: tensor<2x16x8xf16>, %s: tensor<2x8xf16>, %g: tensor<8xf32>, %b: tensor<8xf32>,
                     %y: tensor<2x8x16xf16>, %t: tensor<2x8x16xf16>)
    -> (tensor<2x16x8xf16>, tensor<2x8x16xf16>, tensor<2x16x8xf16>, tensor<2x16x8xf16>) {
  %n0 = trellis.layer_norm %x, %g, %b {eps = 1.0e-06 : f64} : (tensor<2x16x8xf16>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x16x8xf16>
  %h0 = trellis.modulate %n0, %s, %s : (tensor<2x16x8xf16>, tensor<2x8xf16>, tensor<2x8xf16>) -> tensor<2x16x8xf16>
  %n1 = trellis.layer_norm %y {axis = 1 : i64, eps = 1.0e-06 : f64} : (tensor<2x8x16xf16>) -> tensor<2x8x16xf16>
  %h1 = trellis.modulate %n1, %t, %t : (tensor<2x8x16xf16>, tensor<2x8x16xf16>, tensor<2x8x16xf16>) -> tensor<2x8x16xf16>
  %n2 = trellis.layer_norm %x {eps = 1.0e-06 : f64} : (tensor<2x16x8xf16>) -> tensor<2x16x8xf16>
  %h2 = trellis.modulate %n2, %s, %s : (tensor<2x16x8xf16>, tensor<2x8xf16>, tensor<2x8xf16>) -> tensor<2x16x8xf16>
  return %h0, %h1, %h2, %n2 : tensor<2x16x8xf16>, tensor<2x8x16xf16>, tensor<2x16x8xf16>, tensor<2x16x8xf16>
}
