#include "trellis/Output/Mesh.h"

#include "test/unit/output/TestMeshes.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <nlohmann/json.hpp>

using namespace trellis;
using namespace trellis::output;
using namespace trellis::output::fixtures;
namespace fs = std::filesystem;

namespace {

std::string readAll(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

MeshReport report(const Mesh &m) {
  auto r = analyzeMesh(m);
  EXPECT_TRUE(r.isOk()) << (r.isOk() ? "" : r.message());
  return r.isOk() ? r.value() : MeshReport{};
}

uint32_t u32(const std::string &s, size_t off) {
  uint32_t v;
  std::memcpy(&v, s.data() + off, 4);
  return v;
}

} // namespace

TEST(MeshReport, ClosedCube) {
  MeshReport r = report(makeMesh(cubeVertices(), cubeFaces()));
  EXPECT_EQ(r.vertices, 8);
  EXPECT_EQ(r.faces, 12);
  EXPECT_EQ(r.edges, 18);
  EXPECT_EQ(r.boundaryEdges, 0);
  EXPECT_EQ(r.nonManifoldEdges, 0);
  EXPECT_EQ(r.nonManifoldVertices, 0);
  EXPECT_EQ(r.inconsistentEdges, 0);
  EXPECT_EQ(r.components, 1);
  EXPECT_EQ(r.eulerCharacteristic, 2);
  EXPECT_TRUE(r.manifold);
  EXPECT_TRUE(r.watertight);
  EXPECT_TRUE(r.consistentlyOriented);
}

TEST(MeshReport, OpenCube) {
  auto f = cubeFaces();
  f.erase(f.begin() + 2, f.begin() + 4); // remove the +z side
  MeshReport r = report(makeMesh(cubeVertices(), f));
  EXPECT_EQ(r.faces, 10);
  EXPECT_EQ(r.boundaryEdges, 4);
  EXPECT_EQ(r.nonManifoldEdges, 0);
  EXPECT_EQ(r.components, 1);
  EXPECT_EQ(r.eulerCharacteristic, 1);
  EXPECT_TRUE(r.manifold);
  EXPECT_FALSE(r.watertight);
  EXPECT_TRUE(r.consistentlyOriented);
}

TEST(MeshReport, TwoCubesAreTwoComponents) {
  auto v = cubeVertices();
  auto v2 = cubeVertices(3.0f);
  v.insert(v.end(), v2.begin(), v2.end());
  auto f = cubeFaces();
  auto f2 = cubeFaces(8);
  f.insert(f.end(), f2.begin(), f2.end());
  MeshReport r = report(makeMesh(v, f));
  EXPECT_EQ(r.components, 2);
  EXPECT_EQ(r.eulerCharacteristic, 4);
  EXPECT_TRUE(r.watertight);
}

TEST(MeshReport, FlippedFaceIsInconsistent) {
  auto f = cubeFaces();
  std::swap(f[5][1], f[5][2]);
  MeshReport r = report(makeMesh(cubeVertices(), f));
  EXPECT_EQ(r.inconsistentEdges, 3);
  EXPECT_TRUE(r.watertight); // closed, only badly wound
  EXPECT_TRUE(r.manifold);
  EXPECT_FALSE(r.consistentlyOriented);
}

TEST(MeshReport, ThreeFacesOnOneEdge) {
  MeshReport r =
      report(makeMesh({{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, -1, 0}, {0, 0, 1}},
                      {{0, 1, 2}, {1, 0, 3}, {0, 1, 4}}));
  EXPECT_EQ(r.edges, 7);
  EXPECT_EQ(r.nonManifoldEdges, 1);
  EXPECT_EQ(r.boundaryEdges, 6);
  EXPECT_FALSE(r.manifold);
  EXPECT_FALSE(r.watertight);
}

TEST(MeshReport, BowtieVertex) {
  // Two triangles touching only at vertex 0.
  MeshReport r = report(
      makeMesh({{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {-1, 0, 0}, {-1, -1, 0}},
               {{0, 1, 2}, {0, 3, 4}}));
  EXPECT_EQ(r.nonManifoldVertices, 1);
  EXPECT_EQ(r.nonManifoldEdges, 0);
  EXPECT_EQ(r.boundaryEdges, 6);
  EXPECT_EQ(r.components, 1);
  EXPECT_FALSE(r.manifold);
  EXPECT_TRUE(r.consistentlyOriented); // a vertex problem, not a winding one
}

TEST(MeshReport, DegenerateAndUnreferenced) {
  auto v = cubeVertices();
  v.push_back({9, 9, 9}); // unreferenced
  auto f = cubeFaces();
  f.push_back({0, 0, 1});
  MeshReport r = report(makeMesh(v, f));
  EXPECT_EQ(r.degenerateFaces, 1);
  EXPECT_EQ(r.unreferencedVertices, 1);
  EXPECT_TRUE(r.watertight);
  EXPECT_EQ(r.eulerCharacteristic, 2);
  std::string line = formatMeshReport(r);
  EXPECT_NE(line.find("degenerate_faces=1"), std::string::npos) << line;
  EXPECT_NE(line.find("watertight=yes"), std::string::npos) << line;
}

TEST(MeshReport, IcosphereIsClosed) {
  Mesh m = icosphere(3);
  EXPECT_EQ(m.numFaces(), 1280);
  EXPECT_EQ(m.numVertices(), 642);
  MeshReport r = report(m);
  EXPECT_TRUE(r.watertight);
  EXPECT_TRUE(r.consistentlyOriented);
  EXPECT_EQ(r.eulerCharacteristic, 2);
}

TEST(Mesh, ValidateNamesTheProblem) {
  Mesh m = makeMesh(cubeVertices(), cubeFaces());
  m.faces.mutableData<int32_t>()[3 * 7 + 1] = 8;
  Status s = m.validate();
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("face 7"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("vertex 8"), std::string::npos) << s.message();

  fixtures::TempDir tmp("mesh0");
  const fs::path &dir = tmp.path();
  s = writeMeshPly((dir / "bad.ply").string(), m);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("bad.ply"), std::string::npos) << s.message();
  EXPECT_TRUE(fs::is_empty(dir));

  m = makeMesh(cubeVertices(), cubeFaces());
  m.vertexColors = HostTensor(DType::F32, {7, 3});
  s = m.validate();
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("'vertex_colors'"), std::string::npos);
}

TEST(Mesh, FromExtractResultTakesFirstThreeAttrs) {
  HostTensor v(DType::F32, {3, 3}), f(DType::I64, {1, 3}),
      a(DType::F32, {3, 6});
  int64_t *fi = f.mutableData<int64_t>();
  fi[0] = 0, fi[1] = 1, fi[2] = 2;
  for (int i = 0; i < 18; ++i)
    a.mutableData<float>()[i] = float(i) / 18.0f;
  auto m = meshFromExtractResult(v, f, a);
  ASSERT_TRUE(m.isOk()) << m.message();
  ASSERT_TRUE(m->hasColors());
  EXPECT_EQ(m->vertexColors.shape(), (Shape{3, 3}));
  EXPECT_EQ(m->vertexColors.data<float>()[3], 6.0f / 18.0f);
  EXPECT_EQ(m->vertexColors.data<float>()[8], 14.0f / 18.0f);
  auto bad = meshFromExtractResult(v, f, HostTensor(DType::F32, {3, 5}));
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.message().find("vertex_attrs"), std::string::npos);
}

TEST(MeshPly, SingleTriangleExactBytes) {
  Mesh m = makeMesh({{0, 0, 0}, {1, 0, 0}, {0, 1, 0.25f}}, {{0, 1, 2}});
  m.vertexColors = HostTensor(DType::F32, {3, 3});
  const float col[9] = {0, 0.5f, 1, 2.0f, -1, 0.2f, 0.999f, 0.001f, 0.5f};
  std::memcpy(m.vertexColors.mutableRaw(), col, sizeof(col));
  fixtures::TempDir tmp("mesh1");
  const fs::path &dir = tmp.path();
  ASSERT_TRUE(writeMeshPly((dir / "t.ply").string(), m).isOk());
  std::string bytes = readAll(dir / "t.ply");
  const std::string header =
      "ply\nformat binary_little_endian 1.0\ncomment written by trellisc\n"
      "element vertex 3\nproperty float x\nproperty float y\n"
      "property float z\nproperty uchar red\nproperty uchar green\n"
      "property uchar blue\nelement face 1\n"
      "property list uchar int vertex_indices\nend_header\n";
  ASSERT_EQ(bytes.size(), header.size() + 3 * 15 + 13);
  EXPECT_EQ(bytes.substr(0, header.size()), header);
  const char *p = bytes.data() + header.size();
  float z;
  std::memcpy(&z, p + 2 * 15 + 8, 4);
  EXPECT_EQ(z, 0.25f);
  // 0 -> 0, 0.5 -> 128 (127.5 rounds away from 0), 1 -> 255, clamps,
  // 0.2 -> 51, 0.999 -> 255, 0.001 -> 0.
  const uint8_t want[9] = {0, 128, 255, 255, 0, 51, 255, 0, 128};
  for (int v = 0; v < 3; ++v)
    for (int c = 0; c < 3; ++c)
      EXPECT_EQ(uint8_t(p[v * 15 + 12 + c]), want[v * 3 + c]) << v << "," << c;
  const char *face = p + 45;
  EXPECT_EQ(face[0], 3);
  int32_t idx[3];
  std::memcpy(idx, face + 1, 12);
  EXPECT_EQ(idx[0], 0);
  EXPECT_EQ(idx[1], 1);
  EXPECT_EQ(idx[2], 2);
}

TEST(MeshPly, NoColors) {
  Mesh m = makeMesh(cubeVertices(), cubeFaces());
  fixtures::TempDir tmp("mesh2");
  const fs::path &dir = tmp.path();
  ASSERT_TRUE(writeMeshPly((dir / "c.ply").string(), m).isOk());
  std::string bytes = readAll(dir / "c.ply");
  EXPECT_EQ(bytes.find("red"), std::string::npos);
  size_t end = bytes.find("end_header\n") + 11;
  EXPECT_EQ(bytes.size(), end + 8 * 12 + 12 * 13);
}

TEST(MeshSimplify, KeepsTheRatio) {
  Mesh m = icosphere(4); // 5120 faces
  auto s = simplifyMesh(m, 0.25);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_LE(s->numFaces(), 1280);
  EXPECT_GE(s->numFaces(), 1100);
  MeshReport r = report(s.value());
  EXPECT_EQ(r.unreferencedVertices, 0);
  EXPECT_TRUE(r.watertight) << formatMeshReport(r);
  EXPECT_TRUE(s->hasColors());
  EXPECT_EQ(s->vertexColors.dim(0), s->numVertices());
  // Ratio 1 is the identity; out of range is an error.
  auto same = simplifyMesh(m, 1.0);
  ASSERT_TRUE(same.isOk());
  EXPECT_EQ(same->numFaces(), 5120);
  EXPECT_FALSE(simplifyMesh(m, 0.0).isOk());
  EXPECT_FALSE(simplifyMesh(m, 1.5).isOk());
}

TEST(MeshGlb, StructureAndAxisChange) {
  Mesh m = makeMesh(cubeVertices(), cubeFaces(), /*colors=*/true);
  // Move one vertex so that min/max are not symmetric.
  m.vertices.mutableData<float>()[7 * 3 + 1] = 0.75f; // y of vertex 7
  fixtures::TempDir tmp("glb1");
  const fs::path &dir = tmp.path();
  fs::path glb = dir / "c.glb";
  auto info = writeMeshGlb(glb.string(), m);
  ASSERT_TRUE(info.isOk()) << info.message();
  EXPECT_EQ(info->facesBefore, 12);
  EXPECT_EQ(info->facesAfter, 12);
  EXPECT_EQ(info->verticesAfter, 8);
  std::string bytes = readAll(glb);
  ASSERT_EQ(info->bytes, bytes.size());
  ASSERT_GE(bytes.size(), 20u);
  EXPECT_EQ(bytes.substr(0, 4), "glTF");
  EXPECT_EQ(u32(bytes, 4), 2u);
  EXPECT_EQ(u32(bytes, 8), bytes.size());
  uint32_t jsonLen = u32(bytes, 12);
  EXPECT_EQ(u32(bytes, 16), 0x4E4F534Au); // "JSON"
  EXPECT_EQ(jsonLen % 4, 0u);
  auto j = nlohmann::json::parse(bytes.substr(20, jsonLen), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  size_t binHeader = 20 + jsonLen;
  EXPECT_EQ(u32(bytes, binHeader + 4), 0x004E4942u); // "BIN\0"
  const char *bin = bytes.data() + binHeader + 8;

  EXPECT_EQ(j["asset"]["version"], "2.0");
  auto prim = j["meshes"][0]["primitives"][0];
  EXPECT_EQ(prim.value("mode", 4), 4);
  auto posAcc = j["accessors"][prim["attributes"]["POSITION"].get<int>()];
  auto colAcc = j["accessors"][prim["attributes"]["COLOR_0"].get<int>()];
  auto idxAcc = j["accessors"][prim["indices"].get<int>()];
  EXPECT_EQ(posAcc["componentType"], 5126);
  EXPECT_EQ(posAcc["type"], "VEC3");
  EXPECT_EQ(posAcc["count"], 8);
  EXPECT_EQ(colAcc["type"], "VEC3");
  EXPECT_EQ(idxAcc["componentType"], 5125); // UNSIGNED_INT
  EXPECT_EQ(idxAcc["count"], 36);
  // y-up: (x, y, z) -> (x, z, -y); vertex 7 has y = 0.75 -> z = -0.75.
  EXPECT_EQ(posAcc["min"], (std::vector<double>{-0.5, -0.5, -0.75}));
  EXPECT_EQ(posAcc["max"], (std::vector<double>{0.5, 0.5, 0.5}));
  auto mat = j["materials"][prim["material"].get<int>()];
  EXPECT_FALSE(mat.value("doubleSided", false));
  EXPECT_EQ(mat["pbrMetallicRoughness"].value("metallicFactor", 1.0), 0.0);

  auto view = j["bufferViews"][posAcc["bufferView"].get<int>()];
  const char *pos = bin + view.value("byteOffset", 0);
  for (int v = 0; v < 8; ++v) {
    float got[3];
    std::memcpy(got, pos + v * 12, 12);
    const float *src = m.vertices.data<float>() + v * 3;
    EXPECT_EQ(got[0], src[0]);
    EXPECT_EQ(got[1], src[2]);
    EXPECT_EQ(got[2], -src[1]);
  }
  view = j["bufferViews"][idxAcc["bufferView"].get<int>()];
  EXPECT_EQ(view["target"], 34963);
  uint32_t idx[36];
  std::memcpy(idx, bin + view.value("byteOffset", 0), sizeof(idx));
  for (int i = 0; i < 36; ++i)
    EXPECT_EQ(idx[i], uint32_t(m.faces.data<int32_t>()[i]));
}

TEST(MeshGlb, UnlitAndSimplified) {
  Mesh m = icosphere(3);
  fixtures::TempDir tmp("glb2");
  const fs::path &dir = tmp.path();
  GlbOptions opt;
  opt.unlit = true;
  opt.simplifyRatio = 0.1;
  auto info = writeMeshGlb((dir / "s.glb").string(), m, opt);
  ASSERT_TRUE(info.isOk()) << info.message();
  EXPECT_EQ(info->facesBefore, 1280);
  EXPECT_EQ(info->verticesBefore, 642);
  EXPECT_LE(info->facesAfter, 128);
  EXPECT_GT(info->facesAfter, 64);
  std::string bytes = readAll(dir / "s.glb");
  auto j =
      nlohmann::json::parse(bytes.substr(20, u32(bytes, 12)), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["extensionsUsed"][0], "KHR_materials_unlit");
  EXPECT_TRUE(j["materials"][0]["extensions"].contains("KHR_materials_unlit"));
  EXPECT_EQ(j["accessors"][2]["count"], info->facesAfter * 3);
}

TEST(MeshGlb, Refusals) {
  fixtures::TempDir tmp("glb3");
  const fs::path &dir = tmp.path();
  auto empty = writeMeshGlb((dir / "e.glb").string(), makeMesh({}, {}));
  ASSERT_FALSE(empty.isOk());
  EXPECT_NE(empty.message().find("e.glb"), std::string::npos);
  EXPECT_NE(empty.message().find("empty"), std::string::npos);
  Mesh m = makeMesh(cubeVertices(), cubeFaces());
  m.vertices.mutableData<float>()[5] = NAN;
  auto nan = writeMeshGlb((dir / "n.glb").string(), m);
  ASSERT_FALSE(nan.isOk());
  EXPECT_NE(nan.message().find("vertex 1"), std::string::npos) << nan.message();
  EXPECT_TRUE(fs::is_empty(dir));
}
