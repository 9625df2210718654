// RUN: trellis-opt %s | trellis-opt | FileCheck %s

// The flow sampler and its elementwise building blocks (the examples of
// their descriptions appear here verbatim; check_doc_examples.py checks that).

// CHECK-LABEL: func.func @ss_stage
func.func @ss_stage(%noise: tensor<1x8x16x16x16xf32>, %cond: tensor<1x1374x1024xf32>, %neg: tensor<1x1374x1024xf32>) -> tensor<1x8x16x16x16xf32> {
  // CHECK: %[[R:.*]] = trellis.flow_sample %{{.*}}, %{{.*}}, %{{.*}} {cfg_interval = array<f64: 5.000000e-01, 1.000000e+00>, cfg_strength = 7.500000e+00 : f64, rescale_t = 3.000000e+00 : f64, steps = 25 : i64} : (tensor<1x8x16x16x16xf32>, tensor<1x1374x1024xf32>, tensor<1x1374x1024xf32>) -> tensor<1x8x16x16x16xf32> {
  // CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<1x8x16x16x16xf32>, %{{.*}}: tensor<1xf32>, %{{.*}}: tensor<1x1374x1024xf32>):
  // CHECK-NEXT: %[[V:.*]] = trellis.neg %[[X]] : tensor<1x8x16x16x16xf32>
  // CHECK-NEXT: trellis.yield %[[V]] : tensor<1x8x16x16x16xf32>
  // CHECK-NEXT: }
  // CHECK-NEXT: return %[[R]]
  %x0 = trellis.flow_sample %noise, %cond, %neg
          {cfg_interval = array<f64: 5.000000e-01, 1.000000e+00>, cfg_strength = 7.500000e+00 : f64,
           rescale_t = 3.000000e+00 : f64, steps = 25 : i64}
          : (tensor<1x8x16x16x16xf32>, tensor<1x1374x1024xf32>, tensor<1x1374x1024xf32>)
          -> tensor<1x8x16x16x16xf32> {
  ^bb0(%x: tensor<1x8x16x16x16xf32>, %tau: tensor<1xf32>, %c: tensor<1x1374x1024xf32>):
    %v = trellis.neg %x : tensor<1x8x16x16x16xf32>
    trellis.yield %v : tensor<1x8x16x16x16xf32>
  }
  return %x0 : tensor<1x8x16x16x16xf32>
}

// A sparse stage: the body uses the coordinate set from above (the region is
// not isolated); cond of batch 1 and neg_cond of batch 1 are repeated to B = 2.
// CHECK-LABEL: func.func @slat_stage
func.func @slat_stage(%coords: !trellis.coords<resolution = 64, bound = 32768>,
                      %noise: tensor<?x8xf32, #trellis.bounds<[32768]>>,
                      %cond: tensor<1x1374x1024xf32>, %neg: tensor<1x1374x1024xf32>,
                      %w: tensor<8x8xf32>) -> tensor<?x8xf32, #trellis.bounds<[32768]>> {
  // CHECK: trellis.flow_sample %{{.*}}, %{{.*}}, %{{.*}} {cfg_interval = array<f64: 5.000000e-01, 0.94999999999999996>, cfg_strength = 3.000000e+00 : f64, rescale_t = 3.000000e+00 : f64, sigma_min = 0.000000e+00 : f64, steps = 12 : i64} : (tensor<?x8xf32, #trellis.bounds<[32768]>>, tensor<1x1374x1024xf32>, tensor<1x1374x1024xf32>) -> tensor<?x8xf32, #trellis.bounds<[32768]>>
  // CHECK: ^bb0(%{{.*}}: tensor<?x8xf32, #trellis.bounds<[32768]>>, %{{.*}}: tensor<2xf32>, %{{.*}}: tensor<2x1374x1024xf32>):
  // CHECK: trellis.sparse.batch_broadcast
  // CHECK: trellis.yield %{{.*}} : tensor<?x8xf32, #trellis.bounds<[32768]>>
  %f = trellis.flow_sample %noise, %cond, %neg
         {cfg_interval = array<f64: 0.5, 0.95>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64,
          sigma_min = 0.0 : f64, steps = 12 : i64}
         : (tensor<?x8xf32, #trellis.bounds<[32768]>>, tensor<1x1374x1024xf32>, tensor<1x1374x1024xf32>)
         -> tensor<?x8xf32, #trellis.bounds<[32768]>> {
  ^bb0(%x: tensor<?x8xf32, #trellis.bounds<[32768]>>, %tau: tensor<2xf32>, %c: tensor<2x1374x1024xf32>):
    %e = trellis.timestep_embedding %tau {dim = 8 : i64} : (tensor<2xf32>) -> tensor<2x8xf32>
    %r = trellis.sparse.batch_broadcast %e, %coords
           : (tensor<2x8xf32>, !trellis.coords<resolution = 64, bound = 32768>)
           -> tensor<?x8xf32, #trellis.bounds<[32768]>>
    %h = trellis.linear %x, %w : (tensor<?x8xf32, #trellis.bounds<[32768]>>, tensor<8x8xf32>) -> tensor<?x8xf32, #trellis.bounds<[32768]>>
    %v = trellis.add %h, %r : (tensor<?x8xf32, #trellis.bounds<[32768]>>, tensor<?x8xf32, #trellis.bounds<[32768]>>) -> tensor<?x8xf32, #trellis.bounds<[32768]>>
    trellis.yield %v : tensor<?x8xf32, #trellis.bounds<[32768]>>
  }
  return %f : tensor<?x8xf32, #trellis.bounds<[32768]>>
}

// Multi-image modes: cond holds N_img = 3 image rows; the body sees B = 1.
// CHECK-LABEL: func.func @multi_image
func.func @multi_image(%noise: tensor<1x8x16x16x16xf32>, %cond: tensor<3x1374x1024xf32>, %neg: tensor<1x1374x1024xf32>) {
  // CHECK: trellis.flow_sample {{.*}}multi_image = #trellis.multi_image<stochastic>
  %a = trellis.flow_sample %noise, %cond, %neg
         {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 5.0 : f64, multi_image = #trellis.multi_image<stochastic>,
          rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<1x8x16x16x16xf32>, tensor<3x1374x1024xf32>, tensor<1x1374x1024xf32>) -> tensor<1x8x16x16x16xf32> {
  ^bb0(%x: tensor<1x8x16x16x16xf32>, %tau: tensor<1xf32>, %c: tensor<1x1374x1024xf32>):
    trellis.yield %x : tensor<1x8x16x16x16xf32>
  }
  // CHECK: trellis.flow_sample {{.*}}multi_image = #trellis.multi_image<multidiffusion>
  %b = trellis.flow_sample %noise, %cond, %neg
         {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 5.0 : f64, multi_image = #trellis.multi_image<multidiffusion>,
          rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<1x8x16x16x16xf32>, tensor<3x1374x1024xf32>, tensor<1x1374x1024xf32>) -> tensor<1x8x16x16x16xf32> {
  ^bb0(%x: tensor<1x8x16x16x16xf32>, %tau: tensor<1xf32>, %c: tensor<1x1374x1024xf32>):
    trellis.yield %x : tensor<1x8x16x16x16xf32>
  }
  // The default mode is not printed.
  // CHECK: trellis.flow_sample
  // CHECK-NOT: multi_image
  // CHECK-SAME: : (
  %c = trellis.flow_sample %noise, %neg, %neg
         {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 5.0 : f64, multi_image = #trellis.multi_image<none>,
          rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<1x8x16x16x16xf32>, tensor<1x1374x1024xf32>, tensor<1x1374x1024xf32>) -> tensor<1x8x16x16x16xf32> {
  ^bb0(%x: tensor<1x8x16x16x16xf32>, %tau: tensor<1xf32>, %c: tensor<1x1374x1024xf32>):
    trellis.yield %x : tensor<1x8x16x16x16xf32>
  }
  return
}

// CHECK-LABEL: func.func @euler_cfg
func.func @euler_cfg(%vc: tensor<1x8x16x16x16xf32>, %vu: tensor<1x8x16x16x16xf32>, %x: tensor<1x8x16x16x16xf32>,
                     %r: tensor<?x8xf32, #trellis.bounds<[32768]>>) {
  // CHECK: trellis.cfg_combine %{{.*}}, %{{.*}} {strength = 7.500000e+00 : f64} : (tensor<1x8x16x16x16xf32>, tensor<1x8x16x16x16xf32>) -> tensor<1x8x16x16x16xf32>
  %v = trellis.cfg_combine %vc, %vu {strength = 7.500000e+00 : f64}
         : (tensor<1x8x16x16x16xf32>, tensor<1x8x16x16x16xf32>) -> tensor<1x8x16x16x16xf32>
  // CHECK: trellis.euler_update %{{.*}}, %{{.*}} {dt = 0.01369863 : f64} : (tensor<1x8x16x16x16xf32>, tensor<1x8x16x16x16xf32>) -> tensor<1x8x16x16x16xf32>
  %x1 = trellis.euler_update %x, %v {dt = 0.01369863 : f64}
          : (tensor<1x8x16x16x16xf32>, tensor<1x8x16x16x16xf32>) -> tensor<1x8x16x16x16xf32>
  // CHECK: trellis.cfg_combine %{{.*}}, %{{.*}} {strength = 0.000000e+00 : f64} : (tensor<?x8xf32, #trellis.bounds<[32768]>>, tensor<?x8xf32, #trellis.bounds<[32768]>>) -> tensor<?x8xf32, #trellis.bounds<[32768]>>
  %v2 = trellis.cfg_combine %r, %r {strength = 0.0 : f64} : (tensor<?x8xf32, #trellis.bounds<[32768]>>, tensor<?x8xf32, #trellis.bounds<[32768]>>) -> tensor<?x8xf32, #trellis.bounds<[32768]>>
  // CHECK: trellis.euler_update %{{.*}}, %{{.*}} {dt = 1.111100e-01 : f64} : (tensor<?x8xf32, #trellis.bounds<[32768]>>, tensor<?x8xf32, #trellis.bounds<[32768]>>) -> tensor<?x8xf32, #trellis.bounds<[32768]>>
  %x2 = trellis.euler_update %r, %v2 {dt = 0.11111 : f64} : (tensor<?x8xf32, #trellis.bounds<[32768]>>, tensor<?x8xf32, #trellis.bounds<[32768]>>) -> tensor<?x8xf32, #trellis.bounds<[32768]>>
  return
}

// The two-region form of trellis-specialize-guidance: (x, tau) in both
// regions, the conditions used from above.
// CHECK-LABEL: func.func @ss_stage_specialized
func.func @ss_stage_specialized(%noise: tensor<1x8x16x16x16xf32>, %cond: tensor<1x1374x1024xf32>, %neg: tensor<1x1374x1024xf32>) -> tensor<1x8x16x16x16xf32> {
  // CHECK: trellis.flow_sample
  // CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<1x8x16x16x16xf32>, %{{.*}}: tensor<1xf32>):
  // CHECK-NEXT: %[[V:.*]] = trellis.neg %[[X]] : tensor<1x8x16x16x16xf32>
  // CHECK-NEXT: trellis.yield %[[V]] : tensor<1x8x16x16x16xf32>
  // CHECK-NEXT: } uncond {
  // CHECK-NEXT: ^bb0(%[[XU:.*]]: tensor<1x8x16x16x16xf32>, %{{.*}}: tensor<1xf32>):
  // CHECK-NEXT: trellis.yield %[[XU]] : tensor<1x8x16x16x16xf32>
  // CHECK-NEXT: }
  %x1 = trellis.flow_sample %noise, %cond, %neg
          {cfg_interval = array<f64: 5.000000e-01, 1.000000e+00>, cfg_strength = 7.500000e+00 : f64,
           rescale_t = 3.000000e+00 : f64, steps = 25 : i64}
          : (tensor<1x8x16x16x16xf32>, tensor<1x1374x1024xf32>, tensor<1x1374x1024xf32>)
          -> tensor<1x8x16x16x16xf32> {
  ^bb0(%x: tensor<1x8x16x16x16xf32>, %tau: tensor<1xf32>):
    %v = trellis.neg %x : tensor<1x8x16x16x16xf32>
    trellis.yield %v : tensor<1x8x16x16x16xf32>
  } uncond {
  ^bb0(%x: tensor<1x8x16x16x16xf32>, %tau: tensor<1xf32>):
    trellis.yield %x : tensor<1x8x16x16x16xf32>
  }
  return %x1 : tensor<1x8x16x16x16xf32>
}

// The shared-prefix form of trellis-share-guidance-prefix: the third region
// computes what both branches read (their arguments after (x, tau)).
// CHECK-LABEL: func.func @ss_stage_shared_prefix
func.func @ss_stage_shared_prefix(%noise: tensor<1x8x16x16x16xf32>, %cond: tensor<1x1374x1024xf32>, %neg: tensor<1x1374x1024xf32>) -> tensor<1x8x16x16x16xf32> {
  // CHECK: trellis.flow_sample
  // CHECK-NEXT: ^bb0(%{{.*}}: tensor<1x8x16x16x16xf32>, %{{.*}}: tensor<1xf32>, %[[S:.*]]: tensor<1x8x16x16x16xf32>):
  // CHECK-NEXT: trellis.yield %[[S]] : tensor<1x8x16x16x16xf32>
  // CHECK-NEXT: } uncond {
  // CHECK-NEXT: ^bb0(%[[XU:.*]]: tensor<1x8x16x16x16xf32>, %{{.*}}: tensor<1xf32>, %{{.*}}: tensor<1x8x16x16x16xf32>):
  // CHECK-NEXT: trellis.yield %[[XU]] : tensor<1x8x16x16x16xf32>
  // CHECK-NEXT: } shared {
  // CHECK-NEXT: ^bb0(%[[XS:.*]]: tensor<1x8x16x16x16xf32>, %{{.*}}: tensor<1xf32>):
  // CHECK-NEXT: %[[H:.*]] = trellis.neg %[[XS]] : tensor<1x8x16x16x16xf32>
  // CHECK-NEXT: trellis.shared_yield %[[H]] : tensor<1x8x16x16x16xf32>
  %x1 = trellis.flow_sample %noise, %cond, %neg
          {cfg_interval = array<f64: 5.000000e-01, 1.000000e+00>, cfg_strength = 7.500000e+00 : f64,
           rescale_t = 3.000000e+00 : f64, steps = 25 : i64}
          : (tensor<1x8x16x16x16xf32>, tensor<1x1374x1024xf32>, tensor<1x1374x1024xf32>)
          -> tensor<1x8x16x16x16xf32> {
  ^bb0(%x: tensor<1x8x16x16x16xf32>, %tau: tensor<1xf32>, %s: tensor<1x8x16x16x16xf32>):
    trellis.yield %s : tensor<1x8x16x16x16xf32>
  } uncond {
  ^bb0(%x: tensor<1x8x16x16x16xf32>, %tau: tensor<1xf32>, %s: tensor<1x8x16x16x16xf32>):
    trellis.yield %x : tensor<1x8x16x16x16xf32>
  } shared {
  ^bb0(%x: tensor<1x8x16x16x16xf32>, %tau: tensor<1xf32>):
    %h = trellis.neg %x : tensor<1x8x16x16x16xf32>
    trellis.shared_yield %h : tensor<1x8x16x16x16xf32>
  }
  return %x1 : tensor<1x8x16x16x16xf32>
}

// The time tables of trellis-hoist-time: the grid's model times and the row
// of a table that belongs to τ.
// CHECK-LABEL: func.func @time_tables
func.func @time_tables(%table: tensor<64x6144xf16>, %tau: tensor<1xf32>) -> tensor<1x6144xf16> {
  // CHECK: %[[G:.*]] = trellis.time_grid {rescale_t = 3.000000e+00 : f64, steps = 25 : i64} : () -> tensor<64xf32>
  %g = trellis.time_grid {rescale_t = 3.000000e+00 : f64, steps = 25 : i64} : () -> tensor<64xf32>
  // CHECK: trellis.time_row %{{.*}}, %[[G]], %{{.*}} : (tensor<64x6144xf16>, tensor<64xf32>, tensor<1xf32>) -> tensor<1x6144xf16>
  %r = trellis.time_row %table, %g, %tau
         : (tensor<64x6144xf16>, tensor<64xf32>, tensor<1xf32>) -> tensor<1x6144xf16>
  return %r : tensor<1x6144xf16>
}
