//===- Safetensors.cpp - Mapped safetensors files and a streaming writer --===//
//
// The checks follow the reference implementation (huggingface/safetensors,
// safetensors/src/tensor.rs: read_metadata, Metadata::validate): header
// length <= 100 MB and inside the file, a JSON object of entries with
// exactly {dtype, shape, data_offsets}, byte ranges that match shape x dtype
// and tile the data section with no overlap, no hole and nothing after the
// last tensor. Duplicate keys (which serde silently collapses) are refused.
//
//===----------------------------------------------------------------------===//
#include "trellis/Format/Safetensors.h"
#include "trellis/Support/AtomicFile.h"

#include "runtime/format/FormatUtil.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <new>
#include <set>
#include <unordered_set>

#include <unistd.h>

namespace trellis {

using format::quote;
using json = nlohmann::json;

namespace {

constexpr std::string_view kMetadataKey = "__metadata__";
constexpr const char *kKnownDTypes =
    "F16, BF16, F32, F64, I8, U8, I16, I32, I64, BOOL";

/// Rank of a dtype in the reference library's `Dtype` enum (declared in
/// increasing alignment order; the writer sorts by it, descending).
int referenceRank(DType t) {
  switch (t) {
  case DType::Bool:
    return 0;
  case DType::U8:
    return 1;
  case DType::I8:
    return 2;
  case DType::I16:
    return 3;
  case DType::F16:
    return 4;
  case DType::BF16:
    return 5;
  case DType::I32:
    return 6;
  case DType::F32:
    return 7;
  case DType::F64:
    return 8;
  case DType::I64:
    return 9;
  }
  return -1;
}

std::string rangeStr(uint64_t b, uint64_t e) {
  std::string s = "[";
  s += std::to_string(b);
  s += ", ";
  s += std::to_string(e);
  s += ']';
  return s;
}

/// "an array", "a string", ... for messages.
std::string kind(const json &j) {
  switch (j.type()) {
  case json::value_t::array:
    return "an array";
  case json::value_t::object:
    return "an object";
  case json::value_t::string:
    return "a string";
  case json::value_t::boolean:
    return "a boolean";
  case json::value_t::null:
    return "null";
  case json::value_t::number_integer:
  case json::value_t::number_unsigned:
  case json::value_t::number_float:
    return "a number";
  default:
    return std::string("a ") + j.type_name();
  }
}

/// The JSON text of a value for a message, shortened. Never recurses (a
/// hostile header can nest millions of levels deep): containers show their
/// first few scalar elements only.
std::string jsonStr(const json &j) {
  auto scalar = [](const json &v) -> std::string {
    if (v.is_array())
      return v.empty() ? "[]" : "[...]";
    if (v.is_object())
      return v.empty() ? "{}" : "{...}";
    return v.dump(-1, ' ', true, json::error_handler_t::replace);
  };
  std::string s;
  if (j.is_array()) {
    s = "[";
    size_t i = 0;
    for (const json &v : j) {
      if (i)
        s += ",";
      if (++i > 8) {
        s += "...";
        break;
      }
      s += scalar(v);
    }
    s += "]";
  } else if (j.is_object()) {
    s = j.empty() ? "{}" : "{...}";
  } else {
    s = scalar(j);
  }
  if (s.size() > 80)
    s = s.substr(0, 77) + "...";
  return s;
}

/// Parse-time bookkeeping: nlohmann keeps the last of duplicate keys, so
/// the callback records the first duplicate it sees.
struct DuplicateFinder {
  struct Level {
    bool isObject;
    std::set<std::string> keys;
    std::string lastKey;
  };
  std::vector<Level> stack;
  std::string message; // empty: no duplicate

  bool operator()(int, json::parse_event_t event, json &parsed) {
    switch (event) {
    case json::parse_event_t::object_start:
      stack.push_back({true, {}, {}});
      break;
    case json::parse_event_t::array_start:
      stack.push_back({false, {}, {}});
      break;
    case json::parse_event_t::object_end:
    case json::parse_event_t::array_end:
      if (!stack.empty())
        stack.pop_back();
      break;
    case json::parse_event_t::key: {
      if (stack.empty() || !parsed.is_string())
        break;
      const std::string &k = parsed.get_ref<const std::string &>();
      Level &top = stack.back();
      top.lastKey = k;
      if (!top.keys.insert(k).second && message.empty()) {
        if (stack.size() == 1)
          message = k == kMetadataKey
                        ? "'__metadata__' appears twice in the header"
                        : "tensor " + quote(k) + " appears twice in the header";
        else if (stack[0].lastKey == kMetadataKey)
          message = "'__metadata__' has the key " + quote(k) + " twice";
        else
          message = "tensor " + quote(stack[0].lastKey) + ": field " +
                    quote(k) + " appears twice";
      }
      break;
    }
    case json::parse_event_t::value:
      break;
    }
    return true;
  }
};

/// Reads a JSON integer >= 0 that fits in int64.
bool getNonNegative(const json &j, uint64_t &out) {
  if (j.is_number_unsigned()) {
    out = j.get<uint64_t>();
    return out <= uint64_t(INT64_MAX);
  }
  if (j.is_number_integer()) {
    int64_t v = j.get<int64_t>();
    if (v < 0)
      return false;
    out = uint64_t(v);
    return true;
  }
  return false;
}

} // namespace

Result<std::shared_ptr<const SafetensorsFile>>
SafetensorsFile::open(const std::string &path) {
  auto mapped = format::mapFile(path, /*keepOpen=*/true);
  if (!mapped)
    return mapped.takeError();
  auto file = fromMemory(mapped->data, mapped->size, path, mapped->keepAlive);
  if (!file) {
    ::close(mapped->fd);
    return file.takeError();
  }
  auto *f = const_cast<SafetensorsFile *>(file->get());
  f->fd_ = mapped->fd;
  f->openedMtimeNs_ = mapped->stamp.mtimeNs;
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0)
    ::close(fd_);
}

Result<std::shared_ptr<const SafetensorsFile>>
SafetensorsFile::fromMemory(const void *data, size_t size, std::string path,
                            std::shared_ptr<const void> keepAlive) {
  const std::string where = "'" + path + "': ";
  auto fail = [&](const std::string &msg) { return Error{where + msg}; };
  const uint8_t *bytes = static_cast<const uint8_t *>(data);

  if (size < 8)
    return fail("the file is only " + std::to_string(size) +
                " bytes long; a safetensors file starts with an 8-byte "
                "header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = n << 8 | bytes[i];
  if (n > kSafetensorsMaxHeaderSize)
    return fail("the header length is " + std::to_string(n) +
                " bytes, more than the 100000000-byte limit (this is not a "
                "safetensors file, or its first 8 bytes are corrupt)");
  if (n > size - 8)
    return fail("the header is truncated: its length prefix says " +
                std::to_string(n) + " bytes but only " +
                std::to_string(size - 8) + " bytes follow the prefix");

  std::string_view text(reinterpret_cast<const char *>(bytes + 8), size_t(n));
  json header;
  DuplicateFinder dups;
  try {
    header = json::parse(
        text.begin(), text.end(),
        [&dups](int depth, json::parse_event_t event, json &parsed) {
          return dups(depth, event, parsed);
        });
  } catch (const json::exception &e) {
    std::string what = e.what();
    if (size_t p = what.find("] ");
        what.rfind("[json.exception", 0) == 0 && p != std::string::npos)
      what = what.substr(p + 2);
    return fail("the header is not valid JSON: " + what);
  } catch (const std::bad_alloc &) {
    return fail("out of memory while parsing the " + std::to_string(n) +
                "-byte header");
  }
  if (!dups.message.empty())
    return fail(dups.message);
  if (!header.is_object())
    return fail("the header is " + kind(header) +
                "; expected an object mapping tensor names to "
                "{dtype, shape, data_offsets}");

  auto file = std::shared_ptr<SafetensorsFile>(new SafetensorsFile());
  file->path_ = std::move(path);
  file->keepAlive_ = std::move(keepAlive);
  file->base_ = bytes;
  file->size_ = size;
  file->headerSize_ = n;
  const uint64_t dataSize = size - 8 - n;

  std::vector<SafetensorsEntry> entries;
  entries.reserve(header.size());
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string &name = it.key();
    const json &v = it.value();
    if (name == kMetadataKey) {
      if (!v.is_object())
        return fail("'__metadata__' is " + kind(v) +
                    "; expected an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          return fail("'__metadata__' value of " + quote(m.key()) + " is " +
                      kind(m.value()) + " (" + jsonStr(m.value()) +
                      "); metadata values must be strings");
        file->metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string t = "tensor " + quote(name) + ": ";
    if (!v.is_object())
      return fail(t + "the entry is " + kind(v) +
                  "; expected an object with dtype, shape and data_offsets");
    for (auto f = v.begin(); f != v.end(); ++f)
      if (f.key() != "dtype" && f.key() != "shape" && f.key() != "data_offsets")
        return fail(t + "unexpected field " + quote(f.key()) +
                    " (an entry has exactly dtype, shape and data_offsets)");
    for (const char *field : {"dtype", "shape", "data_offsets"})
      if (!v.contains(field))
        return fail(t + "missing field '" + field + "'");

    SafetensorsEntry e;
    e.name = name;
    const json &dt = v["dtype"];
    if (!dt.is_string())
      return fail(t + "'dtype' is " + kind(dt) + " (" + jsonStr(dt) +
                  "); expected a string such as \"F16\"");
    auto parsed = parseDTypeName(dt.get_ref<const std::string &>());
    if (!parsed)
      return fail(t + "unknown dtype " +
                  quote(dt.get_ref<const std::string &>()) +
                  " (supported: " + kKnownDTypes + ")");
    e.dtype = *parsed;

    const json &sh = v["shape"];
    if (!sh.is_array())
      return fail(t + "'shape' is " + kind(sh) + " (" + jsonStr(sh) +
                  "); expected an array of non-negative integers");
    for (size_t i = 0; i < sh.size(); ++i) {
      const json &d = sh[i];
      uint64_t dim;
      if (!getNonNegative(d, dim)) {
        std::string why = d.is_number_integer() && !d.is_number_unsigned()
                              ? "; dimensions must be non-negative"
                          : d.is_number_unsigned()
                              ? "; dimensions must fit in a signed 64-bit int"
                              : "; expected a non-negative integer";
        return fail(t + "shape[" + std::to_string(i) + "] is " + jsonStr(d) +
                    why);
      }
      e.shape.push_back(int64_t(dim));
    }
    uint64_t expectBytes = 0;
    if (!format::shapeBytes(e.shape, dtypeSize(e.dtype), expectBytes))
      return fail(t + "shape " + shapeToString(e.shape) + " of " +
                  std::string(dtypeName(e.dtype)) +
                  " is too large (its size in bytes overflows int64)");

    const json &off = v["data_offsets"];
    uint64_t b = 0, en = 0;
    if (!off.is_array() || off.size() != 2 || !getNonNegative(off[0], b) ||
        !getNonNegative(off[1], en))
      return fail(t + "'data_offsets' is " + jsonStr(off) +
                  "; expected [begin, end] with two non-negative integers");
    if (b > en)
      return fail(t + "data_offsets " + rangeStr(b, en) +
                  " end before they begin");
    if (en - b != expectBytes)
      return fail(t + "shape " + shapeToString(e.shape) + " of " +
                  std::string(dtypeName(e.dtype)) + " needs " +
                  std::to_string(expectBytes) + " bytes but data_offsets " +
                  rangeStr(b, en) + " span " + std::to_string(en - b));
    e.begin = b;
    e.end = en;
    entries.push_back(std::move(e));
  }

  std::stable_sort(entries.begin(), entries.end(),
                   [](const SafetensorsEntry &a, const SafetensorsEntry &b) {
                     return a.begin != b.begin ? a.begin < b.begin
                                               : a.end < b.end;
                   });
  // Overlaps first: they make every later statement about the layout moot.
  uint64_t maxEnd = 0;
  const SafetensorsEntry *maxEntry = nullptr;
  for (const auto &e : entries) {
    if (maxEntry && e.begin < maxEnd)
      return fail("tensors " + quote(maxEntry->name) + " " +
                  rangeStr(maxEntry->begin, maxEntry->end) + " and " +
                  quote(e.name) + " " + rangeStr(e.begin, e.end) +
                  " overlap in the data section");
    if (!maxEntry || e.end >= maxEnd) {
      maxEnd = e.end;
      maxEntry = &e;
    }
  }
  // With no overlap, the ranges tile [0, total) exactly when there is no
  // hole; then a total beyond the data section means a truncated file.
  uint64_t total = 0;
  bool holes = false;
  for (const auto &e : entries) {
    if (e.begin != total)
      holes = true;
    total = e.end;
  }
  if (total > dataSize) {
    if (!holes)
      return fail("the file is truncated: the header describes " +
                  std::to_string(total) + " bytes of tensor data but only " +
                  std::to_string(dataSize) +
                  " bytes follow the header (the file should be " +
                  std::to_string(8 + n + total) + " bytes, it is " +
                  std::to_string(size) + ")");
    for (const auto &e : entries)
      if (e.end > dataSize)
        return fail("tensor " + quote(e.name) + ": data_offsets " +
                    rangeStr(e.begin, e.end) +
                    " lie outside the data section, which has " +
                    std::to_string(dataSize) + " bytes");
  }
  uint64_t pos = 0;
  for (const auto &e : entries) {
    if (e.begin != pos)
      return fail("bytes [" + std::to_string(pos) + ", " +
                  std::to_string(e.begin) +
                  ") of the data section belong to no tensor (the next "
                  "tensor is " +
                  quote(e.name) + "); safetensors files may not contain holes");
    pos = e.end;
  }
  if (total < dataSize)
    return fail("the data section has " + std::to_string(dataSize - total) +
                " bytes after the last tensor (the tensors cover " +
                std::to_string(total) + " of " + std::to_string(dataSize) +
                " bytes)");

  file->entries_ = std::move(entries);
  file->index_.reserve(file->entries_.size());
  for (size_t i = 0; i < file->entries_.size(); ++i)
    file->index_.emplace(file->entries_[i].name, i);
  return std::shared_ptr<const SafetensorsFile>(std::move(file));
}

const SafetensorsEntry *SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &entries_[it->second];
}

HostTensor SafetensorsFile::tensor(const SafetensorsEntry &entry) const {
  assert(&entry >= entries_.data() &&
         &entry < entries_.data() + entries_.size() &&
         "entry does not belong to this file");
  const uint8_t *p = base_ + dataOffset() + entry.begin;
  HostTensor view = HostTensor::view(entry.dtype, entry.shape, p, keepAlive_);
  if (reinterpret_cast<uintptr_t>(p) % dtypeSize(entry.dtype) != 0)
    return view.clone(); // misaligned (hand-made file): an aligned copy
  return view;
}

Status SafetensorsFile::checkUnchanged(const std::string &what) const {
  auto now = format::stampOf(fd_, path_);
  if (!now)
    return Error{now.message() + " (" + what + ")"};
  if (now->size != size_)
    return Error{"'" + path_ + "' changed while in use: it was " +
                 std::to_string(size_) + " bytes when it was opened, it is " +
                 std::to_string(now->size) +
                 " bytes now (truncated or rewritten); cannot read " + what};
  if (now->mtimeNs != openedMtimeNs_)
    return Error{"'" + path_ +
                 "' changed while in use: it was modified after it was "
                 "opened (same size, " +
                 std::to_string(size_) +
                 " bytes, new modification time), so its tensors may mix old "
                 "and new bytes; cannot read " +
                 what};
  return Status::ok();
}

Status SafetensorsFile::read(const SafetensorsEntry &entry, void *dst) const {
  assert(&entry >= entries_.data() &&
         &entry < entries_.data() + entries_.size() &&
         "entry does not belong to this file");
  const uint64_t offset = dataOffset() + entry.begin, n = entry.nbytes();
  if (fd_ < 0) {
    if (n)
      std::memcpy(dst, base_ + offset, size_t(n));
    return Status::ok();
  }
  const std::string what = "tensor " + quote(entry.name) + " (bytes [" +
                           std::to_string(offset) + ", " +
                           std::to_string(offset + n) + ") of the file)";
  TRELLIS_RETURN_IF_ERROR(checkUnchanged(what));
  uint8_t *out = static_cast<uint8_t *>(dst);
  for (uint64_t got = 0; got < n;) {
    size_t chunk = size_t(std::min<uint64_t>(n - got, 1 << 30));
    ssize_t r = ::pread(fd_, out + got, chunk, off_t(offset + got));
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return Error{"cannot read '" + path_ + "': " + std::strerror(errno) +
                   " (at byte " + std::to_string(offset + got) + ", " + what +
                   ")"};
    if (r == 0)
      return Error{
          "'" + path_ + "' changed while in use: it ends at byte " +
          std::to_string(offset + got) + " but was " + std::to_string(size_) +
          " bytes when it was opened (truncated); cannot read " + what};
    got += uint64_t(r);
  }
  // A rewrite during the read leaves a new modification time.
  return checkUnchanged(what);
}

Result<HostTensor> SafetensorsFile::load(const SafetensorsEntry &entry) const {
  HostTensor t;
  try {
    t = HostTensor(entry.dtype, entry.shape);
  } catch (const std::bad_alloc &) {
    return Error{"'" + path_ + "': out of memory reading tensor " +
                 quote(entry.name) + " (" + std::to_string(entry.nbytes()) +
                 " bytes)"};
  }
  TRELLIS_RETURN_IF_ERROR(read(entry, t.mutableRaw()));
  return t;
}

//===----------------------------------------------------------------------===//
// Writer
//===----------------------------------------------------------------------===//

namespace {

/// A JSON string as serde_json writes it: '"' and '\\' escaped, control
/// characters as \b \t \n \f \r or \u00xx (lowercase hex), everything else
/// (including non-ASCII UTF-8) verbatim.
void appendJsonString(std::string &out, std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  out += '"';
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\f':
      out += "\\f";
      break;
    case '\r':
      out += "\\r";
      break;
    default:
      if (c < 0x20) {
        out += "\\u00";
        out += kHex[c >> 4];
        out += kHex[c & 15];
      } else {
        out += ch;
      }
    }
  }
  out += '"';
}

} // namespace

Result<SafetensorsLayout>
planSafetensors(const std::vector<TensorSpec> &specs,
                const std::map<std::string, std::string> &metadata) {
  SafetensorsLayout layout;
  layout.begin.assign(specs.size(), 0);
  layout.end.assign(specs.size(), 0);
  std::vector<uint64_t> nbytes(specs.size());
  std::unordered_set<std::string_view> names;
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec &s = specs[i];
    std::string t = "tensor " + quote(s.name) + ": ";
    if (s.name == kMetadataKey)
      return Error{t + "the name '__metadata__' is reserved for the metadata"};
    if (!format::isValidUtf8(s.name))
      return Error{t + "the name is not valid UTF-8"};
    if (!names.insert(s.name).second)
      return Error{t + "the name appears twice in the tensor list"};
    for (int64_t d : s.shape)
      if (d < 0)
        return Error{t + "shape " + shapeToString(s.shape) +
                     " has a negative dimension"};
    if (!format::shapeBytes(s.shape, dtypeSize(s.dtype), nbytes[i]))
      return Error{t + "shape " + shapeToString(s.shape) +
                   " is too large (its size in bytes overflows int64)"};
  }
  for (const auto &[k, v] : metadata)
    if (!format::isValidUtf8(k) || !format::isValidUtf8(v))
      return Error{"metadata entry " + quote(k) + " is not valid UTF-8"};

  layout.order.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i)
    layout.order[i] = i;
  std::stable_sort(layout.order.begin(), layout.order.end(),
                   [&](size_t a, size_t b) {
                     int ra = referenceRank(specs[a].dtype);
                     int rb = referenceRank(specs[b].dtype);
                     if (ra != rb)
                       return ra > rb;
                     return specs[a].name < specs[b].name;
                   });

  std::string &h = layout.header;
  h = "{";
  bool first = true;
  if (!metadata.empty()) {
    // serde writes a HashMap in hash order; we write keys sorted. The two
    // agree whenever there is at most one key (e.g. {"format":"pt"}).
    h += "\"__metadata__\":{";
    bool firstKey = true;
    for (const auto &[k, v] : metadata) {
      if (!firstKey)
        h += ',';
      firstKey = false;
      appendJsonString(h, k);
      h += ':';
      appendJsonString(h, v);
    }
    h += '}';
    first = false;
  }
  uint64_t offset = 0;
  for (size_t idx : layout.order) {
    const TensorSpec &s = specs[idx];
    if (!first)
      h += ',';
    first = false;
    appendJsonString(h, s.name);
    h += ":{\"dtype\":\"";
    h += dtypeName(s.dtype);
    h += "\",\"shape\":[";
    for (size_t d = 0; d < s.shape.size(); ++d) {
      if (d)
        h += ',';
      h += std::to_string(s.shape[d]);
    }
    h += "],\"data_offsets\":[";
    layout.begin[idx] = offset;
    if (__builtin_add_overflow(offset, nbytes[idx], &offset))
      return Error{"the tensors' total size overflows 64 bits"};
    layout.end[idx] = offset;
    h += std::to_string(layout.begin[idx]);
    h += ',';
    h += std::to_string(offset);
    h += "]}";
  }
  h += '}';
  h.append((8 - h.size() % 8) % 8, ' ');
  if (h.size() > kSafetensorsMaxHeaderSize)
    return Error{"the header would be " + std::to_string(h.size()) +
                 " bytes, more than the 100000000-byte limit readers accept"};
  layout.dataSize = offset;
  return layout;
}

Status
writeSafetensors(const std::string &path, const std::vector<TensorSpec> &specs,
                 const std::function<void(size_t index, void *dst)> &fill,
                 const std::map<std::string, std::string> &metadata) {
  auto planned = planSafetensors(specs, metadata);
  if (!planned)
    return Error{"cannot write '" + path + "': " + planned.message()};
  const SafetensorsLayout &layout = *planned;

  uint64_t maxBytes = 1;
  for (size_t i = 0; i < specs.size(); ++i)
    maxBytes = std::max(maxBytes, layout.end[i] - layout.begin[i]);
  std::unique_ptr<uint8_t[]> buffer(new (std::nothrow) uint8_t[maxBytes]);
  if (!buffer)
    return Error{"cannot write '" + path + "': out of memory allocating a " +
                 std::to_string(maxBytes) + "-byte tensor buffer"};

  AtomicFile out(path);
  if (!out.status())
    return out.status();
  uint8_t prefix[8];
  uint64_t n = layout.header.size();
  for (int i = 0; i < 8; ++i)
    prefix[i] = uint8_t(n >> (8 * i));
  out.write(prefix, 8);
  out.write(layout.header);
  for (size_t idx : layout.order) {
    if (!out.status())
      break;
    uint64_t bytes = layout.end[idx] - layout.begin[idx];
    std::memset(buffer.get(), 0, bytes);
    fill(idx, buffer.get());
    out.write(buffer.get(), bytes);
  }
  return out.commit();
}

} // namespace trellis
