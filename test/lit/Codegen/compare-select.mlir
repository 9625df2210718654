// RUN: trellis-opt --trellis-gpu-codegen=dump-kernels %s | FileCheck %s

// Comparisons: an ordered compare (a NaN compares false) widened to 1.0 / 0.0
// (integers: extended to 1 / 0); where: cond ≠ 0 (unordered, so a NaN cond
// selects a) picks a or b, both read, neither NaN reaching the other side.
// CHECK-LABEL: gpu.func @greater_f32_2x8_k0
// CHECK: arith.cmpf ogt, {{.*}} : vector<4xf32>
// CHECK: arith.uitofp {{.*}} : vector<4xi1> to vector<4xf32>
// CHECK-LABEL: gpu.func @equal_f32_2x8_k1
// CHECK: arith.cmpf oeq
// CHECK-LABEL: gpu.func @less_i32_16x3_k2
// CHECK: arith.cmpi slt
// CHECK: arith.extui
// CHECK-LABEL: gpu.func @where_f32_2x8_k3
// CHECK-SAME: (%{{.*}}: memref<16xf32>, %{{.*}}: memref<16xf32>, %{{.*}}: memref<1xf32>, %{{.*}}: memref<16xf32>)
// CHECK: arith.cmpf une
// CHECK: arith.select
func.func @main(%x: tensor<2x8xf32>, %z: tensor<1xf32>, %i: tensor<16x3xi32>, %j: tensor<3xi32>) -> (tensor<2x8xf32>, tensor<16x3xi32>) attributes {trellis.device = "cuda"} {
  %m = trellis.greater %x, %z : (tensor<2x8xf32>, tensor<1xf32>) -> tensor<2x8xf32>
  %e = trellis.equal %x, %m : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %l = trellis.less %i, %j : (tensor<16x3xi32>, tensor<3xi32>) -> tensor<16x3xi32>
  %y = trellis.where %e, %x, %z : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<1xf32>) -> tensor<2x8xf32>
  return %y, %l : tensor<2x8xf32>, tensor<16x3xi32>
}
