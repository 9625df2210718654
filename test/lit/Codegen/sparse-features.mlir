// RUN: trellis-opt --trellis-gpu-codegen %s | FileCheck %s
// RUN: trellis-opt --trellis-gpu-codegen=dump-kernels %s | FileCheck %s --check-prefix=KERNEL

// A 3×3×3 sparse conv gets two generated kernels, the neighbour gather
// (trellis.launch, its col chunk in trellis.scratch_bytes) and the taps-first
// tap sum (trellis.tap_sum, its f32 products' limit in
// trellis.taps_scratch_bytes); the runtime picks between them and its
// implicit-GEMM kernel per binding. Convs of the same types share them; a
// 1×1×1 conv is a GEMM (no kernel). subdivide_features is a row-index
// kernel: fine row r reads coarse row r / 8. The group norm's normalization is
// generated; its statistics are the runtime's reductions.
// CHECK-LABEL: func.func @convs
func.func @convs(%c: !trellis.coords<resolution = 16, bound = 4096>, %x: tensor<?x64xf16, #trellis.bounds<[4096]>>,
                 %w: tensor<32x3x3x3x64xf16>, %b: tensor<32xf16>, %w2: tensor<32x3x3x3x64xf16>,
                 %f: tensor<?x24xf32, #trellis.bounds<[4096]>>, %w3: tensor<8x3x3x3x24xf32>,
                 %w1: tensor<16x1x1x1x64xf16>, %g: tensor<32xf32>)
    attributes {trellis.device = "cuda"} {
  %n = trellis.sparse.neighbor_map %c {kernel = 3 : i64} : (!trellis.coords<resolution = 16, bound = 4096>) -> !trellis.neighbor_map<kernel = 3, bound = 4096>
  // 64 f16 channels: 8 per thread, 27 · 8 threads per output row; the
  // chunk is the whole bound (4096 · 27 · 64 · 2 bytes, under 128 MiB).
  // CHECK: trellis.sparse.conv3d {{.*}}trellis.launch = {{{.*}}kernel = "sparse_conv_gather_f16_dx64_k0", smem = 0 : i64, threads_per_row = 216 : i64}, trellis.scratch_bytes = 14155776 : i64, trellis.tap_sum = {{{.*}}kernel = "sparse_conv_tap_sum_f16_dx32_k1", smem = 0 : i64, threads_per_row = 8 : i64}, trellis.taps_scratch_bytes = 14155776 : i64}
  %y = trellis.sparse.conv3d %x, %w, %b neighbors %n : (tensor<?x64xf16, #trellis.bounds<[4096]>>, tensor<32x3x3x3x64xf16>, tensor<32xf16>, !trellis.neighbor_map<kernel = 3, bound = 4096>) -> tensor<?x32xf16, #trellis.bounds<[4096]>>
  // CHECK: trellis.sparse.conv3d {{.*}}kernel = "sparse_conv_gather_f16_dx64_k0"{{.*}}kernel = "sparse_conv_tap_sum_f16_dx32_k1"
  %y2 = trellis.sparse.conv3d %x, %w2, %b neighbors %n : (tensor<?x64xf16, #trellis.bounds<[4096]>>, tensor<32x3x3x3x64xf16>, tensor<32xf16>, !trellis.neighbor_map<kernel = 3, bound = 4096>) -> tensor<?x32xf16, #trellis.bounds<[4096]>>
  // No bias, f32: the products' limit is their size at the bound
  // (27 · 4096 · 8 · 4 bytes).
  // CHECK: trellis.sparse.conv3d {{.*}}kernel = "sparse_conv_gather_f32_dx24_k2"{{.*}}kernel = "sparse_conv_tap_sum_f32_dx8_k3"{{.*}}trellis.taps_scratch_bytes = 3538944 : i64}
  %z = trellis.sparse.conv3d %f, %w3 neighbors %n : (tensor<?x24xf32, #trellis.bounds<[4096]>>, tensor<8x3x3x3x24xf32>, !trellis.neighbor_map<kernel = 3, bound = 4096>) -> tensor<?x8xf32, #trellis.bounds<[4096]>>
  // CHECK: trellis.sparse.conv3d
  // CHECK-NOT: trellis.launch
  // CHECK-SAME: -> tensor<?x16xf16
  %p = trellis.sparse.conv3d %x, %w1 : (tensor<?x64xf16, #trellis.bounds<[4096]>>, tensor<16x1x1x1x64xf16>) -> tensor<?x16xf16, #trellis.bounds<[4096]>>
  // CHECK: trellis.sparse.subdivide_features {{.*}}kernel = "sparse_subdivide_features_f16_dx32_k4", smem = 0 : i64, threads_per_row = 4 : i64}}
  %s = trellis.sparse.subdivide_features %y : (tensor<?x32xf16, #trellis.bounds<[4096]>>) -> tensor<?x32xf16, #trellis.bounds<[32768]>>
  // 4 groups of 8 channels: 8 f16 per thread (one group), 4 threads per row.
  // CHECK: trellis.sparse.group_norm {{.*}}kernel = "sparse_group_norm_f16_dx32_k5", smem = 0 : i64, threads_per_row = 4 : i64}}
  %n1 = trellis.sparse.group_norm %y, %c, %g, %g {eps = 1.000000e-05 : f64, groups = 4 : i64} : (tensor<?x32xf16, #trellis.bounds<[4096]>>, !trellis.coords<resolution = 16, bound = 4096>, tensor<32xf32>, tensor<32xf32>) -> tensor<?x32xf16, #trellis.bounds<[4096]>>
  return
}

// A bound past 2^31 elements: the kernel addresses the rows below it
// (2^31 - 1 elements / 192 per row = 11184810), the runtime refuses more.
// CHECK-LABEL: func.func @huge
// CHECK: trellis.sparse.subdivide_features {{.*}}grid = array<i64: 1048576, 1, 1>{{.*}}threads_per_row = 24
func.func @huge(%h: tensor<?x192xf16, #trellis.bounds<[2097152]>>) attributes {trellis.device = "cuda"} {
  %s = trellis.sparse.subdivide_features %h : (tensor<?x192xf16, #trellis.bounds<[2097152]>>) -> tensor<?x192xf16, #trellis.bounds<[16777216]>>
  return
}

// The gather: (x, neighbours, col, row0, rows); rows clamped to the chunk;
// an inactive neighbour (-1) reads row 0 and stores zeros.
// KERNEL-LABEL: gpu.func @sparse_conv_gather_f16_dx64_k0
// KERNEL-SAME: (%[[X:.*]]: memref<262144xf16>, %[[NBR:.*]]: memref<110592xi32>, %[[COL:.*]]: memref<7077888xf16>, %[[ROW0:.*]]: i64, %[[ROWS:.*]]: i64)
// KERNEL: arith.minui %[[ROWS]], %c4096_i64
// KERNEL: %[[R0:.*]] = arith.index_cast %[[ROW0]]
// KERNEL: %[[BASE:.*]] = arith.muli %[[R0]], %c27
// KERNEL: %[[AT:.*]] = arith.addi %[[BASE]]
// KERNEL: %[[SRC:.*]] = memref.load %[[NBR]][%[[AT]]]
// KERNEL: %[[ACTIVE:.*]] = arith.cmpi sge, %[[SRC]], %c0_i32
// KERNEL: arith.select %[[ACTIVE]], %[[SRC]], %c0_i32
// KERNEL: %[[V:.*]] = vector.load %[[X]]{{.*}} vector<8xf16>
// KERNEL: %[[Z:.*]] = arith.select %[[ACTIVE]], %[[V]], %{{.*}} : vector<8xf16>
// KERNEL: vector.store %[[Z]], %[[COL]]
// KERNEL: gpu.return
// The tap sum: (y, neighbours, bias, out, rows, rowsIn); bias first, then
// the 27 taps in order, each added only for an active neighbour; tap o's
// products start at o · rowsIn · Cout.
// KERNEL-LABEL: gpu.func @sparse_conv_tap_sum_f16_dx32_k1
// KERNEL-SAME: (%[[Y:.*]]: memref<3538944xf32>, %[[NB:.*]]: memref<110592xi32>, %[[B:.*]]: memref<32xf16>, %[[O:.*]]: memref<131072xf16>, %{{.*}}: i64, %[[RIN:.*]]: i64)
// KERNEL: %[[RI:.*]] = arith.index_cast %[[RIN]]
// KERNEL: %[[BIAS:.*]] = vector.load %[[B]]{{.*}} vector<4xf16>
// KERNEL: %[[ACC:.*]] = arith.extf %[[BIAS]]
// KERNEL: %[[TAP:.*]] = arith.muli %[[RI]], %c32
// KERNEL: vector.load %[[Y]]
// KERNEL: arith.addf %[[ACC]]
// KERNEL: %[[T1:.*]] = arith.addi %[[TAP]]
// KERNEL: vector.load %[[Y]][%[[T1]]]
// KERNEL-COUNT-25: vector.load %[[Y]]
// KERNEL-NOT: vector.load %[[Y]]
// KERNEL: %[[H:.*]] = arith.truncf %{{.*}} : vector<4xf32> to vector<4xf16>
// KERNEL: vector.store %[[H]], %[[O]]
// KERNEL: gpu.return
// KERNEL-LABEL: gpu.func @sparse_subdivide_features_f16_dx32_k4
// KERNEL-SAME: (%[[C:.*]]: memref<131072xf16>, %[[F:.*]]: memref<1048576xf16>, %{{.*}}: i64)
// KERNEL: %[[ROW:.*]] = arith.divui %{{.*}}, %c4
// KERNEL: %[[PARENT:.*]] = arith.divui %[[ROW]], %c8
// KERNEL: arith.muli %[[PARENT]], %c32
// KERNEL: vector.load %[[C]]
// KERNEL: vector.store {{.*}}, %[[F]]
// The group norm: (x, coords, γ, β, out, stats, rows); the row's sample from
// the coordinates' batch column, one (mean, rstd) pair per thread.
// KERNEL-LABEL: gpu.func @sparse_group_norm_f16_dx32_k5
// KERNEL-SAME: (%[[GX:.*]]: memref<131072xf16>, %[[CO:.*]]: memref<16384xi32>, %[[GA:.*]]: memref<32xf32>, %[[BE:.*]]: memref<32xf32>, %[[GO:.*]]: memref<131072xf16>, %[[ST:.*]]: memref<32768xf32>, %{{.*}}: i64)
// KERNEL: %[[ROW:.*]] = arith.divui %{{.*}}, %c4
// KERNEL: %[[CR:.*]] = arith.muli %[[ROW]], %c4
// KERNEL: %[[B:.*]] = memref.load %[[CO]][%[[CR]]]
// KERNEL: %[[S:.*]] = arith.index_cast %[[B]]
// KERNEL: %[[ITEM:.*]] = arith.addi
// KERNEL: %[[AT:.*]] = arith.muli %[[ITEM]], %c2
// KERNEL: %[[MEAN:.*]] = memref.load %[[ST]][%[[AT]]]
// KERNEL: %[[RSTD:.*]] = memref.load %[[ST]]
// KERNEL: arith.subf
// KERNEL: arith.mulf
// KERNEL: vector.load %[[GA]]
// KERNEL: arith.mulf
// KERNEL: vector.load %[[BE]]
// KERNEL: arith.addf
// KERNEL: arith.truncf
// KERNEL: vector.store {{.*}}, %[[GO]]

// A Swin window attention: the library kernel, with its rows moved into
// window order and back by generated kernels (q, k, v gathers, the output's
// scatter); a batch-segment attention reads its rows in place (no kernels).
// CHECK-LABEL: func.func @windows
// CHECK: trellis.sparse.attention {{.*}}trellis.window_rows = [{{{.*}}kernel = "window_gather_f16_dx2x64_k[[G:[0-9]+]]"{{.*}}threads_per_row = 16 : i64}, {{{.*}}kernel = "window_gather_f16_dx2x64_k[[G]]"{{.*}}}, {{{.*}}kernel = "window_gather_f16_dx2x64_k[[G]]"{{.*}}}, {{{.*}}kernel = "window_scatter_f16_dx2x64_k{{[0-9]+}}"{{.*}}threads_per_row = 16 : i64}]
// CHECK: trellis.sparse.attention
// CHECK-NOT: trellis.window_rows
// CHECK-SAME: -> tensor
func.func @windows(%c: !trellis.coords<resolution = 16, bound = 4096>, %q: tensor<?x2x64xf16, #trellis.bounds<[4096]>>)
    attributes {trellis.device = "cuda"} {
  %w = trellis.sparse.window_segments %c {window = 8 : i64} : (!trellis.coords<resolution = 16, bound = 4096>) -> !trellis.segments<max_length = 512, bound = 4096>
  %a = trellis.sparse.attention %q, %q, %q, %w {scale = 1.250000e-01 : f64} : (tensor<?x2x64xf16, #trellis.bounds<[4096]>>, tensor<?x2x64xf16, #trellis.bounds<[4096]>>, tensor<?x2x64xf16, #trellis.bounds<[4096]>>, !trellis.segments<max_length = 512, bound = 4096>) -> tensor<?x2x64xf16, #trellis.bounds<[4096]>>
  %s = trellis.sparse.batch_segments %c : (!trellis.coords<resolution = 16, bound = 4096>) -> !trellis.segments<max_length = 4096, bound = 4096>
  %b = trellis.sparse.attention %a, %a, %a, %s {scale = 1.250000e-01 : f64} : (tensor<?x2x64xf16, #trellis.bounds<[4096]>>, tensor<?x2x64xf16, #trellis.bounds<[4096]>>, tensor<?x2x64xf16, #trellis.bounds<[4096]>>, !trellis.segments<max_length = 4096, bound = 4096>) -> tensor<?x2x64xf16, #trellis.bounds<[4096]>>
  return
}
// The gather: (x, window rows, out, x's row stride, rows); x addressed up to
// 2^31 elements (a strided view of a packed qkv).
// KERNEL-LABEL: gpu.func @window_gather_f16_dx2x64
// KERNEL-SAME: (%[[WX:.*]]: memref<2147483647xf16>, %[[WI:.*]]: memref<4096xi32>, %[[WO:.*]]: memref<524288xf16>, %[[STRIDE:.*]]: i64, %{{.*}}: i64)
// KERNEL: %[[SRC:.*]] = memref.load %[[WI]]
// KERNEL: %[[ROW:.*]] = arith.index_cast %[[SRC]]
// KERNEL: %[[S:.*]] = arith.index_cast %[[STRIDE]]
// KERNEL: %[[AT:.*]] = arith.muli %[[ROW]], %[[S]]
// KERNEL: vector.load %[[WX]]
// KERNEL: vector.store {{.*}}, %[[WO]]
// The scatter: (x, window rows, out, rows): out[rows[r]] = x[r].
// KERNEL-LABEL: gpu.func @window_scatter_f16_dx2x64
// KERNEL-SAME: (%[[SX:.*]]: memref<524288xf16>, %[[SI:.*]]: memref<4096xi32>, %[[SO:.*]]: memref<524288xf16>, %{{.*}}: i64)
// KERNEL: %[[DST:.*]] = memref.load %[[SI]]
// KERNEL: %[[D:.*]] = arith.index_cast %[[DST]]
// KERNEL: vector.load %[[SX]]
// KERNEL: arith.muli %[[D]], %c128
// KERNEL: vector.store {{.*}}, %[[SO]]
