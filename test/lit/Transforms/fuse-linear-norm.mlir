// RUN: trellis-opt --trellis-fuse-linear-norm %s | FileCheck %s
// RUN: trellis-opt --trellis-fuse-linear-norm --mlir-print-debuginfo %s | FileCheck %s --check-prefix=LOC

// The fused ops are at the fused locations of the linear and the norm.
// LOC-LABEL: func.func @gated_modulate
// LOC: trellis.linear_residual_norm {{.*}} loc(#[[L1:loc[0-9]*]])
// LOC: func.func @residual_modulate
// LOC: trellis.linear_residual_norm {{.*}} loc(#[[L2:loc[0-9]*]])
// LOC-DAG: #[[FC2:loc[0-9]+]] = loc("fc2")
// LOC-DAG: #[[GRN:loc[0-9]+]] = loc("residual_norm")
// LOC-DAG: #[[L1]] = loc(fused[#[[FC2]], #[[GRN]]])
// LOC-DAG: #[[PROJ:loc[0-9]+]] = loc("out_proj")
// LOC-DAG: #[[NORM:loc[0-9]+]] = loc("norm2")
// LOC-DAG: #[[L2]] = loc(fused[#[[PROJ]], #[[NORM]]])

// The MLP's fc2 and the gated residual + LayerNorm-modulate after it (the
// end of one adaLN block, the start of the next): one op; the residual keeps
// its later user through the fused op's first result.
// CHECK-LABEL: func.func @gated_modulate
// CHECK-SAME: (%[[A:[^:]*]]: tensor<1x16x32xf16>, %[[W:[^:]*]]: tensor<8x32xf16>, %[[B:[^:]*]]: tensor<8xf16>, %[[X:[^:]*]]: tensor<1x16x8xf16>, %[[G:[^:]*]]: tensor<1x8xf16>, %[[SH:[^:]*]]: tensor<1x8xf16>, %[[SC:[^:]*]]: tensor<1x8xf16>, %[[H2:[^:]*]]: tensor<1x16x8xf16>)
// CHECK-NEXT: %[[R:.*]], %[[Y:.*]] = trellis.linear_residual_norm %[[A]], %[[W]], %[[B]] residual %[[X]] gate %[[G]] modulate %[[SH]], %[[SC]] {eps = 9.9999999999999995E-7 : f64} : (tensor<1x16x32xf16>, tensor<8x32xf16>, tensor<8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>) -> (tensor<1x16x8xf16>, tensor<1x16x8xf16>)
// CHECK-NEXT: %[[N:.*]] = trellis.gated_residual %[[R]], %[[H2]], %[[G]]
// CHECK-NEXT: return %[[Y]], %[[N]]
func.func @gated_modulate(%a: tensor<1x16x32xf16>, %w: tensor<8x32xf16>, %b: tensor<8xf16>, %x: tensor<1x16x8xf16>,
                          %g: tensor<1x8xf16>, %shift: tensor<1x8xf16>, %scale: tensor<1x8xf16>, %h2: tensor<1x16x8xf16>)
    -> (tensor<1x16x8xf16>, tensor<1x16x8xf16>) {
  %h = trellis.linear %a, %w, %b : (tensor<1x16x32xf16>, tensor<8x32xf16>, tensor<8xf16>) -> tensor<1x16x8xf16> loc("fc2")
  %r, %y = trellis.gated_residual_norm %x, %h, %g modulate %shift, %scale {eps = 1.0e-06 : f64} : (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>) -> (tensor<1x16x8xf16>, tensor<1x16x8xf16>) loc("residual_norm")
  %n = trellis.gated_residual %r, %h2, %g : (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16>
  return %y, %n : tensor<1x16x8xf16>, tensor<1x16x8xf16>
}

// The conditional branch's self-attention output projection and its affine
// LayerNorm; the unconditional branch's, plus the folded cross-attention
// row, then the LayerNorm-modulate; voxel rows (the SLat flow).
// CHECK-LABEL: func.func @gated_affine_and_plus
// CHECK-NEXT: %[[R:.*]], %[[N:.*]] = trellis.linear_residual_norm %{{.*}}, %{{.*}}, %{{.*}} residual %{{.*}} gate %{{.*}} affine %{{.*}}, %{{.*}} {eps = 9.9999999999999995E-7 : f64} : (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<8x8xf16>, tensor<8xf16>, tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<1x8xf16>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NEXT: %[[R2:.*]], %[[M:.*]] = trellis.linear_residual_norm %{{.*}}, %{{.*}}, %{{.*}} residual %{{.*}} gate %{{.*}} plus %{{.*}} modulate %{{.*}}, %{{.*}} {eps = 9.9999999999999995E-7 : f64}
// CHECK-NEXT: return %[[N]], %[[R]], %[[M]], %[[R2]]
func.func @gated_affine_and_plus(%a: tensor<?x8xf16, #trellis.bounds<[64]>>, %w: tensor<8x8xf16>, %b: tensor<8xf16>,
                                 %x: tensor<?x8xf16, #trellis.bounds<[64]>>, %g: tensor<1x8xf16>, %nw: tensor<8xf32>, %c: tensor<1x8xf16>)
    -> (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>) {
  %h = trellis.linear %a, %w, %b : (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<8x8xf16>, tensor<8xf16>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  %r, %n = trellis.gated_residual_norm %x, %h, %g affine %nw, %nw {eps = 1.0e-06 : f64} : (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<1x8xf16>, tensor<8xf32>, tensor<8xf32>) -> (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>)
  %h2 = trellis.linear %a, %w, %b : (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<8x8xf16>, tensor<8xf16>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  %r2, %m = trellis.gated_residual_norm %x, %h2, %g plus %c modulate %g, %g {eps = 1.0e-06 : f64} : (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<1x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>) -> (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>)
  return %n, %r, %m, %r2 : tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>
}

// The cross-attention's output projection with its (ungated) residual and
// the LayerNorm-modulate of the MLP: the ungated form, in place of the norm;
// the sum's later user (the MLP's gated residual) reads the first result.
// CHECK-LABEL: func.func @residual_modulate
// CHECK-SAME: (%[[A:[^:]*]]: tensor<1x16x8xf16>, %[[W:[^:]*]]: tensor<8x8xf16>, %[[B:[^:]*]]: tensor<8xf16>, %[[X:[^:]*]]: tensor<1x16x8xf16>, %[[G:[^:]*]]: tensor<1x8xf16>)
// CHECK-NEXT: %[[R:.*]], %[[Y:.*]] = trellis.linear_residual_norm %[[A]], %[[W]], %[[B]] residual %[[X]] modulate %[[G]], %[[G]] {eps = 9.9999999999999995E-7 : f64} : (tensor<1x16x8xf16>, tensor<8x8xf16>, tensor<8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>) -> (tensor<1x16x8xf16>, tensor<1x16x8xf16>)
// CHECK-NEXT: %[[F:.*]] = trellis.linear %[[Y]], %[[W]], %[[B]] :
// CHECK-NEXT: %[[N:.*]] = trellis.gated_residual %[[R]], %[[F]], %[[G]]
// CHECK-NEXT: return %[[N]]
func.func @residual_modulate(%a: tensor<1x16x8xf16>, %w: tensor<8x8xf16>, %b: tensor<8xf16>, %x: tensor<1x16x8xf16>, %g: tensor<1x8xf16>)
    -> tensor<1x16x8xf16> {
  %v = trellis.linear %a, %w, %b residual %x : (tensor<1x16x8xf16>, tensor<8x8xf16>, tensor<8xf16>, tensor<1x16x8xf16>) -> tensor<1x16x8xf16> loc("out_proj")
  %y = trellis.layer_norm_modulate %v, %g, %g {eps = 1.0e-06 : f64} : (tensor<1x16x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16> loc("norm2")
  %f = trellis.linear %y, %w, %b : (tensor<1x16x8xf16>, tensor<8x8xf16>, tensor<8xf16>) -> tensor<1x16x8xf16>
  %n = trellis.gated_residual %v, %f, %g : (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16>
  return %n : tensor<1x16x8xf16>
}

// A LayerNorm of a linear with a residual: affine, and without weights over
// voxel rows (the SLat flow's output block: skip linear + conv, then the
// output LayerNorm); the last axis given as its index.
// CHECK-LABEL: func.func @residual_layer_norm
// CHECK-NEXT: %{{.*}}, %[[Y:.*]] = trellis.linear_residual_norm %{{.*}}, %{{.*}}, %{{.*}} residual %{{.*}} affine %{{.*}}, %{{.*}} {eps = 9.9999999999999995E-7 : f64} : (tensor<1x16x8xf16>, tensor<8x8xf16>, tensor<8xf16>, tensor<1x16x8xf16>, tensor<8xf32>, tensor<8xf32>) -> (tensor<1x16x8xf16>, tensor<1x16x8xf16>)
// CHECK-NEXT: %{{.*}}, %[[Z:.*]] = trellis.linear_residual_norm %{{.*}}, %{{.*}}, %{{.*}} residual %{{.*}} {eps = 1.000000e-05 : f64} : (tensor<?x16xf16, #trellis.bounds<[64]>>, tensor<8x16xf16>, tensor<8xf16>, tensor<?x8xf16, #trellis.bounds<[64]>>) -> (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>)
// CHECK-NEXT: return %[[Y]], %[[Z]]
func.func @residual_layer_norm(%a: tensor<1x16x8xf16>, %w: tensor<8x8xf16>, %b: tensor<8xf16>, %x: tensor<1x16x8xf16>, %nw: tensor<8xf32>,
                               %ar: tensor<?x16xf16, #trellis.bounds<[64]>>, %wr: tensor<8x16xf16>, %xr: tensor<?x8xf16, #trellis.bounds<[64]>>)
    -> (tensor<1x16x8xf16>, tensor<?x8xf16, #trellis.bounds<[64]>>) {
  %v = trellis.linear %a, %w, %b residual %x : (tensor<1x16x8xf16>, tensor<8x8xf16>, tensor<8xf16>, tensor<1x16x8xf16>) -> tensor<1x16x8xf16>
  %y = trellis.layer_norm %v, %nw, %nw {axis = 2 : i64, eps = 1.0e-06 : f64} : (tensor<1x16x8xf16>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x16x8xf16>
  %s = trellis.linear %ar, %wr, %b residual %xr : (tensor<?x16xf16, #trellis.bounds<[64]>>, tensor<8x16xf16>, tensor<8xf16>, tensor<?x8xf16, #trellis.bounds<[64]>>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  %z = trellis.layer_norm %s {eps = 1.0e-05 : f64} : (tensor<?x8xf16, #trellis.bounds<[64]>>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  return %y, %z : tensor<1x16x8xf16>, tensor<?x8xf16, #trellis.bounds<[64]>>
}

// Negative (gated_residual_norm): h from a linear with another user, with an
// activation, without a bias, with a residual of its own; h not a linear;
// an f32_result norm (the flow's f32 output layer).
// CHECK-LABEL: func.func @gated_not_fused
// CHECK-NOT: linear_residual_norm
// CHECK: return
func.func @gated_not_fused(%a: tensor<1x16x8xf16>, %w: tensor<8x8xf16>, %b: tensor<8xf16>, %x: tensor<1x16x8xf16>, %g: tensor<1x8xf16>)
    -> (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf32>) {
  %h1 = trellis.linear %a, %w, %b : (tensor<1x16x8xf16>, tensor<8x8xf16>, tensor<8xf16>) -> tensor<1x16x8xf16>
  %r1, %y1 = trellis.gated_residual_norm %x, %h1, %g modulate %g, %g {eps = 1.0e-06 : f64} : (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>) -> (tensor<1x16x8xf16>, tensor<1x16x8xf16>)
  %h2 = trellis.linear %a, %w, %b {activation = "gelu_tanh"} : (tensor<1x16x8xf16>, tensor<8x8xf16>, tensor<8xf16>) -> tensor<1x16x8xf16>
  %r2, %y2 = trellis.gated_residual_norm %x, %h2, %g modulate %g, %g {eps = 1.0e-06 : f64} : (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>) -> (tensor<1x16x8xf16>, tensor<1x16x8xf16>)
  %h3 = trellis.linear %a, %w : (tensor<1x16x8xf16>, tensor<8x8xf16>) -> tensor<1x16x8xf16>
  %r3, %y3 = trellis.gated_residual_norm %x, %h3, %g modulate %g, %g {eps = 1.0e-06 : f64} : (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>) -> (tensor<1x16x8xf16>, tensor<1x16x8xf16>)
  %h4 = trellis.linear %a, %w, %b residual %x : (tensor<1x16x8xf16>, tensor<8x8xf16>, tensor<8xf16>, tensor<1x16x8xf16>) -> tensor<1x16x8xf16>
  %r4, %y4 = trellis.gated_residual_norm %x, %h4, %g modulate %g, %g {eps = 1.0e-06 : f64} : (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>) -> (tensor<1x16x8xf16>, tensor<1x16x8xf16>)
  %r5, %y5 = trellis.gated_residual_norm %x, %a, %g modulate %g, %g {eps = 1.0e-06 : f64} : (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>) -> (tensor<1x16x8xf16>, tensor<1x16x8xf16>)
  %h6 = trellis.linear %a, %w, %b : (tensor<1x16x8xf16>, tensor<8x8xf16>, tensor<8xf16>) -> tensor<1x16x8xf16>
  %r6, %y6 = trellis.gated_residual_norm %x, %h6, %g {eps = 1.0e-05 : f64, f32_result} : (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>) -> (tensor<1x16x8xf16>, tensor<1x16x8xf32>)
  return %y1, %h1, %y2, %y3, %y4, %y5, %y6 : tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf32>
}

// Negative (norm of a linear's sum): a user of the sum before the norm (the
// fused op, placed at the norm, would not dominate it); the norm reads the
// sum through a cast; a linear without a residual; a LayerNorm of another
// axis; a linear with a residual but without a bias cannot exist (verifier),
// and the sum also as the norm's shift.
// CHECK-LABEL: func.func @residual_not_fused
// CHECK-NOT: linear_residual_norm
// CHECK: return
func.func @residual_not_fused(%a: tensor<1x16x8xf16>, %w: tensor<8x8xf16>, %b: tensor<8xf16>, %x: tensor<1x16x8xf16>, %g: tensor<1x8xf16>)
    -> (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf32>, tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>) {
  %v1 = trellis.linear %a, %w, %b residual %x : (tensor<1x16x8xf16>, tensor<8x8xf16>, tensor<8xf16>, tensor<1x16x8xf16>) -> tensor<1x16x8xf16>
  %early = trellis.gated_residual %v1, %x, %g : (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16>
  %y1 = trellis.layer_norm_modulate %v1, %g, %g {eps = 1.0e-06 : f64} : (tensor<1x16x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16>
  %v2 = trellis.linear %a, %w, %b residual %x : (tensor<1x16x8xf16>, tensor<8x8xf16>, tensor<8xf16>, tensor<1x16x8xf16>) -> tensor<1x16x8xf16>
  %c2 = trellis.cast %v2 : (tensor<1x16x8xf16>) -> tensor<1x16x8xf32>
  %y2 = trellis.layer_norm %c2 {eps = 1.0e-05 : f64} : (tensor<1x16x8xf32>) -> tensor<1x16x8xf32>
  %v3 = trellis.linear %a, %w, %b : (tensor<1x16x8xf16>, tensor<8x8xf16>, tensor<8xf16>) -> tensor<1x16x8xf16>
  %y3 = trellis.layer_norm_modulate %v3, %g, %g {eps = 1.0e-06 : f64} : (tensor<1x16x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16>
  %v4 = trellis.linear %a, %w, %b residual %x : (tensor<1x16x8xf16>, tensor<8x8xf16>, tensor<8xf16>, tensor<1x16x8xf16>) -> tensor<1x16x8xf16>
  %y4 = trellis.layer_norm %v4 {axis = 1 : i64, eps = 1.0e-06 : f64} : (tensor<1x16x8xf16>) -> tensor<1x16x8xf16>
  %v5 = trellis.linear %a, %w, %b residual %x : (tensor<1x16x8xf16>, tensor<8x8xf16>, tensor<8xf16>, tensor<1x16x8xf16>) -> tensor<1x16x8xf16>
  %y5 = trellis.layer_norm_modulate %v5, %v5, %g {eps = 1.0e-06 : f64} : (tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16>
  return %y1, %early, %y2, %y3, %y4, %y5 : tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf32>, tensor<1x16x8xf16>, tensor<1x16x8xf16>, tensor<1x16x8xf16>
}
