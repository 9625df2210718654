// RUN: trellis-opt --trellis-gpu-codegen %s | FileCheck %s
// RUN: trellis-opt --trellis-gpu-codegen=dump-kernels %s | FileCheck %s --check-prefix=KERNEL

// Dynamic rows (the sparse stages): kernels generated for the bound, a
// trailing `i64 rows` parameter, `threads_per_row` in the annotation.
func.func @rows(%x: tensor<?x128xf16, #trellis.bounds<[4096]>>, %b: tensor<128xf16>, %r: tensor<1x128xf16>,
                %f: tensor<?x128xf32, #trellis.bounds<[4096]>>,
                %q: tensor<?x2x64xf16, #trellis.bounds<[4096]>>, %g: tensor<2x64xf32>, %w: tensor<128xf32>)
    attributes {trellis.device = "cuda"} {
  // Elementwise: 8 f16 per thread, 16 threads per row.
  // CHECK: trellis.add %arg0, %arg1 {trellis.launch = {block = array<i64: 256, 1, 1>, grid = array<i64: 256, 1, 1>, kernel = "add_f16_dx128_k0", smem = 0 : i64, threads_per_row = 16 : i64}}
  %a = trellis.add %x, %b : (tensor<?x128xf16, #trellis.bounds<[4096]>>, tensor<128xf16>) -> tensor<?x128xf16, #trellis.bounds<[4096]>>
  // CHECK: trellis.mul %{{.*}}, %arg2 {trellis.launch = {{.*}}threads_per_row = 16 : i64}}
  %m = trellis.mul %a, %r : (tensor<?x128xf16, #trellis.bounds<[4096]>>, tensor<1x128xf16>) -> tensor<?x128xf16, #trellis.bounds<[4096]>>
  // CHECK: trellis.cast %arg3 {trellis.launch = {{.*}}kernel = "cast_f32_to_f16_dx128_k2", smem = 0 : i64, threads_per_row = 16 : i64}}
  %c = trellis.cast %f : (tensor<?x128xf32, #trellis.bounds<[4096]>>) -> tensor<?x128xf16, #trellis.bounds<[4096]>>
  // Row kernels: G lanes per reduced row (16 for 128 f16 channels), times
  // the reduced rows per dimension-0 row (2 heads of head_rms_norm).
  // CHECK: trellis.layer_norm {{.*}}threads_per_row = 16 : i64}}
  %n = trellis.layer_norm %c, %w, %w {eps = 1.0e-06 : f64} : (tensor<?x128xf16, #trellis.bounds<[4096]>>, tensor<128xf32>, tensor<128xf32>) -> tensor<?x128xf16, #trellis.bounds<[4096]>>
  // CHECK: trellis.layer_norm_modulate {{.*}}kernel = "layer_norm_modulate_f16_dx128_k4", smem = 0 : i64, threads_per_row = 16 : i64}}
  %l = trellis.layer_norm_modulate %n, %a, %m {eps = 1.0e-06 : f64} : (tensor<?x128xf16, #trellis.bounds<[4096]>>, tensor<?x128xf16, #trellis.bounds<[4096]>>, tensor<?x128xf16, #trellis.bounds<[4096]>>) -> tensor<?x128xf16, #trellis.bounds<[4096]>>
  // CHECK: trellis.head_rms_norm {{.*}}kernel = "head_rms_norm_f16_dx2x64_k5", smem = 0 : i64, threads_per_row = 16 : i64}}
  %h = trellis.head_rms_norm %q, %g : (tensor<?x2x64xf16, #trellis.bounds<[4096]>>, tensor<2x64xf32>) -> tensor<?x2x64xf16, #trellis.bounds<[4096]>>
  // CHECK: trellis.gated_residual {{.*}}threads_per_row = 16 : i64}}
  %e = trellis.gated_residual %l, %a, %m : (tensor<?x128xf16, #trellis.bounds<[4096]>>, tensor<?x128xf16, #trellis.bounds<[4096]>>, tensor<?x128xf16, #trellis.bounds<[4096]>>) -> tensor<?x128xf16, #trellis.bounds<[4096]>>
  // Split / concat along axis 1: groups of one dimension-0 row.
  // CHECK: trellis.concat {{.*}}kernel = "concat_f16_dx256_k7", smem = 0 : i64, threads_per_row = 32 : i64}}
  %k = trellis.concat %e, %l {axis = 1 : i64} : (tensor<?x128xf16, #trellis.bounds<[4096]>>, tensor<?x128xf16, #trellis.bounds<[4096]>>) -> tensor<?x256xf16, #trellis.bounds<[4096]>>
  // CHECK: trellis.split {{.*}}threads_per_row = 32 : i64}}
  %s:2 = trellis.split %k {axis = 1 : i64, sizes = array<i64: 64, 192>} : (tensor<?x256xf16, #trellis.bounds<[4096]>>) -> (tensor<?x64xf16, #trellis.bounds<[4096]>>, tensor<?x192xf16, #trellis.bounds<[4096]>>)
  return
}

// The sampler's update of a [?, 8] latent: (x, v_cond, v_uncond, x_next,
// strength, dt, guided, rows), 4 f32 per thread.
// CHECK-LABEL: func.func @sampler
// CHECK: trellis.update = {block = array<i64: 256, 1, 1>, grid = array<i64: 32, 1, 1>, kernel = "flow_update_f32_dx8_k9", smem = 0 : i64, threads_per_row = 2 : i64}
func.func @sampler(%noise: tensor<?x8xf32, #trellis.bounds<[4096]>>, %cond: tensor<1x4x16xf32>) -> tensor<?x8xf32, #trellis.bounds<[4096]>>
    attributes {trellis.device = "cuda"} {
  %0 = trellis.flow_sample %noise, %cond, %cond {cfg_interval = array<f64: 5.000000e-01, 1.000000e+00>, cfg_strength = 7.500000e+00 : f64, rescale_t = 3.000000e+00 : f64, steps = 25 : i64} : (tensor<?x8xf32, #trellis.bounds<[4096]>>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<?x8xf32, #trellis.bounds<[4096]>> {
  ^bb0(%x: tensor<?x8xf32, #trellis.bounds<[4096]>>, %t: tensor<1xf32>, %c: tensor<1x4x16xf32>):
    trellis.yield %x : tensor<?x8xf32, #trellis.bounds<[4096]>>
  }
  return %0 : tensor<?x8xf32, #trellis.bounds<[4096]>>
}

// The elementwise kernel: buffers at the bound, rows clamped to it, one
// group per thread, guarded by rows * threads_per_row.
// KERNEL-LABEL: gpu.func @add_f16_dx128_k0
// KERNEL-SAME: (%[[X:.*]]: memref<524288xf16>, %{{.*}}: memref<128xf16>, %[[O:.*]]: memref<524288xf16>, %[[ROWS:.*]]: i64)
// KERNEL: %[[B:.*]] = arith.minui %[[ROWS]], %c4096_i64 : i64
// KERNEL: %[[R:.*]] = arith.index_cast %[[B]] : i64 to index
// KERNEL: %[[GID:.*]] = arith.addi
// KERNEL: %[[N:.*]] = arith.muli %[[R]], %c16
// KERNEL: %[[IN:.*]] = arith.cmpi ult, %[[GID]], %[[N]]
// KERNEL: scf.if %[[IN]]
// KERNEL: vector.load %[[X]]{{.*}} : memref<524288xf16>, vector<8xf16>
// KERNEL-NOT: vector.load %[[X]]
// KERNEL: vector.store {{.*}}, %[[O]]
// KERNEL-NOT: vector.store
// KERNEL: gpu.return
// Row kernels: nothing when rows = 0, the row clamped to rows - 1 for the
// shuffles, the stores guarded by row < rows.
// KERNEL-LABEL: gpu.func @layer_norm_f16_dx128_k3
// KERNEL-SAME: %[[ROWS:.*]]: i64)
// KERNEL: %[[R:.*]] = arith.index_cast
// KERNEL: %[[ROW:.*]] = arith.divui %{{.*}}, %c16
// KERNEL: %[[NZ:.*]] = arith.cmpi ne, %[[R]], %c0
// KERNEL: scf.if %[[NZ]]
// KERNEL: %[[VALID:.*]] = arith.cmpi ult, %[[ROW]], %[[R]]
// KERNEL: %[[LAST:.*]] = arith.subi %[[R]], %c1
// KERNEL: arith.minui %[[ROW]], %[[LAST]]
// KERNEL: gpu.shuffle  xor
// KERNEL: scf.if %[[VALID]]
// KERNEL-LABEL: gpu.func @head_rms_norm_f16_dx2x64_k5
// KERNEL: %[[R:.*]] = arith.index_cast
// KERNEL: arith.cmpi ne, %[[R]], %c0
// KERNEL: arith.muli %[[R]], %c2
// KERNEL-LABEL: gpu.func @flow_update_f32_dx8_k9
// KERNEL-SAME: (%{{.*}}: memref<32768xf32>, %{{.*}}: memref<32768xf32>, %{{.*}}: memref<32768xf32>, %{{.*}}: memref<32768xf32>, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: i32, %{{.*}}: i64)

// The resampling kernels (trellis-partition-cuda's form of upsample and
// downsample): each tensor flattened at its own bound, the
// result's rows last; the index arrays from the coordinates are host ops.
// CHECK-LABEL: func.func @resampling
func.func @resampling(%c: tensor<?x4xi32, #trellis.bounds<[4096]>>, %x: tensor<?x128xf16, #trellis.bounds<[4096]>>)
    attributes {trellis.device = "cuda"} {
  %fine = trellis.sparse.from_tensor %c {resolution = 16 : i64} : (tensor<?x4xi32, #trellis.bounds<[4096]>>) -> !trellis.coords<resolution = 16, bound = 4096>
  %coarse = trellis.sparse.coarsen %fine : (!trellis.coords<resolution = 16, bound = 4096>) -> !trellis.coords<resolution = 8, bound = 4096>
  // CHECK: trellis.sparse.child_rows
  // CHECK-NOT: trellis.launch
  // CHECK-SAME: -> (tensor
  %o, %ch = trellis.sparse.child_rows %fine, %coarse : (!trellis.coords<resolution = 16, bound = 4096>, !trellis.coords<resolution = 8, bound = 4096>) -> (tensor<?xi32, #trellis.bounds<[4097]>>, tensor<?xi32, #trellis.bounds<[4096]>>)
  // CHECK: trellis.sparse.parent_rows
  // CHECK-NOT: trellis.launch
  // CHECK-SAME: -> tensor
  %p = trellis.sparse.parent_rows %fine, %coarse : (!trellis.coords<resolution = 16, bound = 4096>, !trellis.coords<resolution = 8, bound = 4096>) -> tensor<?xi32, #trellis.bounds<[4096]>>
  // 8 f16 per thread, 16 threads per row.
  // CHECK: trellis.segment_mean {{.*}}kernel = "segment_mean_f16_dx128_k{{[0-9]+}}", smem = 0 : i64, threads_per_row = 16 : i64}
  // KERNEL-LABEL: gpu.func @segment_mean_f16_dx128
  // KERNEL-SAME: (%{{.*}}: memref<524288xf16>, %{{.*}}: memref<4097xi32>, %{{.*}}: memref<4096xi32>, %{{.*}}: memref<524288xf16>, %{{.*}}: i64)
  // KERNEL: scf.for
  // KERNEL: arith.addf {{.*}} : vector<8xf32>
  // KERNEL: arith.divf {{.*}} : vector<8xf32>
  %d = trellis.segment_mean %x, %o, %ch {extra_count = 1 : i64} : (tensor<?x128xf16, #trellis.bounds<[4096]>>, tensor<?xi32, #trellis.bounds<[4097]>>, tensor<?xi32, #trellis.bounds<[4096]>>) -> tensor<?x128xf16, #trellis.bounds<[4096]>>
  // CHECK: trellis.gather_rows {{.*}}threads_per_row = 16 : i64}
  // An index outside x's 4096 rows reads row 0 and stores NaN.
  // KERNEL-LABEL: gpu.func @gather_rows_f16_dx128
  // KERNEL: memref.load {{.*}} : memref<4096xi32>
  // KERNEL: %[[OK:.*]] = arith.cmpi ult, %{{.*}}, %c4096 : index
  // KERNEL: arith.select %[[OK]], %{{.*}}, %c0 : index
  // KERNEL: %[[ROW:.*]] = vector.load {{.*}} : memref<524288xf16>, vector<8xf16>
  // KERNEL: %[[NAN:.*]] = vector.broadcast %{{.*}} : f16 to vector<8xf16>
  // KERNEL: arith.select %[[OK]], %[[ROW]], %[[NAN]] : vector<8xf16>
  %u = trellis.gather_rows %d, %p : (tensor<?x128xf16, #trellis.bounds<[4096]>>, tensor<?xi32, #trellis.bounds<[4096]>>) -> tensor<?x128xf16, #trellis.bounds<[4096]>>
  return
}
