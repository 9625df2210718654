// RUN: trellis-opt %s | trellis-opt | FileCheck %s

// The ops and op forms made by the fusion passes (lib/Transforms; the
// examples of their descriptions appear here verbatim).

// CHECK-LABEL: func.func @fused_ops
func.func @fused_ops(%x: tensor<2x4096x1024xf16>, %w: tensor<3072x1024xf16>, %b: tensor<3072xf16>,
                     %shift: tensor<2x1024xf16>, %scale: tensor<2x1024xf16>,
                     %q: tensor<2x4096x16x64xf16>, %gq: tensor<16x64xf32>, %gk: tensor<16x64xf32>,
                     %row: tensor<1x1024xf16>)
    -> (tensor<2x4096x3072xf16>, tensor<2x4096x1024xf16>, tensor<2x4096x16x64xf16>, tensor<2x1374x1024xf16>) {
  // CHECK: trellis.linear %{{.*}}, %{{.*}}, %{{.*}} {activation = "gelu_tanh"} : (tensor<2x4096x1024xf16>, tensor<3072x1024xf16>, tensor<3072xf16>) -> tensor<2x4096x3072xf16>
  %g = trellis.linear %x, %w, %b {activation = "gelu_tanh"}
         : (tensor<2x4096x1024xf16>, tensor<3072x1024xf16>, tensor<3072xf16>)
         -> tensor<2x4096x3072xf16>
  // CHECK: trellis.layer_norm_modulate %{{.*}}, %{{.*}}, %{{.*}} {eps = 9.9999999999999995E-7 : f64} : (tensor<2x4096x1024xf16>, tensor<2x1024xf16>, tensor<2x1024xf16>) -> tensor<2x4096x1024xf16>
  %h = trellis.layer_norm_modulate %x, %shift, %scale {eps = 1.0e-06 : f64}
         : (tensor<2x4096x1024xf16>, tensor<2x1024xf16>, tensor<2x1024xf16>)
         -> tensor<2x4096x1024xf16>
  // CHECK: trellis.attention %[[Q:.*]], %[[Q]], %[[Q]] q_gamma %{{.*}} k_gamma %{{.*}} {scale = 1.250000e-01 : f64} : (tensor<2x4096x16x64xf16>, tensor<2x4096x16x64xf16>, tensor<2x4096x16x64xf16>, tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<2x4096x16x64xf16>
  %s = trellis.attention %q, %q, %q q_gamma %gq k_gamma %gk {scale = 1.250000e-01 : f64}
         : (tensor<2x4096x16x64xf16>, tensor<2x4096x16x64xf16>, tensor<2x4096x16x64xf16>,
            tensor<16x64xf32>, tensor<16x64xf32>)
         -> tensor<2x4096x16x64xf16>
  // CHECK: trellis.broadcast_rows %{{.*}} : (tensor<1x1024xf16>) -> tensor<2x1374x1024xf16>
  %bc = trellis.broadcast_rows %row : (tensor<1x1024xf16>) -> tensor<2x1374x1024xf16>
  return %g, %h, %s, %bc : tensor<2x4096x3072xf16>, tensor<2x4096x1024xf16>, tensor<2x4096x16x64xf16>, tensor<2x1374x1024xf16>
}

// CHECK-LABEL: func.func @residual_norm
func.func @residual_norm(%x: tensor<2x4096x1024xf16>, %h: tensor<2x4096x1024xf16>, %gate: tensor<2x1024xf16>,
                         %shift: tensor<2x1024xf16>, %scale: tensor<2x1024xf16>,
                         %w: tensor<1024xf32>, %b: tensor<1024xf32>)
    -> (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>,
        tensor<2x4096x1024xf16>) {
  // CHECK: trellis.gated_residual_norm %{{.*}}, %{{.*}}, %{{.*}} modulate %{{.*}}, %{{.*}} {eps = 9.9999999999999995E-7 : f64} : (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>, tensor<2x1024xf16>, tensor<2x1024xf16>, tensor<2x1024xf16>) -> (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>)
  // CHECK: trellis.gated_residual_norm %{{.*}}, %{{.*}}, %{{.*}} affine %{{.*}}, %{{.*}} {eps = 9.9999999999999995E-7 : f64} : (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>, tensor<2x1024xf16>, tensor<1024xf32>, tensor<1024xf32>) -> (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>)
  %r, %y = trellis.gated_residual_norm %x, %h, %gate modulate %shift, %scale {eps = 1.0e-06 : f64}
             : (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>, tensor<2x1024xf16>,
                tensor<2x1024xf16>, tensor<2x1024xf16>)
             -> (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>)
  %r2, %n = trellis.gated_residual_norm %x, %h, %gate affine %w, %b {eps = 1.0e-06 : f64}
              : (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>, tensor<2x1024xf16>,
                 tensor<1024xf32>, tensor<1024xf32>)
              -> (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>)
  // An added row, then a norm without affine.
  // CHECK: trellis.gated_residual_norm %{{.*}}, %{{.*}}, %{{.*}} plus %{{.*}} {eps = 1.000000e-05 : f64}
  %r3, %p = trellis.gated_residual_norm %x, %h, %gate plus %shift {eps = 1.0e-05 : f64}
              : (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>, tensor<2x1024xf16>, tensor<2x1024xf16>)
              -> (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>)
  // A flow model's f32 output layer: the norm of the residual widened to f32.
  // CHECK: trellis.gated_residual_norm %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-05 : f64, f32_result} : (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>, tensor<2x1024xf16>) -> (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf32>)
  %r4, %w32 = trellis.gated_residual_norm %x, %h, %gate {eps = 1.0e-05 : f64, f32_result}
                : (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>, tensor<2x1024xf16>)
                -> (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf32>)
  return %r, %y, %n, %p, %r3 : tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>
}

// Only one gain; rows of a multi-dimensional row.
// CHECK-LABEL: func.func @partial_forms
func.func @partial_forms(%q: tensor<1x8x2x4xf16>, %k: tensor<1x3x2x4xf16>, %gk: tensor<2x4xf32>,
                         %r: tensor<1x2x4xf16>) -> (tensor<1x8x2x4xf16>, tensor<1x3x2x4xf16>) {
  // CHECK: trellis.attention %{{.*}}, %{{.*}}, %{{.*}} k_gamma %{{.*}} {scale = 5.000000e-01 : f64} : (tensor<1x8x2x4xf16>, tensor<1x3x2x4xf16>, tensor<1x3x2x4xf16>, tensor<2x4xf32>) -> tensor<1x8x2x4xf16>
  %o = trellis.attention %q, %k, %k k_gamma %gk {scale = 0.5 : f64}
         : (tensor<1x8x2x4xf16>, tensor<1x3x2x4xf16>, tensor<1x3x2x4xf16>, tensor<2x4xf32>) -> tensor<1x8x2x4xf16>
  // CHECK: trellis.broadcast_rows %{{.*}} : (tensor<1x2x4xf16>) -> tensor<1x3x2x4xf16>
  %b = trellis.broadcast_rows %r : (tensor<1x2x4xf16>) -> tensor<1x3x2x4xf16>
  return %o, %b : tensor<1x8x2x4xf16>, tensor<1x3x2x4xf16>
}

// Rows repeated over a bounded dynamic number of rows, taken from `like`
// (the folded sparse cross-attention of the SLat stage).
// CHECK-LABEL: func.func @dynamic_rows
func.func @dynamic_rows(%row: tensor<1x16x64xf16>, %q: tensor<?x16x64xf16, #trellis.bounds<[32768]>>)
    -> tensor<?x16x64xf16, #trellis.bounds<[32768]>> {
  // CHECK: trellis.broadcast_rows %{{.*}}, %{{.*}} : (tensor<1x16x64xf16>, tensor<?x16x64xf16, #trellis.bounds<[32768]>>) -> tensor<?x16x64xf16, #trellis.bounds<[32768]>>
  %o = trellis.broadcast_rows %row, %q
         : (tensor<1x16x64xf16>, tensor<?x16x64xf16, #trellis.bounds<[32768]>>)
         -> tensor<?x16x64xf16, #trellis.bounds<[32768]>>
  return %o : tensor<?x16x64xf16, #trellis.bounds<[32768]>>
}

// A residual as the GEMM's C (trellis-fuse-linear-residual).
// CHECK-LABEL: func.func @linear_residual
func.func @linear_residual(%h: tensor<1x4096x1024xf16>, %w: tensor<1024x1024xf16>, %b: tensor<1024xf16>,
                           %x: tensor<1x4096x1024xf16>) -> tensor<1x4096x1024xf16> {
  // CHECK: trellis.linear %{{.*}}, %{{.*}}, %{{.*}} residual %{{.*}} : (tensor<1x4096x1024xf16>, tensor<1024x1024xf16>, tensor<1024xf16>, tensor<1x4096x1024xf16>) -> tensor<1x4096x1024xf16>
    %r = trellis.linear %h, %w, %b residual %x
           : (tensor<1x4096x1024xf16>, tensor<1024x1024xf16>, tensor<1024xf16>,
              tensor<1x4096x1024xf16>) -> tensor<1x4096x1024xf16>
  return %r : tensor<1x4096x1024xf16>
}
