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

// FP8 self-attention (trellisc --precision=fp8) on normalized q and k.
// CHECK-LABEL: func.func @fp8_attention
func.func @fp8_attention(%q: tensor<2x4096x16x64xf16>, %gq: tensor<16x64xf32>, %gk: tensor<16x64xf32>,
                         %sq: tensor<?x16x64xf16, #trellis.bounds<[32768]>>,
                         %s: !trellis.segments<max_length = 32768, bound = 32768>)
    -> (tensor<2x4096x16x64xf16>, tensor<?x16x64xf16, #trellis.bounds<[32768]>>) {
  // CHECK: trellis.attention %[[Q:.*]], %[[Q]], %[[Q]] q_gamma %{{.*}} k_gamma %{{.*}} {precision = "fp8_e4m3", scale = 1.250000e-01 : f64} : (tensor<2x4096x16x64xf16>, tensor<2x4096x16x64xf16>, tensor<2x4096x16x64xf16>, tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<2x4096x16x64xf16>
  %f = trellis.attention %q, %q, %q q_gamma %gq k_gamma %gk {precision = "fp8_e4m3", scale = 1.250000e-01 : f64}
         : (tensor<2x4096x16x64xf16>, tensor<2x4096x16x64xf16>, tensor<2x4096x16x64xf16>,
            tensor<16x64xf32>, tensor<16x64xf32>)
         -> tensor<2x4096x16x64xf16>
  // CHECK: trellis.sparse.attention %[[S:.*]], %[[S]], %[[S]], %{{.*}} q_gamma %{{.*}} k_gamma %{{.*}} {precision = "fp8_e4m3", scale = 1.250000e-01 : f64}
  %o = trellis.sparse.attention %sq, %sq, %sq, %s q_gamma %gq k_gamma %gk {precision = "fp8_e4m3", scale = 1.250000e-01 : f64}
         : (tensor<?x16x64xf16, #trellis.bounds<[32768]>>, tensor<?x16x64xf16, #trellis.bounds<[32768]>>,
            tensor<?x16x64xf16, #trellis.bounds<[32768]>>, !trellis.segments<max_length = 32768, bound = 32768>,
            tensor<16x64xf32>, tensor<16x64xf32>)
         -> tensor<?x16x64xf16, #trellis.bounds<[32768]>>
  return %f, %o : tensor<2x4096x16x64xf16>, tensor<?x16x64xf16, #trellis.bounds<[32768]>>
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

// A GEMM into the residual stream and the norm after it
// (trellis-fuse-linear-norm): the gated forms with modulate (plus a row) or
// affine, the ungated form of `linear … residual` with modulate or a plain
// LayerNorm, and voxel rows.
// CHECK-LABEL: func.func @linear_residual_norm
func.func @linear_residual_norm(%a: tensor<1x4096x4096xf16>, %w: tensor<1024x4096xf16>, %b: tensor<1024xf16>,
                                %a2: tensor<1x4096x1024xf16>, %w2: tensor<1024x1024xf16>,
                                %x: tensor<1x4096x1024xf16>, %gate: tensor<1x1024xf16>,
                                %shift: tensor<1x1024xf16>, %scale: tensor<1x1024xf16>,
                                %nw: tensor<1024xf32>, %nb: tensor<1024xf32>,
                                %ar: tensor<?x256xf16, #trellis.bounds<[64]>>, %wr: tensor<128x256xf16>, %br: tensor<128xf16>,
                                %xr: tensor<?x128xf16, #trellis.bounds<[64]>>, %gr: tensor<1x128xf16>)
    -> (tensor<1x4096x1024xf16>, tensor<1x4096x1024xf16>, tensor<1x4096x1024xf16>, tensor<1x4096x1024xf16>,
        tensor<1x4096x1024xf16>, tensor<?x128xf16, #trellis.bounds<[64]>>, tensor<?x128xf16, #trellis.bounds<[64]>>) {
  // CHECK: %[[R:.*]], %[[Y:.*]] = trellis.linear_residual_norm %{{.*}}, %{{.*}}, %{{.*}} residual %{{.*}} gate %{{.*}} modulate %{{.*}}, %{{.*}} {eps = 9.9999999999999995E-7 : f64} : (tensor<1x4096x4096xf16>, tensor<1024x4096xf16>, tensor<1024xf16>, tensor<1x4096x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>) -> (tensor<1x4096x1024xf16>, tensor<1x4096x1024xf16>)
  // CHECK: trellis.linear_residual_norm %{{.*}}, %{{.*}}, %{{.*}} residual %[[R]] modulate %{{.*}}, %{{.*}} {eps = 9.9999999999999995E-7 : f64} : (tensor<1x4096x1024xf16>, tensor<1024x1024xf16>, tensor<1024xf16>, tensor<1x4096x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>) -> (tensor<1x4096x1024xf16>, tensor<1x4096x1024xf16>)
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x gate %gate
             modulate %shift, %scale {eps = 1.0e-06 : f64}
             : (tensor<1x4096x4096xf16>, tensor<1024x4096xf16>, tensor<1024xf16>,
                tensor<1x4096x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>,
                tensor<1x1024xf16>)
             -> (tensor<1x4096x1024xf16>, tensor<1x4096x1024xf16>)
  %r2, %n = trellis.linear_residual_norm %a2, %w2, %b residual %r
              modulate %shift, %scale {eps = 1.0e-06 : f64}
              : (tensor<1x4096x1024xf16>, tensor<1024x1024xf16>, tensor<1024xf16>,
                 tensor<1x4096x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>)
              -> (tensor<1x4096x1024xf16>, tensor<1x4096x1024xf16>)
  // CHECK: trellis.linear_residual_norm %{{.*}}, %{{.*}}, %{{.*}} residual %{{.*}} gate %{{.*}} affine %{{.*}}, %{{.*}} {eps = 9.9999999999999995E-7 : f64} : (tensor<1x4096x1024xf16>, tensor<1024x1024xf16>, tensor<1024xf16>, tensor<1x4096x1024xf16>, tensor<1x1024xf16>, tensor<1024xf32>, tensor<1024xf32>) -> (tensor<1x4096x1024xf16>, tensor<1x4096x1024xf16>)
  %r3, %y3 = trellis.linear_residual_norm %a2, %w2, %b residual %x gate %gate affine %nw, %nb {eps = 1.0e-06 : f64}
               : (tensor<1x4096x1024xf16>, tensor<1024x1024xf16>, tensor<1024xf16>, tensor<1x4096x1024xf16>,
                  tensor<1x1024xf16>, tensor<1024xf32>, tensor<1024xf32>)
               -> (tensor<1x4096x1024xf16>, tensor<1x4096x1024xf16>)
  // CHECK: trellis.linear_residual_norm %{{.*}}, %{{.*}}, %{{.*}} residual %{{.*}} gate %{{.*}} plus %{{.*}} modulate %{{.*}}, %{{.*}} {eps = 9.9999999999999995E-7 : f64} : (tensor<1x4096x1024xf16>, tensor<1024x1024xf16>, tensor<1024xf16>, tensor<1x4096x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>) -> (tensor<1x4096x1024xf16>, tensor<1x4096x1024xf16>)
  %r4, %y4 = trellis.linear_residual_norm %a2, %w2, %b residual %x gate %gate plus %gate modulate %shift, %scale {eps = 1.0e-06 : f64}
               : (tensor<1x4096x1024xf16>, tensor<1024x1024xf16>, tensor<1024xf16>, tensor<1x4096x1024xf16>,
                  tensor<1x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>)
               -> (tensor<1x4096x1024xf16>, tensor<1x4096x1024xf16>)
  // CHECK: trellis.linear_residual_norm %{{.*}}, %{{.*}}, %{{.*}} residual %{{.*}} gate %{{.*}} plus %{{.*}} {eps = 1.000000e-05 : f64} : (tensor<1x4096x1024xf16>, tensor<1024x1024xf16>, tensor<1024xf16>, tensor<1x4096x1024xf16>, tensor<1x1024xf16>, tensor<1x4096x1024xf16>) -> (tensor<1x4096x1024xf16>, tensor<1x4096x1024xf16>)
  %r5, %y5 = trellis.linear_residual_norm %a2, %w2, %b residual %x gate %gate plus %x {eps = 1.0e-05 : f64}
               : (tensor<1x4096x1024xf16>, tensor<1024x1024xf16>, tensor<1024xf16>, tensor<1x4096x1024xf16>,
                  tensor<1x1024xf16>, tensor<1x4096x1024xf16>)
               -> (tensor<1x4096x1024xf16>, tensor<1x4096x1024xf16>)
  // CHECK: trellis.linear_residual_norm %{{.*}}, %{{.*}}, %{{.*}} residual %{{.*}} {eps = 1.000000e-05 : f64} : (tensor<?x256xf16, #trellis.bounds<[64]>>, tensor<128x256xf16>, tensor<128xf16>, tensor<?x128xf16, #trellis.bounds<[64]>>) -> (tensor<?x128xf16, #trellis.bounds<[64]>>, tensor<?x128xf16, #trellis.bounds<[64]>>)
  %r6, %y6 = trellis.linear_residual_norm %ar, %wr, %br residual %xr {eps = 1.0e-05 : f64}
               : (tensor<?x256xf16, #trellis.bounds<[64]>>, tensor<128x256xf16>, tensor<128xf16>,
                  tensor<?x128xf16, #trellis.bounds<[64]>>)
               -> (tensor<?x128xf16, #trellis.bounds<[64]>>, tensor<?x128xf16, #trellis.bounds<[64]>>)
  // CHECK: trellis.linear_residual_norm %{{.*}}, %{{.*}}, %{{.*}} residual %{{.*}} gate %{{.*}} modulate %{{.*}}, %{{.*}} {eps = 9.9999999999999995E-7 : f64} : (tensor<?x256xf16, #trellis.bounds<[64]>>, tensor<128x256xf16>, tensor<128xf16>, tensor<?x128xf16, #trellis.bounds<[64]>>, tensor<1x128xf16>, tensor<1x128xf16>, tensor<1x128xf16>)
  %r7, %y7 = trellis.linear_residual_norm %ar, %wr, %br residual %xr gate %gr modulate %gr, %gr {eps = 1.0e-06 : f64}
               : (tensor<?x256xf16, #trellis.bounds<[64]>>, tensor<128x256xf16>, tensor<128xf16>,
                  tensor<?x128xf16, #trellis.bounds<[64]>>, tensor<1x128xf16>, tensor<1x128xf16>, tensor<1x128xf16>)
               -> (tensor<?x128xf16, #trellis.bounds<[64]>>, tensor<?x128xf16, #trellis.bounds<[64]>>)
  return %y, %n, %y3, %y4, %y5, %y6, %y7 : tensor<1x4096x1024xf16>, tensor<1x4096x1024xf16>, tensor<1x4096x1024xf16>, tensor<1x4096x1024xf16>,
        tensor<1x4096x1024xf16>, tensor<?x128xf16, #trellis.bounds<[64]>>, tensor<?x128xf16, #trellis.bounds<[64]>>
}
