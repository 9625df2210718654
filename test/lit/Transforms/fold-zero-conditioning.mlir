// RUN: trellis-opt --trellis-fold-zero-conditioning %s | FileCheck %s
// RUN: trellis-opt --trellis-fold-zero-conditioning --mlir-print-debuginfo %s | FileCheck %s --check-prefix=LOC

// The unconditional cross-attention of a block (spec §3.6) on the zero
// negative condition: K/V are the to_kv bias for every key, so the output
// is the V half of that bias for every query, and the out-projection is
// one GEMV added to every token.
// CHECK-LABEL: func.func @uncond_cross_attention
// CHECK-SAME: (%[[H:[^:]*]]: tensor<1x16x8xf16>, %[[WQ:[^:]*]]: tensor<8x8xf16>, %[[WKV:[^:]*]]: tensor<16x8xf16>, %[[BKV:[^:]*]]: tensor<16xf16>, %[[WO:[^:]*]]: tensor<8x8xf16>, %[[BO:[^:]*]]: tensor<8xf16>)
// CHECK-NOT: trellis.attention
// CHECK: %[[B:.*]] = trellis.reshape %[[BKV]] : (tensor<16xf16>) -> tensor<1x16xf16>
// CHECK: %[[B5:.*]] = trellis.reshape %[[B]] : (tensor<1x16xf16>) -> tensor<1x2x2x4xf16>
// CHECK: %[[KV:.*]]:2 = trellis.split %[[B5]] {axis = 1 : i64, sizes = array<i64: 1, 1>} : (tensor<1x2x2x4xf16>) -> (tensor<1x1x2x4xf16>, tensor<1x1x2x4xf16>)
// CHECK: %[[V:.*]] = trellis.reshape %[[KV]]#1 : (tensor<1x1x2x4xf16>) -> tensor<1x2x4xf16>
// CHECK: %[[V2:.*]] = trellis.reshape %[[V]] : (tensor<1x2x4xf16>) -> tensor<1x8xf16>
// CHECK: %[[O:.*]] = trellis.linear %[[V2]], %[[WO]], %[[BO]] : (tensor<1x8xf16>, tensor<8x8xf16>, tensor<8xf16>) -> tensor<1x8xf16>
// CHECK: %[[R:.*]] = trellis.add %[[H]], %[[O]] : (tensor<1x16x8xf16>, tensor<1x8xf16>) -> tensor<1x16x8xf16>
// CHECK: return %[[R]]
// LOC-LABEL: func.func @uncond_cross_attention
// LOC: trellis.add {{.*}} loc(#[[ADD:loc[0-9]+]])
// LOC: #[[ATTN:loc[0-9]+]] = loc("attn")
// LOC: #[[ADD]] = loc(fused[{{.*}}#[[ATTN]]{{.*}}])
func.func @uncond_cross_attention(%h: tensor<1x16x8xf16>, %wq: tensor<8x8xf16>, %wkv: tensor<16x8xf16>, %bkv: tensor<16xf16>,
                                  %wo: tensor<8x8xf16>, %bo: tensor<8xf16>) -> tensor<1x16x8xf16> {
  %z = trellis.constant dense<0.0> : tensor<1x4x8xf32>
  %zc = trellis.cast %z : (tensor<1x4x8xf32>) -> tensor<1x4x8xf16>
  %q = trellis.linear %h, %wq : (tensor<1x16x8xf16>, tensor<8x8xf16>) -> tensor<1x16x8xf16>
  %q4 = trellis.reshape %q : (tensor<1x16x8xf16>) -> tensor<1x16x2x4xf16>
  %kv = trellis.linear %zc, %wkv, %bkv : (tensor<1x4x8xf16>, tensor<16x8xf16>, tensor<16xf16>) -> tensor<1x4x16xf16>
  %kv5 = trellis.reshape %kv : (tensor<1x4x16xf16>) -> tensor<1x4x2x2x4xf16>
  %p:2 = trellis.split %kv5 {axis = 2 : i64, sizes = array<i64: 1, 1>} : (tensor<1x4x2x2x4xf16>) -> (tensor<1x4x1x2x4xf16>, tensor<1x4x1x2x4xf16>)
  %k = trellis.reshape %p#0 : (tensor<1x4x1x2x4xf16>) -> tensor<1x4x2x4xf16>
  %v = trellis.reshape %p#1 : (tensor<1x4x1x2x4xf16>) -> tensor<1x4x2x4xf16>
  %o = trellis.attention %q4, %k, %v {scale = 0.5 : f64} : (tensor<1x16x2x4xf16>, tensor<1x4x2x4xf16>, tensor<1x4x2x4xf16>) -> tensor<1x16x2x4xf16> loc("attn")
  %o3 = trellis.reshape %o : (tensor<1x16x2x4xf16>) -> tensor<1x16x8xf16>
  %y = trellis.linear %o3, %wo, %bo : (tensor<1x16x8xf16>, tensor<8x8xf16>, tensor<8xf16>) -> tensor<1x16x8xf16>
  %r = trellis.add %h, %y : (tensor<1x16x8xf16>, tensor<1x16x8xf16>) -> tensor<1x16x8xf16>
  return %r : tensor<1x16x8xf16>
}

// Without a bias the projection of zeros is zeros.
// CHECK-LABEL: func.func @no_bias
// CHECK: %[[Z:.*]] = trellis.constant dense<0.000000e+00> : tensor<2x3x16xf16>
// CHECK-NEXT: return %[[Z]]
func.func @no_bias(%w: tensor<16x8xf16>) -> tensor<2x3x16xf16> {
  %z = trellis.constant dense<0.0> : tensor<2x3x8xf32>
  %zc = trellis.cast %z : (tensor<2x3x8xf32>) -> tensor<2x3x8xf16>
  %y = trellis.linear %zc, %w : (tensor<2x3x8xf16>, tensor<16x8xf16>) -> tensor<2x3x16xf16>
  return %y : tensor<2x3x16xf16>
}

// Repeated rows survive as trellis.broadcast_rows where they meet an op
// that needs the full tensor (here the function's result).
// CHECK-LABEL: func.func @rows_result
// CHECK: %[[R:.*]] = trellis.reshape %{{.*}} : (tensor<16xf16>) -> tensor<1x16xf16>
// CHECK: %[[B:.*]] = trellis.broadcast_rows %[[R]] : (tensor<1x16xf16>) -> tensor<2x3x16xf16>
// CHECK-NEXT: return %[[B]]
func.func @rows_result(%w: tensor<16x8xf16>, %b: tensor<16xf16>) -> tensor<2x3x16xf16> {
  %z = trellis.constant dense<0.0> : tensor<2x3x8xf16>
  %y = trellis.linear %z, %w, %b : (tensor<2x3x8xf16>, tensor<16x8xf16>, tensor<16xf16>) -> tensor<2x3x16xf16>
  return %y : tensor<2x3x16xf16>
}

// Negative: a condition that is not zero, and repeated K but distinct V
// (the attention output then depends on the query).
// CHECK-LABEL: func.func @not_zero
// CHECK: trellis.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<1x4x8xf16>
// CHECK: trellis.attention
// CHECK: trellis.attention
func.func @not_zero(%q: tensor<1x16x2x4xf16>, %v: tensor<1x4x2x4xf16>, %wkv: tensor<8x8xf16>, %bkv: tensor<8xf16>)
    -> (tensor<1x16x2x4xf16>, tensor<1x16x2x4xf16>) {
  %one = trellis.constant dense<1.0> : tensor<1x4x8xf16>
  %kv = trellis.linear %one, %wkv, %bkv : (tensor<1x4x8xf16>, tensor<8x8xf16>, tensor<8xf16>) -> tensor<1x4x8xf16>
  %k = trellis.reshape %kv : (tensor<1x4x8xf16>) -> tensor<1x4x2x4xf16>
  %o = trellis.attention %q, %k, %k {scale = 0.5 : f64} : (tensor<1x16x2x4xf16>, tensor<1x4x2x4xf16>, tensor<1x4x2x4xf16>) -> tensor<1x16x2x4xf16>
  %z = trellis.constant dense<0.0> : tensor<1x4x8xf16>
  %kz = trellis.linear %z, %wkv, %bkv : (tensor<1x4x8xf16>, tensor<8x8xf16>, tensor<8xf16>) -> tensor<1x4x8xf16>
  %k2 = trellis.reshape %kz : (tensor<1x4x8xf16>) -> tensor<1x4x2x4xf16>
  %o2 = trellis.attention %q, %k2, %v {scale = 0.5 : f64} : (tensor<1x16x2x4xf16>, tensor<1x4x2x4xf16>, tensor<1x4x2x4xf16>) -> tensor<1x16x2x4xf16>
  return %o, %o2 : tensor<1x16x2x4xf16>, tensor<1x16x2x4xf16>
}
