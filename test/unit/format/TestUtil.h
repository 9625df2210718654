//===- TestUtil.h - Helpers for the format tests --------------------------===//
#ifndef TRELLIS_TEST_UNIT_FORMAT_TESTUTIL_H
#define TRELLIS_TEST_UNIT_FORMAT_TESTUTIL_H

#include "trellis/Support/HostTensor.h"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>

namespace trellis::test {

/// A fresh, empty directory for one test, removed when the test ends.
class TempDir {
public:
  explicit TempDir(const std::string &tag) {
    path_ = std::filesystem::temp_directory_path() /
            ("trellis-format-" + tag + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string &name) const {
    return (path_ / name).string();
  }
  const std::filesystem::path &path() const { return path_; }

private:
  std::filesystem::path path_;
};

inline std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

/// 8-byte little-endian length + header + data, as a safetensors image.
inline std::string safetensorsImage(const std::string &header,
                                    const std::string &data,
                                    uint64_t lengthField = UINT64_MAX) {
  uint64_t n = lengthField == UINT64_MAX ? header.size() : lengthField;
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = char(n >> (8 * i));
  return out + header + data;
}

/// A tensor of the given dtype/shape whose bytes are a deterministic pattern
/// (any bit pattern is fine: the formats move bytes, they do not interpret
/// them).
inline HostTensor patternTensor(DType dtype, Shape shape, unsigned seed = 1) {
  HostTensor t(dtype, std::move(shape));
  auto *p = static_cast<uint8_t *>(t.mutableRaw());
  for (size_t i = 0; i < t.nbytes(); ++i)
    p[i] = uint8_t((i * 37 + seed * 101 + (i >> 8)) & 0xff);
  if (dtype == DType::Bool)
    for (size_t i = 0; i < t.nbytes(); ++i)
      p[i] &= 1;
  return t;
}

inline bool sameBytes(const HostTensor &a, const HostTensor &b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         a.nbytes() == b.nbytes() &&
         (a.nbytes() == 0 || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0);
}

inline constexpr DType kAllDTypes[] = {
    DType::F16, DType::BF16, DType::F32, DType::F64, DType::I8,
    DType::U8,  DType::I16,  DType::I32, DType::I64, DType::Bool};

} // namespace trellis::test

#endif // TRELLIS_TEST_UNIT_FORMAT_TESTUTIL_H
