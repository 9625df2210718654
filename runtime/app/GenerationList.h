//===- GenerationList.h - The generations of a trellis.exe run --*- C++ -*-===//
//
// Private to runtime/app. trellis.exe makes one generation per --cond, or one
// per line of an --inputs manifest (JSON Lines: one object a line with "id",
// "cond", "seed" and optionally "coords"; relative paths are relative to the
// manifest's folder), each --repeat times. Each generation writes into its
// own folder: OUT itself for a single --cond, OUT/<i> for repeated --cond,
// OUT/<id> for a manifest.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_RUNTIME_APP_GENERATIONLIST_H
#define TRELLIS_RUNTIME_APP_GENERATIONLIST_H

#include "trellis/Support/Result.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trellis {

struct GenerationSpec {
  std::string id;                  // names the generation in messages
  std::string cond;                // conditioning file
  std::vector<std::string> images; // or images (--image), one generation
  std::string coords;              // optional: skip stage 1
  uint64_t seed = 42;
  std::string outDir;
  std::string origin; // "--cond 2" or "manifest.jsonl:3" (messages)
};

/// Reads an --inputs manifest. Every line is checked before anything runs:
/// errors name the file, the line, the field, expected and found.
Result<std::vector<GenerationSpec>>
readGenerationManifest(const std::string &path, const std::string &outDir);

/// The generations of repeated --cond (one folder each when several).
std::vector<GenerationSpec>
generationsFromConds(const std::vector<std::string> &conds,
                     const std::string &coords, uint64_t seed,
                     const std::string &outDir);

} // namespace trellis

#endif // TRELLIS_RUNTIME_APP_GENERATIONLIST_H
