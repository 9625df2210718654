// RUN: trellis-opt %s | trellis-opt | FileCheck %s

// Coordinate sets and sparse feature ops (the examples of their descriptions
// appear here verbatim; check_doc_examples.py checks that).

// CHECK-LABEL: func.func @coords
func.func @coords(%logits: tensor<1x1x64x64x64xf32>, %c: !trellis.coords<resolution = 64, bound = 32768>,
                  %t: tensor<?x4xi32, #trellis.bounds<[32768]>>, %ts: tensor<5x4xi32>,
                  %lb: tensor<?x1x16x16x16xf32, #trellis.bounds<[4]>>) {
  // CHECK: trellis.occupancy %{{.*}} : (tensor<1x1x64x64x64xf32>) -> !trellis.coords<resolution = 64, bound = 262144>
  %occ = trellis.occupancy %logits
           : (tensor<1x1x64x64x64xf32>) -> !trellis.coords<resolution = 64, bound = 262144>
  // A bounded batch: bound = 4 * 16^3.
  // CHECK: trellis.occupancy %{{.*}} : (tensor<?x1x16x16x16xf32, #trellis.bounds<[4]>>) -> !trellis.coords<resolution = 16, bound = 16384>
  %occ4 = trellis.occupancy %lb : (tensor<?x1x16x16x16xf32, #trellis.bounds<[4]>>) -> !trellis.coords<resolution = 16, bound = 16384>
  // CHECK: trellis.sparse.neighbor_map %{{.*}} {kernel = 3 : i64} : (!trellis.coords<resolution = 64, bound = 32768>) -> !trellis.neighbor_map<kernel = 3, bound = 32768>
  %nb = trellis.sparse.neighbor_map %c {kernel = 3 : i64}
          : (!trellis.coords<resolution = 64, bound = 32768>)
          -> !trellis.neighbor_map<kernel = 3, bound = 32768>
  // CHECK: trellis.sparse.coarsen %{{.*}} : (!trellis.coords<resolution = 64, bound = 32768>) -> !trellis.coords<resolution = 32, bound = 32768>
  %cc = trellis.sparse.coarsen %c {factor = 2 : i64}
          : (!trellis.coords<resolution = 64, bound = 32768>)
          -> !trellis.coords<resolution = 32, bound = 32768>
  // CHECK: trellis.sparse.coarsen %{{.*}} {factor = 4 : i64} : (!trellis.coords<resolution = 64, bound = 32768>) -> !trellis.coords<resolution = 16, bound = 32768>
  %c4 = trellis.sparse.coarsen %c {factor = 4 : i64} : (!trellis.coords<resolution = 64, bound = 32768>) -> !trellis.coords<resolution = 16, bound = 32768>
  // CHECK: trellis.sparse.subdivide %{{.*}} : (!trellis.coords<resolution = 64, bound = 32768>) -> !trellis.coords<resolution = 128, bound = 262144>
  %f = trellis.sparse.subdivide %c
         : (!trellis.coords<resolution = 64, bound = 32768>)
         -> !trellis.coords<resolution = 128, bound = 262144>
  // CHECK: trellis.sparse.xyz %{{.*}} : (!trellis.coords<resolution = 64, bound = 32768>) -> tensor<?x3xi32, #trellis.bounds<[32768]>>
  %xyz = trellis.sparse.xyz %c
           : (!trellis.coords<resolution = 64, bound = 32768>)
           -> tensor<?x3xi32, #trellis.bounds<[32768]>>
  // CHECK: trellis.sparse.to_tensor %{{.*}} : (!trellis.coords<resolution = 64, bound = 32768>) -> tensor<?x4xi32, #trellis.bounds<[32768]>>
  %rows = trellis.sparse.to_tensor %c
            : (!trellis.coords<resolution = 64, bound = 32768>)
            -> tensor<?x4xi32, #trellis.bounds<[32768]>>
  // CHECK: trellis.sparse.from_tensor %{{.*}} {resolution = 64 : i64} : (tensor<?x4xi32, #trellis.bounds<[32768]>>) -> !trellis.coords<resolution = 64, bound = 32768>
  %c2 = trellis.sparse.from_tensor %t {resolution = 64 : i64}
          : (tensor<?x4xi32, #trellis.bounds<[32768]>>)
          -> !trellis.coords<resolution = 64, bound = 32768>
  // A static row count is the bound.
  // CHECK: trellis.sparse.from_tensor %{{.*}} {resolution = 8 : i64} : (tensor<5x4xi32>) -> !trellis.coords<resolution = 8, bound = 5>
  %c3 = trellis.sparse.from_tensor %ts {resolution = 8 : i64} : (tensor<5x4xi32>) -> !trellis.coords<resolution = 8, bound = 5>
  return
}

// CHECK-LABEL: func.func @segments
func.func @segments(%c32: !trellis.coords<resolution = 32, bound = 32768>, %c: !trellis.coords<resolution = 64, bound = 32768>) {
  // CHECK: trellis.sparse.batch_segments %{{.*}} : (!trellis.coords<resolution = 32, bound = 32768>) -> !trellis.segments<max_length = 32768, bound = 32768>
  %s = trellis.sparse.batch_segments %c32
         : (!trellis.coords<resolution = 32, bound = 32768>)
         -> !trellis.segments<max_length = 32768, bound = 32768>
  // CHECK: trellis.sparse.window_segments %{{.*}} {shift = 4 : i64} : (!trellis.coords<resolution = 64, bound = 32768>) -> !trellis.segments<max_length = 512, bound = 32768>
  %w = trellis.sparse.window_segments %c {shift = 4 : i64, window = 8 : i64}
         : (!trellis.coords<resolution = 64, bound = 32768>)
         -> !trellis.segments<max_length = 512, bound = 32768>
  // CHECK: trellis.sparse.window_segments %{{.*}} : (!trellis.coords<resolution = 64, bound = 32768>) -> !trellis.segments<max_length = 512, bound = 32768>
  %w0 = trellis.sparse.window_segments %c : (!trellis.coords<resolution = 64, bound = 32768>) -> !trellis.segments<max_length = 512, bound = 32768>
  // CHECK: trellis.sparse.window_segments %{{.*}} {window = 4 : i64} : (!trellis.coords<resolution = 64, bound = 32768>) -> !trellis.segments<max_length = 64, bound = 32768>
  %w4 = trellis.sparse.window_segments %c {window = 4 : i64} : (!trellis.coords<resolution = 64, bound = 32768>) -> !trellis.segments<max_length = 64, bound = 32768>
  return
}

// CHECK-LABEL: func.func @conv
func.func @conv(%h: tensor<?x128xf16, #trellis.bounds<[32768]>>, %w: tensor<1024x3x3x3x128xf16>, %b: tensor<1024xf16>,
                %nb: !trellis.neighbor_map<kernel = 3, bound = 32768>, %w1: tensor<96x1x1x1x128xf16>, %b1: tensor<96xf16>,
                %w5: tensor<8x5x5x5x128xf16>, %nb5: !trellis.neighbor_map<kernel = 5, bound = 32768>) {
  // CHECK: trellis.sparse.conv3d %{{.*}}, %{{.*}}, %{{.*}} neighbors %{{.*}} : (tensor<?x128xf16, #trellis.bounds<[32768]>>, tensor<1024x3x3x3x128xf16>, tensor<1024xf16>, !trellis.neighbor_map<kernel = 3, bound = 32768>) -> tensor<?x1024xf16, #trellis.bounds<[32768]>>
  // CHECK: trellis.sparse.conv3d %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x128xf16, #trellis.bounds<[32768]>>, tensor<96x1x1x1x128xf16>, tensor<96xf16>) -> tensor<?x96xf16, #trellis.bounds<[32768]>>
  %y = trellis.sparse.conv3d %h, %w, %b neighbors %nb
         : (tensor<?x128xf16, #trellis.bounds<[32768]>>, tensor<1024x3x3x3x128xf16>, tensor<1024xf16>,
            !trellis.neighbor_map<kernel = 3, bound = 32768>)
         -> tensor<?x1024xf16, #trellis.bounds<[32768]>>
  %s = trellis.sparse.conv3d %h, %w1, %b1
         : (tensor<?x128xf16, #trellis.bounds<[32768]>>, tensor<96x1x1x1x128xf16>, tensor<96xf16>)
         -> tensor<?x96xf16, #trellis.bounds<[32768]>>
  // Without bias; a 5x5x5 kernel with its map; a 1x1x1 kernel without bias.
  // CHECK: trellis.sparse.conv3d %{{.*}}, %{{.*}} neighbors %{{.*}} : (tensor<?x128xf16, #trellis.bounds<[32768]>>, tensor<1024x3x3x3x128xf16>, !trellis.neighbor_map<kernel = 3, bound = 32768>) -> tensor<?x1024xf16, #trellis.bounds<[32768]>>
  %y0 = trellis.sparse.conv3d %h, %w neighbors %nb : (tensor<?x128xf16, #trellis.bounds<[32768]>>, tensor<1024x3x3x3x128xf16>, !trellis.neighbor_map<kernel = 3, bound = 32768>) -> tensor<?x1024xf16, #trellis.bounds<[32768]>>
  // CHECK: trellis.sparse.conv3d %{{.*}}, %{{.*}} neighbors %{{.*}} : (tensor<?x128xf16, #trellis.bounds<[32768]>>, tensor<8x5x5x5x128xf16>, !trellis.neighbor_map<kernel = 5, bound = 32768>) -> tensor<?x8xf16, #trellis.bounds<[32768]>>
  %y5 = trellis.sparse.conv3d %h, %w5 neighbors %nb5 : (tensor<?x128xf16, #trellis.bounds<[32768]>>, tensor<8x5x5x5x128xf16>, !trellis.neighbor_map<kernel = 5, bound = 32768>) -> tensor<?x8xf16, #trellis.bounds<[32768]>>
  // CHECK: trellis.sparse.conv3d %{{.*}}, %{{.*}} : (tensor<?x128xf16, #trellis.bounds<[32768]>>, tensor<96x1x1x1x128xf16>) -> tensor<?x96xf16, #trellis.bounds<[32768]>>
  %s0 = trellis.sparse.conv3d %h, %w1 : (tensor<?x128xf16, #trellis.bounds<[32768]>>, tensor<96x1x1x1x128xf16>) -> tensor<?x96xf16, #trellis.bounds<[32768]>>
  return
}

// CHECK-LABEL: func.func @resample
func.func @resample(%h: tensor<?x128xf16, #trellis.bounds<[32768]>>, %h2: tensor<?x2048xf16, #trellis.bounds<[32768]>>,
                    %c64: !trellis.coords<resolution = 64, bound = 32768>,
                    %c32: !trellis.coords<resolution = 32, bound = 32768>,
                    %h768: tensor<?x768xf16, #trellis.bounds<[32768]>>, %r: tensor<5x3xi32>) {
  // CHECK: trellis.sparse.downsample %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x128xf16, #trellis.bounds<[32768]>>, !trellis.coords<resolution = 64, bound = 32768>, !trellis.coords<resolution = 32, bound = 32768>) -> tensor<?x128xf16, #trellis.bounds<[32768]>>
  %d = trellis.sparse.downsample %h, %c64, %c32
         : (tensor<?x128xf16, #trellis.bounds<[32768]>>,
            !trellis.coords<resolution = 64, bound = 32768>, !trellis.coords<resolution = 32, bound = 32768>)
         -> tensor<?x128xf16, #trellis.bounds<[32768]>>
  // CHECK: trellis.sparse.upsample %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x2048xf16, #trellis.bounds<[32768]>>, !trellis.coords<resolution = 32, bound = 32768>, !trellis.coords<resolution = 64, bound = 32768>) -> tensor<?x2048xf16, #trellis.bounds<[32768]>>
  %u = trellis.sparse.upsample %h2, %c32, %c64
         : (tensor<?x2048xf16, #trellis.bounds<[32768]>>,
            !trellis.coords<resolution = 32, bound = 32768>, !trellis.coords<resolution = 64, bound = 32768>)
         -> tensor<?x2048xf16, #trellis.bounds<[32768]>>
  // CHECK: trellis.sparse.subdivide_features %{{.*}} : (tensor<?x768xf16, #trellis.bounds<[32768]>>) -> tensor<?x768xf16, #trellis.bounds<[262144]>>
  %f = trellis.sparse.subdivide_features %h768
         : (tensor<?x768xf16, #trellis.bounds<[32768]>>) -> tensor<?x768xf16, #trellis.bounds<[262144]>>
  // A static row count stays static.
  // CHECK: trellis.sparse.subdivide_features %{{.*}} : (tensor<5x3xi32>) -> tensor<40x3xi32>
  %fs = trellis.sparse.subdivide_features %r : (tensor<5x3xi32>) -> tensor<40x3xi32>
  return
}

// Bounds follow the coordinate sets, which need not have equal bounds.
// CHECK-LABEL: func.func @resample_bounds
func.func @resample_bounds(%h: tensor<?x8xf32, #trellis.bounds<[1000]>>, %u: tensor<?x8xf32, #trellis.bounds<[300]>>,
                           %fine: !trellis.coords<resolution = 64, bound = 1000>,
                           %coarse: !trellis.coords<resolution = 32, bound = 300>) {
  // CHECK: trellis.sparse.downsample {{.*}} -> tensor<?x8xf32, #trellis.bounds<[300]>>
  %d = trellis.sparse.downsample %h, %fine, %coarse : (tensor<?x8xf32, #trellis.bounds<[1000]>>, !trellis.coords<resolution = 64, bound = 1000>, !trellis.coords<resolution = 32, bound = 300>) -> tensor<?x8xf32, #trellis.bounds<[300]>>
  // CHECK: trellis.sparse.upsample {{.*}} -> tensor<?x8xf32, #trellis.bounds<[1000]>>
  %up = trellis.sparse.upsample %u, %coarse, %fine : (tensor<?x8xf32, #trellis.bounds<[300]>>, !trellis.coords<resolution = 32, bound = 300>, !trellis.coords<resolution = 64, bound = 1000>) -> tensor<?x8xf32, #trellis.bounds<[1000]>>
  return
}

// A conv of upsampled rows through the parent neighbour map: the feats are
// the coarse rows (bound 300), the result has the map's fine rows (1000).
// CHECK-LABEL: func.func @parent_neighbors
func.func @parent_neighbors(%u: tensor<?x8xf16, #trellis.bounds<[300]>>, %w: tensor<4x3x3x3x8xf16>,
                            %nb: !trellis.neighbor_map<kernel = 3, bound = 1000>,
                            %c64: !trellis.coords<resolution = 64, bound = 1000>,
                            %c32: !trellis.coords<resolution = 32, bound = 300>) {
  // CHECK: trellis.sparse.parent_neighbor_map %{{.*}}, %{{.*}}, %{{.*}} : (!trellis.neighbor_map<kernel = 3, bound = 1000>, !trellis.coords<resolution = 32, bound = 300>, !trellis.coords<resolution = 64, bound = 1000>) -> !trellis.neighbor_map<kernel = 3, bound = 1000>
  %pm = trellis.sparse.parent_neighbor_map %nb, %c32, %c64 : (!trellis.neighbor_map<kernel = 3, bound = 1000>, !trellis.coords<resolution = 32, bound = 300>, !trellis.coords<resolution = 64, bound = 1000>) -> !trellis.neighbor_map<kernel = 3, bound = 1000>
  // CHECK: trellis.sparse.conv3d {{.*}} -> tensor<?x4xf16, #trellis.bounds<[1000]>>
  %y = trellis.sparse.conv3d %u, %w neighbors %pm : (tensor<?x8xf16, #trellis.bounds<[300]>>, tensor<4x3x3x3x8xf16>, !trellis.neighbor_map<kernel = 3, bound = 1000>) -> tensor<?x4xf16, #trellis.bounds<[1000]>>
  return
}

// The example of the op reference.
// CHECK-LABEL: func.func @parent_neighbors_doc
func.func @parent_neighbors_doc(%nb: !trellis.neighbor_map<kernel = 3, bound = 32768>,
                                %c64: !trellis.coords<resolution = 64, bound = 32768>,
                                %c32: !trellis.coords<resolution = 32, bound = 32768>) {
  // CHECK: trellis.sparse.parent_neighbor_map
  %pm = trellis.sparse.parent_neighbor_map %nb, %c32, %c64
          : (!trellis.neighbor_map<kernel = 3, bound = 32768>,
             !trellis.coords<resolution = 32, bound = 32768>,
             !trellis.coords<resolution = 64, bound = 32768>)
          -> !trellis.neighbor_map<kernel = 3, bound = 32768>
  return
}

// CHECK-LABEL: func.func @norm_broadcast
func.func @norm_broadcast(%h: tensor<?x768xf16, #trellis.bounds<[32768]>>, %c: !trellis.coords<resolution = 64, bound = 32768>,
                          %gamma: tensor<768xf32>, %beta: tensor<768xf32>, %scale: tensor<2x128xf16>) {
  // CHECK: trellis.sparse.group_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-05 : f64} : (tensor<?x768xf16, #trellis.bounds<[32768]>>, !trellis.coords<resolution = 64, bound = 32768>, tensor<768xf32>, tensor<768xf32>) -> tensor<?x768xf16, #trellis.bounds<[32768]>>
  %g = trellis.sparse.group_norm %h, %c, %gamma, %beta {eps = 1.000000e-05 : f64, groups = 32 : i64}
         : (tensor<?x768xf16, #trellis.bounds<[32768]>>, !trellis.coords<resolution = 64, bound = 32768>,
            tensor<768xf32>, tensor<768xf32>)
         -> tensor<?x768xf16, #trellis.bounds<[32768]>>
  // CHECK: trellis.sparse.group_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-05 : f64, groups = 768 : i64}
  %g1 = trellis.sparse.group_norm %h, %c, %gamma, %beta {eps = 1.0e-5 : f64, groups = 768 : i64} : (tensor<?x768xf16, #trellis.bounds<[32768]>>, !trellis.coords<resolution = 64, bound = 32768>, tensor<768xf32>, tensor<768xf32>) -> tensor<?x768xf16, #trellis.bounds<[32768]>>
  // CHECK: trellis.sparse.batch_broadcast %{{.*}}, %{{.*}} : (tensor<2x128xf16>, !trellis.coords<resolution = 64, bound = 32768>) -> tensor<?x128xf16, #trellis.bounds<[32768]>>
  %r = trellis.sparse.batch_broadcast %scale, %c
         : (tensor<2x128xf16>, !trellis.coords<resolution = 64, bound = 32768>)
         -> tensor<?x128xf16, #trellis.bounds<[32768]>>
  return
}

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<?x12x64xf16, #trellis.bounds<[32768]>>, %k: tensor<?x12x64xf16, #trellis.bounds<[32768]>>,
                     %v: tensor<?x12x64xf16, #trellis.bounds<[32768]>>, %s: !trellis.segments<max_length = 512, bound = 32768>,
                     %q16: tensor<?x16x64xf16, #trellis.bounds<[32768]>>, %ck: tensor<2x1374x16x64xf16>,
                     %cv: tensor<2x1374x16x64xf16>, %c: !trellis.coords<resolution = 32, bound = 32768>,
                     %vs: tensor<?x12x32xf16, #trellis.bounds<[32768]>>) {
  // CHECK: trellis.sparse.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f64} : (tensor<?x12x64xf16, #trellis.bounds<[32768]>>, tensor<?x12x64xf16, #trellis.bounds<[32768]>>, tensor<?x12x64xf16, #trellis.bounds<[32768]>>, !trellis.segments<max_length = 512, bound = 32768>) -> tensor<?x12x64xf16, #trellis.bounds<[32768]>>
  %o = trellis.sparse.attention %q, %k, %v, %s {scale = 1.250000e-01 : f64}
         : (tensor<?x12x64xf16, #trellis.bounds<[32768]>>, tensor<?x12x64xf16, #trellis.bounds<[32768]>>,
            tensor<?x12x64xf16, #trellis.bounds<[32768]>>, !trellis.segments<max_length = 512, bound = 32768>)
         -> tensor<?x12x64xf16, #trellis.bounds<[32768]>>
  // CHECK: trellis.sparse.attention {{.*}} -> tensor<?x12x32xf16, #trellis.bounds<[32768]>>
  %o2 = trellis.sparse.attention %q, %k, %vs, %s {scale = 1.250000e-01 : f64} : (tensor<?x12x64xf16, #trellis.bounds<[32768]>>, tensor<?x12x64xf16, #trellis.bounds<[32768]>>, tensor<?x12x32xf16, #trellis.bounds<[32768]>>, !trellis.segments<max_length = 512, bound = 32768>) -> tensor<?x12x32xf16, #trellis.bounds<[32768]>>
  // CHECK: trellis.sparse.cross_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f64} : (tensor<?x16x64xf16, #trellis.bounds<[32768]>>, tensor<2x1374x16x64xf16>, tensor<2x1374x16x64xf16>, !trellis.coords<resolution = 32, bound = 32768>) -> tensor<?x16x64xf16, #trellis.bounds<[32768]>>
  %x = trellis.sparse.cross_attention %q16, %ck, %cv, %c {scale = 1.250000e-01 : f64}
         : (tensor<?x16x64xf16, #trellis.bounds<[32768]>>, tensor<2x1374x16x64xf16>, tensor<2x1374x16x64xf16>,
            !trellis.coords<resolution = 32, bound = 32768>)
         -> tensor<?x16x64xf16, #trellis.bounds<[32768]>>
  return
}

// CHECK-LABEL: func.func @unique_mean
func.func @unique_mean(%keys: tensor<?xi64, #trellis.bounds<[16777216]>>, %vals: tensor<?x10xf32, #trellis.bounds<[16777216]>>,
                       %sk: tensor<12xi64>, %sv: tensor<12x3xf32>) {
  // CHECK: trellis.sparse.unique_mean %{{.*}}, %{{.*}} : (tensor<?xi64, #trellis.bounds<[16777216]>>, tensor<?x10xf32, #trellis.bounds<[16777216]>>) -> (tensor<?xi64, #trellis.bounds<[16777216]>>, tensor<?x10xf32, #trellis.bounds<[16777216]>>)
  %u, %m = trellis.sparse.unique_mean %keys, %vals
         : (tensor<?xi64, #trellis.bounds<[16777216]>>, tensor<?x10xf32, #trellis.bounds<[16777216]>>)
         -> (tensor<?xi64, #trellis.bounds<[16777216]>>, tensor<?x10xf32, #trellis.bounds<[16777216]>>)
  // Static inputs give a dynamic count bounded by M.
  // CHECK: trellis.sparse.unique_mean %{{.*}}, %{{.*}} : (tensor<12xi64>, tensor<12x3xf32>) -> (tensor<?xi64, #trellis.bounds<[12]>>, tensor<?x3xf32, #trellis.bounds<[12]>>)
  %u2:2 = trellis.sparse.unique_mean %sk, %sv : (tensor<12xi64>, tensor<12x3xf32>) -> (tensor<?xi64, #trellis.bounds<[12]>>, tensor<?x3xf32, #trellis.bounds<[12]>>)
  return
}

// The resampling index arrays and the ops that read them (the GPU form of
// upsample / downsample / batch_broadcast after trellis-partition-cuda); the
// examples of the op reference.
// CHECK-LABEL: func.func @resampling_index_doc
func.func @resampling_index_doc(%c64: !trellis.coords<resolution = 64, bound = 32768>,
                                %c32: !trellis.coords<resolution = 32, bound = 32768>,
                                %c: !trellis.coords<resolution = 64, bound = 32768>,
                                %h: tensor<?x128xf16, #trellis.bounds<[4096]>>) {
  // CHECK: trellis.sparse.parent_rows {{.*}} -> tensor<?xi32, #trellis.bounds<[32768]>>
  %p = trellis.sparse.parent_rows %c64, %c32
         : (!trellis.coords<resolution = 64, bound = 32768>, !trellis.coords<resolution = 32, bound = 32768>)
         -> tensor<?xi32, #trellis.bounds<[32768]>>
  // CHECK: trellis.sparse.child_rows {{.*}} -> (tensor<?xi32, #trellis.bounds<[32769]>>, tensor<?xi32, #trellis.bounds<[32768]>>)
  %o, %ch = trellis.sparse.child_rows %c64, %c32
         : (!trellis.coords<resolution = 64, bound = 32768>, !trellis.coords<resolution = 32, bound = 32768>)
         -> (tensor<?xi32, #trellis.bounds<[32769]>>, tensor<?xi32, #trellis.bounds<[32768]>>)
  // CHECK: trellis.sparse.batch_index {{.*}} -> tensor<?xi32, #trellis.bounds<[32768]>>
  %b = trellis.sparse.batch_index %c
         : (!trellis.coords<resolution = 64, bound = 32768>) -> tensor<?xi32, #trellis.bounds<[32768]>>
  // CHECK: trellis.gather_rows {{.*}} -> tensor<?x128xf16, #trellis.bounds<[32768]>>
  %u = trellis.gather_rows %h, %p
         : (tensor<?x128xf16, #trellis.bounds<[4096]>>, tensor<?xi32, #trellis.bounds<[32768]>>)
         -> tensor<?x128xf16, #trellis.bounds<[32768]>>
  return
}

// CHECK-LABEL: func.func @segment_mean_doc
func.func @segment_mean_doc(%h: tensor<?x32xf16, #trellis.bounds<[32768]>>,
                            %o: tensor<?xi32, #trellis.bounds<[32769]>>,
                            %ch: tensor<?xi32, #trellis.bounds<[32768]>>,
                            %s: tensor<4x3xf32>, %so: tensor<3xi32>, %sr: tensor<5xi32>) {
  // CHECK: trellis.segment_mean {{.*}} {extra_count = 1 : i64} {{.*}} -> tensor<?x32xf16, #trellis.bounds<[32768]>>
  %d = trellis.segment_mean %h, %o, %ch {extra_count = 1 : i64}
         : (tensor<?x32xf16, #trellis.bounds<[32768]>>, tensor<?xi32, #trellis.bounds<[32769]>>,
            tensor<?xi32, #trellis.bounds<[32768]>>)
         -> tensor<?x32xf16, #trellis.bounds<[32768]>>
  // Static shapes: S = 3 - 1 segments; extra_count defaults to 0.
  // CHECK: trellis.segment_mean {{.*}} -> tensor<2x3xf32>
  %m = trellis.segment_mean %s, %so, %sr : (tensor<4x3xf32>, tensor<3xi32>, tensor<5xi32>) -> tensor<2x3xf32>
  return
}
