//===- OutputTool.cpp - trellis-output-tool: synthetic output files -------===//
//
// A test helper for test/python/test_output_*.py: writes deterministic
// synthetic outputs through the TrellisOutput writers and prints a JSON
// summary on stdout.
//
//   trellis-output-tool gaussians OUT.ply [--npz OUT.npz] [--count M] [--seed
//   S] trellis-output-tool mesh PREFIX [--subdiv N] [--simplify RATIO]
//   [--unlit]
//                                   [--open] [--no-colors]
//       writes PREFIX.ply and PREFIX.glb (an icosphere; --open removes 1/8 of
//       its faces) and prints the mesh report and the GLB face counts
//   trellis-output-tool rf OUT.npz [--head HEAD.npz] [--count N] [--seed S]
//       writes a radiance field from a synthetic decoder head (and the head)
//
//===----------------------------------------------------------------------===//
#include "trellis/Format/Npy.h"
#include "trellis/Output/Gaussians.h"
#include "trellis/Output/Mesh.h"
#include "trellis/Output/RadianceField.h"

#include "test/unit/output/TestMeshes.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

using namespace trellis;
using namespace trellis::output;

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: trellis-output-tool gaussians OUT.ply [--npz OUT.npz] "
               "[--count M] [--seed S]\n"
               "       trellis-output-tool mesh PREFIX [--subdiv N] "
               "[--simplify R] [--unlit] [--open] [--no-colors]\n"
               "       trellis-output-tool rf OUT.npz [--head HEAD.npz] "
               "[--count N] [--seed S]\n");
  return 2;
}

int fail(const std::string &msg) {
  std::fprintf(stderr, "trellis-output-tool: error: %s\n", msg.c_str());
  return 1;
}

struct Args {
  std::vector<std::string> positional;
  std::string npz, head;
  long long count = -1, seed = 1, subdiv = 3;
  double simplify = 1.0;
  bool unlit = false, open = false, noColors = false;
};

bool parse(int argc, char **argv, Args &a) {
  for (int i = 2; i < argc; ++i) {
    std::string s = argv[i];
    auto next = [&](const char *&out) {
      if (i + 1 >= argc)
        return false;
      out = argv[++i];
      return true;
    };
    const char *v = nullptr;
    if (s == "--unlit")
      a.unlit = true;
    else if (s == "--open")
      a.open = true;
    else if (s == "--no-colors")
      a.noColors = true;
    else if (s == "--npz" && next(v))
      a.npz = v;
    else if (s == "--head" && next(v))
      a.head = v;
    else if (s == "--count" && next(v))
      a.count = std::atoll(v);
    else if (s == "--seed" && next(v))
      a.seed = std::atoll(v);
    else if (s == "--subdiv" && next(v))
      a.subdiv = std::atoll(v);
    else if (s == "--simplify" && next(v))
      a.simplify = std::atof(v);
    else if (!s.empty() && s[0] == '-')
      return false;
    else
      a.positional.push_back(s);
  }
  return a.positional.size() == 1;
}

nlohmann::json reportJson(const MeshReport &r) {
  return {{"vertices", r.vertices},
          {"faces", r.faces},
          {"edges", r.edges},
          {"boundary_edges", r.boundaryEdges},
          {"non_manifold_edges", r.nonManifoldEdges},
          {"non_manifold_vertices", r.nonManifoldVertices},
          {"inconsistent_edges", r.inconsistentEdges},
          {"degenerate_faces", r.degenerateFaces},
          {"unreferenced_vertices", r.unreferencedVertices},
          {"components", r.components},
          {"euler", r.eulerCharacteristic},
          {"manifold", r.manifold},
          {"watertight", r.watertight},
          {"oriented", r.consistentlyOriented},
          {"line", formatMeshReport(r)}};
}

int runGaussians(const Args &a) {
  Gaussians g = fixtures::syntheticGaussians(a.count < 0 ? 1000 : a.count,
                                             uint64_t(a.seed));
  if (Status s = writeGaussianPly(a.positional[0], g); !s)
    return fail(s.message());
  if (!a.npz.empty())
    if (Status s = writeGaussianNpz(a.npz, g); !s)
      return fail(s.message());
  nlohmann::json out = {{"count", g.size()},
                        {"ply", a.positional[0]},
                        {"npz", a.npz},
                        {"scaling_bias_raw", g.constants.scalingBiasRaw()},
                        {"opacity_bias_raw", g.constants.opacityBiasRaw()}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

int runMesh(const Args &a) {
  if (a.subdiv < 0 || a.subdiv > 8)
    return fail("--subdiv must be in [0, 8]");
  Mesh m = fixtures::icosphere(int(a.subdiv), !a.noColors);
  if (a.open) {
    // Drop every 8th face: holes, so the mesh is no longer watertight.
    int64_t f = m.numFaces(), kept = 0;
    HostTensor faces(DType::I32, {f - (f + 7) / 8, 3});
    for (int64_t i = 0; i < f; ++i)
      if (i % 8 != 0)
        std::memcpy(faces.mutableData<int32_t>() + 3 * kept++,
                    m.faces.data<int32_t>() + 3 * i, 12);
    m.faces = faces;
  }
  auto report = analyzeMesh(m);
  if (!report)
    return fail(report.message());
  const std::string &prefix = a.positional[0];
  if (Status s = writeMeshPly(prefix + ".ply", m); !s)
    return fail(s.message());
  GlbOptions opt;
  opt.simplifyRatio = a.simplify;
  opt.unlit = a.unlit;
  auto info = writeMeshGlb(prefix + ".glb", m, opt);
  if (!info)
    return fail(info.message());
  nlohmann::json out = {{"report", reportJson(report.value())},
                        {"glb",
                         {{"vertices_before", info->verticesBefore},
                          {"faces_before", info->facesBefore},
                          {"vertices_after", info->verticesAfter},
                          {"faces_after", info->facesAfter},
                          {"bytes", info->bytes}}}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

int runRf(const Args &a) {
  int64_t n = a.count < 0 ? 100 : a.count;
  if (n > 64 * 64 * 64)
    return fail("--count must be at most 64^3");
  fixtures::SplitMix rng(uint64_t(a.seed));
  std::set<std::array<int32_t, 3>> seen;
  HostTensor coords(DType::I32, {n, 4});
  int32_t *c = coords.mutableData<int32_t>();
  for (int64_t i = 0; i < n;) {
    std::array<int32_t, 3> v = {int32_t(rng.next() * 64),
                                int32_t(rng.next() * 64),
                                int32_t(rng.next() * 64)};
    if (!seen.insert(v).second)
      continue;
    c[i * 4] = 0;
    for (int k = 0; k < 3; ++k)
      c[i * 4 + 1 + k] = v[k];
    ++i;
  }
  HostTensor head(DType::F32, {n, kRfHeadChannels});
  for (int64_t i = 0; i < head.numel(); ++i)
    head.mutableData<float>()[i] = rng.uniform(-2.0, 2.0);
  auto rf = radianceFieldFromHead(coords, head);
  if (!rf)
    return fail(rf.message());
  if (Status s = writeRadianceFieldNpz(a.positional[0], rf.value()); !s)
    return fail(s.message());
  if (!a.head.empty())
    if (Status s = writeNpz(a.head, {{"coords", coords}, {"head", head}},
                            /*compress=*/false);
        !s)
      return fail(s.message());
  nlohmann::json out = {
      {"count", n}, {"npz", a.positional[0]}, {"head", a.head}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3)
    return usage();
  Args a;
  if (!parse(argc, argv, a))
    return usage();
  std::string cmd = argv[1];
  if (cmd == "gaussians")
    return runGaussians(a);
  if (cmd == "mesh")
    return runMesh(a);
  if (cmd == "rf")
    return runRf(a);
  return usage();
}
