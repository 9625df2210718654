// RUN: trellis-opt --trellis-partition-cuda=entries=ss_stage,image_stage %s | FileCheck %s
// RUN: trellis-opt --trellis-partition-cuda=entries=other %s | FileCheck %s --check-prefix=OTHER

// The GPU entry and its callee are marked; the unrelated function is not.
// CHECK-LABEL: func.func @decoder
// CHECK-SAME: trellis.device = "cuda"
// CHECK: %[[C:.*]] = trellis.conv3d %arg0, %arg1 : (tensor<1x8x4x4x4xf16>, tensor<16x8x3x3x3xf16>) -> tensor<1x16x4x4x4xf16>
// CHECK: %[[B:.*]] = trellis.reshape %arg2 : (tensor<16xf16>) -> tensor<16x1x1x1xf16>
// CHECK: %[[S:.*]] = trellis.add %[[C]], %[[B]] : (tensor<1x16x4x4x4xf16>, tensor<16x1x1x1xf16>) -> tensor<1x16x4x4x4xf16>
// CHECK: return %[[S]]
// OTHER-LABEL: func.func @decoder
// OTHER-NOT: trellis.device
// OTHER: trellis.conv3d %arg0, %arg1, %arg2
func.func @decoder(%x: tensor<1x8x4x4x4xf16>, %w: tensor<16x8x3x3x3xf16>, %b: tensor<16xf16>) -> tensor<1x16x4x4x4xf16> {
  %y = trellis.conv3d %x, %w, %b : (tensor<1x8x4x4x4xf16>, tensor<16x8x3x3x3xf16>, tensor<16xf16>) -> tensor<1x16x4x4x4xf16>
  return %y : tensor<1x16x4x4x4xf16>
}

// CHECK-LABEL: func.func @ss_stage
// CHECK-SAME: trellis.device = "cuda"
func.func @ss_stage(%x: tensor<1x8x4x4x4xf16>, %w: tensor<16x8x3x3x3xf16>, %b: tensor<16xf16>) -> tensor<1x16x4x4x4xf16> {
  %y = call @decoder(%x, %w, %b) : (tensor<1x8x4x4x4xf16>, tensor<16x8x3x3x3xf16>, tensor<16xf16>) -> tensor<1x16x4x4x4xf16>
  return %y : tensor<1x16x4x4x4xf16>
}

// CHECK-LABEL: func.func @other
// CHECK-NOT: trellis.device
// CHECK: trellis.conv3d %arg0, %arg1, %arg2
// OTHER-LABEL: func.func @other
// OTHER-SAME: trellis.device = "cuda"
func.func @other(%x: tensor<1x8x4x4x4xf16>, %w: tensor<16x8x3x3x3xf16>, %b: tensor<16xf16>) -> tensor<1x16x4x4x4xf16> {
  %y = trellis.conv3d %x, %w, %b : (tensor<1x8x4x4x4xf16>, tensor<16x8x3x3x3xf16>, tensor<16xf16>) -> tensor<1x16x4x4x4xf16>
  return %y : tensor<1x16x4x4x4xf16>
}

// The attention kernels take fp16: an f32 attention (the image-conditioning
// model's) runs on fp16 copies of q, k, v, its result widened back.
// CHECK-LABEL: func.func @image_stage
// CHECK-SAME: trellis.device = "cuda"
// CHECK-DAG: %[[Q:.*]] = trellis.cast %arg0 : (tensor<1x1374x16x64xf32>) -> tensor<1x1374x16x64xf16>
// CHECK-DAG: %[[K:.*]] = trellis.cast %arg1 : (tensor<1x1374x16x64xf32>) -> tensor<1x1374x16x64xf16>
// CHECK-DAG: %[[V:.*]] = trellis.cast %arg2 : (tensor<1x1374x16x64xf32>) -> tensor<1x1374x16x64xf16>
// CHECK: %[[O:.*]] = trellis.attention %[[Q]], %[[K]], %[[V]] {scale = 1.250000e-01 : f64} : (tensor<1x1374x16x64xf16>, tensor<1x1374x16x64xf16>, tensor<1x1374x16x64xf16>) -> tensor<1x1374x16x64xf16>
// CHECK: %[[W:.*]] = trellis.cast %[[O]] : (tensor<1x1374x16x64xf16>) -> tensor<1x1374x16x64xf32>
// CHECK: return %[[W]]
// OTHER-LABEL: func.func @image_stage
// OTHER: trellis.attention %arg0, %arg1, %arg2 {{.*}} -> tensor<1x1374x16x64xf32>
func.func @image_stage(%q: tensor<1x1374x16x64xf32>, %k: tensor<1x1374x16x64xf32>, %v: tensor<1x1374x16x64xf32>) -> tensor<1x1374x16x64xf32> {
  %o = trellis.attention %q, %k, %v {scale = 1.250000e-01 : f64} : (tensor<1x1374x16x64xf32>, tensor<1x1374x16x64xf32>, tensor<1x1374x16x64xf32>) -> tensor<1x1374x16x64xf32>
  return %o : tensor<1x1374x16x64xf32>
}
