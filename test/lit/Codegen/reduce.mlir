// RUN: trellis-opt --trellis-gpu-codegen=dump-kernels %s | FileCheck %s
// RUN: trellis-opt --trellis-gpu-codegen %s | FileCheck %s --check-prefix=ANN

// trellis.reduce over the last axis: a warp per result, the lanes striding
// the row (f32 accumulation), a shuffle combine, lane 0 stores.
// CHECK-LABEL: gpu.func @reduce_f16_4_k0
// CHECK: scf.for {{.*}} iter_args
// CHECK: arith.extf {{.*}} : f16 to f32
// CHECK: arith.addf
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK: arith.divf
// CHECK: arith.truncf {{.*}} : f32 to f16
// CHECK: memref.store {{.*}} : memref<4xf16>
// Over another axis: a thread per (outer, inner) position looping over it.
// CHECK-LABEL: gpu.func @reduce_f32_2x5_k1
// CHECK: scf.for {{.*}} = %c0 to %c3 step %c1
// CHECK: arith.maximumf
// CHECK-NOT: gpu.shuffle
// CHECK: memref.store {{.*}} : memref<10xf32>
// Dynamic rows: the reduced axis is not dimension 0; a trailing i64 rows.
// CHECK-LABEL: gpu.func @reduce_f32_d_k2
// CHECK-SAME: (%{{.*}}: memref<65536xf32>, %{{.*}}: memref<1024xf32>, %{{.*}}: i64)
// 4 rows · 32 lanes: one block; 1024 bound rows · 32 lanes: 128 blocks.
// ANN: trellis.reduce {{.*}}grid = array<i64: 1, 1, 1>, kernel = "reduce_f16_4_k0"
// ANN: trellis.reduce {{.*}}grid = array<i64: 1, 1, 1>, kernel = "reduce_f32_2x5_k1"
// ANN: trellis.reduce {{.*}}grid = array<i64: 128, 1, 1>, kernel = "reduce_f32_d_k2", smem = 0 : i64, threads_per_row = 32 : i64
func.func @main(%x: tensor<4x300xf16>, %y: tensor<2x3x5xf32>, %z: tensor<?x64xf32, #trellis.bounds<[1024]>>)
    -> (tensor<4xf16>, tensor<2x5xf32>, tensor<?xf32, #trellis.bounds<[1024]>>) attributes {trellis.device = "cuda"} {
  %m = trellis.reduce %x {kind = "mean"} : (tensor<4x300xf16>) -> tensor<4xf16>
  %a = trellis.reduce %y {kind = "max", axis = 1 : i64} : (tensor<2x3x5xf32>) -> tensor<2x5xf32>
  %s = trellis.reduce %z {kind = "sum"} : (tensor<?x64xf32, #trellis.bounds<[1024]>>) -> tensor<?xf32, #trellis.bounds<[1024]>>
  return %m, %a, %s : tensor<4xf16>, tensor<2x5xf32>, tensor<?xf32, #trellis.bounds<[1024]>>
}
