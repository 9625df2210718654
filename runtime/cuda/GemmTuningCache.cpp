//===- GemmTuningCache.cpp - GEMM picks kept across processes -------------===//
#include "runtime/cuda/GemmTuningCache.h"

#include "trellis/Support/AtomicFile.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <filesystem>
#include <fstream>

namespace trellis::gpuexec {
namespace {

using json = nlohmann::json;

/// The file's JSON object, or an empty object when it is missing or is not
/// one.
json readObject(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    return json::object();
  json cache = json::parse(in, nullptr, /*allow_exceptions=*/false);
  return cache.is_object() ? cache : json::object();
}

/// A non-empty string of lower-case hex digits, as the executor writes.
bool isHexText(const json &v) {
  if (!v.is_string() || v.get_ref<const std::string &>().empty())
    return false;
  for (char c : v.get_ref<const std::string &>())
    if (!std::isdigit(static_cast<unsigned char>(c)) && (c < 'a' || c > 'f'))
      return false;
  return true;
}

} // namespace

GemmPicks readGemmTuningCache(const std::string &path,
                              const std::string &section) {
  GemmPicks picks;
  json cache = readObject(path);
  auto it = cache.find(section);
  if (it == cache.end() || !it->is_object())
    return picks;
  for (const auto &[key, algo] : it->items())
    if (isHexText(algo))
      picks.emplace(key, algo.get<std::string>());
  return picks;
}

Status writeGemmTuningCache(const std::string &path, const std::string &section,
                            const GemmPicks &picks) {
  json cache = readObject(path);
  json &entries = cache[section];
  if (!entries.is_object())
    entries = json::object();
  for (const auto &[key, algo] : picks)
    entries[key] = algo;
  std::filesystem::path file(path);
  if (file.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(file.parent_path(), ec);
    if (ec)
      return Error{"cannot create " + file.parent_path().string() + ": " +
                   ec.message()};
  }
  AtomicFile out(path);
  if (!out.status())
    return out.status();
  out.write(cache.dump(1) + "\n");
  return out.commit();
}

} // namespace trellis::gpuexec
