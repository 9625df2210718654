// RUN: trellis-opt %s | trellis-opt | FileCheck %s

// CHECK-LABEL: func.func @linear_bias
func.func @linear_bias(%x: tensor<2x4096x1024xf16>, %w: tensor<3072x1024xf16>, %b: tensor<3072xf16>) -> tensor<2x4096x3072xf16> {
  // CHECK: trellis.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4096x1024xf16>, tensor<3072x1024xf16>, tensor<3072xf16>) -> tensor<2x4096x3072xf16>
  %y = trellis.linear %x, %w, %b : (tensor<2x4096x1024xf16>, tensor<3072x1024xf16>, tensor<3072xf16>) -> tensor<2x4096x3072xf16>
  return %y : tensor<2x4096x3072xf16>
}

// CHECK-LABEL: func.func @linear_bounded
func.func @linear_bounded(%x: tensor<?x8xf32, #trellis.bounds<[32768]>>, %w: tensor<128x8xf32>) -> tensor<?x128xf32, #trellis.bounds<[32768]>> {
  // CHECK: trellis.linear %{{.*}}, %{{.*}} : (tensor<?x8xf32, #trellis.bounds<[32768]>>, tensor<128x8xf32>) -> tensor<?x128xf32, #trellis.bounds<[32768]>>
  %y = trellis.linear %x, %w : (tensor<?x8xf32, #trellis.bounds<[32768]>>, tensor<128x8xf32>) -> tensor<?x128xf32, #trellis.bounds<[32768]>>
  return %y : tensor<?x128xf32, #trellis.bounds<[32768]>>
}

// CHECK-LABEL: func.func @linear_fp8
func.func @linear_fp8(%x: tensor<1x4096x1024xf16>, %w: tensor<4096x1024xf16>, %b: tensor<4096xf16>) -> tensor<1x4096x4096xf16> {
  // CHECK: trellis.linear %{{.*}}, %{{.*}}, %{{.*}} {activation = "gelu_tanh", precision = "fp8_e4m3"} : (tensor<1x4096x1024xf16>, tensor<4096x1024xf16>, tensor<4096xf16>) -> tensor<1x4096x4096xf16>
  %y = trellis.linear %x, %w, %b {activation = "gelu_tanh", precision = "fp8_e4m3"} : (tensor<1x4096x1024xf16>, tensor<4096x1024xf16>, tensor<4096xf16>) -> tensor<1x4096x4096xf16>
  return %y : tensor<1x4096x4096xf16>
}

// CHECK-LABEL: func.func @linear_tf32
func.func @linear_tf32(%x: tensor<1x1374x1024xf32>, %w: tensor<1024x1024xf32>, %b: tensor<1024xf32>) -> tensor<1x1374x1024xf32> {
  // CHECK: trellis.linear %{{.*}}, %{{.*}}, %{{.*}} {precision = "tf32"} : (tensor<1x1374x1024xf32>, tensor<1024x1024xf32>, tensor<1024xf32>) -> tensor<1x1374x1024xf32>
  %y = trellis.linear %x, %w, %b {precision = "tf32"} : (tensor<1x1374x1024xf32>, tensor<1024x1024xf32>, tensor<1024xf32>) -> tensor<1x1374x1024xf32>
  return %y : tensor<1x1374x1024xf32>
}
