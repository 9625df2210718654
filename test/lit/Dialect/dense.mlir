// RUN: trellis-opt %s | trellis-opt | FileCheck %s

// Dense ops: weights, constants, casts, linear algebra, normalization,
// attention, embeddings, convolution and layout (the examples of their
// descriptions appear here verbatim; check_doc_examples.py checks that).

// CHECK-LABEL: func.func @weights_constants_casts
func.func @weights_constants_casts(%x: tensor<2x4096x1024xf32>, %i: tensor<?x3xi32, #trellis.bounds<[32768]>>) {
  // CHECK: trellis.weight "blocks.0.self_attn.to_qkv.weight" of "sparse_structure_flow_model" : tensor<3072x1024xf16>
  %w = trellis.weight "blocks.0.self_attn.to_qkv.weight" of "sparse_structure_flow_model"
         : tensor<3072x1024xf16>
  // CHECK: trellis.constant dense<[-2.16875458, -0.00434704637, -0.133523494, -0.0841807276, -0.52712065, 0.723868906, -1.14144504, 1.20393634]> : tensor<8xf32>
  %mean = trellis.constant dense<[-2.16875458, -0.00434704637, -0.133523494, -0.0841807276, -0.52712065, 0.723868906, -1.14144504, 1.20393634]> : tensor<8xf32>
  // A splat may be large (the zero negative condition).
  // CHECK: trellis.constant dense<0.000000e+00> : tensor<1x1374x1024xf32>
  %zero = trellis.constant dense<0.0> : tensor<1x1374x1024xf32>
  // CHECK: trellis.constant dense<[1, 2]> : tensor<2xi64>
  %ints = trellis.constant dense<[1, 2]> : tensor<2xi64>
  // CHECK: trellis.cast %{{.*}} : (tensor<2x4096x1024xf32>) -> tensor<2x4096x1024xf16>
  %h = trellis.cast %x : (tensor<2x4096x1024xf32>) -> tensor<2x4096x1024xf16>
  // CHECK: trellis.cast %{{.*}} : (tensor<2x4096x1024xf16>) -> tensor<2x4096x1024xf32>
  %back = trellis.cast %h : (tensor<2x4096x1024xf16>) -> tensor<2x4096x1024xf32>
  // CHECK: trellis.cast %{{.*}} : (tensor<?x3xi32, #trellis.bounds<[32768]>>) -> tensor<?x3xf32, #trellis.bounds<[32768]>>
  %f = trellis.cast %i : (tensor<?x3xi32, #trellis.bounds<[32768]>>) -> tensor<?x3xf32, #trellis.bounds<[32768]>>
  return
}

// CHECK-LABEL: func.func @matmul
func.func @matmul(%a: tensor<2x16x4096x64xf16>, %b: tensor<2x16x64x1374xf16>,
                  %m: tensor<?x64xf32, #trellis.bounds<[500]>>, %n: tensor<64x8xf32>,
                  %p: tensor<3x1x5x4xf32>, %q: tensor<7x4x6xf32>) {
  // CHECK: trellis.matmul %{{.*}}, %{{.*}} : (tensor<2x16x4096x64xf16>, tensor<2x16x64x1374xf16>) -> tensor<2x16x4096x1374xf16>
  %s = trellis.matmul %a, %b
         : (tensor<2x16x4096x64xf16>, tensor<2x16x64x1374xf16>)
         -> tensor<2x16x4096x1374xf16>
  // CHECK: trellis.matmul %{{.*}}, %{{.*}} : (tensor<?x64xf32, #trellis.bounds<[500]>>, tensor<64x8xf32>) -> tensor<?x8xf32, #trellis.bounds<[500]>>
  %t = trellis.matmul %m, %n : (tensor<?x64xf32, #trellis.bounds<[500]>>, tensor<64x8xf32>) -> tensor<?x8xf32, #trellis.bounds<[500]>>
  // Batch dimensions broadcast: [3, 1] with [7] gives [3, 7].
  // CHECK: trellis.matmul %{{.*}}, %{{.*}} : (tensor<3x1x5x4xf32>, tensor<7x4x6xf32>) -> tensor<3x7x5x6xf32>
  %u = trellis.matmul %p, %q : (tensor<3x1x5x4xf32>, tensor<7x4x6xf32>) -> tensor<3x7x5x6xf32>
  return
}

// CHECK-LABEL: func.func @norms
func.func @norms(%x: tensor<2x4096x1024xf16>, %v: tensor<1x32x64x64x64xf32>, %gamma: tensor<32xf32>,
                 %beta: tensor<32xf32>, %q: tensor<2x4096x16x64xf16>, %g: tensor<16x64xf32>,
                 %r: tensor<?x1024xf16, #trellis.bounds<[32768]>>, %s: tensor<2x16x4096x1374xf16>) {
  // CHECK: trellis.layer_norm %{{.*}} {eps = 9.9999999999999995E-7 : f64} : (tensor<2x4096x1024xf16>) -> tensor<2x4096x1024xf16>
  // CHECK: trellis.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {axis = 1 : i64, eps = 1.000000e-05 : f64} : (tensor<1x32x64x64x64xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<1x32x64x64x64xf32>
  %h = trellis.layer_norm %x {eps = 1.0e-06 : f64}
         : (tensor<2x4096x1024xf16>) -> tensor<2x4096x1024xf16>
  %c = trellis.layer_norm %v, %gamma, %beta {axis = 1 : i64, eps = 1.0e-05 : f64}
         : (tensor<1x32x64x64x64xf32>, tensor<32xf32>, tensor<32xf32>)
         -> tensor<1x32x64x64x64xf32>
  // Sparse rows: the bounded voxel dimension is not the normalized one.
  // CHECK: trellis.layer_norm %{{.*}} {eps = 1.000000e-05 : f64} : (tensor<?x1024xf16, #trellis.bounds<[32768]>>) -> tensor<?x1024xf16, #trellis.bounds<[32768]>>
  %rn = trellis.layer_norm %r {axis = -1 : i64, eps = 1.0e-05 : f64} : (tensor<?x1024xf16, #trellis.bounds<[32768]>>) -> tensor<?x1024xf16, #trellis.bounds<[32768]>>
  // CHECK: trellis.head_rms_norm %{{.*}}, %{{.*}} : (tensor<2x4096x16x64xf16>, tensor<16x64xf32>) -> tensor<2x4096x16x64xf16>
  %qn = trellis.head_rms_norm %q, %g
          : (tensor<2x4096x16x64xf16>, tensor<16x64xf32>) -> tensor<2x4096x16x64xf16>
  // CHECK: trellis.softmax %{{.*}} : (tensor<2x16x4096x1374xf16>) -> tensor<2x16x4096x1374xf16>
  %p = trellis.softmax %s {axis = -1 : i64}
         : (tensor<2x16x4096x1374xf16>) -> tensor<2x16x4096x1374xf16>
  // CHECK: trellis.softmax %{{.*}} {axis = 1 : i64} : (tensor<2x16x4096x1374xf16>) -> tensor<2x16x4096x1374xf16>
  %p1 = trellis.softmax %s {axis = 1 : i64} : (tensor<2x16x4096x1374xf16>) -> tensor<2x16x4096x1374xf16>
  // CHECK: trellis.reduce %{{.*}} {kind = "sum"} : (tensor<2x16x4096x1374xf16>) -> tensor<2x16x4096xf16>
  %r0 = trellis.reduce %s {kind = "sum"} : (tensor<2x16x4096x1374xf16>) -> tensor<2x16x4096xf16>
  // CHECK: trellis.reduce %{{.*}} {axis = 1 : i64, keepdim = true, kind = "max"} : (tensor<2x16x4096x1374xf16>) -> tensor<2x1x4096x1374xf16>
  %r1 = trellis.reduce %s {kind = "max", axis = 1 : i64, keepdim = true} : (tensor<2x16x4096x1374xf16>) -> tensor<2x1x4096x1374xf16>
  // A bounded dimension that is not reduced keeps its bound.
  // CHECK: trellis.reduce %{{.*}} {kind = "mean"} : (tensor<?x1024xf16, #trellis.bounds<[32768]>>) -> tensor<?xf16, #trellis.bounds<[32768]>>
  %r2 = trellis.reduce %r {kind = "mean"} : (tensor<?x1024xf16, #trellis.bounds<[32768]>>) -> tensor<?xf16, #trellis.bounds<[32768]>>
  // Reducing the only axis gives a rank-0 tensor.
  // CHECK: trellis.reduce %{{.*}} {axis = 0 : i64, kind = "sum"} : (tensor<32xf32>) -> tensor<f32>
  %r3 = trellis.reduce %gamma {kind = "sum", axis = 0 : i64} : (tensor<32xf32>) -> tensor<f32>
  return
}

// CHECK-LABEL: func.func @reduce
func.func @reduce(%x: tensor<2x16x64xf16>) {
  // CHECK: trellis.reduce %{{.*}} {keepdim = true, kind = "mean"} : (tensor<2x16x64xf16>) -> tensor<2x16x1xf16>
  %m = trellis.reduce %x {kind = "mean", axis = -1 : i64, keepdim = true}
         : (tensor<2x16x64xf16>) -> tensor<2x16x1xf16>
  return
}

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<2x4096x16x64xf16>, %k: tensor<2x1374x16x64xf16>, %v: tensor<2x1374x16x64xf16>,
                     %qs: tensor<1x4096x16x64xf32>, %vs: tensor<1x4096x16x32xf32>) {
  // CHECK: trellis.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f64} : (tensor<2x4096x16x64xf16>, tensor<2x1374x16x64xf16>, tensor<2x1374x16x64xf16>) -> tensor<2x4096x16x64xf16>
  %o = trellis.attention %q, %k, %v {scale = 1.250000e-01 : f64}
         : (tensor<2x4096x16x64xf16>, tensor<2x1374x16x64xf16>, tensor<2x1374x16x64xf16>)
         -> tensor<2x4096x16x64xf16>
  // Self-attention with a value head dim different from d.
  // CHECK: trellis.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f64} : (tensor<1x4096x16x64xf32>, tensor<1x4096x16x64xf32>, tensor<1x4096x16x32xf32>) -> tensor<1x4096x16x32xf32>
  %s = trellis.attention %qs, %qs, %vs {scale = 0.125 : f64} : (tensor<1x4096x16x64xf32>, tensor<1x4096x16x64xf32>, tensor<1x4096x16x32xf32>) -> tensor<1x4096x16x32xf32>
  return
}

// CHECK-LABEL: func.func @embeddings
func.func @embeddings(%t: tensor<2xf32>, %xyz: tensor<?x3xi32, #trellis.bounds<[32768]>>, %grid: tensor<4096x3xi32>) {
  // CHECK: trellis.timestep_embedding %{{.*}} : (tensor<2xf32>) -> tensor<2x256xf32>
  %e = trellis.timestep_embedding %t {dim = 256 : i64, max_period = 1.000000e+04 : f64}
         : (tensor<2xf32>) -> tensor<2x256xf32>
  // CHECK: trellis.timestep_embedding %{{.*}} {dim = 64 : i64, max_period = 1.000000e+02 : f64} : (tensor<2xf32>) -> tensor<2x64xf32>
  %e1 = trellis.timestep_embedding %t {dim = 64 : i64, max_period = 100.0 : f64} : (tensor<2xf32>) -> tensor<2x64xf32>
  // CHECK: trellis.ape %{{.*}} {channels = 1024 : i64} : (tensor<?x3xi32, #trellis.bounds<[32768]>>) -> tensor<?x1024xf32, #trellis.bounds<[32768]>>
  %pe = trellis.ape %xyz {channels = 1024 : i64}
          : (tensor<?x3xi32, #trellis.bounds<[32768]>>)
          -> tensor<?x1024xf32, #trellis.bounds<[32768]>>
  // CHECK: trellis.ape %{{.*}} {channels = 768 : i64} : (tensor<4096x3xi32>) -> tensor<4096x768xf32>
  %pe1 = trellis.ape %grid {channels = 768 : i64} : (tensor<4096x3xi32>) -> tensor<4096x768xf32>
  return
}

// CHECK-LABEL: func.func @conv
func.func @conv(%x: tensor<1x512x16x16x16xf16>, %w: tensor<1024x512x3x3x3xf16>, %b: tensor<1024xf16>,
                %z: tensor<1x8x16x16x16xf32>, %w0: tensor<512x8x3x3x3xf32>, %w1: tensor<4x8x1x1x1xf32>) {
  // CHECK: trellis.conv3d %{{.*}}, %{{.*}}, %{{.*}} : (tensor<1x512x16x16x16xf16>, tensor<1024x512x3x3x3xf16>, tensor<1024xf16>) -> tensor<1x1024x16x16x16xf16>
  %y = trellis.conv3d %x, %w, %b {padding = 1 : i64}
         : (tensor<1x512x16x16x16xf16>, tensor<1024x512x3x3x3xf16>, tensor<1024xf16>)
         -> tensor<1x1024x16x16x16xf16>
  // No bias, no padding: 16 - 3 + 1 = 14.
  // CHECK: trellis.conv3d %{{.*}}, %{{.*}} {padding = 0 : i64} : (tensor<1x8x16x16x16xf32>, tensor<512x8x3x3x3xf32>) -> tensor<1x512x14x14x14xf32>
  %y0 = trellis.conv3d %z, %w0 {padding = 0 : i64} : (tensor<1x8x16x16x16xf32>, tensor<512x8x3x3x3xf32>) -> tensor<1x512x14x14x14xf32>
  // A 1x1x1 kernel with padding 1 grows every side: 16 + 2 = 18.
  // CHECK: trellis.conv3d %{{.*}}, %{{.*}} : (tensor<1x8x16x16x16xf32>, tensor<4x8x1x1x1xf32>) -> tensor<1x4x18x18x18xf32>
  %y1 = trellis.conv3d %z, %w1 : (tensor<1x8x16x16x16xf32>, tensor<4x8x1x1x1xf32>) -> tensor<1x4x18x18x18xf32>
  // CHECK: trellis.pixel_shuffle_3d %{{.*}} : (tensor<1x1024x16x16x16xf16>) -> tensor<1x128x32x32x32xf16>
  %s = trellis.pixel_shuffle_3d %y {factor = 2 : i64}
         : (tensor<1x1024x16x16x16xf16>) -> tensor<1x128x32x32x32xf16>
  // CHECK: trellis.pixel_shuffle_3d %{{.*}} {factor = 4 : i64} : (tensor<1x1024x16x16x16xf16>) -> tensor<1x16x64x64x64xf16>
  %s4 = trellis.pixel_shuffle_3d %y {factor = 4 : i64} : (tensor<1x1024x16x16x16xf16>) -> tensor<1x16x64x64x64xf16>
  return
}

// CHECK-LABEL: func.func @layout
func.func @layout(%x: tensor<2x8x16x16x16xf32>, %qkv: tensor<2x4096x3072xf16>,
                  %r: tensor<?x1024xf16, #trellis.bounds<[32768]>>,
                  %h: tensor<?x1024xf16, #trellis.bounds<[32768]>>, %skip: tensor<?x1024xf16, #trellis.bounds<[32768]>>,
                  %u: tensor<?x4xf32, #trellis.bounds<[10]>>, %w: tensor<?x4xf32, #trellis.bounds<[20]>>) {
  // CHECK: trellis.reshape %{{.*}} : (tensor<2x8x16x16x16xf32>) -> tensor<2x8x4096xf32>
  %t = trellis.reshape %x : (tensor<2x8x16x16x16xf32>) -> tensor<2x8x4096xf32>
  // Head split of sparse rows: [N, 1024] -> [N, 16, 64], bound kept.
  // CHECK: trellis.reshape %{{.*}} : (tensor<?x1024xf16, #trellis.bounds<[32768]>>) -> tensor<?x16x64xf16, #trellis.bounds<[32768]>>
  %heads = trellis.reshape %r : (tensor<?x1024xf16, #trellis.bounds<[32768]>>) -> tensor<?x16x64xf16, #trellis.bounds<[32768]>>
  // Flattening rows: the dynamic dimension's bound scales with it.
  // CHECK: trellis.reshape %{{.*}} : (tensor<?x1024xf16, #trellis.bounds<[32768]>>) -> tensor<?xf16, #trellis.bounds<[33554432]>>
  %flat = trellis.reshape %r : (tensor<?x1024xf16, #trellis.bounds<[32768]>>) -> tensor<?xf16, #trellis.bounds<[33554432]>>
  // CHECK: trellis.permute %{{.*}} {perm = array<i64: 0, 2, 1>} : (tensor<2x8x4096xf32>) -> tensor<2x4096x8xf32>
  %p = trellis.permute %t {perm = array<i64: 0, 2, 1>}
         : (tensor<2x8x4096xf32>) -> tensor<2x4096x8xf32>
  // CHECK: trellis.permute %{{.*}} {perm = array<i64: 2, 0, 1>} : (tensor<?x16x64xf16, #trellis.bounds<[32768]>>) -> tensor<64x?x16xf16, #trellis.bounds<[32768]>>
  %pb = trellis.permute %heads {perm = array<i64: 2, 0, 1>} : (tensor<?x16x64xf16, #trellis.bounds<[32768]>>) -> tensor<64x?x16xf16, #trellis.bounds<[32768]>>
  // CHECK: trellis.concat %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<?x1024xf16, #trellis.bounds<[32768]>>, tensor<?x1024xf16, #trellis.bounds<[32768]>>) -> tensor<?x2048xf16, #trellis.bounds<[32768]>>
  %c = trellis.concat %h, %skip {axis = 1 : i64}
         : (tensor<?x1024xf16, #trellis.bounds<[32768]>>, tensor<?x1024xf16, #trellis.bounds<[32768]>>)
         -> tensor<?x2048xf16, #trellis.bounds<[32768]>>
  // Along a dynamic dimension the bounds add up.
  // CHECK: trellis.concat %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<?x4xf32, #trellis.bounds<[10]>>, tensor<?x4xf32, #trellis.bounds<[20]>>) -> tensor<?x4xf32, #trellis.bounds<[30]>>
  %cd = trellis.concat %u, %w {axis = 0 : i64} : (tensor<?x4xf32, #trellis.bounds<[10]>>, tensor<?x4xf32, #trellis.bounds<[20]>>) -> tensor<?x4xf32, #trellis.bounds<[30]>>
  // CHECK: trellis.concat %{{.*}} {axis = -1 : i64} : (tensor<2x8x4096xf32>) -> tensor<2x8x4096xf32>
  %c1 = trellis.concat %t {axis = -1 : i64} : (tensor<2x8x4096xf32>) -> tensor<2x8x4096xf32>
  // CHECK: trellis.split %{{.*}} {axis = 2 : i64, sizes = array<i64: 1024, 1024, 1024>} : (tensor<2x4096x3072xf16>) -> (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>)
  %q, %k, %v = trellis.split %qkv {axis = 2 : i64, sizes = array<i64: 1024, 1024, 1024>}
         : (tensor<2x4096x3072xf16>)
         -> (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>)
  // Splitting the channels of bounded rows keeps the bound.
  // CHECK: trellis.split %{{.*}} {axis = -1 : i64, sizes = array<i64: 1000, 24>} : (tensor<?x1024xf16, #trellis.bounds<[32768]>>) -> (tensor<?x1000xf16, #trellis.bounds<[32768]>>, tensor<?x24xf16, #trellis.bounds<[32768]>>)
  %a:2 = trellis.split %r {axis = -1 : i64, sizes = array<i64: 1000, 24>} : (tensor<?x1024xf16, #trellis.bounds<[32768]>>) -> (tensor<?x1000xf16, #trellis.bounds<[32768]>>, tensor<?x24xf16, #trellis.bounds<[32768]>>)
  return
}
