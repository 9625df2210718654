// RUN: trellis-opt --trellis-fuse-residual-norm %s | FileCheck %s
// RUN: trellis-opt --trellis-fuse-residual-norm --mlir-print-debuginfo %s | FileCheck %s --check-prefix=LOC

// The end of one adaLN block and the start of the next (spec §3.6): the
// residual keeps its later user (the next block's residual) through the
// fused op's first result.
// CHECK-LABEL: func.func @block_boundary
// CHECK-SAME: (%[[X:[^:]*]]: tensor<1x16x8xf16>, %[[H:[^:]*]]: tensor<1x16x8xf16>, %[[G:[^:]*]]: tensor<1x8xf16>, %[[SH:[^:]*]]: tensor<1x8xf16>, %[[SC:[^:]*]]: tensor<1x8xf16>, %[[H2:[^:]*]]: tensor<1x16x8xf16>)
// CHECK-NEXT: %[[R:.*]], %[[Y:.*]] = trellis.gated_residual_norm %[[X]], %[[H]], %[[G]] modulate %[[SH]], %[[SC]] {eps = 9.9999999999999995E-7 : f64} : (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>) -> (tensor<1x16x8xf16>, tensor<1x16x8xf16>)
// CHECK-NEXT: %[[N:.*]] = trellis.gated_residual %[[R]], %[[H2]], %[[G]]
// CHECK-NEXT: return %[[Y]], %[[N]]
// LOC-LABEL: func.func @block_boundary
// LOC: trellis.gated_residual_norm {{.*}} loc(#[[L:loc[0-9]*]])
// LOC-DAG: #[[A:loc[0-9]+]] = loc("mlp_residual")
// LOC-DAG: #[[B:loc[0-9]+]] = loc("next_norm")
// LOC-DAG: #[[L]] = loc(fused[#[[A]], #[[B]]])
func.func @block_boundary(%x: tensor<1x16x8xf16>, %h: tensor<1x16x8xf16>, %g: tensor<1x8xf16>,
                          %shift: tensor<1x8xf16>, %scale: tensor<1x8xf16>, %h2: tensor<1x16x8xf16>)
    -> (tensor<1x16x8xf16>, tensor<1x16x8xf16>) {
  %r = trellis.gated_residual %x, %h, %g : (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16> loc("mlp_residual")
  %y = trellis.layer_norm_modulate %r, %shift, %scale {eps = 1.0e-06 : f64} : (tensor<1x16x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16> loc("next_norm")
  %n = trellis.gated_residual %r, %h2, %g : (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16>
  return %y, %n : tensor<1x16x8xf16>, tensor<1x16x8xf16>
}

// Voxel rows (the SLat flow) with [1, C] vectors.
// CHECK-LABEL: func.func @rows
// CHECK-NEXT: trellis.gated_residual_norm {{.*}} -> (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>)
// CHECK-NEXT: return
func.func @rows(%x: tensor<?x8xf16, #trellis.bounds<[64]>>, %h: tensor<?x8xf16, #trellis.bounds<[64]>>, %v: tensor<1x8xf16>)
    -> (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>) {
  %r = trellis.gated_residual %x, %h, %v : (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<1x8xf16>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  %y = trellis.layer_norm_modulate %r, %v, %v {eps = 1.0e-06 : f64} : (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<1x8xf16>, tensor<1x8xf16>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  return %r, %y : tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>
}

// The conditional branch's residual after the self-attention and its affine
// LayerNorm (before the cross-attention); the unconditional branch's residual
// plus the folded cross-attention row, then the LayerNorm-modulate.
// CHECK-LABEL: func.func @affine_and_plus
// CHECK-NEXT: %[[R:.*]], %[[N:.*]] = trellis.gated_residual_norm %{{.*}}, %{{.*}}, %{{.*}} affine %{{.*}}, %{{.*}} {eps = 9.9999999999999995E-7 : f64}
// CHECK-NEXT: %[[R2:.*]], %[[M:.*]] = trellis.gated_residual_norm %{{.*}}, %{{.*}}, %{{.*}} plus %{{.*}} modulate %{{.*}}, %{{.*}} {eps = 9.9999999999999995E-7 : f64}
// CHECK-NEXT: return %[[N]], %[[R]], %[[M]], %[[R2]]
func.func @affine_and_plus(%x: tensor<1x16x8xf16>, %h: tensor<1x16x8xf16>, %g: tensor<1x8xf16>, %w: tensor<8xf32>, %c: tensor<1x8xf16>)
    -> (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>) {
  %r = trellis.gated_residual %x, %h, %g : (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16>
  %n = trellis.layer_norm %r, %w, %w {eps = 1.0e-06 : f64} : (tensor<1x16x8xf16>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x16x8xf16>
  %r2 = trellis.gated_residual %x, %h, %g : (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16>
  %s = trellis.add %r2, %c : (tensor<1x16x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16>
  %m = trellis.layer_norm_modulate %s, %g, %g {eps = 1.0e-06 : f64} : (tensor<1x16x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16>
  return %n, %r, %m, %s : tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>
}

// A flow model's f32 output layer (spec §3: the final LayerNorm in f32): the
// cast to f32 goes into the fused op, whose normalized result is f32.
// CHECK-LABEL: func.func @f32_output_layer
// CHECK-NEXT: %{{.*}}, %[[Y:.*]] = trellis.gated_residual_norm %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-05 : f64, f32_result} : (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>) -> (tensor<1x16x8xf16>, tensor<1x16x8xf32>)
// CHECK-NEXT: return %[[Y]]
func.func @f32_output_layer(%x: tensor<1x16x8xf16>, %h: tensor<1x16x8xf16>, %g: tensor<1x8xf16>) -> tensor<1x16x8xf32> {
  %r = trellis.gated_residual %x, %h, %g : (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16>
  %w = trellis.cast %r : (tensor<1x16x8xf16>) -> tensor<1x16x8xf32>
  %y = trellis.layer_norm %w {eps = 1.0e-05 : f64} : (tensor<1x16x8xf32>) -> tensor<1x16x8xf32>
  return %y : tensor<1x16x8xf32>
}

// Negative: the widened residual has another user; a cast of an f32 residual
// to f16 (not a widening).
// CHECK-LABEL: func.func @cast_not_fused
// CHECK-NOT: gated_residual_norm
// CHECK: return
func.func @cast_not_fused(%x: tensor<1x16x8xf16>, %g: tensor<1x8xf16>, %x32: tensor<1x16x8xf32>, %g32: tensor<1x8xf32>)
    -> (tensor<1x16x8xf32>, tensor<1x16x8xf32>, tensor<1x16x8xf16>) {
  %r = trellis.gated_residual %x, %x, %g : (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16>
  %w = trellis.cast %r : (tensor<1x16x8xf16>) -> tensor<1x16x8xf32>
  %y = trellis.layer_norm %w {eps = 1.0e-05 : f64} : (tensor<1x16x8xf32>) -> tensor<1x16x8xf32>
  %r2 = trellis.gated_residual %x32, %x32, %g32 : (tensor<1x16x8xf32>, tensor<1x16x8xf32>, tensor<1x8xf32>) -> tensor<1x16x8xf32>
  %n = trellis.cast %r2 : (tensor<1x16x8xf32>) -> tensor<1x16x8xf16>
  %z = trellis.layer_norm %n {eps = 1.0e-05 : f64} : (tensor<1x16x8xf16>) -> tensor<1x16x8xf16>
  return %y, %w, %z : tensor<1x16x8xf32>, tensor<1x16x8xf32>, tensor<1x16x8xf16>
}

// Negative: a user of the residual before the norm (the fused op, placed at
// the norm, would not dominate it); a norm of something else; a LayerNorm of
// another axis; an added row whose gated residual has another user.
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT: gated_residual_norm
// CHECK: return
func.func @not_fused(%x: tensor<1x16x8xf16>, %g: tensor<1x8xf16>, %w: tensor<8xf32>)
    -> (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>) {
  %r = trellis.gated_residual %x, %x, %g : (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16>
  %early = trellis.add %r, %x : (tensor<1x16x8xf16>, tensor<1x16x8xf16>) -> tensor<1x16x8xf16>
  %y = trellis.layer_norm_modulate %r, %g, %g {eps = 1.0e-06 : f64} : (tensor<1x16x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16>
  %z = trellis.layer_norm_modulate %early, %g, %g {eps = 1.0e-06 : f64} : (tensor<1x16x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16>
  %r2 = trellis.gated_residual %x, %x, %g : (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16>
  %a = trellis.layer_norm %r2 {axis = 1 : i64, eps = 1.0e-06 : f64} : (tensor<1x16x8xf16>) -> tensor<1x16x8xf16>
  %r3 = trellis.gated_residual %x, %x, %g : (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16>
  %s = trellis.add %r3, %g : (tensor<1x16x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16>
  %m = trellis.layer_norm_modulate %s, %g, %g {eps = 1.0e-06 : f64} : (tensor<1x16x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16>
  return %y, %z, %a, %m, %r3 : tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>
}
