// RUN: trellis-opt --trellis-tile-attention %s -split-input-file -verify-diagnostics | FileCheck %s
// RUN: trellis-opt --trellis-tile-attention=multiprocessors=96 %s -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=SM96
// RUN: not trellis-opt --trellis-tile-attention=multiprocessors=0 %s -split-input-file 2>&1 | FileCheck %s --check-prefix=ZERO

// Per family (sm_90a, compute_80, compute_75) the kernels an attention op may
// run (runtime/kernels/attention.h), the short-sequence default first.

// Static lengths: decided here. The dense flow's self-attention (the CFG
// pair, 4096 tokens, d = 64): 256-row tiles fill the waves of 132 SMs best.
// A short sequence and other head dims: the defaults.
// CHECK-LABEL: func.func @dense
// CHECK: trellis.attention {{.*}}tiles = ["trellis_attn_sm90_d64_m256_n64_s4_mbrs", "trellis_attn_sm80_d64_m128_n64_s2", "trellis_attn_sm75_d64_m64_n64_s1"]
// CHECK: trellis.attention {{.*}}tiles = ["trellis_attn_sm90_d64_m128_n64_s4", "trellis_attn_sm80_d64_m128_n64_s2", "trellis_attn_sm75_d64_m64_n64_s1"]
// CHECK: trellis.attention {{.*}}tiles = ["trellis_attn_sm90_d80_m128_n64_s4", "trellis_attn_sm80_d80_m128_n64_s2", "trellis_attn_sm75_d80_m64_n64_s1"]
// CHECK: trellis.attention {{.*}}tiles = ["trellis_attn_sm90_d128_m128_n128_s3", "trellis_attn_sm80_d128_m128_n64_s2", "trellis_attn_sm75_d128_m64_n64_s1"]
// 2048 tokens: on 132 SMs 256-row tiles need 2 waves, 192-row ones 3; on 96
// SMs 3 and 4, and 4 × 192 / 428 < 3 × 256 / 417 (and at 4096 tokens 8 and
// 6 waves: 8 × 192 / 428 < 6 × 256 / 417).
// CHECK: trellis.attention {{.*}}tiles = ["trellis_attn_sm90_d64_m256_n64_s4_mbrs",
// SM96-LABEL: func.func @dense
// SM96: trellis.attention {{.*}}tiles = ["trellis_attn_sm90_d64_m192_n128_s3_mbrs",
// SM96: trellis.attention
// SM96: trellis.attention
// SM96: trellis.attention
// SM96: trellis.attention {{.*}}tiles = ["trellis_attn_sm90_d64_m192_n128_s3_mbrs",
func.func @dense(%a: tensor<2x4096x16x64xf16>, %b: tensor<1x512x16x64xf16>,
                 %c: tensor<1x512x8x80xf16>, %d: tensor<1x512x8x128xf16>,
                 %e: tensor<2x2048x16x64xf16>) {
  %0 = trellis.attention %a, %a, %a {scale = 0.125 : f64} : (tensor<2x4096x16x64xf16>, tensor<2x4096x16x64xf16>, tensor<2x4096x16x64xf16>) -> tensor<2x4096x16x64xf16>
  %1 = trellis.attention %b, %b, %b {scale = 0.125 : f64} : (tensor<1x512x16x64xf16>, tensor<1x512x16x64xf16>, tensor<1x512x16x64xf16>) -> tensor<1x512x16x64xf16>
  %2 = trellis.attention %c, %c, %c {scale = 0.125 : f64} : (tensor<1x512x8x80xf16>, tensor<1x512x8x80xf16>, tensor<1x512x8x80xf16>) -> tensor<1x512x8x80xf16>
  %3 = trellis.attention %d, %d, %d {scale = 0.125 : f64} : (tensor<1x512x8x128xf16>, tensor<1x512x8x128xf16>, tensor<1x512x8x128xf16>) -> tensor<1x512x8x128xf16>
  %4 = trellis.attention %e, %e, %e {scale = 0.125 : f64} : (tensor<2x2048x16x64xf16>, tensor<2x2048x16x64xf16>, tensor<2x2048x16x64xf16>) -> tensor<2x2048x16x64xf16>
  return
}

// -----

// Lengths known at run time. Swin windows (segments of at most 512 rows) are
// never long: the default alone. Full attention over a sample's voxels and
// the cross-attention of a sample's rows may be: the default, then the
// long-sequence candidates the runtime chooses among.
// CHECK-LABEL: func.func @sparse
// CHECK: trellis.sparse.attention {{.*}}tiles = ["trellis_attn_sm90_d64_m128_n64_s4", "trellis_attn_sm80_d64_m128_n64_s2", "trellis_attn_sm75_d64_m64_n64_s1"]
// CHECK: trellis.sparse.attention {{.*}}tiles = ["trellis_attn_sm90_d64_m128_n64_s4", "trellis_attn_sm90_d64_m192_n128_s3_mbrs", "trellis_attn_sm90_d64_m256_n64_s4_mbrs", "trellis_attn_sm80_d64_m128_n64_s2", "trellis_attn_sm75_d64_m64_n64_s1"]
// CHECK: trellis.sparse.cross_attention {{.*}}tiles = ["trellis_attn_sm90_d64_m128_n64_s4", "trellis_attn_sm90_d64_m192_n128_s3_mbrs", "trellis_attn_sm90_d64_m256_n64_s4_mbrs", "trellis_attn_sm80_d64_m128_n64_s2", "trellis_attn_sm75_d64_m64_n64_s1"]
func.func @sparse(%q: tensor<?x12x64xf16, #trellis.bounds<[32768]>>,
                  %w: !trellis.segments<max_length = 512, bound = 32768>,
                  %s: !trellis.segments<max_length = 32768, bound = 32768>,
                  %ctx: tensor<1x1374x12x64xf16>,
                  %c: !trellis.coords<resolution = 64, bound = 32768>) {
  %0 = trellis.sparse.attention %q, %q, %q, %w {scale = 1.250000e-01 : f64} : (tensor<?x12x64xf16, #trellis.bounds<[32768]>>, tensor<?x12x64xf16, #trellis.bounds<[32768]>>, tensor<?x12x64xf16, #trellis.bounds<[32768]>>, !trellis.segments<max_length = 512, bound = 32768>) -> tensor<?x12x64xf16, #trellis.bounds<[32768]>>
  %1 = trellis.sparse.attention %q, %q, %q, %s {scale = 1.250000e-01 : f64} : (tensor<?x12x64xf16, #trellis.bounds<[32768]>>, tensor<?x12x64xf16, #trellis.bounds<[32768]>>, tensor<?x12x64xf16, #trellis.bounds<[32768]>>, !trellis.segments<max_length = 32768, bound = 32768>) -> tensor<?x12x64xf16, #trellis.bounds<[32768]>>
  %2 = trellis.sparse.cross_attention %q, %ctx, %ctx, %c {scale = 1.250000e-01 : f64} : (tensor<?x12x64xf16, #trellis.bounds<[32768]>>, tensor<1x1374x12x64xf16>, tensor<1x1374x12x64xf16>, !trellis.coords<resolution = 64, bound = 32768>) -> tensor<?x12x64xf16, #trellis.bounds<[32768]>>
  return
}

// -----

// A head dim no family has a kernel for: an error at the op.
func.func @no_kernel(%q: tensor<1x64x4x96xf16>) {
  // expected-error @+1 {{'trellis.attention' op cannot run on the GPU: no attention kernel of the sm_90a family for head dim 96 (runtime/kernels/attention.h has 64, 80 and 128)}}
  %0 = trellis.attention %q, %q, %q {scale = 0.125 : f64} : (tensor<1x64x4x96xf16>, tensor<1x64x4x96xf16>, tensor<1x64x4x96xf16>) -> tensor<1x64x4x96xf16>
  return
}

// ZERO: trellis-tile-attention: multiprocessors must be >= 1, found 0
