//===- Mesh.h - The mesh decoder's result and its files -------------------===//
//
// A triangle mesh as FlexiCubes extraction leaves it (spec §7.4 item 6): z-up
// world coordinates in about [-0.5, 0.5]^3, triangles, optional vertex colours
// (the first 3 of the 6 vertex attributes, already in [0,1]). Files:
//
//  * writeMeshPly: binary little-endian PLY; `vertex` with float x,y,z (and
//    uchar red,green,blue when there are colours), `face` with
//    `list uchar int vertex_indices`. Coordinates are written as given (z up).
//  * writeMeshGlb: glTF 2.0 binary through tinygltf, converted to glTF's y-up
//    frame as TRELLIS's to_glb does (spec §9.2 step 5): (x,y,z) -> (x,z,-y).
//    Vertex colours become COLOR_0; optional simplification through
//    meshoptimizer first.
//  * analyzeMesh: edge/vertex manifoldness, boundary and component counts
//    (computed from the faces, never assumed).
//
// No LLVM here; errors are values (Status / Result).
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_OUTPUT_MESH_H
#define TRELLIS_OUTPUT_MESH_H

#include "trellis/Support/HostTensor.h"
#include "trellis/Support/Result.h"

#include <cstdint>
#include <string>

namespace trellis::output {

struct Mesh {
  HostTensor vertices;     ///< [V, 3] F32, z-up world coordinates
  HostTensor faces;        ///< [F, 3] I32 or I64, indices into vertices
  HostTensor vertexColors; ///< [V, 3] F32 in [0,1]; leave undefined for none

  bool hasColors() const { return vertexColors.defined(); }
  int64_t numVertices() const;
  int64_t numFaces() const;
  /// Checks dtypes, shapes and that every index is in [0, V); the message
  /// names the tensor (and the first bad face).
  Status validate() const;
};

/// A Mesh from the extraction result: vertices [V,3] F32, faces [F,3] I32/I64,
/// vertex_attrs [V,6] F32 (channels 0-2 colour); `vertexAttrs` may be
/// undefined. The colours are copied, the other tensors shared.
Result<Mesh> meshFromExtractResult(const HostTensor &vertices,
                                   const HostTensor &faces,
                                   const HostTensor &vertexAttrs);

/// What analyzeMesh found. Edges are undirected; degenerate faces (a repeated
/// vertex index) are counted and left out of the edge and vertex analysis.
struct MeshReport {
  int64_t vertices = 0;        ///< V (all, referenced or not)
  int64_t faces = 0;           ///< F (all)
  int64_t degenerateFaces = 0; ///< faces with a repeated index
  int64_t unreferencedVertices = 0;
  int64_t edges = 0;            ///< distinct undirected edges
  int64_t boundaryEdges = 0;    ///< edges of exactly 1 face
  int64_t nonManifoldEdges = 0; ///< edges of 3 or more faces
  /// Edges of exactly 2 faces that traverse them in the same direction.
  int64_t inconsistentEdges = 0;
  /// Vertices whose incident faces form more than one edge-connected fan.
  int64_t nonManifoldVertices = 0;
  /// Connected components of the faces (sharing a vertex connects).
  int64_t components = 0;
  /// V_referenced - E + F_nondegenerate.
  int64_t eulerCharacteristic = 0;

  /// No non-manifold edge or vertex.
  bool manifold = false;
  /// Every edge has exactly 2 faces (closed), F > 0.
  bool watertight = false;
  /// No non-manifold edge, and every 2-face edge is traversed in opposite
  /// directions by its faces (the winding is consistent; whether it points
  /// outward is not checked). Non-manifold vertices do not matter here.
  bool consistentlyOriented = false;
};

Result<MeshReport> analyzeMesh(const Mesh &mesh);
/// One line: "V=.. F=.. edges=.. boundary=.. non-manifold edges=.. ...".
std::string formatMeshReport(const MeshReport &r);

/// Quadric simplification with meshoptimizer (meshopt_simplify) to
/// round(ratio * F) faces, ratio in (0, 1]; ratio 1 returns the mesh
/// unchanged. `targetError` is meshoptimizer's relative error bound (a
/// fraction of the mesh extent); the default 1 lets it reach the face target
/// wherever the topology allows (TRELLIS's pyvista decimation has no error
/// bound either). Vertices no face uses any more are dropped; the survivors
/// keep their order. Faces come back as I32.
Result<Mesh> simplifyMesh(const Mesh &mesh, double ratio,
                          float targetError = 1.0f);

Status writeMeshPly(const std::string &path, const Mesh &mesh);

struct GlbOptions {
  /// Fraction of the faces to keep (1 = no simplification). TRELLIS's
  /// to_glb(simplify=0.95) removes 95%: simplifyRatio = 0.05.
  double simplifyRatio = 1.0;
  /// meshoptimizer's relative error bound (see simplifyMesh).
  float simplifyTargetError = 1.0f;
  /// true: KHR_materials_unlit (the vertex colours are shown as they are);
  /// false: metallic-roughness PBR, base colour white, metallic 0,
  /// roughness 1. doubleSided is false either way.
  bool unlit = false;
};

struct GlbInfo {
  int64_t verticesBefore = 0, facesBefore = 0; ///< the mesh given
  int64_t verticesAfter = 0, facesAfter = 0;   ///< what the GLB holds
  uint64_t bytes = 0;                          ///< size of the .glb
};

/// Writes a single-mesh, single-node glTF 2.0 binary: POSITION (F32 VEC3, y
/// up, with min/max), COLOR_0 (F32 VEC3, clamped to [0,1]) when the mesh has
/// colours, indices UNSIGNED_INT, one material. Refuses empty meshes and
/// non-finite coordinates (glTF forbids them).
Result<GlbInfo> writeMeshGlb(const std::string &path, const Mesh &mesh,
                             const GlbOptions &options = {});

} // namespace trellis::output

#endif // TRELLIS_OUTPUT_MESH_H
