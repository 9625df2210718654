//===- FlexiCubes.h - Sparse FlexiCubes mesh extraction (CPU) -------------===//
//
// FlexiCubes inference-mode extraction from the mesh decoder's head output
// (spec §7.4 steps 1-6), run sparsely over the candidate cubes (the active
// cubes and every cube sharing a lattice vertex with one) in ascending flat
// index order instead of over the dense R^3 grid.
//
// Input: coords I32 [N,4] as (batch, x, y, z) at resolution R (cubes in
// [0,R)^3), fields F32 [N,101] in the head layout of §7.4. Only batch 0 is
// extracted; rows of other batch items are ignored.
//
// The dual-vertex tables are derived from the dual-marching-cubes definition
// by tools/flexicubes-tables (runtime/mesh/FlexiCubesTables.inc); see there for
// the grouping rule, and FlexiCubes.cpp for the ambiguous-face handling. They
// are not FlexiCubes' own tables: in ambiguous configurations the dual-vertex
// grouping (hence V, F and the order) may differ from TRELLIS's output.
//
// No LLVM here; errors are values (Status / Result).
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_MESH_FLEXICUBES_H
#define TRELLIS_MESH_FLEXICUBES_H

#include "trellis/Support/HostTensor.h"
#include "trellis/Support/Result.h"

#include <cstdint>

namespace trellis::mesh {

/// Channels of one cube in the decoder's head output.
inline constexpr int kMeshHeadChannels = 101;

struct MeshResult {
  HostTensor vertices; ///< [V,3] F32, world coordinates in about [-0.5,0.5]^3
  HostTensor faces;    ///< [F,3] I32
  HostTensor vertexAttrs; ///< [V,6] F32 in [0,1]
  int64_t candidateCubes = 0;
  int64_t surfaceCubes = 0;
  /// Cubes switched to their inside-corner grouping on an ambiguous face.
  int64_t resolvedAmbiguities = 0;
  bool success() const { return vertices.numel() > 0 && faces.numel() > 0; }
};

/// The input checks both extractions make (CPU here, GPU in
/// GpuExecutor::extractFlexiCubes): resolution in [1, 1024], coords I32
/// [N, 4], fields F32 [N, 101]; the error names the offending input.
Status checkFlexiCubesInput(const HostTensor &coords, const HostTensor &fields,
                            int resolution);

/// FlexiCubes extraction (weight_scale 0.99, inference mode). An empty mesh
/// (V = F = 0) when there is no surface cube.
Result<MeshResult> extractFlexiCubes(const HostTensor &coords,
                                     const HostTensor &fields, int resolution);

namespace tables {
/// Read access to the generated tables (for tests).
int numDualVertices(int caseId);
/// Edge index of member `i` (0..6) of dual vertex `g` of `caseId`, -1 unused.
int dualGroupEdge(int caseId, int g, int i);
int altNumDualVertices(int caseId);
int altDualGroupEdge(int caseId, int g, int i);
/// Bit (2*axis + side) set when that cube face is ambiguous.
int ambiguousFaces(int caseId);
/// The corners (a, b) of cube edge e in the spec's order.
int edgeCorner(int e, int end);
} // namespace tables

} // namespace trellis::mesh

#endif // TRELLIS_MESH_FLEXICUBES_H
