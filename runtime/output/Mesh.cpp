//===- Mesh.cpp - Mesh checks, report, simplification and PLY -------------===//
#include "trellis/Output/Mesh.h"

#include "trellis/Support/AtomicFile.h"

#include "runtime/output/MeshUtil.h"
#include "runtime/output/OutputUtil.h"

#include <meshoptimizer.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

namespace trellis::output {

static_assert(std::endian::native == std::endian::little,
              "the PLY writer assumes a little-endian host");

int64_t Mesh::numVertices() const {
  return vertices.defined() && vertices.rank() >= 1 ? vertices.dim(0) : 0;
}

int64_t Mesh::numFaces() const {
  return faces.defined() && faces.rank() >= 1 ? faces.dim(0) : 0;
}

Status Mesh::validate() const {
  const int64_t v = numVertices(), f = numFaces();
  if (Status s = detail::checkTensor("mesh tensor", "vertices", vertices,
                                     DType::F32, {v, 3});
      !s)
    return s;
  if (!faces.defined())
    return Error{"mesh tensor 'faces' is missing (expected I32 or I64 [F, 3])"};
  DType fd = faces.dtype() == DType::I64 ? DType::I64 : DType::I32;
  if (Status s = detail::checkTensor("mesh tensor", "faces", faces, fd, {f, 3});
      !s)
    return s;
  if (hasColors()) {
    if (Status s = detail::checkTensor("mesh tensor", "vertex_colors",
                                       vertexColors, DType::F32, {v, 3});
        !s)
      return s;
  }
  for (int64_t i = 0; i < f; ++i)
    for (int c = 0; c < 3; ++c) {
      int64_t idx = detail::faceIndex(faces, i * 3 + c);
      if (idx < 0 || idx >= v)
        return Error{"mesh face " + std::to_string(i) + " refers to vertex " +
                     std::to_string(idx) + ", but the mesh has " +
                     std::to_string(v) + " vertices"};
    }
  return Status::ok();
}

Result<Mesh> meshFromExtractResult(const HostTensor &vertices,
                                   const HostTensor &faces,
                                   const HostTensor &vertexAttrs) {
  Mesh mesh;
  mesh.vertices = vertices;
  mesh.faces = faces;
  if (vertexAttrs.defined()) {
    int64_t v = mesh.numVertices();
    if (Status s = detail::checkTensor("mesh tensor", "vertex_attrs",
                                       vertexAttrs, DType::F32, {v, 6});
        !s)
      return Error{s.message()};
    HostTensor colors(DType::F32, {v, 3});
    const float *src = vertexAttrs.data<float>();
    float *dst = colors.mutableData<float>();
    for (int64_t i = 0; i < v; ++i)
      for (int c = 0; c < 3; ++c)
        dst[i * 3 + c] = src[i * 6 + c];
    mesh.vertexColors = colors;
  }
  TRELLIS_RETURN_IF_ERROR(mesh.validate());
  return mesh;
}

//===----------------------------------------------------------------------===//
// Report
//===----------------------------------------------------------------------===//

namespace {
struct UnionFind {
  std::vector<uint32_t> parent;
  explicit UnionFind(size_t n) : parent(n) {
    std::iota(parent.begin(), parent.end(), 0u);
  }
  uint32_t find(uint32_t a) {
    while (parent[a] != a) {
      parent[a] = parent[parent[a]];
      a = parent[a];
    }
    return a;
  }
  void unite(uint32_t a, uint32_t b) {
    a = find(a);
    b = find(b);
    if (a != b)
      parent[std::max(a, b)] = std::min(a, b);
  }
};

struct HalfEdge {
  uint64_t key;      // (lo << 32) | hi, lo < hi
  uint32_t cornerLo; // corner (3 f + i) of the face at the lo vertex
  uint32_t cornerHi; // corner at the hi vertex
  bool forward;      // the face traverses lo -> hi
};
} // namespace

Result<MeshReport> analyzeMesh(const Mesh &mesh) {
  TRELLIS_RETURN_IF_ERROR(mesh.validate());
  const int64_t nv = mesh.numVertices(), nf = mesh.numFaces();
  if (nv > int64_t(std::numeric_limits<uint32_t>::max()) ||
      nf * 3 > int64_t(std::numeric_limits<uint32_t>::max()))
    return Error{"mesh too large to analyze (" + std::to_string(nv) +
                 " vertices, " + std::to_string(nf) + " faces)"};
  std::vector<uint32_t> idx = detail::facesAsU32(mesh.faces);

  MeshReport r;
  r.vertices = nv;
  r.faces = nf;

  std::vector<char> referenced(size_t(nv), 0);
  std::vector<char> degenerate(size_t(nf), 0);
  UnionFind vertexSets(static_cast<size_t>(nv));
  std::vector<HalfEdge> edges;
  edges.reserve(size_t(nf) * 3);
  for (int64_t f = 0; f < nf; ++f) {
    const uint32_t *v = &idx[size_t(f) * 3];
    for (int c = 0; c < 3; ++c)
      referenced[v[c]] = 1;
    vertexSets.unite(v[0], v[1]);
    vertexSets.unite(v[0], v[2]);
    if (v[0] == v[1] || v[1] == v[2] || v[0] == v[2]) {
      degenerate[size_t(f)] = 1;
      ++r.degenerateFaces;
      continue;
    }
    for (int c = 0; c < 3; ++c) {
      uint32_t a = v[c], b = v[(c + 1) % 3];
      uint32_t ca = uint32_t(f * 3 + c), cb = uint32_t(f * 3 + (c + 1) % 3);
      if (a < b)
        edges.push_back({uint64_t(a) << 32 | b, ca, cb, true});
      else
        edges.push_back({uint64_t(b) << 32 | a, cb, ca, false});
    }
  }
  // Grouped by key in linear time (a comparison sort of the ~6 half-edges
  // per vertex took a second at image-large's ~1M vertices): a counting sort
  // by the lo vertex, then each vertex's few edges by the hi vertex.
  {
    std::vector<uint32_t> start(size_t(nv) + 1, 0);
    for (const HalfEdge &e : edges)
      ++start[size_t(e.key >> 32) + 1];
    for (size_t v = 0; v < size_t(nv); ++v)
      start[v + 1] += start[v];
    std::vector<HalfEdge> byLo(edges.size());
    std::vector<uint32_t> next(start.begin(), start.end() - 1);
    for (const HalfEdge &e : edges)
      byLo[next[size_t(e.key >> 32)]++] = e;
    for (size_t v = 0; v < size_t(nv); ++v)
      std::stable_sort(
          byLo.begin() + start[v], byLo.begin() + start[v + 1],
          [](const HalfEdge &x, const HalfEdge &y) { return x.key < y.key; });
    edges.swap(byLo);
  }

  // Corners at the same vertex are joined when their faces share an edge
  // there; more than one group at a vertex means it is not a manifold vertex.
  UnionFind corners(size_t(nf) * 3);
  const HalfEdge *he = edges.data();
  const size_t ne = edges.size();
  for (size_t i = 0; i < ne;) {
    size_t j = i + 1;
    while (j < ne && he[j].key == he[i].key)
      ++j;
    size_t k = j - i;
    ++r.edges;
    if (k == 1)
      ++r.boundaryEdges;
    else if (k == 2 && he[i].forward == he[i + 1].forward)
      ++r.inconsistentEdges;
    else if (k > 2)
      ++r.nonManifoldEdges;
    for (size_t e = i + 1; e < j; ++e) {
      corners.unite(he[i].cornerLo, he[e].cornerLo);
      corners.unite(he[i].cornerHi, he[e].cornerHi);
    }
    i = j;
  }
  // A vertex whose corners fall into two or more fans (corner groups) is not
  // manifold: the first fan root seen at each vertex, and whether another
  // one appears.
  constexpr uint32_t kNoFan = std::numeric_limits<uint32_t>::max();
  std::vector<uint32_t> firstFan(size_t(nv), kNoFan);
  std::vector<char> severalFans(size_t(nv), 0);
  for (int64_t f = 0; f < nf; ++f) {
    if (degenerate[size_t(f)])
      continue;
    for (int c = 0; c < 3; ++c) {
      uint32_t v = idx[size_t(f) * 3 + c];
      uint32_t fan = corners.find(uint32_t(f * 3 + c));
      if (firstFan[v] == kNoFan)
        firstFan[v] = fan;
      else if (firstFan[v] != fan)
        severalFans[v] = 1;
    }
  }
  for (char several : severalFans)
    r.nonManifoldVertices += several;

  int64_t nref = 0;
  for (int64_t v = 0; v < nv; ++v) {
    if (!referenced[size_t(v)])
      continue;
    ++nref;
    if (vertexSets.find(uint32_t(v)) == uint32_t(v))
      ++r.components;
  }
  r.unreferencedVertices = nv - nref;
  r.eulerCharacteristic = nref - r.edges + (nf - r.degenerateFaces);
  r.manifold = r.nonManifoldEdges == 0 && r.nonManifoldVertices == 0;
  r.watertight =
      nf > r.degenerateFaces && r.boundaryEdges == 0 && r.nonManifoldEdges == 0;
  r.consistentlyOriented = r.nonManifoldEdges == 0 && r.inconsistentEdges == 0;
  return r;
}

std::string formatMeshReport(const MeshReport &r) {
  auto b = [](bool v) { return v ? "yes" : "no"; };
  return "V=" + std::to_string(r.vertices) + " F=" + std::to_string(r.faces) +
         " E=" + std::to_string(r.edges) +
         " boundary_edges=" + std::to_string(r.boundaryEdges) +
         " non_manifold_edges=" + std::to_string(r.nonManifoldEdges) +
         " non_manifold_vertices=" + std::to_string(r.nonManifoldVertices) +
         " inconsistent_edges=" + std::to_string(r.inconsistentEdges) +
         " degenerate_faces=" + std::to_string(r.degenerateFaces) +
         " unreferenced_vertices=" + std::to_string(r.unreferencedVertices) +
         " components=" + std::to_string(r.components) +
         " euler=" + std::to_string(r.eulerCharacteristic) +
         " manifold=" + b(r.manifold) + " watertight=" + b(r.watertight) +
         " oriented=" + b(r.consistentlyOriented);
}

//===----------------------------------------------------------------------===//
// Simplification
//===----------------------------------------------------------------------===//

Result<Mesh> simplifyMesh(const Mesh &mesh, double ratio, float targetError) {
  TRELLIS_RETURN_IF_ERROR(mesh.validate());
  if (!(ratio > 0.0 && ratio <= 1.0))
    return Error{"mesh simplification ratio must be in (0, 1], got " +
                 std::to_string(ratio)};
  if (!(targetError >= 0.0f) || !std::isfinite(targetError))
    return Error{"mesh simplification error bound must be a finite number "
                 ">= 0, got " +
                 std::to_string(targetError)};
  if (ratio == 1.0)
    return mesh;
  const int64_t nv = mesh.numVertices(), nf = mesh.numFaces();
  if (nv > int64_t(std::numeric_limits<uint32_t>::max()) ||
      nf * 3 > int64_t(std::numeric_limits<uint32_t>::max()))
    return Error{"mesh too large to simplify (" + std::to_string(nv) +
                 " vertices, " + std::to_string(nf) + " faces)"};
  std::vector<uint32_t> idx = detail::facesAsU32(mesh.faces);
  size_t targetFaces = size_t(std::max<int64_t>(1, std::llround(ratio * nf)));
  std::vector<uint32_t> out(idx.size());
  size_t n = idx.empty()
                 ? 0
                 : meshopt_simplify(out.data(), idx.data(), idx.size(),
                                    mesh.vertices.data<float>(), size_t(nv),
                                    3 * sizeof(float), targetFaces * 3,
                                    targetError, 0, nullptr);
  out.resize(n);

  // Drop the vertices no face uses; the survivors keep their order.
  std::vector<int64_t> remap(size_t(nv), -1);
  for (uint32_t v : out)
    remap[v] = 0;
  int64_t kept = 0;
  for (int64_t &r : remap)
    if (r == 0)
      r = kept++;
  Mesh res;
  res.vertices = HostTensor(DType::F32, {kept, 3});
  res.faces = HostTensor(DType::I32, {int64_t(n / 3), 3});
  if (mesh.hasColors())
    res.vertexColors = HostTensor(DType::F32, {kept, 3});
  for (int64_t v = 0; v < nv; ++v) {
    int64_t r = remap[size_t(v)];
    if (r < 0)
      continue;
    std::memcpy(res.vertices.mutableData<float>() + r * 3,
                mesh.vertices.data<float>() + v * 3, 3 * sizeof(float));
    if (mesh.hasColors())
      std::memcpy(res.vertexColors.mutableData<float>() + r * 3,
                  mesh.vertexColors.data<float>() + v * 3, 3 * sizeof(float));
  }
  int32_t *fd = res.faces.mutableData<int32_t>();
  for (size_t i = 0; i < n; ++i)
    fd[i] = int32_t(remap[out[i]]);
  return res;
}

//===----------------------------------------------------------------------===//
// PLY
//===----------------------------------------------------------------------===//

uint8_t detail::colorToByte(float c) {
  if (!(c > 0.0f)) // also NaN
    return 0;
  if (c >= 1.0f)
    return 255;
  return uint8_t(std::lround(double(c) * 255.0));
}

Status writeMeshPly(const std::string &path, const Mesh &mesh) {
  if (Status s = mesh.validate(); !s)
    return Error{"cannot write mesh PLY '" + path + "': " + s.message()};
  const int64_t nv = mesh.numVertices(), nf = mesh.numFaces();
  if (nv > int64_t(std::numeric_limits<int32_t>::max()))
    return Error{"cannot write mesh PLY '" + path + "': " + std::to_string(nv) +
                 " vertices do not fit the PLY's int vertex indices"};
  const bool colors = mesh.hasColors();
  std::string header = "ply\nformat binary_little_endian 1.0\n"
                       "comment written by trellisc\n"
                       "element vertex " +
                       std::to_string(nv) +
                       "\nproperty float x\nproperty float y\n"
                       "property float z\n";
  if (colors)
    header += "property uchar red\nproperty uchar green\nproperty uchar blue\n";
  header += "element face " + std::to_string(nf) +
            "\nproperty list uchar int vertex_indices\nend_header\n";

  AtomicFile file(path);
  if (!file.status())
    return file.status();
  file.write(header);

  const size_t vstride = 12 + (colors ? 3 : 0);
  const int64_t chunk = 65536;
  std::vector<uint8_t> buf;
  const float *pos = mesh.vertices.data<float>();
  const float *col = colors ? mesh.vertexColors.data<float>() : nullptr;
  for (int64_t b = 0; b < nv; b += chunk) {
    int64_t e = std::min(nv, b + chunk);
    buf.resize(size_t(e - b) * vstride);
    uint8_t *p = buf.data();
    for (int64_t v = b; v < e; ++v) {
      std::memcpy(p, pos + v * 3, 12);
      p += 12;
      if (colors)
        for (int c = 0; c < 3; ++c)
          *p++ = detail::colorToByte(col[v * 3 + c]);
    }
    file.write(buf.data(), buf.size());
  }
  for (int64_t b = 0; b < nf; b += chunk) {
    int64_t e = std::min(nf, b + chunk);
    buf.resize(size_t(e - b) * 13);
    uint8_t *p = buf.data();
    for (int64_t f = b; f < e; ++f) {
      *p++ = 3;
      for (int c = 0; c < 3; ++c) {
        int32_t i = int32_t(detail::faceIndex(mesh.faces, f * 3 + c));
        std::memcpy(p, &i, 4);
        p += 4;
      }
    }
    file.write(buf.data(), buf.size());
  }
  return file.commit();
}

} // namespace trellis::output
