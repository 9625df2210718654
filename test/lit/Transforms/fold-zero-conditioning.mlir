// RUN: trellis-opt --trellis-fold-zero-conditioning %s | FileCheck %s
// RUN: trellis-opt --trellis-fold-zero-conditioning --mlir-print-debuginfo %s | FileCheck %s --check-prefix=LOC
// RUN: trellis-opt --trellis-fold-zero-conditioning --mlir-print-debuginfo %s | FileCheck %s --check-prefix=SLOC

// The unconditional cross-attention of a block (spec §3.6) on the zero
// negative condition: K/V are the to_kv bias for every key, so the output
// is the V half of that bias for every query, and the out-projection is
// one GEMV added to every token.
// CHECK-LABEL: func.func @uncond_cross_attention
// CHECK-SAME: (%[[H:[^:]*]]: tensor<1x16x8xf16>, %[[WQ:[^:]*]]: tensor<8x8xf16>, %[[WKV:[^:]*]]: tensor<16x8xf16>, %[[BKV:[^:]*]]: tensor<16xf16>, %[[WO:[^:]*]]: tensor<8x8xf16>, %[[BO:[^:]*]]: tensor<8xf16>)
// CHECK-NOT: trellis.attention
// The reshapes of the bias row fold into one each (reshape of reshape).
// CHECK: %[[B5:.*]] = trellis.reshape %[[BKV]] : (tensor<16xf16>) -> tensor<1x2x2x4xf16>
// CHECK: %[[KV:.*]]:2 = trellis.split %[[B5]] {axis = 1 : i64, sizes = array<i64: 1, 1>} : (tensor<1x2x2x4xf16>) -> (tensor<1x1x2x4xf16>, tensor<1x1x2x4xf16>)
// CHECK: %[[V2:.*]] = trellis.reshape %[[KV]]#1 : (tensor<1x1x2x4xf16>) -> tensor<1x8xf16>
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

// The SLat stage's sparse cross-attention (spec §6.5) on the zero negative
// condition, repeated to batch 2 as specialize-guidance does: N voxel rows
// (bounded dynamic). The V row is repeated over the queries' rows (their
// count taken from q at run time), and the out-projection is one GEMV added
// to every row.
// CHECK-LABEL: func.func @uncond_sparse_cross_attention
// CHECK-SAME: (%[[H:[^:]*]]: tensor<?x8xf16, #trellis.bounds<[64]>>, %[[C:[^:]*]]: !trellis.coords<resolution = 8, bound = 64>, %[[WQ:[^:]*]]: tensor<8x8xf16>, %[[WKV:[^:]*]]: tensor<16x8xf16>, %[[BKV:[^:]*]]: tensor<16xf16>, %[[WO:[^:]*]]: tensor<8x8xf16>, %[[BO:[^:]*]]: tensor<8xf16>)
// CHECK-NOT: trellis.sparse.cross_attention
// CHECK-NOT: trellis.broadcast_rows
// CHECK: %[[O:.*]] = trellis.linear %{{.*}}, %[[WO]], %[[BO]] : (tensor<1x8xf16>, tensor<8x8xf16>, tensor<8xf16>) -> tensor<1x8xf16>
// CHECK: %[[R:.*]] = trellis.add %[[H]], %[[O]] : (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<1x8xf16>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
// CHECK: return %[[R]]
// SLOC-LABEL: func.func @uncond_sparse_cross_attention
// SLOC: trellis.add {{.*}} loc(#[[SADD:loc[0-9]+]])
// SLOC: #[[CROSS:loc[0-9]+]] = loc("cross")
// SLOC: #[[SADD]] = loc(fused[{{.*}}#[[CROSS]]{{.*}}])
func.func @uncond_sparse_cross_attention(%h: tensor<?x8xf16, #trellis.bounds<[64]>>, %c: !trellis.coords<resolution = 8, bound = 64>,
                                         %wq: tensor<8x8xf16>, %wkv: tensor<16x8xf16>, %bkv: tensor<16xf16>,
                                         %wo: tensor<8x8xf16>, %bo: tensor<8xf16>) -> tensor<?x8xf16, #trellis.bounds<[64]>> {
  %z = trellis.constant dense<0.0> : tensor<1x4x8xf32>
  %zc = trellis.cast %z : (tensor<1x4x8xf32>) -> tensor<1x4x8xf16>
  %zb = trellis.broadcast_rows %zc : (tensor<1x4x8xf16>) -> tensor<2x4x8xf16>
  %q = trellis.linear %h, %wq : (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<8x8xf16>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  %q3 = trellis.reshape %q : (tensor<?x8xf16, #trellis.bounds<[64]>>) -> tensor<?x2x4xf16, #trellis.bounds<[64]>>
  %kv = trellis.linear %zb, %wkv, %bkv : (tensor<2x4x8xf16>, tensor<16x8xf16>, tensor<16xf16>) -> tensor<2x4x16xf16>
  %kv5 = trellis.reshape %kv : (tensor<2x4x16xf16>) -> tensor<2x4x2x2x4xf16>
  %p:2 = trellis.split %kv5 {axis = 2 : i64, sizes = array<i64: 1, 1>} : (tensor<2x4x2x2x4xf16>) -> (tensor<2x4x1x2x4xf16>, tensor<2x4x1x2x4xf16>)
  %k = trellis.reshape %p#0 : (tensor<2x4x1x2x4xf16>) -> tensor<2x4x2x4xf16>
  %v = trellis.reshape %p#1 : (tensor<2x4x1x2x4xf16>) -> tensor<2x4x2x4xf16>
  %o = trellis.sparse.cross_attention %q3, %k, %v, %c {scale = 0.5 : f64}
         : (tensor<?x2x4xf16, #trellis.bounds<[64]>>, tensor<2x4x2x4xf16>, tensor<2x4x2x4xf16>, !trellis.coords<resolution = 8, bound = 64>)
         -> tensor<?x2x4xf16, #trellis.bounds<[64]>> loc("cross")
  %o2 = trellis.reshape %o : (tensor<?x2x4xf16, #trellis.bounds<[64]>>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  %y = trellis.linear %o2, %wo, %bo : (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<8x8xf16>, tensor<8xf16>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  %r = trellis.add %h, %y : (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  return %r : tensor<?x8xf16, #trellis.bounds<[64]>>
}

// Where the dynamic rows meet a full tensor (here the result) they stay
// repeated, with the row count of the queries.
// CHECK-LABEL: func.func @sparse_rows_result
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<?x2x4xf16, #trellis.bounds<[64]>>
// CHECK: %[[V:.*]] = trellis.reshape %{{.*}} : (tensor<1x1x2x4xf16>) -> tensor<1x8xf16>
// CHECK: %[[B:.*]] = trellis.broadcast_rows %[[V]], %[[Q]] : (tensor<1x8xf16>, tensor<?x2x4xf16, #trellis.bounds<[64]>>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
// CHECK-NEXT: return %[[B]]
func.func @sparse_rows_result(%q: tensor<?x2x4xf16, #trellis.bounds<[64]>>, %c: !trellis.coords<resolution = 8, bound = 64>,
                              %wkv: tensor<16x8xf16>, %bkv: tensor<16xf16>) -> tensor<?x8xf16, #trellis.bounds<[64]>> {
  %z = trellis.constant dense<0.0> : tensor<1x4x8xf16>
  %kv = trellis.linear %z, %wkv, %bkv : (tensor<1x4x8xf16>, tensor<16x8xf16>, tensor<16xf16>) -> tensor<1x4x16xf16>
  %kv5 = trellis.reshape %kv : (tensor<1x4x16xf16>) -> tensor<1x4x2x2x4xf16>
  %p:2 = trellis.split %kv5 {axis = 2 : i64, sizes = array<i64: 1, 1>} : (tensor<1x4x2x2x4xf16>) -> (tensor<1x4x1x2x4xf16>, tensor<1x4x1x2x4xf16>)
  %k = trellis.reshape %p#0 : (tensor<1x4x1x2x4xf16>) -> tensor<1x4x2x4xf16>
  %v = trellis.reshape %p#1 : (tensor<1x4x1x2x4xf16>) -> tensor<1x4x2x4xf16>
  %o = trellis.sparse.cross_attention %q, %k, %v, %c {scale = 0.5 : f64}
         : (tensor<?x2x4xf16, #trellis.bounds<[64]>>, tensor<1x4x2x4xf16>, tensor<1x4x2x4xf16>, !trellis.coords<resolution = 8, bound = 64>)
         -> tensor<?x2x4xf16, #trellis.bounds<[64]>>
  %o2 = trellis.reshape %o : (tensor<?x2x4xf16, #trellis.bounds<[64]>>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  return %o2 : tensor<?x8xf16, #trellis.bounds<[64]>>
}

// Negative: the text-base negative condition is an input (the CLIP
// embedding of the empty prompt), not zero: the sparse cross-attention and
// its K/V projection stay.
// CHECK-LABEL: func.func @sparse_neg_cond_input
// CHECK: trellis.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<1x4x8xf16>
// CHECK: trellis.sparse.cross_attention
// CHECK-NOT: trellis.broadcast_rows
func.func @sparse_neg_cond_input(%q: tensor<?x2x4xf16, #trellis.bounds<[64]>>, %c: !trellis.coords<resolution = 8, bound = 64>,
                                 %neg: tensor<1x4x8xf32>, %wkv: tensor<16x8xf16>, %bkv: tensor<16xf16>)
    -> tensor<?x2x4xf16, #trellis.bounds<[64]>> {
  %nc = trellis.cast %neg : (tensor<1x4x8xf32>) -> tensor<1x4x8xf16>
  %kv = trellis.linear %nc, %wkv, %bkv : (tensor<1x4x8xf16>, tensor<16x8xf16>, tensor<16xf16>) -> tensor<1x4x16xf16>
  %kv5 = trellis.reshape %kv : (tensor<1x4x16xf16>) -> tensor<1x4x2x2x4xf16>
  %p:2 = trellis.split %kv5 {axis = 2 : i64, sizes = array<i64: 1, 1>} : (tensor<1x4x2x2x4xf16>) -> (tensor<1x4x1x2x4xf16>, tensor<1x4x1x2x4xf16>)
  %k = trellis.reshape %p#0 : (tensor<1x4x1x2x4xf16>) -> tensor<1x4x2x4xf16>
  %v = trellis.reshape %p#1 : (tensor<1x4x1x2x4xf16>) -> tensor<1x4x2x4xf16>
  %o = trellis.sparse.cross_attention %q, %k, %v, %c {scale = 0.5 : f64}
         : (tensor<?x2x4xf16, #trellis.bounds<[64]>>, tensor<1x4x2x4xf16>, tensor<1x4x2x4xf16>, !trellis.coords<resolution = 8, bound = 64>)
         -> tensor<?x2x4xf16, #trellis.bounds<[64]>>
  return %o : tensor<?x2x4xf16, #trellis.bounds<[64]>>
}
