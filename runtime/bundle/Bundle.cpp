//===- Bundle.cpp - The versioned bundle trellisc emits -------------------===//
#include "trellis/Runtime/Bundle.h"
#include "trellis/Support/AtomicFile.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <zlib.h>

namespace trellis {

namespace {

constexpr char kMagic[8] = {'T', 'R', 'E', 'L', 'L', 'I', 'S', 'B'};
constexpr char kExeMagic[8] = {'T', 'R', 'L', 'S', 'E', 'X', 'E', '1'};
constexpr size_t kHeaderSize = 24;
constexpr size_t kEntrySize = kBundleSectionNameSize + 8 + 8 + 4 + 4;
constexpr size_t kTrailerSize = 24;

void putU32(std::string &out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(char((v >> (8 * i)) & 0xff));
}
void putU64(std::string &out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(char((v >> (8 * i)) & 0xff));
}
uint32_t getU32(const char *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i)
    v = (v << 8) | uint8_t(p[i]);
  return v;
}
uint64_t getU64(const char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | uint8_t(p[i]);
  return v;
}

Result<std::string> readWholeFile(const std::string &path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return Error{"cannot read '" + path + "': it is a directory, not a bundle"};
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Error{"cannot open '" + path + "': " + std::strerror(errno)};
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  if (in.bad())
    return Error{"cannot read '" + path + "'"};
  return bytes;
}

} // namespace

uint32_t crc32Of(std::string_view bytes) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  // zlib takes uInt lengths: feed large inputs in pieces.
  size_t done = 0;
  while (done < bytes.size()) {
    size_t n = std::min<size_t>(bytes.size() - done, 1u << 30);
    crc = ::crc32(crc, reinterpret_cast<const Bytef *>(bytes.data() + done),
                  uInt(n));
    done += n;
  }
  return uint32_t(crc);
}

void Bundle::set(std::string name, std::string data) {
  for (BundleSection &s : sections_)
    if (s.name == name) {
      s.data = std::move(data);
      return;
    }
  sections_.push_back({std::move(name), std::move(data)});
}

const std::string *Bundle::find(std::string_view name) const {
  for (const BundleSection &s : sections_)
    if (s.name == name)
      return &s.data;
  return nullptr;
}

std::string Bundle::serialize() const {
  std::string table;
  uint64_t offset = kHeaderSize + kEntrySize * sections_.size();
  std::vector<uint64_t> offsets;
  for (const BundleSection &s : sections_) {
    offset = (offset + 7) & ~uint64_t(7);
    offsets.push_back(offset);
    std::string name = s.name.substr(0, kBundleSectionNameSize - 1);
    name.resize(kBundleSectionNameSize, '\0');
    table += name;
    putU64(table, offset);
    putU64(table, s.data.size());
    putU32(table, crc32Of(s.data));
    putU32(table, 0);
    offset += s.data.size();
  }
  std::string out(kMagic, 8);
  putU32(out, kBundleFormatVersion);
  putU32(out, uint32_t(sections_.size()));
  putU32(out, crc32Of(table));
  putU32(out, 0);
  out += table;
  for (size_t i = 0; i < sections_.size(); ++i) {
    out.resize(offsets[i], '\0');
    out += sections_[i].data;
  }
  return out;
}

Result<Bundle> Bundle::parse(std::string_view bytes, const std::string &what) {
  auto bad = [&](const std::string &msg) {
    return Error{"'" + what + "' is not a valid trellis bundle: " + msg};
  };
  if (bytes.size() < kHeaderSize)
    return bad("it has " + std::to_string(bytes.size()) +
               " bytes, fewer than the 24-byte header");
  if (std::memcmp(bytes.data(), kMagic, 8) != 0)
    return bad("the magic is not \"TRELLISB\"");
  uint32_t version = getU32(bytes.data() + 8);
  if (version != kBundleFormatVersion)
    return Error{"'" + what + "' has bundle format version " +
                 std::to_string(version) + ", this runtime reads version " +
                 std::to_string(kBundleFormatVersion) +
                 ": recompile it with the matching trellisc"};
  uint64_t count = getU32(bytes.data() + 12);
  uint32_t tableCrc = getU32(bytes.data() + 16);
  if (count > (bytes.size() - kHeaderSize) / kEntrySize)
    return bad("the section table (" + std::to_string(count) +
               " sections) runs past the end of the data");
  std::string_view table = bytes.substr(kHeaderSize, count * kEntrySize);
  if (crc32Of(table) != tableCrc)
    return bad("the section table checksum does not match (corrupted file)");
  Bundle bundle;
  for (uint64_t i = 0; i < count; ++i) {
    const char *e = table.data() + i * kEntrySize;
    std::string name(e, strnlen(e, kBundleSectionNameSize));
    uint64_t off = getU64(e + kBundleSectionNameSize);
    uint64_t size = getU64(e + kBundleSectionNameSize + 8);
    uint32_t crc = getU32(e + kBundleSectionNameSize + 16);
    if (off > bytes.size() || size > bytes.size() - off)
      return bad("section '" + name + "' lies outside the data");
    std::string_view data = bytes.substr(off, size);
    if (crc32Of(data) != crc)
      return bad("section '" + name + "' checksum does not match (corrupted)");
    bundle.sections_.push_back({name, std::string(data)});
  }
  return bundle;
}

Result<Bundle> Bundle::readFile(const std::string &path) {
  Result<std::string> bytes = readWholeFile(path);
  if (!bytes)
    return bytes.takeError();
  return parse(*bytes, path);
}

Result<Bundle> Bundle::readEmbedded(const std::string &exePath) {
  Result<std::string> bytes = readWholeFile(exePath);
  if (!bytes)
    return bytes.takeError();
  const std::string &b = *bytes;
  if (b.size() < kTrailerSize ||
      std::memcmp(b.data() + b.size() - 8, kExeMagic, 8) != 0)
    return Error{"'" + exePath +
                 "' carries no bundle (it is the bare runtime; pass --bundle "
                 "FILE or run an executable made by trellisc)"};
  uint64_t off = getU64(b.data() + b.size() - kTrailerSize);
  uint64_t size = getU64(b.data() + b.size() - kTrailerSize + 8);
  if (off > b.size() || size > b.size() - kTrailerSize - off)
    return Error{"'" + exePath + "' has a damaged bundle trailer"};
  return parse(std::string_view(b).substr(off, size), exePath);
}

Status Bundle::writeFile(const std::string &outPath) const {
  AtomicFile out(outPath);
  if (!out.status())
    return out.status();
  out.write(serialize());
  return out.commit();
}

Status Bundle::writeExecutable(const std::string &runtimeExe,
                               const std::string &outPath) const {
  Result<std::string> runtime = readWholeFile(runtimeExe);
  if (!runtime)
    return Error{"cannot read the trellis runtime to embed: " +
                 runtime.message()};
  std::string bundle = serialize();
  std::string trailer;
  putU64(trailer, runtime->size());
  putU64(trailer, bundle.size());
  trailer.append(kExeMagic, 8);
  AtomicFile out(outPath);
  if (!out.status())
    return out.status();
  out.write(*runtime);
  out.write(bundle);
  out.write(trailer);
  TRELLIS_RETURN_IF_ERROR(out.commit());
  if (::chmod(outPath.c_str(), 0755) != 0)
    return Error{"cannot make '" + outPath +
                 "' executable: " + std::strerror(errno)};
  return Status::ok();
}

} // namespace trellis
