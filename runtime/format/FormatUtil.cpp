//===- FormatUtil.cpp -----------------------------------------------------===//
#include "runtime/format/FormatUtil.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace trellis::format {

Result<FileStamp> stampOf(int fd, const std::string &path) {
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return Error{"cannot stat '" + path + "': " + std::strerror(errno)};
  FileStamp s;
  s.size = uint64_t(st.st_size);
  s.mtimeNs = int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  return s;
}

Result<MappedFile> mapFile(const std::string &path, bool keepOpen) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Error{"cannot open '" + path + "': " + std::strerror(errno)};
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Error{"cannot stat '" + path + "': " + std::strerror(e)};
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error{"cannot read '" + path + "': not a regular file"};
  }
  MappedFile m;
  m.size = size_t(st.st_size);
  m.stamp.size = uint64_t(st.st_size);
  m.stamp.mtimeNs =
      int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  auto finish = [&] {
    if (keepOpen)
      m.fd = fd;
    else
      ::close(fd);
  };
  if (m.size == 0) {
    finish();
    static const uint8_t kEmpty[1] = {0};
    m.data = kEmpty;
    return m;
  }
  void *addr = ::mmap(nullptr, m.size, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  if (addr == MAP_FAILED) {
    ::close(fd);
    return Error{"cannot map '" + path + "': " + std::strerror(e)};
  }
  finish();
  size_t size = m.size;
  m.keepAlive = std::shared_ptr<const void>(
      addr, [size](const void *p) { ::munmap(const_cast<void *>(p), size); });
  m.data = static_cast<const uint8_t *>(addr);
  return m;
}

std::string quote(std::string_view s, size_t maxLen) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "'";
  size_t n = s.size() > maxLen ? maxLen : s.size();
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c >= 0x7f || c == '\\' || c == '\'') {
      if (c == '\\' || c == '\'') {
        out += '\\';
        out += char(c);
      } else {
        out += "\\x";
        out += kHex[c >> 4];
        out += kHex[c & 15];
      }
    } else {
      out += char(c);
    }
  }
  out += "'";
  if (s.size() > maxLen)
    out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

bool isValidUtf8(std::string_view s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n)
      return false;
    for (int k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80)
        return false;
      cp = cp << 6 | (cc & 0x3f);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
        (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += len;
  }
  return true;
}

} // namespace trellis::format
