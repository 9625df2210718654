// RUN: trellis-opt %s -split-input-file -verify-diagnostics | trellis-opt -split-input-file | FileCheck %s

// Types and attributes of the dialect: valid ones round-trip, invalid ones
// are rejected by their verifiers.

// CHECK-LABEL: func.func @types
// CHECK-SAME: !trellis.coords<resolution = 64, bound = 32768>
// CHECK-SAME: !trellis.neighbor_map<kernel = 3, bound = 32768>
// CHECK-SAME: !trellis.segments<max_length = 512, bound = 32768>
// CHECK-SAME: tensor<?x1024xf16, #trellis.bounds<[32768]>>
// CHECK-SAME: tensor<?x?x8xf32, #trellis.bounds<[4, 100]>>
// CHECK-SAME: !trellis.coords<resolution = 1024, bound = 1>
// CHECK-SAME: !trellis.neighbor_map<kernel = 1, bound = 1>
// CHECK-SAME: !trellis.segments<max_length = 1, bound = 1>
func.func @types(%c: !trellis.coords<resolution = 64, bound = 32768>,
                 %n: !trellis.neighbor_map<kernel = 3, bound = 32768>,
                 %s: !trellis.segments<max_length = 512, bound = 32768>,
                 %t: tensor<?x1024xf16, #trellis.bounds<[32768]>>,
                 %u: tensor<?x?x8xf32, #trellis.bounds<[4, 100]>>,
                 %c1: !trellis.coords<resolution = 1024, bound = 1>,
                 %n1: !trellis.neighbor_map<kernel = 1, bound = 1>,
                 %s1: !trellis.segments<max_length = 1, bound = 1>) {
  return
}

// -----

// CHECK-LABEL: func.func @multi_image_attr
// CHECK-SAME: attributes {mode = #trellis.multi_image<multidiffusion>}
func.func @multi_image_attr() attributes {mode = #trellis.multi_image<multidiffusion>} {
  return
}

// -----

// expected-error @+1 {{coordinate resolution must be in [1, 1024], found 2048}}
func.func @coords_resolution(%c: !trellis.coords<resolution = 2048, bound = 8>) {
  return
}

// -----

// expected-error @+1 {{coordinate resolution must be in [1, 1024], found 0}}
func.func @coords_resolution_zero(%c: !trellis.coords<resolution = 0, bound = 8>) {
  return
}

// -----

// expected-error @+1 {{coordinate set bound must be >= 1, found 0}}
func.func @coords_bound(%c: !trellis.coords<resolution = 64, bound = 0>) {
  return
}

// -----

// expected-error @+1 {{neighbour map kernel must be odd and >= 1, found 2}}
func.func @neighbor_map_kernel(%n: !trellis.neighbor_map<kernel = 2, bound = 8>) {
  return
}

// -----

// expected-error @+1 {{neighbour map bound must be >= 1, found 0}}
func.func @neighbor_map_bound(%n: !trellis.neighbor_map<kernel = 3, bound = 0>) {
  return
}

// -----

// expected-error @+1 {{segment max_length must be >= 1, found 0}}
func.func @segments_max_length(%s: !trellis.segments<max_length = 0, bound = 8>) {
  return
}

// -----

// expected-error @+1 {{segments bound must be >= 1, found -1}}
func.func @segments_bound(%s: !trellis.segments<max_length = 8, bound = -1>) {
  return
}

// -----

// An empty bound list does not parse (the verifier's "needs at least one
// bound" guards C++ builders).
// expected-error @+2 {{expected integer value}}
// expected-error @+1 {{failed to parse Trellis_BoundsAttr parameter 'max'}}
func.func @bounds_empty(%t: tensor<?x8xf32, #trellis.bounds<[]>>) {
  return
}

// -----

// expected-error @+1 {{#trellis.bounds entries must be >= 1, found 0}}
func.func @bounds_zero(%t: tensor<?x8xf32, #trellis.bounds<[0]>>) {
  return
}

// -----

// expected-error @+2 {{expected ::mlir::trellis::MultiImageMode to be one of: none, stochastic, multidiffusion}}
// expected-error @+1 {{failed to parse Trellis_MultiImageModeAttr parameter 'value'}}
func.func @multi_image_unknown() attributes {mode = #trellis.multi_image<sometimes>} {
  return
}
