//===- GenerationList.h - The generations of a trellis.exe run --*- C++ -*-===//
//
// Private to runtime/app. trellis.exe makes one generation per --cond, or one
// per line of an --inputs manifest (JSON Lines: one object a line with "id",
// "cond" or "image", "seed" and optionally "coords", "ss" / "slat" ({"steps",
// "cfg"}) and "formats"; relative paths are relative to the manifest's
// folder), each --repeat times. Each generation writes into its own folder:
// OUT itself for a single --cond, OUT/<i> for repeated --cond, OUT/<id> for a
// manifest.
//
// A manifest line that cannot be used (malformed JSON, a missing or wrong
// field) does not stop the others: it becomes an entry with `invalid` set,
// which the batch records as failed (named `line-<n>` when it has no usable
// id). Only an unreadable file, no entry at all, or an id given twice (two
// lines, one folder) fail the whole manifest.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_RUNTIME_APP_GENERATIONLIST_H
#define TRELLIS_RUNTIME_APP_GENERATIONLIST_H

#include "trellis/Runtime/CpuExecutor.h"
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
  /// A manifest entry's own sampler settings and decoders (else the command
  /// line's).
  std::optional<SamplerRunOverrides> ss, slat;
  std::optional<std::vector<std::string>> formats;
  /// Why a manifest line cannot run (empty: it can).
  std::string invalid;
  /// The line's position among the manifest's entries (0-based; the unit
  /// of --shard).
  size_t index = 0;
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
