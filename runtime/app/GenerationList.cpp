//===- GenerationList.cpp - The generations one trellis.exe run makes -----===//
//
// See GenerationList.h. The manifest is JSON Lines (nlohmann::json per line);
// blank lines are skipped; unknown keys are errors (a misspelt "seeed" must
// not silently fall back to a default).
//
//===----------------------------------------------------------------------===//
#include "runtime/app/GenerationList.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

namespace trellis {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

/// An id becomes a folder name: letters, digits, '-', '_', '.', not "." or
/// "..", at most 128 characters.
bool safeId(const std::string &id) {
  if (id.empty() || id.size() > 128 || id == "." || id == "..")
    return false;
  for (char c : id)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ||
          c == '.'))
      return false;
  return true;
}

std::string resolve(const fs::path &base, const std::string &p) {
  fs::path path(p);
  return path.is_absolute() ? p : (base / path).string();
}

} // namespace

namespace {

/// {"steps": N, "cfg": W} of a manifest entry; an error names the field.
Status samplerOverrides(const json &v, const std::string &name,
                        std::optional<SamplerRunOverrides> &dst) {
  if (!v.is_object())
    return Error{"field '" + name +
                 "' must be an object {\"steps\": N, \"cfg\": W}, found " +
                 v.dump()};
  SamplerRunOverrides o;
  for (const auto &[key, value] : v.items()) {
    if (key == "steps") {
      if (!value.is_number_integer() || value.get<int64_t>() < 1 ||
          value.get<int64_t>() > 10000)
        return Error{"field '" + name +
                     ".steps' must be an integer in 1..10000, found " +
                     value.dump()};
      o.steps = value.get<int64_t>();
    } else if (key == "cfg") {
      if (!value.is_number() || !std::isfinite(value.get<double>()) ||
          value.get<double>() < 0)
        return Error{"field '" + name +
                     ".cfg' must be a finite number >= 0, found " +
                     value.dump()};
      o.cfgStrength = value.get<double>();
    } else {
      return Error{"unknown field '" + name + "." + key +
                   "' (expected steps, cfg)"};
    }
  }
  dst = o;
  return Status::ok();
}

/// Every field of one manifest object but its id, into `g`.
Status readEntry(const json &j, const fs::path &base, GenerationSpec &g) {
  for (const auto &[key, value] : j.items())
    if (key != "id" && key != "cond" && key != "image" && key != "seed" &&
        key != "coords" && key != "ss" && key != "slat" && key != "formats")
      return Error{"unknown field '" + key +
                   "' (expected id, cond or image, seed, coords, ss, slat, "
                   "formats)"};
  if (j.contains("image")) {
    // One picture, or the pictures of one multi-image generation.
    const json &image = j["image"];
    if (j.contains("cond"))
      return Error{"fields 'cond' and 'image' exclude each other (tokens, or "
                   "the pictures to encode)"};
    std::vector<json> items = image.is_array() ? image.get<std::vector<json>>()
                                               : std::vector<json>{image};
    for (const json &item : items) {
      if (!item.is_string() || item.get<std::string>().empty())
        return Error{"field 'image' must be an image path or a non-empty "
                     "list of them, found " +
                     image.dump()};
      g.images.push_back(resolve(base, item.get<std::string>()));
    }
    if (g.images.empty())
      return Error{"field 'image' must be an image path or a non-empty list "
                   "of them, found []"};
  } else {
    if (!j.contains("cond") || !j["cond"].is_string() ||
        j["cond"].get<std::string>().empty())
      return Error{"field 'cond' (or 'image') must be a file path, found " +
                   (j.contains("cond") ? j["cond"].dump() : "nothing")};
    g.cond = resolve(base, j["cond"].get<std::string>());
  }
  if (!j.contains("seed") || !j["seed"].is_number_unsigned())
    return Error{"field 'seed' must be an integer in 0..2^64-1, found " +
                 (j.contains("seed") ? j["seed"].dump() : "nothing")};
  g.seed = j["seed"].get<uint64_t>();
  if (j.contains("coords")) {
    if (!j["coords"].is_string())
      return Error{"field 'coords' must be a file path, found " +
                   j["coords"].dump()};
    g.coords = resolve(base, j["coords"].get<std::string>());
  }
  for (const char *stage : {"ss", "slat"})
    if (j.contains(stage))
      TRELLIS_RETURN_IF_ERROR(
          samplerOverrides(j[stage], stage, stage[1] == 's' ? g.ss : g.slat));
  if (j.contains("formats")) {
    const json &f = j["formats"];
    std::vector<std::string> formats;
    for (const json &item : f.is_array() ? f : json::array({nullptr})) {
      std::string name = item.is_string() ? item.get<std::string>() : "";
      if (name != "gs" && name != "rf" && name != "mesh")
        return Error{"field 'formats' must be a non-empty list of \"gs\", "
                     "\"rf\", \"mesh\", found " +
                     f.dump()};
      formats.push_back(name);
    }
    if (formats.empty())
      return Error{"field 'formats' must be a non-empty list of \"gs\", "
                   "\"rf\", \"mesh\", found []"};
    g.formats = formats;
  }
  return Status::ok();
}

} // namespace

Result<std::vector<GenerationSpec>>
readGenerationManifest(const std::string &path, const std::string &outDir) {
  std::ifstream in(path);
  if (!in)
    return Error{"--inputs: cannot open '" + path + "'"};
  const fs::path base = fs::path(path).parent_path();
  std::vector<GenerationSpec> specs;
  std::set<std::string> ids;
  std::string line;
  for (int lineNo = 1; std::getline(in, line); ++lineNo) {
    std::string where = path + ":" + std::to_string(lineNo);
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    GenerationSpec g;
    g.origin = where;
    g.index = specs.size();
    g.id = "line-" + std::to_string(lineNo);
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      g.invalid = where + ": expected one JSON object per line, found '" +
                  line.substr(0, 80) + "'";
    } else if (!j.contains("id") || !j["id"].is_string() ||
               !safeId(j["id"].get<std::string>())) {
      g.invalid = where +
                  ": field 'id' must be a string of letters, digits, '-', "
                  "'_' or '.' (it names the output folder), found " +
                  (j.contains("id") ? j["id"].dump() : "nothing");
    } else {
      g.id = j["id"].get<std::string>();
      if (Status s = readEntry(j, base, g); !s)
        g.invalid = where + ": " + s.message();
    }
    if (!ids.insert(g.id).second)
      return Error{where + ": id '" + g.id +
                   "' appears twice (each id names one output folder)"};
    g.outDir = (fs::path(outDir) / g.id).string();
    specs.push_back(std::move(g));
  }
  if (specs.empty())
    return Error{"--inputs: '" + path + "' lists no generation"};
  return specs;
}

std::vector<GenerationSpec>
generationsFromConds(const std::vector<std::string> &conds,
                     const std::string &coords, uint64_t seed,
                     const std::string &outDir) {
  std::vector<GenerationSpec> specs;
  for (size_t i = 0; i < conds.size(); ++i) {
    GenerationSpec g;
    g.id = std::to_string(i);
    g.cond = conds[i];
    g.coords = coords;
    g.seed = seed;
    g.outDir = conds.size() == 1 ? outDir : (fs::path(outDir) / g.id).string();
    g.origin = "--cond " + conds[i];
    specs.push_back(std::move(g));
  }
  return specs;
}

} // namespace trellis
