//===- Npz.cpp - NumPy .npz archives through libzip -----------------------===//
//
// numpy.savez / savez_compressed write a zip archive (Python's zipfile) with
// one "<key>.npy" member per array, ZIP_STORED or ZIP_DEFLATED (zlib level
// 6, the zlib default zipfile uses).
//
// Writing: libzip writes into an in-memory buffer source; the finished
// archive is then copied into an AtomicFile. (libzip can write to a path
// itself, through its own temporary file renamed on zip_close, but it needs
// to seek back into what it wrote, which AtomicFile does not offer; and
// going through AtomicFile keeps one rule for every output.) The member
// data is not copied: each member is a two-fragment source (the .npy header
// and the tensor's own bytes). Members get the DOS epoch as timestamp so the
// same arrays always give the same bytes.
//
// Reading: the file is mapped and opened as a buffer source with
// ZIP_CHECKCONS. Of each member the .npy header is inflated first; the array
// it declares must be the member's size in the directory, and exactly that
// many bytes are inflated into the tensor, so a member that inflates to more
// (a zip bomb) or less is an error that costs no more memory than the
// declared array. libzip checks the CRC at the end of the member.
//
//===----------------------------------------------------------------------===//
#include "trellis/Format/Npy.h"
#include "trellis/Support/AtomicFile.h"

#include "runtime/format/FormatUtil.h"
#include "runtime/format/NpyHeader.h"

#include <zip.h>

#include <cstring>
#include <ctime>
#include <memory>
#include <new>
#include <unordered_set>

namespace trellis {

using format::quote;

namespace {

/// Deflate cannot expand data more than ~1032:1 (RFC 1951 bound); members
/// claiming more are corrupt (or zip bombs).
constexpr uint64_t kMaxDeflateRatio = 1032;

/// numpy.save writes headers of a few hundred bytes (numpy.load refuses
/// more than 10000 by default); longer ones in an .npz are refused before
/// they are read.
constexpr uint64_t kMaxMemberHeaderBytes = 1 << 20;

struct ZipError {
  zip_error_t e;
  ZipError() { zip_error_init(&e); }
  ~ZipError() { zip_error_fini(&e); }
  std::string str() { return zip_error_strerror(&e); }
};

struct ArchiveCloser {
  void operator()(zip_t *za) const { zip_discard(za); }
};
using Archive = std::unique_ptr<zip_t, ArchiveCloser>;
struct FileCloser {
  void operator()(zip_file_t *f) const { zip_fclose(f); }
};
using ZipFile = std::unique_ptr<zip_file_t, FileCloser>;

const char *methodName(int32_t m) {
  switch (m) {
  case ZIP_CM_STORE:
    return "stored";
  case ZIP_CM_DEFLATE:
    return "deflate";
  case ZIP_CM_BZIP2:
    return "bzip2";
  case ZIP_CM_LZMA:
    return "lzma";
  case ZIP_CM_XZ:
    return "xz";
#ifdef ZIP_CM_ZSTD
  case ZIP_CM_ZSTD:
    return "zstd";
#endif
  default:
    return "unknown";
  }
}

} // namespace

Result<NamedTensors> parseNpz(const void *data, size_t size,
                              const std::string &what) {
  const std::string where = what + ": ";
  static const uint8_t kEmpty[1] = {0};
  ZipError err;
  zip_source_t *src =
      zip_source_buffer_create(size ? data : kEmpty, size, 0, &err.e);
  if (!src)
    return Error{where + "cannot read the archive: " + err.str()};
  Archive za(zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &err.e));
  if (!za) {
    zip_source_free(src);
    std::string why = zip_error_code_zip(&err.e) == ZIP_ER_EXISTS
                          ? "two members have the same name"
                          : err.str();
    return Error{where + "not a valid .npz (zip) archive: " + why};
  }
  zip_int64_t count = zip_get_num_entries(za.get(), 0);
  if (count < 0)
    return Error{where + "cannot list the archive: " + zip_strerror(za.get())};

  NamedTensors out;
  std::unordered_set<std::string> seen;
  for (zip_int64_t i = 0; i < count; ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(za.get(), zip_uint64_t(i), 0, &st) != 0)
      return Error{where + "cannot read entry " + std::to_string(i) + ": " +
                   zip_strerror(za.get())};
    const zip_uint64_t need = ZIP_STAT_NAME | ZIP_STAT_SIZE |
                              ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD;
    if ((st.valid & need) != need || !st.name)
      return Error{where + "entry " + std::to_string(i) +
                   " lacks a name, size or compression method"};
    std::string name = st.name;
    std::string m = "member " + quote(name) + ": ";
    if (name.size() < 4 || name.compare(name.size() - 4, 4, ".npy") != 0 ||
        name.back() == '/')
      return Error{where + m +
                   "not a .npy array (every member of an .npz is named "
                   "'<key>.npy')"};
    std::string key = name.substr(0, name.size() - 4);
    if (!seen.insert(key).second)
      return Error{where + m + "appears twice in the archive"};
    if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) &&
        st.encryption_method != ZIP_EM_NONE)
      return Error{where + m + "is encrypted, which is not supported"};
    if (st.comp_method != ZIP_CM_STORE && st.comp_method != ZIP_CM_DEFLATE)
      return Error{where + m + "uses compression method " +
                   std::to_string(st.comp_method) + " (" +
                   methodName(st.comp_method) +
                   "); .npz members are stored or deflate-compressed"};
    if (st.comp_method == ZIP_CM_STORE && st.size != st.comp_size)
      return Error{where + m + "is stored uncompressed but its size (" +
                   std::to_string(st.size) +
                   ") differs from its stored size (" +
                   std::to_string(st.comp_size) + ")"};
    if (st.comp_size > size || (st.comp_method == ZIP_CM_DEFLATE &&
                                st.size > st.comp_size * kMaxDeflateRatio + 64))
      return Error{where + m + "claims " + std::to_string(st.size) +
                   " bytes from " + std::to_string(st.comp_size) +
                   " compressed bytes, more than deflate can produce in an "
                   "archive of " +
                   std::to_string(size) + " bytes"};

    ZipFile zf(zip_fopen_index(za.get(), zip_uint64_t(i), 0));
    if (!zf)
      return Error{where + m + "cannot open: " + zip_strerror(za.get())};
    // Reads up to n bytes; fewer only where the member's data ends.
    auto readUpTo = [&](void *dst, uint64_t n) -> Result<uint64_t> {
      uint64_t got = 0;
      while (got < n) {
        zip_int64_t r =
            zip_fread(zf.get(), static_cast<uint8_t *>(dst) + got, n - got);
        if (r < 0)
          return Error{where + m +
                       "corrupt data: " + zip_file_strerror(zf.get())};
        if (r == 0)
          break;
        got += uint64_t(r);
      }
      return got;
    };

    // The .npy header first: the array it declares is all the member may
    // inflate to, checked against the directory before the data is read.
    const std::string member = what + " member " + quote(name); // as .npy
    std::string header(format::kNpyPrefixMax, '\0');
    TRELLIS_ASSIGN_OR_RETURN(uint64_t got,
                             readUpTo(header.data(), header.size()));
    TRELLIS_ASSIGN_OR_RETURN(
        uint64_t headerBytes,
        format::npyHeaderBytes(header.data(), got, member));
    if (headerBytes > kMaxMemberHeaderBytes)
      return Error{where + m + "the .npy header is " +
                   std::to_string(headerBytes) + " bytes long, more than the " +
                   std::to_string(kMaxMemberHeaderBytes) +
                   " bytes an .npz member's header may have"};
    if (headerBytes > got) {
      header.resize(size_t(headerBytes));
      TRELLIS_ASSIGN_OR_RETURN(
          uint64_t rest, readUpTo(header.data() + got, headerBytes - got));
      if (got + rest < headerBytes)
        return Error{where + m + "the data ends after " +
                     std::to_string(got + rest) + " bytes, inside its " +
                     std::to_string(headerBytes) + "-byte .npy header"};
    }
    TRELLIS_ASSIGN_OR_RETURN(
        format::NpyLayout layout,
        format::parseNpyHeader(header.data(), size_t(headerBytes), member));
    const uint64_t declared = headerBytes + layout.dataBytes;
    const std::string layoutDesc =
        "shape " + shapeToString(layout.shape) + " of " + layout.descr + ": " +
        std::to_string(headerBytes) + " header + " +
        std::to_string(layout.dataBytes) + " data bytes";
    const std::string declares = "its .npy header declares " +
                                 std::to_string(declared) + " (" + layoutDesc +
                                 ")";
    if (st.size != declared)
      return Error{where + m + "the archive's directory gives it " +
                   std::to_string(st.size) + " bytes but " + declares};
    HostTensor t;
    try {
      t = HostTensor(layout.dtype, layout.shape);
    } catch (const std::bad_alloc &) {
      return Error{where + m + "out of memory reading " +
                   std::to_string(layout.dataBytes) + " bytes"};
    }
    // A header shorter than the 12 bytes read first (only in a malformed
    // member) leaves data bytes in `header`.
    uint64_t data = got > headerBytes ? got - headerBytes : 0;
    bool longer = data > layout.dataBytes;
    if (data && !longer)
      std::memcpy(t.mutableRaw(), header.data() + headerBytes, size_t(data));
    if (!longer) {
      TRELLIS_ASSIGN_OR_RETURN(
          uint64_t rest, readUpTo(static_cast<uint8_t *>(t.mutableRaw()) + data,
                                  layout.dataBytes - data));
      data += rest;
    }
    if (data < layout.dataBytes)
      return Error{where + m + "the data ends after " +
                   std::to_string(headerBytes + data) + " bytes, but " +
                   declares};
    // One more read reaches the end of the member, where libzip checks the
    // CRC, and shows whether the stream inflates to more than declared.
    uint8_t extra;
    zip_int64_t r = longer ? 1 : zip_fread(zf.get(), &extra, 1);
    if (r < 0)
      return Error{where + m + "corrupt data: " + zip_file_strerror(zf.get())};
    if (r > 0)
      return Error{where + m + "the data inflates to more than the " +
                   std::to_string(declared) +
                   " bytes its .npy header declares (" + layoutDesc +
                   "); reading stopped there (a corrupt member or a zip bomb)"};
    out.emplace_back(std::move(key), std::move(t));
  }
  return out;
}

Result<NamedTensors> readNpz(const std::string &path) {
  auto mapped = format::mapFile(path);
  if (!mapped)
    return mapped.takeError();
  return parseNpz(mapped->data, mapped->size, "'" + path + "'");
}

Status writeNpz(const std::string &path, const NamedTensors &entries,
                bool compress) {
  const std::string where = "cannot write '" + path + "': ";
  std::vector<std::string> headers;
  headers.reserve(entries.size());
  std::unordered_set<std::string> keys;
  for (const auto &[key, tensor] : entries) {
    std::string a = "array " + quote(key) + ": ";
    if (key.empty())
      return Error{where + "an array has an empty key"};
    if (key.find('\0') != std::string::npos || !format::isValidUtf8(key))
      return Error{where + a + "the key is not valid UTF-8 text"};
    if (!keys.insert(key).second)
      return Error{where + a + "the key appears twice"};
    if (!tensor.defined())
      return Error{where + a + "the tensor has no data"};
    auto h = npyHeader(tensor.dtype(), tensor.shape());
    if (!h)
      return Error{where + a + h.message()};
    headers.push_back(std::move(*h));
  }

  AtomicFile out(path);
  if (!out.status())
    return out.status();
  if (entries.empty()) {
    // libzip deletes an archive with no entries; numpy writes the bare
    // end-of-central-directory record.
    static const char kEmptyZip[22] = {'P', 'K', 5, 6};
    out.write(kEmptyZip, sizeof(kEmptyZip));
    return out.commit();
  }

  ZipError err;
  zip_source_t *sink = zip_source_buffer_create(nullptr, 0, 0, &err.e);
  if (!sink)
    return Error{where + err.str()};
  Archive za(zip_open_from_source(sink, ZIP_CREATE | ZIP_TRUNCATE, &err.e));
  if (!za) {
    zip_source_free(sink);
    return Error{where + err.str()};
  }
  zip_source_keep(sink); // survives zip_close, holding the archive bytes
  std::unique_ptr<zip_source_t, void (*)(zip_source_t *)> sinkRef(
      sink, zip_source_free);

  // Midnight, 1 January 1980 (local time, as DOS timestamps are).
  std::tm tm{};
  tm.tm_year = 80;
  tm.tm_mday = 1;
  tm.tm_isdst = -1;
  std::time_t epoch = std::mktime(&tm);

  for (size_t i = 0; i < entries.size(); ++i) {
    const auto &[key, tensor] = entries[i];
    std::string a = "array " + quote(key) + ": ";
    zip_buffer_fragment_t frags[2] = {
        {reinterpret_cast<zip_uint8_t *>(headers[i].data()), headers[i].size()},
        {static_cast<zip_uint8_t *>(const_cast<void *>(tensor.raw())),
         tensor.nbytes()}};
    zip_source_t *src = zip_source_buffer_fragment_create(
        frags, tensor.nbytes() ? 2 : 1, 0, &err.e);
    if (!src)
      return Error{where + a + err.str()};
    std::string member = key + ".npy";
    zip_int64_t idx =
        zip_file_add(za.get(), member.c_str(), src, ZIP_FL_ENC_UTF_8);
    if (idx < 0) {
      zip_source_free(src);
      return Error{where + a + zip_strerror(za.get())};
    }
    if (zip_set_file_compression(za.get(), zip_uint64_t(idx),
                                 compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE,
                                 compress ? 6 : 0) != 0 ||
        zip_file_set_mtime(za.get(), zip_uint64_t(idx), epoch, 0) != 0)
      return Error{where + a + zip_strerror(za.get())};
  }
  if (zip_close(za.get()) != 0)
    return Error{where + zip_strerror(za.get())};
  (void)za.release(); // zip_close freed it

  if (zip_source_open(sink) != 0)
    return Error{where + "cannot read back the archive: " +
                 zip_error_strerror(zip_source_error(sink))};
  char chunk[1 << 16];
  while (true) {
    zip_int64_t r = zip_source_read(sink, chunk, sizeof(chunk));
    if (r < 0) {
      std::string msg = zip_error_strerror(zip_source_error(sink));
      zip_source_close(sink);
      return Error{where + "cannot read back the archive: " + msg};
    }
    if (r == 0)
      break;
    out.write(chunk, size_t(r));
  }
  zip_source_close(sink);
  return out.commit();
}

} // namespace trellis
