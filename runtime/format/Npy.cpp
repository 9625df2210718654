//===- Npy.cpp - NumPy .npy files -----------------------------------------===//
//
// Format reference: numpy/lib/format.py (NumPy 1.24, Debian 12). The writer
// reproduces _write_array_header exactly: keys sorted, repr() values, 21 - len
// (repr(shape[0])) spaces of growth room, then spaces and '\n' up to a
// multiple of 64 bytes; version 1.0 unless the header needs a 4-byte length.
//
//===----------------------------------------------------------------------===//
#include "trellis/Format/Npy.h"
#include "trellis/Support/AtomicFile.h"

#include "runtime/format/FormatUtil.h"
#include "runtime/format/NpyHeader.h"

#include <cctype>
#include <cstring>
#include <optional>

namespace trellis {

using format::quote;

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr const char *kSupported = "<f2 <f4 <f8 |i1 |u1 <i2 <i4 <i8 |b1";

/// Maps a descr string to a dtype, or explains why not.
Result<DType> parseDescr(std::string_view d) {
  std::string q = quote(d);
  if (d.empty())
    return Error{"descr is an empty string"};
  char order = 0;
  std::string_view body = d;
  if (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=') {
    order = d[0];
    body = d.substr(1);
  }
  if (!body.empty() && body[0] == 'O')
    return Error{"descr " + q +
                 " is an object array (pickled Python objects), which is "
                 "not supported; save a numeric array"};
  struct Known {
    std::string_view body;
    DType type;
  };
  static constexpr Known kKnown[] = {
      {"f2", DType::F16}, {"f4", DType::F32}, {"f8", DType::F64},
      {"i1", DType::I8},  {"u1", DType::U8},  {"i2", DType::I16},
      {"i4", DType::I32}, {"i8", DType::I64}, {"b1", DType::Bool}};
  for (const Known &k : kKnown) {
    if (k.body != body)
      continue;
    if (dtypeSize(k.type) == 1)
      return k.type; // byte order is meaningless for one-byte types
    if (order == '<')
      return k.type;
    if (order == '>')
      return Error{"descr " + q +
                   " is big-endian, which is not supported; convert with "
                   "arr.astype('<" +
                   std::string(body) + "')"};
    return Error{"descr " + q + " does not say little-endian (expected '<" +
                 std::string(body) + "')"};
  }
  return Error{"unsupported dtype " + q + " (supported: " + kSupported + ")"};
}

/// A strict parser for the header dict literal:
///   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
/// Whitespace may appear between tokens; strings use ' or " without
/// escapes; integers are decimal (with a Python 2 'L' suffix allowed in
/// versions 1.0 and 2.0, as NumPy allows).
class HeaderParser {
public:
  HeaderParser(std::string_view text, bool allowLongSuffix)
      : s_(text), allowL_(allowLongSuffix) {}

  std::string error;
  std::optional<std::string> descr;
  std::optional<bool> fortranOrder;
  std::optional<Shape> shape;

  bool parse() {
    skipWs();
    if (!eat('{'))
      return fail("the header is not a Python dict literal: expected '{' " +
                  found());
    while (true) {
      skipWs();
      if (eat('}'))
        break;
      std::string key;
      if (peek() != '\'' && peek() != '"')
        return fail("expected a quoted key or '}' " + found());
      if (!parseString(key))
        return false;
      skipWs();
      if (!eat(':'))
        return fail("expected ':' after key " + quote(key) + " " + found());
      skipWs();
      if (key == "descr") {
        if (descr)
          return fail("key 'descr' appears twice");
        if (peek() == '[')
          return fail("descr is a list: structured (record) dtypes are not "
                      "supported");
        if (peek() != '\'' && peek() != '"')
          return fail("descr must be a string such as '<f4' " + found());
        std::string v;
        if (!parseString(v))
          return false;
        descr = v;
      } else if (key == "fortran_order") {
        if (fortranOrder)
          return fail("key 'fortran_order' appears twice");
        if (eatWord("True"))
          fortranOrder = true;
        else if (eatWord("False"))
          fortranOrder = false;
        else
          return fail("fortran_order must be True or False " + found());
      } else if (key == "shape") {
        if (shape)
          return fail("key 'shape' appears twice");
        if (!parseShape())
          return false;
      } else {
        return fail("unexpected key " + quote(key) +
                    " (a .npy header has exactly 'descr', 'fortran_order' "
                    "and 'shape')");
      }
      skipWs();
      if (eat(','))
        continue;
      if (eat('}'))
        break;
      return fail("expected ',' or '}' " + found());
    }
    skipWs();
    if (pos_ != s_.size())
      return fail("unexpected text after the closing '}' " + found());
    if (!descr)
      return fail("missing key 'descr'");
    if (!fortranOrder)
      return fail("missing key 'fortran_order'");
    if (!shape)
      return fail("missing key 'shape'");
    return true;
  }

private:
  std::string_view s_;
  size_t pos_ = 0;
  bool allowL_;

  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool eatWord(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w)
      return false;
    size_t after = pos_ + w.size();
    if (after < s_.size() &&
        (std::isalnum((unsigned char)s_[after]) || s_[after] == '_'))
      return false;
    pos_ = after;
    return true;
  }
  void skipWs() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' ||
            s_[pos_] == '\r' || s_[pos_] == '\f'))
      ++pos_;
  }
  std::string found() const {
    if (pos_ >= s_.size())
      return "at the end of the header";
    return "at header offset " + std::to_string(pos_) + ", found " +
           quote(s_.substr(pos_, 16));
  }
  bool fail(std::string msg) {
    error = std::move(msg);
    return false;
  }
  bool parseString(std::string &out) {
    char q = s_[pos_++];
    size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != q) {
      if (s_[pos_] == '\\')
        return fail("escape sequences in header strings are not supported " +
                    found());
      if (s_[pos_] == '\n')
        return fail("unterminated string " + found());
      ++pos_;
    }
    if (pos_ >= s_.size())
      return fail("unterminated string starting at header offset " +
                  std::to_string(start - 1));
    out.assign(s_.substr(start, pos_ - start));
    ++pos_;
    return true;
  }
  bool parseInt(int64_t &out) {
    size_t start = pos_;
    if (peek() == '-' || peek() == '+') {
      bool neg = peek() == '-';
      ++pos_;
      skipWs();
      if (!std::isdigit((unsigned char)peek()))
        return fail("expected a dimension " + found());
      if (neg) {
        size_t end = pos_;
        while (end < s_.size() && std::isdigit((unsigned char)s_[end]))
          ++end;
        if (s_.substr(pos_, end - pos_).find_first_not_of('0') !=
            std::string_view::npos)
          return fail("shape has a negative dimension -" +
                      std::string(s_.substr(pos_, end - pos_)));
      }
    }
    if (!std::isdigit((unsigned char)peek()))
      return fail("shape must be a tuple of integers " + found());
    size_t digits = pos_;
    uint64_t v = 0;
    bool tooBig = false;
    while (std::isdigit((unsigned char)peek())) {
      if (!tooBig) {
        v = v * 10 + uint64_t(s_[pos_] - '0');
        tooBig = v > uint64_t(INT64_MAX);
      }
      ++pos_;
    }
    if (pos_ - digits > 1 && s_[digits] == '0')
      return fail("shape entry " + quote(s_.substr(start, pos_ - start)) +
                  " is not a decimal integer");
    if (allowL_ && (peek() == 'L' || peek() == 'l'))
      ++pos_;
    if (std::isalnum((unsigned char)peek()) || peek() == '_' || peek() == '.')
      return fail("shape entry " + quote(s_.substr(start, pos_ - start + 1)) +
                  "... is not a decimal integer");
    if (tooBig)
      return fail("shape entry " + quote(s_.substr(start, pos_ - start)) +
                  " is too large");
    out = int64_t(v);
    return true;
  }
  bool parseShape() {
    if (!eat('('))
      return fail("shape must be a tuple such as (2, 3) " + found());
    Shape dims;
    skipWs();
    if (eat(')')) {
      shape = dims;
      return true;
    }
    while (true) {
      int64_t d;
      skipWs();
      if (!parseInt(d))
        return false;
      dims.push_back(d);
      skipWs();
      if (eat(',')) {
        skipWs();
        if (eat(')'))
          break;
        continue;
      }
      if (eat(')')) {
        if (dims.size() == 1)
          return fail("shape (" + std::to_string(d) +
                      ") is not a tuple (a one-element tuple is written (" +
                      std::to_string(d) + ",))");
        break;
      }
      return fail("expected ',' or ')' in shape " + found());
    }
    shape = dims;
    return true;
  }
};

/// The repr() of a shape tuple: (), (5,), (2, 3).
std::string shapeRepr(const Shape &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1)
    s += ',';
  return s + ")";
}

} // namespace

Result<std::string> npyDescr(DType dtype) {
  switch (dtype) {
  case DType::F16:
    return std::string("<f2");
  case DType::F32:
    return std::string("<f4");
  case DType::F64:
    return std::string("<f8");
  case DType::I8:
    return std::string("|i1");
  case DType::U8:
    return std::string("|u1");
  case DType::I16:
    return std::string("<i2");
  case DType::I32:
    return std::string("<i4");
  case DType::I64:
    return std::string("<i8");
  case DType::Bool:
    return std::string("|b1");
  case DType::BF16:
    break;
  }
  return Error{"dtype " + std::string(dtypeName(dtype)) +
               " has no NumPy equivalent (convert to F32 first)"};
}

Result<std::string> npyHeader(DType dtype, const Shape &shape) {
  auto descr = npyDescr(dtype);
  if (!descr)
    return descr.takeError();
  for (int64_t d : shape)
    if (d < 0)
      return Error{"shape " + shapeToString(shape) +
                   " has a negative dimension"};
  std::string dict = "{'descr': '" + *descr +
                     "', 'fortran_order': False, 'shape': " + shapeRepr(shape) +
                     ", }";
  if (!shape.empty()) {
    size_t len = std::to_string(shape[0]).size();
    if (len < 21)
      dict.append(21 - len, ' ');
  }
  size_t hlen = dict.size() + 1; // + '\n'
  // Version 1.0: 8 bytes magic+version, 2-byte length; else 2.0 with 4.
  for (int lengthBytes : {2, 4}) {
    size_t padlen = 64 - ((8 + lengthBytes + hlen) % 64);
    uint64_t total = hlen + padlen;
    if (lengthBytes == 2 && total > 0xffff)
      continue;
    std::string out(kMagic, kMagicLen);
    out += char(lengthBytes == 2 ? 1 : 2);
    out += char(0);
    for (int i = 0; i < lengthBytes; ++i)
      out += char((total >> (8 * i)) & 0xff);
    out += dict;
    out.append(padlen, ' ');
    out += '\n';
    return out;
  }
  return Error{"shape " + shapeToString(shape) +
               " is too long for a .npy header"};
}

namespace format {

Result<uint64_t> npyHeaderBytes(const void *data, size_t size,
                                const std::string &what) {
  const uint8_t *b = static_cast<const uint8_t *>(data);
  const std::string where = what + ": ";
  if (size < 10)
    return Error{where + "the file is only " + std::to_string(size) +
                 " bytes long, too short for a .npy header"};
  if (std::memcmp(b, kMagic, kMagicLen) != 0)
    return Error{
        where +
        "not a .npy file (bad magic: expected "
        "'\\x93NUMPY', found " +
        quote(std::string_view(reinterpret_cast<const char *>(b), kMagicLen)) +
        ")"};
  int major = b[6], minor = b[7];
  if (!((major == 1 || major == 2 || major == 3) && minor == 0))
    return Error{where + "unsupported .npy format version " +
                 std::to_string(major) + "." + std::to_string(minor) +
                 " (supported: 1.0, 2.0, 3.0)"};
  size_t prefix = major == 1 ? 10 : 12;
  if (size < prefix)
    return Error{where + "the file is only " + std::to_string(size) +
                 " bytes long, too short for a version " +
                 std::to_string(major) + ".0 .npy header"};
  uint64_t hlen = b[8] | uint64_t(b[9]) << 8;
  if (major != 1)
    hlen |= uint64_t(b[10]) << 16 | uint64_t(b[11]) << 24;
  return prefix + hlen;
}

Result<NpyLayout> parseNpyHeader(const void *data, size_t size,
                                 const std::string &what) {
  const uint8_t *b = static_cast<const uint8_t *>(data);
  const std::string where = what + ": ";
  TRELLIS_ASSIGN_OR_RETURN(uint64_t headerBytes,
                           npyHeaderBytes(data, size, what));
  int major = b[6];
  size_t prefix = major == 1 ? 10 : 12;
  uint64_t hlen = headerBytes - prefix;
  if (hlen > size - prefix)
    return Error{where + "the header is truncated: its length field says " +
                 std::to_string(hlen) + " bytes but only " +
                 std::to_string(size - prefix) + " bytes follow"};
  std::string_view text(reinterpret_cast<const char *>(b + prefix),
                        size_t(hlen));
  HeaderParser parser(text, major <= 2);
  if (!parser.parse())
    return Error{where + ".npy header: " + parser.error};
  if (*parser.fortranOrder)
    return Error{where + "fortran_order is True (column-major data), which "
                         "is not supported; save a C-ordered array "
                         "(np.ascontiguousarray)"};
  auto dtype = parseDescr(*parser.descr);
  if (!dtype)
    return Error{where + dtype.message()};
  NpyLayout layout;
  layout.dtype = *dtype;
  layout.shape = *parser.shape;
  layout.descr = *parser.descr;
  layout.headerBytes = headerBytes;
  if (layout.shape.size() > 64)
    return Error{where + "the array has " +
                 std::to_string(layout.shape.size()) +
                 " dimensions, more than the 64 supported"};
  if (!shapeBytes(layout.shape, dtypeSize(layout.dtype), layout.dataBytes))
    return Error{where + "shape " + shapeToString(layout.shape) +
                 " is too large (its size in bytes overflows int64)"};
  return layout;
}

} // namespace format

Result<HostTensor> parseNpy(const void *data, size_t size,
                            const std::string &what) {
  const uint8_t *b = static_cast<const uint8_t *>(data);
  const std::string where = what + ": ";
  TRELLIS_ASSIGN_OR_RETURN(format::NpyLayout layout,
                           format::parseNpyHeader(data, size, what));
  uint64_t bytes = layout.dataBytes;
  uint64_t avail = size - layout.headerBytes;
  std::string desc = "shape " + shapeToString(layout.shape) + " of " +
                     layout.descr + " needs " + std::to_string(bytes) +
                     " bytes";
  if (avail < bytes)
    return Error{where + "the array data is truncated: " + desc + " but only " +
                 std::to_string(avail) + " bytes follow the header"};
  if (avail > bytes)
    return Error{where + std::to_string(avail - bytes) +
                 " unexpected bytes after the array data (" + desc + ", " +
                 std::to_string(avail) + " follow the header)"};
  HostTensor t(layout.dtype, layout.shape);
  if (bytes)
    std::memcpy(t.mutableRaw(), b + layout.headerBytes, size_t(bytes));
  return t;
}

Result<HostTensor> readNpy(const std::string &path) {
  auto mapped = format::mapFile(path);
  if (!mapped)
    return mapped.takeError();
  return parseNpy(mapped->data, mapped->size, "'" + path + "'");
}

Status writeNpy(const std::string &path, const HostTensor &tensor) {
  if (!tensor.defined())
    return Error{"cannot write '" + path + "': the tensor has no data"};
  auto header = npyHeader(tensor.dtype(), tensor.shape());
  if (!header)
    return Error{"cannot write '" + path + "': " + header.message()};
  AtomicFile out(path);
  if (!out.status())
    return out.status();
  out.write(*header);
  out.write(tensor.raw(), tensor.nbytes());
  return out.commit();
}

} // namespace trellis
