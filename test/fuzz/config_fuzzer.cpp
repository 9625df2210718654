//===- config_fuzzer.cpp - Fuzz the JSON reader and the config parsers ----===//
//
// Input: the text of a config file. It goes through the strict JSON reader,
// then through both config parsers (as pipeline.json and as a sidecar); a
// sidecar that validates is turned into its tensor manifest and safetensors
// layout. Invariants:
//  * every error names the file first ("fuzz.json:" or "fuzz.json:L:C: "),
//    and every value position lies inside the text;
//  * an accepted sidecar gives a manifest of unique names, non-negative
//    shapes, F16/F32 dtypes, and a safetensors plan of the same tensors;
//  * the parsers never crash, hang or allocate without bound (the sanity
//    limits in ModelConfig.h bound every tensor list).
//
// Seeds: test/fuzz/corpus/config/ (the TRELLIS-image-large and tiny configs
// plus broken variants).
//
//===----------------------------------------------------------------------===//
#include "test/fuzz/FuzzTarget.h"

#include "trellis/Config/Json.h"
#include "trellis/Config/ModelConfig.h"
#include "trellis/Config/PipelineConfig.h"
#include "trellis/Format/Safetensors.h"
#include "trellis/Models/Manifest.h"

#include <set>
#include <string>
#include <string_view>

using namespace trellis;
using namespace trellis::config;

namespace {

const std::string kFile = "fuzz.json";

bool startsWithFile(const std::string &message) {
  return message.rfind(kFile + ":", 0) == 0;
}

/// Lines and the longest line, to bound positions.
struct Extent {
  uint32_t lines = 1;
  uint32_t maxColumn = 1; // one past the longest line
};

Extent extentOf(std::string_view text) {
  Extent e;
  uint32_t col = 1;
  for (char c : text) {
    if (c == '\n') {
      ++e.lines;
      col = 1;
    } else {
      ++col;
    }
    if (col > e.maxColumn)
      e.maxColumn = col;
  }
  return e;
}

void checkPositions(const JsonValue &v, const Extent &e, unsigned depth) {
  FUZZ_CHECK(v.pos().line >= 1 && v.pos().line <= e.lines);
  FUZZ_CHECK(v.pos().column >= 1 && v.pos().column <= e.maxColumn);
  FUZZ_CHECK(!v.describe().empty());
  if (depth > 64)
    return;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v.isObject()) {
      FUZZ_CHECK(v.keyPos(i).line >= 1 && v.keyPos(i).line <= e.lines);
      FUZZ_CHECK(v.find(v.key(i)) != nullptr);
    }
    checkPositions(v[i], e, depth + 1);
  }
}

void checkDiagnostics(const std::vector<Diagnostic> &diags, const Extent &e) {
  for (const Diagnostic &d : diags) {
    FUZZ_CHECK(d.pos.file == kFile);
    FUZZ_CHECK(d.pos.line >= 1 && d.pos.line <= e.lines);
    FUZZ_CHECK(!d.message.empty());
    FUZZ_CHECK(startsWithFile(d.render()));
  }
}

} // namespace

TRELLIS_FUZZ_TARGET(config) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  Extent extent = extentOf(text);

  auto doc = parseJson(text, kFile);
  if (!doc) {
    FUZZ_CHECK(startsWithFile(doc.message()));
    return 0;
  }
  checkPositions(doc->root, extent, 0);

  std::vector<Diagnostic> pipelineDiags;
  auto pipeline = parsePipelineConfig(doc.value(), &pipelineDiags);
  checkDiagnostics(pipelineDiags, extent);
  if (!pipeline) {
    FUZZ_CHECK(startsWithFile(pipeline.message()));
  } else {
    FUZZ_CHECK(*pipeline->sparseStructureSampler.params.steps >= 1);
    FUZZ_CHECK(pipeline->slatMean.size() == pipeline->slatStd.size());
    for (const auto &s : pipeline->slatStd)
      FUZZ_CHECK(*s > 0);
    SamplerOverrides o;
    o.steps = 3;
    auto merged = applyOverrides(pipeline->slatSampler.params, o);
    FUZZ_CHECK(merged && *merged->steps == 3);
  }

  std::vector<Diagnostic> modelDiags;
  auto model = parseModelConfig(doc.value(), &modelDiags);
  checkDiagnostics(modelDiags, extent);
  if (!model) {
    FUZZ_CHECK(startsWithFile(model.message()));
    return 0;
  }
  models::ModelManifest manifest = models::buildManifest(model.value());
  std::set<std::string_view> names;
  for (const models::ManifestTensor &t : manifest.tensors) {
    FUZZ_CHECK(names.insert(t.name).second);
    FUZZ_CHECK(t.dtype == DType::F16 || t.dtype == DType::F32);
    for (int64_t d : t.shape)
      FUZZ_CHECK(d >= 0);
    FUZZ_CHECK(t.numel() >= 0);
  }
  auto layout = planSafetensors(manifest.specs());
  if (layout) {
    FUZZ_CHECK(layout->order.size() == manifest.tensors.size());
    FUZZ_CHECK(layout->dataSize == manifest.dataBytes());
  }
  return 0;
}
