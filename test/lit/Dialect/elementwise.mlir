// RUN: trellis-opt %s | trellis-opt | FileCheck %s

// Elementwise unary, binary and modulation ops (the examples of their
// descriptions appear here verbatim; check_doc_examples.py checks that).

// CHECK-LABEL: func.func @unary
func.func @unary(%x: tensor<4x8xf16>) {
  // CHECK: trellis.silu %{{.*}} : tensor<4x8xf16>
  %y = trellis.silu %x : tensor<4x8xf16>
  // CHECK: trellis.gelu %{{.*}} : tensor<4x8xf16>
  %y1 = trellis.gelu %x : tensor<4x8xf16>
  // CHECK: trellis.sigmoid %{{.*}} : tensor<4x8xf16>
  %y2 = trellis.sigmoid %x : tensor<4x8xf16>
  // CHECK: trellis.tanh %{{.*}} : tensor<4x8xf16>
  %y3 = trellis.tanh %x : tensor<4x8xf16>
  // CHECK: trellis.softplus %{{.*}} : tensor<4x8xf16>
  %y4 = trellis.softplus %x : tensor<4x8xf16>
  // CHECK: trellis.atanh %{{.*}} : tensor<4x8xf16>
  %y5 = trellis.atanh %x : tensor<4x8xf16>
  // CHECK: trellis.exp %{{.*}} : tensor<4x8xf16>
  %y6 = trellis.exp %x : tensor<4x8xf16>
  // CHECK: trellis.log %{{.*}} : tensor<4x8xf16>
  %y7 = trellis.log %x : tensor<4x8xf16>
  // CHECK: trellis.sin %{{.*}} : tensor<4x8xf16>
  %y8 = trellis.sin %x : tensor<4x8xf16>
  // CHECK: trellis.cos %{{.*}} : tensor<4x8xf16>
  %y9 = trellis.cos %x : tensor<4x8xf16>
  // CHECK: trellis.neg %{{.*}} : tensor<4x8xf16>
  %y10 = trellis.neg %x : tensor<4x8xf16>
  // CHECK: trellis.sqrt %{{.*}} : tensor<4x8xf16>
  %y11 = trellis.sqrt %x : tensor<4x8xf16>
  // CHECK: trellis.abs %{{.*}} : tensor<4x8xf16>
  %y12 = trellis.abs %x : tensor<4x8xf16>
  return
}

// CHECK-LABEL: func.func @unary_f32_bounded
func.func @unary_f32_bounded(%x: tensor<?x1024xf32, #trellis.bounds<[32768]>>) -> tensor<?x1024xf32, #trellis.bounds<[32768]>> {
  // CHECK: trellis.gelu %{{.*}} : tensor<?x1024xf32, #trellis.bounds<[32768]>>
  %y = trellis.gelu %x : tensor<?x1024xf32, #trellis.bounds<[32768]>>
  return %y : tensor<?x1024xf32, #trellis.bounds<[32768]>>
}

// CHECK-LABEL: func.func @binary
func.func @binary(%x: tensor<2x4096x1024xf16>, %y: tensor<2x1x1024xf16>) {
  // CHECK: trellis.add %{{.*}}, %{{.*}} : (tensor<2x4096x1024xf16>, tensor<2x1x1024xf16>) -> tensor<2x4096x1024xf16>
  %z = trellis.add %x, %y : (tensor<2x4096x1024xf16>, tensor<2x1x1024xf16>) -> tensor<2x4096x1024xf16>
  // CHECK: trellis.sub %{{.*}}, %{{.*}} : (tensor<2x4096x1024xf16>, tensor<2x1x1024xf16>) -> tensor<2x4096x1024xf16>
  %z1 = trellis.sub %x, %y : (tensor<2x4096x1024xf16>, tensor<2x1x1024xf16>) -> tensor<2x4096x1024xf16>
  // CHECK: trellis.mul %{{.*}}, %{{.*}} : (tensor<2x4096x1024xf16>, tensor<2x1x1024xf16>) -> tensor<2x4096x1024xf16>
  %z2 = trellis.mul %x, %y : (tensor<2x4096x1024xf16>, tensor<2x1x1024xf16>) -> tensor<2x4096x1024xf16>
  // CHECK: trellis.div %{{.*}}, %{{.*}} : (tensor<2x4096x1024xf16>, tensor<2x1x1024xf16>) -> tensor<2x4096x1024xf16>
  %z3 = trellis.div %x, %y : (tensor<2x4096x1024xf16>, tensor<2x1x1024xf16>) -> tensor<2x4096x1024xf16>
  // CHECK: trellis.maximum %{{.*}}, %{{.*}} : (tensor<2x4096x1024xf16>, tensor<2x1x1024xf16>) -> tensor<2x4096x1024xf16>
  %z4 = trellis.maximum %x, %y : (tensor<2x4096x1024xf16>, tensor<2x1x1024xf16>) -> tensor<2x4096x1024xf16>
  // CHECK: trellis.pow %{{.*}}, %{{.*}} : (tensor<2x4096x1024xf16>, tensor<2x1x1024xf16>) -> tensor<2x4096x1024xf16>
  %z8 = trellis.pow %x, %y : (tensor<2x4096x1024xf16>, tensor<2x1x1024xf16>) -> tensor<2x4096x1024xf16>
  // CHECK: trellis.greater %{{.*}}, %{{.*}} : (tensor<2x4096x1024xf16>, tensor<2x1x1024xf16>) -> tensor<2x4096x1024xf16>
  %z5 = trellis.greater %x, %y : (tensor<2x4096x1024xf16>, tensor<2x1x1024xf16>) -> tensor<2x4096x1024xf16>
  // CHECK: trellis.less %{{.*}}, %{{.*}} : (tensor<2x4096x1024xf16>, tensor<2x1x1024xf16>) -> tensor<2x4096x1024xf16>
  %z6 = trellis.less %x, %y : (tensor<2x4096x1024xf16>, tensor<2x1x1024xf16>) -> tensor<2x4096x1024xf16>
  // CHECK: trellis.equal %{{.*}}, %{{.*}} : (tensor<2x4096x1024xf16>, tensor<2x1x1024xf16>) -> tensor<2x4096x1024xf16>
  %z7 = trellis.equal %x, %y : (tensor<2x4096x1024xf16>, tensor<2x1x1024xf16>) -> tensor<2x4096x1024xf16>
  return
}

// Rank extension, both-sided stretching, integer operands, and bounds taken
// from whichever operand supplies the dynamic dimension.
// CHECK-LABEL: func.func @broadcast_bounds
func.func @broadcast_bounds(%a: tensor<?x1x8xf32, #trellis.bounds<[100]>>, %b: tensor<4x1xf32>,
                            %c: tensor<1x8xf32>, %d: tensor<?x8xf32, #trellis.bounds<[50]>>,
                            %i: tensor<?x4xi32, #trellis.bounds<[7]>>, %j: tensor<4xi32>) {
  // CHECK: trellis.mul %{{.*}}, %{{.*}} : (tensor<?x1x8xf32, #trellis.bounds<[100]>>, tensor<4x1xf32>) -> tensor<?x4x8xf32, #trellis.bounds<[100]>>
  %0 = trellis.mul %a, %b : (tensor<?x1x8xf32, #trellis.bounds<[100]>>, tensor<4x1xf32>) -> tensor<?x4x8xf32, #trellis.bounds<[100]>>
  // CHECK: trellis.sub %{{.*}}, %{{.*}} : (tensor<1x8xf32>, tensor<?x8xf32, #trellis.bounds<[50]>>) -> tensor<?x8xf32, #trellis.bounds<[50]>>
  %1 = trellis.sub %c, %d : (tensor<1x8xf32>, tensor<?x8xf32, #trellis.bounds<[50]>>) -> tensor<?x8xf32, #trellis.bounds<[50]>>
  // CHECK: trellis.add %{{.*}}, %{{.*}} : (tensor<?x4xi32, #trellis.bounds<[7]>>, tensor<4xi32>) -> tensor<?x4xi32, #trellis.bounds<[7]>>
  %2 = trellis.add %i, %j : (tensor<?x4xi32, #trellis.bounds<[7]>>, tensor<4xi32>) -> tensor<?x4xi32, #trellis.bounds<[7]>>
  // CHECK: trellis.maximum %{{.*}}, %{{.*}} : (tensor<?x4xi32, #trellis.bounds<[7]>>, tensor<?x4xi32, #trellis.bounds<[7]>>) -> tensor<?x4xi32, #trellis.bounds<[7]>>
  %3 = trellis.maximum %i, %i : (tensor<?x4xi32, #trellis.bounds<[7]>>, tensor<?x4xi32, #trellis.bounds<[7]>>) -> tensor<?x4xi32, #trellis.bounds<[7]>>
  return
}

// CHECK-LABEL: func.func @modulate
func.func @modulate(%x: tensor<2x4096x1024xf16>, %shift: tensor<2x1024xf16>, %scale: tensor<2x1024xf16>,
                    %h: tensor<2x4096x1024xf16>, %gate: tensor<2x1024xf16>) {
  // CHECK: trellis.modulate %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4096x1024xf16>, tensor<2x1024xf16>, tensor<2x1024xf16>) -> tensor<2x4096x1024xf16>
  %m = trellis.modulate %x, %shift, %scale
         : (tensor<2x4096x1024xf16>, tensor<2x1024xf16>, tensor<2x1024xf16>)
         -> tensor<2x4096x1024xf16>
  // CHECK: trellis.gated_residual %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>, tensor<2x1024xf16>) -> tensor<2x4096x1024xf16>
  %y = trellis.gated_residual %x, %h, %gate
         : (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>, tensor<2x1024xf16>)
         -> tensor<2x4096x1024xf16>
  return
}

// Full-shape modulation: sparse rows after trellis.sparse.batch_broadcast.
// CHECK-LABEL: func.func @modulate_rows
func.func @modulate_rows(%x: tensor<?x128xf16, #trellis.bounds<[32768]>>, %s: tensor<?x128xf16, #trellis.bounds<[32768]>>) {
  // CHECK: trellis.modulate %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x128xf16, #trellis.bounds<[32768]>>, tensor<?x128xf16, #trellis.bounds<[32768]>>, tensor<?x128xf16, #trellis.bounds<[32768]>>) -> tensor<?x128xf16, #trellis.bounds<[32768]>>
  %m = trellis.modulate %x, %s, %s : (tensor<?x128xf16, #trellis.bounds<[32768]>>, tensor<?x128xf16, #trellis.bounds<[32768]>>, tensor<?x128xf16, #trellis.bounds<[32768]>>) -> tensor<?x128xf16, #trellis.bounds<[32768]>>
  // CHECK: trellis.gated_residual %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x128xf16, #trellis.bounds<[32768]>>, tensor<?x128xf16, #trellis.bounds<[32768]>>, tensor<?x128xf16, #trellis.bounds<[32768]>>) -> tensor<?x128xf16, #trellis.bounds<[32768]>>
  %g = trellis.gated_residual %x, %m, %s : (tensor<?x128xf16, #trellis.bounds<[32768]>>, tensor<?x128xf16, #trellis.bounds<[32768]>>, tensor<?x128xf16, #trellis.bounds<[32768]>>) -> tensor<?x128xf16, #trellis.bounds<[32768]>>
  return
}

// The exact GELU of the image-conditioning model (its doc example).
// CHECK-LABEL: func.func @gelu_erf
// CHECK: trellis.gelu_erf %{{.*}} : tensor<4x8xf16>
func.func @gelu_erf(%x: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %y = trellis.gelu_erf %x : tensor<4x8xf16>
  return %y : tensor<4x8xf16>
}

// Comparisons give 1 or 0 in the operands' type; where selects.
// CHECK-LABEL: func.func @compare_and_select
func.func @compare_and_select(%x: tensor<2x8xf32>, %z: tensor<1xf32>) -> tensor<2x8xf32> {
  // CHECK: trellis.greater %{{.*}}, %{{.*}} : (tensor<2x8xf32>, tensor<1xf32>) -> tensor<2x8xf32>
  %m = trellis.greater %x, %z : (tensor<2x8xf32>, tensor<1xf32>) -> tensor<2x8xf32>
  // CHECK: trellis.less
  %l = trellis.less %x, %z : (tensor<2x8xf32>, tensor<1xf32>) -> tensor<2x8xf32>
  // CHECK: trellis.equal
  %e = trellis.equal %m, %l : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  // CHECK: trellis.where %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<1xf32>) -> tensor<2x8xf32>
  %y = trellis.where %m, %x, %z : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<1xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}
