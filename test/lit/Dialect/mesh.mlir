// RUN: trellis-opt %s | trellis-opt | FileCheck %s

// Mesh extraction (the example of its description appears here verbatim;
// check_doc_examples.py checks that).

// Bounds: vertices <= 108 n, triangles <= 162 n for a coordinate bound n.
// CHECK-LABEL: func.func @flexicubes
func.func @flexicubes(%c: !trellis.coords<resolution = 256, bound = 65536>, %fields: tensor<?x101xf32, #trellis.bounds<[65536]>>,
                      %c2: !trellis.coords<resolution = 128, bound = 10>, %f2: tensor<?x101xf32, #trellis.bounds<[10]>>) {
  // CHECK: trellis.mesh.flexicubes %{{.*}}, %{{.*}} : (!trellis.coords<resolution = 256, bound = 65536>, tensor<?x101xf32, #trellis.bounds<[65536]>>) -> (tensor<?x3xf32, #trellis.bounds<[7077888]>>, tensor<?x3xi32, #trellis.bounds<[10616832]>>, tensor<?x6xf32, #trellis.bounds<[7077888]>>)
  %v, %f, %a = trellis.mesh.flexicubes %c, %fields {resolution = 256 : i64}
         : (!trellis.coords<resolution = 256, bound = 65536>, tensor<?x101xf32, #trellis.bounds<[65536]>>)
         -> (tensor<?x3xf32, #trellis.bounds<[7077888]>>, tensor<?x3xi32, #trellis.bounds<[10616832]>>,
             tensor<?x6xf32, #trellis.bounds<[7077888]>>)
  // CHECK: trellis.mesh.flexicubes %{{.*}}, %{{.*}} {resolution = 128 : i64} : (!trellis.coords<resolution = 128, bound = 10>, tensor<?x101xf32, #trellis.bounds<[10]>>) -> (tensor<?x3xf32, #trellis.bounds<[1080]>>, tensor<?x3xi32, #trellis.bounds<[1620]>>, tensor<?x6xf32, #trellis.bounds<[1080]>>)
  %m:3 = trellis.mesh.flexicubes %c2, %f2 {resolution = 128 : i64} : (!trellis.coords<resolution = 128, bound = 10>, tensor<?x101xf32, #trellis.bounds<[10]>>) -> (tensor<?x3xf32, #trellis.bounds<[1080]>>, tensor<?x3xi32, #trellis.bounds<[1620]>>, tensor<?x6xf32, #trellis.bounds<[1080]>>)
  return
}
