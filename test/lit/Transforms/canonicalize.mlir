// RUN: trellis-opt --canonicalize %s | FileCheck %s

// Folds and canonicalizations of the layout ops (TrellisOps.td): fewer
// view ops for the GPU partition and the CPU executor.

// A split into one piece is its input.
// CHECK-LABEL: func.func @split_single
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x8x16xf16>
// CHECK-NOT: trellis.split
// CHECK: return %[[X]], %[[X]]
func.func @split_single(%x: tensor<2x8x16xf16>, %y: tensor<?x16xf16, #trellis.bounds<[64]>>)
    -> (tensor<2x8x16xf16>, tensor<2x8x16xf16>, tensor<?x16xf16, #trellis.bounds<[64]>>) {
  %a = trellis.split %x {axis = 2 : i64, sizes = array<i64: 16>} : (tensor<2x8x16xf16>) -> tensor<2x8x16xf16>
  %b = trellis.split %x {axis = -2 : i64, sizes = array<i64: 8>} : (tensor<2x8x16xf16>) -> tensor<2x8x16xf16>
  %c = trellis.split %y {axis = 1 : i64, sizes = array<i64: 16>} : (tensor<?x16xf16, #trellis.bounds<[64]>>) -> tensor<?x16xf16, #trellis.bounds<[64]>>
  return %a, %b, %c : tensor<2x8x16xf16>, tensor<2x8x16xf16>, tensor<?x16xf16, #trellis.bounds<[64]>>
}

// Negative: a split into two pieces stays.
// CHECK-LABEL: func.func @split_two
// CHECK: trellis.split
func.func @split_two(%x: tensor<2x8x16xf16>) -> (tensor<2x8x8xf16>, tensor<2x8x8xf16>) {
  %a:2 = trellis.split %x {axis = 2 : i64, sizes = array<i64: 8, 8>} : (tensor<2x8x16xf16>) -> (tensor<2x8x8xf16>, tensor<2x8x8xf16>)
  return %a#0, %a#1 : tensor<2x8x8xf16>, tensor<2x8x8xf16>
}

// reshape of reshape: one reshape of the first input; back to the input's
// type: the input. Static and with a bounded dynamic dimension.
// CHECK-LABEL: func.func @reshape_reshape
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x8x16xf16>, %[[Y:[^:]*]]: tensor<?x16xf16, #trellis.bounds<[64]>>)
// CHECK-NEXT: %[[A:.*]] = trellis.reshape %[[X]] : (tensor<2x8x16xf16>) -> tensor<16x16xf16>
// CHECK-NEXT: %[[B:.*]] = trellis.reshape %[[Y]] : (tensor<?x16xf16, #trellis.bounds<[64]>>) -> tensor<?x8xf16, #trellis.bounds<[128]>>
// CHECK-NEXT: return %[[A]], %[[X]], %[[B]], %[[Y]]
func.func @reshape_reshape(%x: tensor<2x8x16xf16>, %y: tensor<?x16xf16, #trellis.bounds<[64]>>)
    -> (tensor<16x16xf16>, tensor<2x8x16xf16>, tensor<?x8xf16, #trellis.bounds<[128]>>, tensor<?x16xf16, #trellis.bounds<[64]>>) {
  %a0 = trellis.reshape %x : (tensor<2x8x16xf16>) -> tensor<2x128xf16>
  %a = trellis.reshape %a0 : (tensor<2x128xf16>) -> tensor<16x16xf16>
  %b0 = trellis.reshape %x : (tensor<2x8x16xf16>) -> tensor<256xf16>
  %b1 = trellis.reshape %b0 : (tensor<256xf16>) -> tensor<16x16xf16>
  %b = trellis.reshape %b1 : (tensor<16x16xf16>) -> tensor<2x8x16xf16>
  %c0 = trellis.reshape %y : (tensor<?x16xf16, #trellis.bounds<[64]>>) -> tensor<?x4x4xf16, #trellis.bounds<[64]>>
  %c = trellis.reshape %c0 : (tensor<?x4x4xf16, #trellis.bounds<[64]>>) -> tensor<?x8xf16, #trellis.bounds<[128]>>
  %d0 = trellis.reshape %y : (tensor<?x16xf16, #trellis.bounds<[64]>>) -> tensor<?x2x8xf16, #trellis.bounds<[64]>>
  %d = trellis.reshape %d0 : (tensor<?x2x8xf16, #trellis.bounds<[64]>>) -> tensor<?x16xf16, #trellis.bounds<[64]>>
  return %a, %b, %c, %d : tensor<16x16xf16>, tensor<2x8x16xf16>, tensor<?x8xf16, #trellis.bounds<[128]>>, tensor<?x16xf16, #trellis.bounds<[64]>>
}

// Negative: a reshape to another shape stays (one op).
// CHECK-LABEL: func.func @reshape_one
// CHECK: trellis.reshape
// CHECK-NOT: trellis.reshape
func.func @reshape_one(%x: tensor<2x8x16xf16>) -> tensor<16x16xf16> {
  %a = trellis.reshape %x : (tensor<2x8x16xf16>) -> tensor<16x16xf16>
  return %a : tensor<16x16xf16>
}

// broadcast_rows of a row count of 1 into the row's own type is the row.
// CHECK-LABEL: func.func @rows_identity
// CHECK-SAME: (%[[R:[^:]*]]: tensor<1x8xf16>, %[[S:[^:]*]]: tensor<1x2x4xf16>)
// CHECK-NEXT: %[[B:.*]] = trellis.broadcast_rows %[[S]] : (tensor<1x2x4xf16>) -> tensor<1x1x2x4xf16>
// CHECK-NEXT: return %[[R]], %[[S]], %[[B]]
func.func @rows_identity(%r: tensor<1x8xf16>, %s: tensor<1x2x4xf16>)
    -> (tensor<1x8xf16>, tensor<1x2x4xf16>, tensor<1x1x2x4xf16>) {
  %a = trellis.broadcast_rows %r : (tensor<1x8xf16>) -> tensor<1x8xf16>
  %b = trellis.broadcast_rows %s : (tensor<1x2x4xf16>) -> tensor<1x2x4xf16>
  %c = trellis.broadcast_rows %s : (tensor<1x2x4xf16>) -> tensor<1x1x2x4xf16>
  return %a, %b, %c : tensor<1x8xf16>, tensor<1x2x4xf16>, tensor<1x1x2x4xf16>
}

// One sample: the modulation operands take the [1, C] row instead of its
// [N, C] batch_broadcast copy (which then dies); other users keep the copy.
// CHECK-LABEL: func.func @batch_broadcast_one_sample
// CHECK-SAME: (%[[X:[^:]*]]: tensor<?x8xf16, {{.*}}>, %[[C:[^:]*]]: !trellis.coords{{.*}}, %[[V:[^:]*]]: tensor<1x8xf16>, %[[W:[^:]*]]: tensor<2x8xf16>)
// CHECK: %[[COPY:.*]] = trellis.sparse.batch_broadcast %[[V]], %[[C]]
// CHECK: %[[M:.*]] = trellis.layer_norm_modulate %[[X]], %[[V]], %[[V]]
// CHECK: %[[G:.*]] = trellis.gated_residual %[[M]], %[[X]], %[[V]]
// CHECK: %[[A:.*]] = trellis.add %[[G]], %[[COPY]]
// CHECK: %[[TWO:.*]] = trellis.sparse.batch_broadcast %[[W]], %[[C]]
// CHECK: trellis.gated_residual %[[A]], %[[X]], %[[TWO]]
func.func @batch_broadcast_one_sample(
    %x: tensor<?x8xf16, #trellis.bounds<[64]>>,
    %c: !trellis.coords<resolution = 16, bound = 64>,
    %v: tensor<1x8xf16>, %w: tensor<2x8xf16>)
    -> tensor<?x8xf16, #trellis.bounds<[64]>> {
  %b = trellis.sparse.batch_broadcast %v, %c : (tensor<1x8xf16>, !trellis.coords<resolution = 16, bound = 64>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  %m = trellis.layer_norm_modulate %x, %b, %b {eps = 1.0e-06 : f64} : (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  %g = trellis.gated_residual %m, %x, %b : (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  %a = trellis.add %g, %b : (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  // Two samples: not folded.
  %b2 = trellis.sparse.batch_broadcast %w, %c : (tensor<2x8xf16>, !trellis.coords<resolution = 16, bound = 64>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  %g2 = trellis.gated_residual %a, %x, %b2 : (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  return %g2 : tensor<?x8xf16, #trellis.bounds<[64]>>
}
