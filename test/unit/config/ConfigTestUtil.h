//===- ConfigTestUtil.h - Helpers for the config tests --------------------===//
#ifndef TRELLIS_TEST_UNIT_CONFIG_CONFIGTESTUTIL_H
#define TRELLIS_TEST_UNIT_CONFIG_CONFIGTESTUTIL_H

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace trellis::testutil {

/// "line:col" (1-based, bytes) of the first occurrence of `needle` in
/// `text`, or of its `nth` occurrence.
inline std::string lineCol(const std::string &text, const std::string &needle,
                           int nth = 0) {
  size_t at = text.find(needle);
  for (int i = 0; i < nth && at != std::string::npos; ++i)
    at = text.find(needle, at + 1);
  EXPECT_NE(at, std::string::npos) << "needle not found: " << needle;
  if (at == std::string::npos)
    return "?:?";
  size_t line = 1, col = 1;
  for (size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

/// `text` with the first occurrence of `from` replaced by `to`.
inline std::string replaced(std::string text, const std::string &from,
                            const std::string &to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "not found: " << from;
  if (at != std::string::npos)
    text.replace(at, from.size(), to);
  return text;
}

inline void writeFile(const std::string &path, const std::string &text) {
  std::filesystem::create_directories(
      std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

inline std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// A fresh directory under the system temp dir, removed at scope exit.
class TempDir {
public:
  explicit TempDir(const std::string &tag) {
    path_ = (std::filesystem::temp_directory_path() /
             ("trellis-" + tag + "-" + std::to_string(::getpid()) + "-" +
              std::to_string(counter()++)))
                .string();
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string &path() const { return path_; }
  std::string operator/(const std::string &rel) const {
    return path_ + "/" + rel;
  }

private:
  static int &counter() {
    static int n = 0;
    return n;
  }
  std::string path_;
};

} // namespace trellis::testutil

#endif // TRELLIS_TEST_UNIT_CONFIG_CONFIGTESTUTIL_H
