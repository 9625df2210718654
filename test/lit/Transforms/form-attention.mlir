// RUN: trellis-opt --trellis-form-attention %s | FileCheck %s
// RUN: trellis-opt --trellis-form-attention --mlir-print-debuginfo %s | FileCheck %s --check-prefix=LOC

// Self-attention with q/k head RMS norms (spec §3.6): both become gains.
// CHECK-LABEL: func.func @self_attention
// CHECK-SAME: (%[[Q:.*]]: tensor<1x8x2x4xf16>, %[[K:.*]]: tensor<1x8x2x4xf16>, %[[V:.*]]: tensor<1x8x2x4xf16>, %[[GQ:.*]]: tensor<2x4xf32>, %[[GK:.*]]: tensor<2x4xf32>)
// CHECK-NEXT: %[[O:.*]] = trellis.attention %[[Q]], %[[K]], %[[V]] q_gamma %[[GQ]] k_gamma %[[GK]] {scale = 5.000000e-01 : f64} : (tensor<1x8x2x4xf16>, tensor<1x8x2x4xf16>, tensor<1x8x2x4xf16>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<1x8x2x4xf16>
// CHECK-NEXT: return %[[O]]
// LOC-LABEL: func.func @self_attention
// LOC: trellis.attention {{.*}} loc(#[[L:loc[0-9]*]])
// LOC-DAG: #[[A:loc[0-9]+]] = loc("attn")
// LOC-DAG: #[[NQ:loc[0-9]+]] = loc("q_norm")
// LOC-DAG: #[[NK:loc[0-9]+]] = loc("k_norm")
// LOC-DAG: #[[L]] = loc(fused[#[[A]], #[[NQ]], #[[NK]]])
func.func @self_attention(%q: tensor<1x8x2x4xf16>, %k: tensor<1x8x2x4xf16>, %v: tensor<1x8x2x4xf16>,
                          %gq: tensor<2x4xf32>, %gk: tensor<2x4xf32>) -> tensor<1x8x2x4xf16> {
  %qn = trellis.head_rms_norm %q, %gq : (tensor<1x8x2x4xf16>, tensor<2x4xf32>) -> tensor<1x8x2x4xf16> loc("q_norm")
  %kn = trellis.head_rms_norm %k, %gk : (tensor<1x8x2x4xf16>, tensor<2x4xf32>) -> tensor<1x8x2x4xf16> loc("k_norm")
  %o = trellis.attention %qn, %kn, %v {scale = 0.5 : f64} : (tensor<1x8x2x4xf16>, tensor<1x8x2x4xf16>, tensor<1x8x2x4xf16>) -> tensor<1x8x2x4xf16> loc("attn")
  return %o : tensor<1x8x2x4xf16>
}

// Only k normalized.
// CHECK-LABEL: func.func @k_only
// CHECK: trellis.attention %{{.*}}, %{{.*}}, %{{.*}} k_gamma %{{.*}} {scale
func.func @k_only(%q: tensor<1x8x2x4xf16>, %k: tensor<1x3x2x4xf16>, %gk: tensor<2x4xf32>) -> tensor<1x8x2x4xf16> {
  %kn = trellis.head_rms_norm %k, %gk : (tensor<1x3x2x4xf16>, tensor<2x4xf32>) -> tensor<1x3x2x4xf16>
  %o = trellis.attention %q, %kn, %k {scale = 0.5 : f64} : (tensor<1x8x2x4xf16>, tensor<1x3x2x4xf16>, tensor<1x3x2x4xf16>) -> tensor<1x8x2x4xf16>
  return %o : tensor<1x8x2x4xf16>
}

// Negative: the normalized q has another user; v's norm is not a gain.
// CHECK-LABEL: func.func @not_formed
// CHECK: trellis.head_rms_norm
// CHECK: trellis.head_rms_norm
// CHECK-NOT: q_gamma
// CHECK-NOT: k_gamma
// CHECK: return
func.func @not_formed(%q: tensor<1x8x2x4xf16>, %g: tensor<2x4xf32>) -> (tensor<1x8x2x4xf16>, tensor<1x8x2x4xf16>) {
  %qn = trellis.head_rms_norm %q, %g : (tensor<1x8x2x4xf16>, tensor<2x4xf32>) -> tensor<1x8x2x4xf16>
  %vn = trellis.head_rms_norm %q, %g : (tensor<1x8x2x4xf16>, tensor<2x4xf32>) -> tensor<1x8x2x4xf16>
  %o = trellis.attention %qn, %q, %vn {scale = 0.5 : f64} : (tensor<1x8x2x4xf16>, tensor<1x8x2x4xf16>, tensor<1x8x2x4xf16>) -> tensor<1x8x2x4xf16>
  return %o, %qn : tensor<1x8x2x4xf16>, tensor<1x8x2x4xf16>
}

// Sparse self-attention within segments (the SLat flow's blocks): the same.
// CHECK-LABEL: func.func @sparse_self_attention
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<?x2x4xf16, {{.*}}>, %[[K:[^:]*]]: tensor<?x2x4xf16, {{.*}}>, %[[V:[^:]*]]: tensor<?x2x4xf16, {{.*}}>, %[[S:[^:]*]]: !trellis.segments{{.*}}, %[[GQ:[^:]*]]: tensor<2x4xf32>, %[[GK:[^:]*]]: tensor<2x4xf32>)
// CHECK-NEXT: %[[O:.*]] = trellis.sparse.attention %[[Q]], %[[K]], %[[V]], %[[S]] q_gamma %[[GQ]] k_gamma %[[GK]] {scale = 5.000000e-01 : f64}
// CHECK-NEXT: return %[[O]]
func.func @sparse_self_attention(%q: tensor<?x2x4xf16, #trellis.bounds<[64]>>, %k: tensor<?x2x4xf16, #trellis.bounds<[64]>>,
                                 %v: tensor<?x2x4xf16, #trellis.bounds<[64]>>, %s: !trellis.segments<max_length = 64, bound = 64>,
                                 %gq: tensor<2x4xf32>, %gk: tensor<2x4xf32>) -> tensor<?x2x4xf16, #trellis.bounds<[64]>> {
  %qn = trellis.head_rms_norm %q, %gq : (tensor<?x2x4xf16, #trellis.bounds<[64]>>, tensor<2x4xf32>) -> tensor<?x2x4xf16, #trellis.bounds<[64]>>
  %kn = trellis.head_rms_norm %k, %gk : (tensor<?x2x4xf16, #trellis.bounds<[64]>>, tensor<2x4xf32>) -> tensor<?x2x4xf16, #trellis.bounds<[64]>>
  %o = trellis.sparse.attention %qn, %kn, %v, %s {scale = 0.5 : f64} : (tensor<?x2x4xf16, #trellis.bounds<[64]>>, tensor<?x2x4xf16, #trellis.bounds<[64]>>, tensor<?x2x4xf16, #trellis.bounds<[64]>>, !trellis.segments<max_length = 64, bound = 64>) -> tensor<?x2x4xf16, #trellis.bounds<[64]>>
  return %o : tensor<?x2x4xf16, #trellis.bounds<[64]>>
}
