// RUN: trellis-opt --trellis-gpu-codegen %s | FileCheck %s

// Op classes of a sparse stage: coordinate ops (and what derives from them
// and constants only) are evaluated by the runtime on the host at bind time
// (the host program's op class says so), the sparse attention is a runtime
// library kernel; neither gets a generated kernel.
// (The sparse conv's generated kernels: sparse-features.mlir.)
// CHECK-LABEL: func.func @sparse
func.func @sparse(%ct: tensor<?x4xi32, #trellis.bounds<[4096]>>, %x: tensor<?x64xf16, #trellis.bounds<[4096]>>,
                  %w: tensor<64x3x3x3x64xf16>, %b: tensor<64xf16>, %o: tensor<?x32x3xf32, #trellis.bounds<[4096]>>)
    attributes {trellis.device = "cuda"} {
  %half = trellis.constant dense<5.000000e-01> : tensor<1xf32>
  // Coordinate ops (the HostBound trait) are the runtime's to evaluate; the
  // neighbour map is built by a runtime command (RuntimeOp).
  // CHECK: trellis.sparse.from_tensor
  // CHECK-NOT: trellis.launch
  // CHECK: trellis.sparse.neighbor_map
  // CHECK-NOT: trellis.launch
  // CHECK: trellis.sparse.batch_segments
  // CHECK-NOT: trellis.launch
  // CHECK: trellis.sparse.conv3d {{.*}}trellis.launch
  // CHECK: trellis.sparse.attention
  // CHECK-NOT: trellis.launch
  %c = trellis.sparse.from_tensor %ct {resolution = 16 : i64} : (tensor<?x4xi32, #trellis.bounds<[4096]>>) -> !trellis.coords<resolution = 16, bound = 4096>
  %n = trellis.sparse.neighbor_map %c {kernel = 3 : i64} : (!trellis.coords<resolution = 16, bound = 4096>) -> !trellis.neighbor_map<kernel = 3, bound = 4096>
  %s = trellis.sparse.batch_segments %c : (!trellis.coords<resolution = 16, bound = 4096>) -> !trellis.segments<max_length = 4096, bound = 4096>
  %y = trellis.sparse.conv3d %x, %w, %b neighbors %n : (tensor<?x64xf16, #trellis.bounds<[4096]>>, tensor<64x3x3x3x64xf16>, tensor<64xf16>, !trellis.neighbor_map<kernel = 3, bound = 4096>) -> tensor<?x64xf16, #trellis.bounds<[4096]>>
  %q = trellis.reshape %y : (tensor<?x64xf16, #trellis.bounds<[4096]>>) -> tensor<?x1x64xf16, #trellis.bounds<[4096]>>
  %a = trellis.sparse.attention %q, %q, %q, %s {scale = 1.250000e-01 : f64} : (tensor<?x1x64xf16, #trellis.bounds<[4096]>>, tensor<?x1x64xf16, #trellis.bounds<[4096]>>, tensor<?x1x64xf16, #trellis.bounds<[4096]>>, !trellis.segments<max_length = 4096, bound = 4096>) -> tensor<?x1x64xf16, #trellis.bounds<[4096]>>
  // Host-derived: xyz, ape, and the cast / add / reshape chain on xyz with
  // constants (decode_gs's voxel centres).
  // CHECK: trellis.sparse.xyz
  // CHECK-NOT: trellis.launch
  // CHECK: trellis.ape
  // CHECK-NOT: trellis.launch
  // CHECK: trellis.cast
  // CHECK-NOT: trellis.launch
  // CHECK: trellis.add
  // CHECK-NOT: trellis.launch
  // CHECK: trellis.reshape
  %p = trellis.sparse.xyz %c : (!trellis.coords<resolution = 16, bound = 4096>) -> tensor<?x3xi32, #trellis.bounds<[4096]>>
  %e = trellis.ape %p {channels = 64 : i64} : (tensor<?x3xi32, #trellis.bounds<[4096]>>) -> tensor<?x64xf32, #trellis.bounds<[4096]>>
  %f = trellis.cast %p : (tensor<?x3xi32, #trellis.bounds<[4096]>>) -> tensor<?x3xf32, #trellis.bounds<[4096]>>
  %g = trellis.add %f, %half : (tensor<?x3xf32, #trellis.bounds<[4096]>>, tensor<1xf32>) -> tensor<?x3xf32, #trellis.bounds<[4096]>>
  %r = trellis.reshape %g : (tensor<?x3xf32, #trellis.bounds<[4096]>>) -> tensor<?x1x3xf32, #trellis.bounds<[4096]>>
  // A host value meeting a device one: a kernel (the host value uploaded).
  // CHECK: trellis.add {{.*}}trellis.launch = {{.*}}threads_per_row
  %h = trellis.add %r, %o : (tensor<?x1x3xf32, #trellis.bounds<[4096]>>, tensor<?x32x3xf32, #trellis.bounds<[4096]>>) -> tensor<?x32x3xf32, #trellis.bounds<[4096]>>
  // The cast of the (host) positional embedding is host-derived too.
  // CHECK: trellis.cast
  // CHECK-NOT: trellis.launch
  // CHECK-SAME: -> tensor<?x64xf16
  %k = trellis.cast %e : (tensor<?x64xf32, #trellis.bounds<[4096]>>) -> tensor<?x64xf16, #trellis.bounds<[4096]>>
  // A device value with the same constant keeps its kernel.
  // CHECK: trellis.add {{.*}}trellis.launch
  %l = trellis.add %h, %half : (tensor<?x32x3xf32, #trellis.bounds<[4096]>>, tensor<1xf32>) -> tensor<?x32x3xf32, #trellis.bounds<[4096]>>
  return
}

// Constant-only arithmetic is not host-derived: it keeps its kernel.
// CHECK-LABEL: func.func @constants
// CHECK: trellis.add {{.*}}trellis.launch
func.func @constants() -> tensor<4xf32> attributes {trellis.device = "cuda"} {
  %a = trellis.constant dense<1.000000e+00> : tensor<4xf32>
  %b = trellis.add %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
