// RUN: trellis-opt --trellis-sink-upsample %s | FileCheck %s
// RUN: trellis-opt --trellis-sink-upsample --mlir-print-debuginfo %s | FileCheck %s --check-prefix=LOC

// The SLat flow's upsampling block (spec §6.2): resample, LayerNorm, SiLU,
// conv1; the skip projection of the resampled rows. Everything but the
// block's narrow results moves to the coarse rows (bound 40); the conv reads
// them through the parent neighbour map and has the fine rows (bound 100).
// CHECK-LABEL: func.func @up_block
// CHECK-SAME: (%[[H:.*]]: tensor<?x16xf16, #trellis.bounds<[40]>>, %[[C:[^:]*]]: !trellis.coords<resolution = 32, bound = 40>, %[[F:[^:]*]]: !trellis.coords<resolution = 64, bound = 100>, %[[NB:[^:]*]]: !trellis.neighbor_map<kernel = 3, bound = 100>
// CHECK-DAG: %[[N:.*]] = trellis.layer_norm %[[H]], %{{.*}}, %{{.*}} {eps = {{.*}}} : (tensor<?x16xf16, #trellis.bounds<[40]>>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf16, #trellis.bounds<[40]>>
// CHECK-DAG: %[[S:.*]] = trellis.silu %[[N]] : tensor<?x16xf16, #trellis.bounds<[40]>>
// CHECK-DAG: %[[PM:.*]] = trellis.sparse.parent_neighbor_map %[[NB]], %[[C]], %[[F]]
// CHECK-DAG: %[[Y:.*]] = trellis.sparse.conv3d %[[S]], %{{.*}}, %{{.*}} neighbors %[[PM]] : (tensor<?x16xf16, #trellis.bounds<[40]>>, tensor<4x3x3x3x16xf16>, tensor<4xf16>, !trellis.neighbor_map<kernel = 3, bound = 100>) -> tensor<?x4xf16, #trellis.bounds<[100]>>
// CHECK-DAG: %[[K:.*]] = trellis.linear %[[H]], %{{.*}}, %{{.*}} : (tensor<?x16xf16, #trellis.bounds<[40]>>, tensor<4x16xf16>, tensor<4xf16>) -> tensor<?x4xf16, #trellis.bounds<[40]>>
// CHECK-DAG: %[[KU:.*]] = trellis.sparse.upsample %[[K]], %[[C]], %[[F]] : (tensor<?x4xf16, #trellis.bounds<[40]>>, {{.*}}) -> tensor<?x4xf16, #trellis.bounds<[100]>>
// CHECK-DAG: %[[R:.*]] = trellis.add %[[Y]], %[[KU]]
// CHECK-NOT: trellis.sparse.upsample
// CHECK: return %[[R]]
// LOC-LABEL: func.func @up_block
// LOC-DAG: trellis.layer_norm {{.*}} loc(#[[LN:loc[0-9]*]])
// LOC-DAG: trellis.sparse.parent_neighbor_map {{.*}} loc(#[[UP:loc[0-9]*]])
// LOC-DAG: trellis.sparse.conv3d {{.*}} loc(#[[CONV:loc[0-9]*]])
// LOC-DAG: #[[LN]] = loc("norm1")
// LOC-DAG: #[[UP]] = loc("upsample")
// LOC-DAG: #[[CONV]] = loc("conv1")
func.func @up_block(%h: tensor<?x16xf16, #trellis.bounds<[40]>>, %c: !trellis.coords<resolution = 32, bound = 40>,
                    %f: !trellis.coords<resolution = 64, bound = 100>, %nb: !trellis.neighbor_map<kernel = 3, bound = 100>,
                    %g: tensor<16xf32>, %beta: tensor<16xf32>, %w: tensor<4x3x3x3x16xf16>, %b: tensor<4xf16>,
                    %ws: tensor<4x16xf16>, %bs: tensor<4xf16>) -> tensor<?x4xf16, #trellis.bounds<[100]>> {
  %u = trellis.sparse.upsample %h, %c, %f : (tensor<?x16xf16, #trellis.bounds<[40]>>, !trellis.coords<resolution = 32, bound = 40>, !trellis.coords<resolution = 64, bound = 100>) -> tensor<?x16xf16, #trellis.bounds<[100]>> loc("upsample")
  %n = trellis.layer_norm %u, %g, %beta {eps = 1.0e-6 : f64} : (tensor<?x16xf16, #trellis.bounds<[100]>>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16xf16, #trellis.bounds<[100]>> loc("norm1")
  %s = trellis.silu %n : tensor<?x16xf16, #trellis.bounds<[100]>>
  %y = trellis.sparse.conv3d %s, %w, %b neighbors %nb : (tensor<?x16xf16, #trellis.bounds<[100]>>, tensor<4x3x3x3x16xf16>, tensor<4xf16>, !trellis.neighbor_map<kernel = 3, bound = 100>) -> tensor<?x4xf16, #trellis.bounds<[100]>> loc("conv1")
  %k = trellis.linear %u, %ws, %bs : (tensor<?x16xf16, #trellis.bounds<[100]>>, tensor<4x16xf16>, tensor<4xf16>) -> tensor<?x4xf16, #trellis.bounds<[100]>>
  %r = trellis.add %y, %k : (tensor<?x4xf16, #trellis.bounds<[100]>>, tensor<?x4xf16, #trellis.bounds<[100]>>) -> tensor<?x4xf16, #trellis.bounds<[100]>>
  return %r : tensor<?x4xf16, #trellis.bounds<[100]>>
}

// A cast and a 1×1×1 conv are row-wise too; the upsample ends up last.
// CHECK-LABEL: func.func @cast_conv1
// CHECK-NEXT: trellis.cast %{{.*}} : (tensor<?x8xf16, #trellis.bounds<[40]>>) -> tensor<?x8xf32, #trellis.bounds<[40]>>
// CHECK-NEXT: trellis.cast
// CHECK-NEXT: trellis.sparse.conv3d {{.*}} -> tensor<?x2xf16, #trellis.bounds<[40]>>
// CHECK-NEXT: trellis.sparse.upsample {{.*}} -> tensor<?x2xf16, #trellis.bounds<[100]>>
// CHECK-NEXT: return
func.func @cast_conv1(%h: tensor<?x8xf16, #trellis.bounds<[40]>>, %c: !trellis.coords<resolution = 32, bound = 40>,
                      %f: !trellis.coords<resolution = 64, bound = 100>, %w: tensor<2x1x1x1x8xf16>) -> tensor<?x2xf16, #trellis.bounds<[100]>> {
  %u = trellis.sparse.upsample %h, %c, %f : (tensor<?x8xf16, #trellis.bounds<[40]>>, !trellis.coords<resolution = 32, bound = 40>, !trellis.coords<resolution = 64, bound = 100>) -> tensor<?x8xf16, #trellis.bounds<[100]>>
  %x = trellis.cast %u : (tensor<?x8xf16, #trellis.bounds<[100]>>) -> tensor<?x8xf32, #trellis.bounds<[100]>>
  %y = trellis.cast %x : (tensor<?x8xf32, #trellis.bounds<[100]>>) -> tensor<?x8xf16, #trellis.bounds<[100]>>
  %z = trellis.sparse.conv3d %y, %w : (tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<2x1x1x1x8xf16>) -> tensor<?x2xf16, #trellis.bounds<[100]>>
  return %z : tensor<?x2xf16, #trellis.bounds<[100]>>
}

// Negative: ops that mix rows or take the upsampled rows twice stay on the
// fine rows (an add of two upsampled tensors, a linear with the upsample as
// its residual, a LayerNorm of another axis, the downsample).
// CHECK-LABEL: func.func @not_sunk
// CHECK-COUNT-2: trellis.sparse.upsample
// CHECK-NOT: trellis.sparse.upsample
// CHECK: trellis.add
// CHECK: trellis.linear {{.*}} residual
// CHECK: trellis.layer_norm
// CHECK: trellis.sparse.downsample
// CHECK: return
func.func @not_sunk(%h: tensor<?x8xf16, #trellis.bounds<[40]>>, %c: !trellis.coords<resolution = 32, bound = 40>,
                    %f: !trellis.coords<resolution = 64, bound = 100>, %w: tensor<8x8xf16>, %b: tensor<8xf16>,
                    %h2: tensor<?x8xf16, #trellis.bounds<[40]>>)
    -> (tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<?x8xf16, #trellis.bounds<[40]>>) {
  %u = trellis.sparse.upsample %h, %c, %f : (tensor<?x8xf16, #trellis.bounds<[40]>>, !trellis.coords<resolution = 32, bound = 40>, !trellis.coords<resolution = 64, bound = 100>) -> tensor<?x8xf16, #trellis.bounds<[100]>>
  %u2 = trellis.sparse.upsample %h2, %c, %f : (tensor<?x8xf16, #trellis.bounds<[40]>>, !trellis.coords<resolution = 32, bound = 40>, !trellis.coords<resolution = 64, bound = 100>) -> tensor<?x8xf16, #trellis.bounds<[100]>>
  %a = trellis.add %u, %u2 : (tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<?x8xf16, #trellis.bounds<[100]>>) -> tensor<?x8xf16, #trellis.bounds<[100]>>
  %l = trellis.linear %u2, %w, %b residual %u : (tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<8x8xf16>, tensor<8xf16>, tensor<?x8xf16, #trellis.bounds<[100]>>) -> tensor<?x8xf16, #trellis.bounds<[100]>>
  %n = trellis.layer_norm %u {eps = 1.0e-6 : f64, axis = 0 : i64} : (tensor<?x8xf16, #trellis.bounds<[100]>>) -> tensor<?x8xf16, #trellis.bounds<[100]>>
  %d = trellis.sparse.downsample %u, %f, %c : (tensor<?x8xf16, #trellis.bounds<[100]>>, !trellis.coords<resolution = 64, bound = 100>, !trellis.coords<resolution = 32, bound = 40>) -> tensor<?x8xf16, #trellis.bounds<[40]>>
  return %a, %l, %n, %d : tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<?x8xf16, #trellis.bounds<[40]>>
}
