//===- MeshGlb.cpp - Mesh to glTF 2.0 binary through tinygltf -------------===//
//
// The only file that includes tiny_gltf.h. Debian packages tinygltf as a
// shared library (libtinygltf2d, built against its own nlohmann-json and
// stb), so this file includes the header WITHOUT TINYGLTF_IMPLEMENTATION and
// links TinyGLTF::TinyGLTF; the header's declaration part needs neither json
// nor stb. We must not define any TINYGLTF_NO_* / TINYGLTF_USE_* macro here:
// they change the TinyGLTF class layout the library was built with.
//
//===----------------------------------------------------------------------===//
#include "trellis/Output/Mesh.h"

#include "trellis/Support/AtomicFile.h"

#include "runtime/output/OutputUtil.h"

#include <tiny_gltf.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

namespace trellis::output {

namespace {
// Appends `n` bytes to the buffer at a 4-byte aligned offset; returns the
// offset.
size_t appendAligned(std::vector<unsigned char> &buf, const void *data,
                     size_t n) {
  buf.resize((buf.size() + 3) & ~size_t(3), 0);
  size_t off = buf.size();
  buf.resize(off + n);
  if (n)
    std::memcpy(buf.data() + off, data, n);
  return off;
}

int addView(tinygltf::Model &model, size_t off, size_t len, int target) {
  tinygltf::BufferView view;
  view.buffer = 0;
  view.byteOffset = off;
  view.byteLength = len;
  view.target = target;
  model.bufferViews.push_back(view);
  return int(model.bufferViews.size() - 1);
}

int addAccessor(tinygltf::Model &model, int view, int componentType, int type,
                size_t count, std::vector<double> min = {},
                std::vector<double> max = {}) {
  tinygltf::Accessor acc;
  acc.bufferView = view;
  acc.byteOffset = 0;
  acc.componentType = componentType;
  acc.type = type;
  acc.count = count;
  acc.minValues = std::move(min);
  acc.maxValues = std::move(max);
  model.accessors.push_back(acc);
  return int(model.accessors.size() - 1);
}
} // namespace

Result<GlbInfo> writeMeshGlb(const std::string &path, const Mesh &input,
                             const GlbOptions &options) {
  auto fail = [&](const std::string &why) -> Error {
    return Error{"cannot write GLB '" + path + "': " + why};
  };
  if (Status s = input.validate(); !s)
    return fail(s.message());
  GlbInfo info;
  info.verticesBefore = input.numVertices();
  info.facesBefore = input.numFaces();

  Mesh mesh = input;
  if (options.simplifyRatio != 1.0) {
    auto simplified =
        simplifyMesh(input, options.simplifyRatio, options.simplifyTargetError);
    if (!simplified)
      return fail(simplified.message());
    mesh = std::move(simplified.value());
  }
  const int64_t nv = mesh.numVertices(), nf = mesh.numFaces();
  info.verticesAfter = nv;
  info.facesAfter = nf;
  if (nv == 0 || nf == 0)
    return fail("the mesh is empty (" + std::to_string(nv) + " vertices, " +
                std::to_string(nf) +
                " faces); glTF accessors need at least "
                "one element");
  if (nv > int64_t(std::numeric_limits<uint32_t>::max()))
    return fail(std::to_string(nv) + " vertices exceed UNSIGNED_INT indices");

  // POSITION: z-up -> y-up, (x, y, z) -> (x, z, -y) (spec §9.2 step 5).
  std::vector<float> pos(size_t(nv) * 3);
  std::vector<double> mn(3, std::numeric_limits<double>::infinity());
  std::vector<double> mx(3, -std::numeric_limits<double>::infinity());
  const float *src = mesh.vertices.data<float>();
  for (int64_t v = 0; v < nv; ++v) {
    float p[3] = {src[v * 3 + 0], src[v * 3 + 2], -src[v * 3 + 1]};
    for (int a = 0; a < 3; ++a) {
      if (!std::isfinite(p[a]))
        return fail("vertex " + std::to_string(v) +
                    " has a non-finite coordinate");
      pos[size_t(v) * 3 + a] = p[a];
      mn[a] = std::min(mn[a], double(p[a]));
      mx[a] = std::max(mx[a], double(p[a]));
    }
  }
  std::vector<uint32_t> idx(size_t(nf) * 3);
  for (size_t i = 0; i < idx.size(); ++i)
    idx[i] = uint32_t(mesh.faces.dtype() == DType::I64
                          ? mesh.faces.data<int64_t>()[i]
                          : mesh.faces.data<int32_t>()[i]);

  tinygltf::Model model;
  model.asset.version = "2.0";
  model.asset.generator = "trellisc";
  std::vector<unsigned char> bin;

  tinygltf::Primitive prim;
  prim.mode = TINYGLTF_MODE_TRIANGLES;
  size_t off = appendAligned(bin, pos.data(), pos.size() * sizeof(float));
  int view = addView(model, off, pos.size() * sizeof(float),
                     TINYGLTF_TARGET_ARRAY_BUFFER);
  prim.attributes["POSITION"] =
      addAccessor(model, view, TINYGLTF_COMPONENT_TYPE_FLOAT,
                  TINYGLTF_TYPE_VEC3, size_t(nv), mn, mx);
  if (mesh.hasColors()) {
    std::vector<float> col(size_t(nv) * 3);
    const float *c = mesh.vertexColors.data<float>();
    for (size_t i = 0; i < col.size(); ++i)
      col[i] = c[i] > 0.0f ? std::min(c[i], 1.0f) : 0.0f; // NaN -> 0
    off = appendAligned(bin, col.data(), col.size() * sizeof(float));
    view = addView(model, off, col.size() * sizeof(float),
                   TINYGLTF_TARGET_ARRAY_BUFFER);
    prim.attributes["COLOR_0"] =
        addAccessor(model, view, TINYGLTF_COMPONENT_TYPE_FLOAT,
                    TINYGLTF_TYPE_VEC3, size_t(nv));
  }
  off = appendAligned(bin, idx.data(), idx.size() * sizeof(uint32_t));
  view = addView(model, off, idx.size() * sizeof(uint32_t),
                 TINYGLTF_TARGET_ELEMENT_ARRAY_BUFFER);
  prim.indices = addAccessor(model, view, TINYGLTF_COMPONENT_TYPE_UNSIGNED_INT,
                             TINYGLTF_TYPE_SCALAR, idx.size());

  tinygltf::Material material;
  material.name = "trellis_vertex_color";
  material.doubleSided = false;
  material.pbrMetallicRoughness.baseColorFactor = {1.0, 1.0, 1.0, 1.0};
  material.pbrMetallicRoughness.metallicFactor = 0.0;
  material.pbrMetallicRoughness.roughnessFactor = 1.0;
  if (options.unlit) {
    material.extensions["KHR_materials_unlit"] =
        tinygltf::Value(tinygltf::Value::Object());
    model.extensionsUsed.push_back("KHR_materials_unlit");
  }
  model.materials.push_back(material);
  prim.material = 0;

  tinygltf::Mesh gmesh;
  gmesh.name = "trellis_mesh";
  gmesh.primitives.push_back(prim);
  model.meshes.push_back(gmesh);
  tinygltf::Node node;
  node.name = "trellis_mesh";
  node.mesh = 0;
  model.nodes.push_back(node);
  tinygltf::Scene scene;
  scene.nodes.push_back(0);
  model.scenes.push_back(scene);
  model.defaultScene = 0;

  bin.resize((bin.size() + 3) & ~size_t(3), 0);
  tinygltf::Buffer buffer;
  buffer.data = std::move(bin);
  model.buffers.push_back(std::move(buffer));

  std::ostringstream stream(std::ios::out | std::ios::binary);
  tinygltf::TinyGLTF writer;
  if (!writer.WriteGltfSceneToStream(&model, stream, /*prettyPrint=*/false,
                                     /*writeBinary=*/true) ||
      !stream)
    return fail("tinygltf could not serialize the model");
  const std::string bytes = stream.str();
  info.bytes = bytes.size();

  AtomicFile file(path);
  if (!file.status())
    return Error{file.status().message()};
  file.write(bytes);
  TRELLIS_RETURN_IF_ERROR(file.commit());
  return info;
}

} // namespace trellis::output
