//===- Bundle.h - The versioned bundle trellisc emits -----------*- C++ -*-===//
//
// A bundle is what the compiler hands the runtime: named sections (the host
// program, the location table, the weight manifest, PTX modules, metadata),
// each with a CRC-32, behind a magic and a format version.
//
//   offset 0   "TRELLISB"                 magic (8 bytes)
//              u32 format version         kBundleFormatVersion
//              u32 section count
//              u32 CRC-32 of the section table
//              u32 reserved (0)
//   24         section table: count × { char name[32] (NUL padded),
//                                       u64 offset, u64 size, u32 crc32,
//                                       u32 reserved }
//   ...        section payloads (8-byte aligned)
//
// All integers little-endian. A trellis.exe is the runtime executable with a
// bundle appended and a 24-byte trailer { u64 bundle offset, u64 bundle size,
// "TRLSEXE1" }, so the runtime finds its bundle in /proc/self/exe.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_RUNTIME_BUNDLE_H
#define TRELLIS_RUNTIME_BUNDLE_H

#include "trellis/Support/Result.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trellis {

inline constexpr uint32_t kBundleFormatVersion = 1;
inline constexpr size_t kBundleSectionNameSize = 32;

struct BundleSection {
  std::string name;
  std::string data;
};

class Bundle {
public:
  /// Adds (or replaces) a section. Names are at most 31 bytes.
  void set(std::string name, std::string data);
  /// The section's bytes, or null if absent.
  const std::string *find(std::string_view name) const;
  const std::vector<BundleSection> &sections() const { return sections_; }

  /// Serializes to bytes.
  std::string serialize() const;
  /// Parses and checks magic, version, table and every CRC. `what` names the
  /// source in error messages (a file path).
  static Result<Bundle> parse(std::string_view bytes, const std::string &what);

  /// Reads a bundle file, or the bundle embedded in an executable.
  static Result<Bundle> readFile(const std::string &path);
  /// The bundle embedded at the end of executable `exePath`.
  static Result<Bundle> readEmbedded(const std::string &exePath);
  /// Writes `runtimeExe` + this bundle + trailer to `outPath` (mode 0755).
  Status writeExecutable(const std::string &runtimeExe,
                         const std::string &outPath) const;
  /// Writes the bundle alone.
  Status writeFile(const std::string &outPath) const;

private:
  std::vector<BundleSection> sections_;
};

/// CRC-32 (zlib's polynomial).
uint32_t crc32Of(std::string_view bytes);

} // namespace trellis

#endif // TRELLIS_RUNTIME_BUNDLE_H
