// RUN: trellis-opt --trellis-chunk-mlp=chunk-tokens=4 %s | FileCheck %s
// RUN: trellis-opt --trellis-chunk-mlp=chunk-tokens=4 --mlir-print-debuginfo %s | FileCheck %s --check-prefix=LOC
// RUN: trellis-opt --trellis-chunk-mlp=hidden-bytes=512 %s | FileCheck %s --check-prefix=BUDGET
// RUN: trellis-opt "--trellis-chunk-mlp=chunk-tokens=3 hidden-bytes=512" %s | FileCheck %s --check-prefix=FEWER
// RUN: not trellis-opt --trellis-chunk-mlp %s 2>&1 | FileCheck %s --check-prefix=UNSET

// 10 tokens in chunks of 4: 4, 4, 2.
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x10x8xf16>, %[[W1:[^:]*]]: tensor<32x8xf16>, %[[B1:[^:]*]]: tensor<32xf16>, %[[W2:[^:]*]]: tensor<8x32xf16>, %[[B2:[^:]*]]: tensor<8xf16>)
// CHECK-NEXT: %[[S:.*]]:3 = trellis.split %[[X]] {axis = 1 : i64, sizes = array<i64: 4, 4, 2>} : (tensor<2x10x8xf16>) -> (tensor<2x4x8xf16>, tensor<2x4x8xf16>, tensor<2x2x8xf16>)
// CHECK-NEXT: %[[H0:.*]] = trellis.linear %[[S]]#0, %[[W1]], %[[B1]] : (tensor<2x4x8xf16>, tensor<32x8xf16>, tensor<32xf16>) -> tensor<2x4x32xf16>
// CHECK-NEXT: %[[G0:.*]] = trellis.gelu %[[H0]] : tensor<2x4x32xf16>
// CHECK-NEXT: %[[Y0:.*]] = trellis.linear %[[G0]], %[[W2]], %[[B2]] : (tensor<2x4x32xf16>, tensor<8x32xf16>, tensor<8xf16>) -> tensor<2x4x8xf16>
// CHECK: trellis.linear %[[S]]#1
// CHECK: %[[H2:.*]] = trellis.linear %[[S]]#2, %[[W1]], %[[B1]] : (tensor<2x2x8xf16>, tensor<32x8xf16>, tensor<32xf16>) -> tensor<2x2x32xf16>
// CHECK-NEXT: %[[G2:.*]] = trellis.gelu %[[H2]] : tensor<2x2x32xf16>
// CHECK-NEXT: %[[Y2:.*]] = trellis.linear %[[G2]], %[[W2]], %[[B2]] : (tensor<2x2x32xf16>, tensor<8x32xf16>, tensor<8xf16>) -> tensor<2x2x8xf16>
// CHECK-NEXT: %[[Y:.*]] = trellis.concat %[[Y0]], %{{.*}}, %[[Y2]] {axis = 1 : i64} : (tensor<2x4x8xf16>, tensor<2x4x8xf16>, tensor<2x2x8xf16>) -> tensor<2x10x8xf16>
// CHECK-NEXT: return %[[Y]]
// LOC-LABEL: func.func @mlp
// LOC: trellis.split {{.*}} loc(#[[MLP:loc[0-9]+]])
// LOC: trellis.linear {{.*}} loc(#[[FC1:loc[0-9]+]])
// LOC: trellis.concat {{.*}} loc(#[[MLP]])
// LOC-DAG: #[[FC1]] = loc("fc1")
// LOC-DAG: #[[MLP]] = loc(fused[#[[FC1]], #{{loc[0-9]+}}, #{{loc[0-9]+}}])
// A hidden row of one token is 2 × 32 f16 = 128 bytes: 512 bytes hold 4.
// BUDGET-LABEL: func.func @mlp
// BUDGET: trellis.split %{{.*}} {axis = 1 : i64, sizes = array<i64: 4, 4, 2>}
// FEWER-LABEL: func.func @mlp
// FEWER: trellis.split %{{.*}} {axis = 1 : i64, sizes = array<i64: 3, 3, 3, 1>}
// UNSET: trellis-chunk-mlp: chunk-tokens or hidden-bytes must be >= 1 (and neither negative), found 0 and 0
func.func @mlp(%x: tensor<2x10x8xf16>, %w1: tensor<32x8xf16>, %b1: tensor<32xf16>, %w2: tensor<8x32xf16>, %b2: tensor<8xf16>) -> tensor<2x10x8xf16> {
  %h = trellis.linear %x, %w1, %b1 : (tensor<2x10x8xf16>, tensor<32x8xf16>, tensor<32xf16>) -> tensor<2x10x32xf16> loc("fc1")
  %g = trellis.gelu %h : tensor<2x10x32xf16> loc("act")
  %y = trellis.linear %g, %w2, %b2 : (tensor<2x10x32xf16>, tensor<8x32xf16>, tensor<8xf16>) -> tensor<2x10x8xf16> loc("fc2")
  return %y : tensor<2x10x8xf16>
}

// The fused form (after trellis-fuse-linear-activation), 8 tokens in 2 chunks.
// CHECK-LABEL: func.func @fused_mlp
// CHECK: trellis.split %{{.*}} {axis = 1 : i64, sizes = array<i64: 4, 4>}
// CHECK: trellis.linear {{.*}} {activation = "gelu_tanh"} : (tensor<1x4x8xf16>
// CHECK-NOT: trellis.gelu
// CHECK: trellis.concat
func.func @fused_mlp(%x: tensor<1x8x8xf16>, %w1: tensor<32x8xf16>, %w2: tensor<8x32xf16>) -> tensor<1x8x8xf16> {
  %h = trellis.linear %x, %w1 {activation = "gelu_tanh"} : (tensor<1x8x8xf16>, tensor<32x8xf16>) -> tensor<1x8x32xf16>
  %y = trellis.linear %h, %w2 : (tensor<1x8x32xf16>, tensor<8x32xf16>) -> tensor<1x8x8xf16>
  return %y : tensor<1x8x8xf16>
}

// After trellis-fuse-linear-residual: the residual is split alike and each
// chunk's second linear adds its piece.
// CHECK-LABEL: func.func @residual_mlp
// CHECK-SAME: (%[[X:[^:]*]]: tensor<1x8x8xf16>, %[[R:[^:]*]]: tensor<1x8x8xf16>
// CHECK: %[[S:.*]]:2 = trellis.split %[[X]] {axis = 1 : i64, sizes = array<i64: 4, 4>}
// CHECK-NEXT: %[[RS:.*]]:2 = trellis.split %[[R]] {axis = 1 : i64, sizes = array<i64: 4, 4>}
// CHECK: trellis.linear %{{.*}}, %{{.*}}, %{{.*}} residual %[[RS]]#0 : (tensor<1x4x32xf16>
// CHECK: trellis.linear %{{.*}}, %{{.*}}, %{{.*}} residual %[[RS]]#1 : (tensor<1x4x32xf16>
// CHECK: trellis.concat
func.func @residual_mlp(%x: tensor<1x8x8xf16>, %r: tensor<1x8x8xf16>, %w1: tensor<32x8xf16>, %b1: tensor<32xf16>, %w2: tensor<8x32xf16>, %b2: tensor<8xf16>) -> tensor<1x8x8xf16> {
  %h = trellis.linear %x, %w1, %b1 {activation = "gelu_tanh"} : (tensor<1x8x8xf16>, tensor<32x8xf16>, tensor<32xf16>) -> tensor<1x8x32xf16>
  %y = trellis.linear %h, %w2, %b2 residual %r : (tensor<1x8x32xf16>, tensor<8x32xf16>, tensor<8xf16>, tensor<1x8x8xf16>) -> tensor<1x8x8xf16>
  return %y : tensor<1x8x8xf16>
}

// Negative: few enough tokens; the hidden activation has another user; no
// GELU in between; dynamic (sparse) token counts.
// CHECK-LABEL: func.func @not_chunked
// CHECK-NOT: trellis.split
// CHECK-NOT: trellis.concat
// CHECK: return
func.func @not_chunked(%x: tensor<1x4x8xf16>, %y: tensor<1x9x8xf16>, %w1: tensor<32x8xf16>, %w2: tensor<8x32xf16>,
                       %s: tensor<?x8xf16, #trellis.bounds<[100]>>)
    -> (tensor<1x4x8xf16>, tensor<1x9x8xf16>, tensor<1x9x32xf16>, tensor<1x9x8xf16>, tensor<?x8xf16, #trellis.bounds<[100]>>) {
  %h0 = trellis.linear %x, %w1 {activation = "gelu_tanh"} : (tensor<1x4x8xf16>, tensor<32x8xf16>) -> tensor<1x4x32xf16>
  %y0 = trellis.linear %h0, %w2 : (tensor<1x4x32xf16>, tensor<8x32xf16>) -> tensor<1x4x8xf16>
  %h1 = trellis.linear %y, %w1 {activation = "gelu_tanh"} : (tensor<1x9x8xf16>, tensor<32x8xf16>) -> tensor<1x9x32xf16>
  %y1 = trellis.linear %h1, %w2 : (tensor<1x9x32xf16>, tensor<8x32xf16>) -> tensor<1x9x8xf16>
  %h2 = trellis.linear %y, %w1 : (tensor<1x9x8xf16>, tensor<32x8xf16>) -> tensor<1x9x32xf16>
  %y2 = trellis.linear %h2, %w2 : (tensor<1x9x32xf16>, tensor<8x32xf16>) -> tensor<1x9x8xf16>
  %h3 = trellis.linear %s, %w1 {activation = "gelu_tanh"} : (tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<32x8xf16>) -> tensor<?x32xf16, #trellis.bounds<[100]>>
  %y3 = trellis.linear %h3, %w2 : (tensor<?x32xf16, #trellis.bounds<[100]>>, tensor<8x32xf16>) -> tensor<?x8xf16, #trellis.bounds<[100]>>
  return %y0, %y1, %h1, %y2, %y3 : tensor<1x4x8xf16>, tensor<1x9x8xf16>, tensor<1x9x32xf16>, tensor<1x9x8xf16>, tensor<?x8xf16, #trellis.bounds<[100]>>
}
