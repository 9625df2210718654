//===- CorruptionTest.cpp - Broken files give specific messages -----------===//
//
// Each case breaks a valid safetensors, .npy or .npz file in one way and
// checks the reader's message: it names the file and says what is wrong.
//
//===----------------------------------------------------------------------===//
#include "trellis/Format/Npy.h"
#include "trellis/Format/Safetensors.h"

#include "test/unit/format/TestUtil.h"

#include <gtest/gtest.h>
#include <zip.h>

using namespace trellis;
using namespace trellis::test;

namespace {

// A valid two-tensor file: a = F32[2] at [0,8), b = I16[2,2] at [8,16).
const std::string kData(16, '\x11');

std::string header(const std::string &a, const std::string &b) {
  return "{\"a\":{" + a + "},\"b\":{" + b + "}}";
}
const std::string kA = R"("dtype":"F32","shape":[2],"data_offsets":[0,8])";
const std::string kB = R"("dtype":"I16","shape":[2,2],"data_offsets":[8,16])";

/// Parses a safetensors image and returns its error ("" if it parsed).
std::string stError(const std::string &image) {
  auto f = SafetensorsFile::fromMemory(image.data(), image.size(),
                                       "bad.safetensors");
  return f.isOk() ? "" : f.message();
}

#define EXPECT_ERROR(error, ...)                                               \
  do {                                                                         \
    std::string e_ = (error);                                                  \
    for (const char *s_ : {__VA_ARGS__})                                       \
      EXPECT_NE(e_.find(s_), std::string::npos)                                \
          << "expected \"" << s_ << "\" in: " << e_;                           \
  } while (0)

std::string npyError(const std::string &bytes) {
  auto t = parseNpy(bytes.data(), bytes.size(), "'bad.npy'");
  return t.isOk() ? "" : t.message();
}

std::string npyV1(const std::string &dict, const std::string &data) {
  std::string s("\x93NUMPY\x01\x00", 8);
  s += char(dict.size() & 0xff);
  s += char(dict.size() >> 8);
  return s + dict + data;
}

std::string npzError(const std::string &bytes) {
  auto t = parseNpz(bytes.data(), bytes.size(), "'bad.npz'");
  return t.isOk() ? "" : t.message();
}

/// A zip archive (as bytes) with arbitrary member contents, through libzip.
std::string makeZip(const std::vector<std::pair<std::string, std::string>> &m,
                    bool compress, const TempDir &dir) {
  std::string path = dir.file("made.zip");
  std::filesystem::remove(path);
  int err = 0;
  zip_t *za = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  EXPECT_NE(za, nullptr);
  for (const auto &[name, bytes] : m) {
    zip_source_t *src = zip_source_buffer(za, bytes.data(), bytes.size(), 0);
    zip_int64_t idx = zip_file_add(za, name.c_str(), src, 0);
    EXPECT_GE(idx, 0);
    zip_set_file_compression(za, zip_uint64_t(idx),
                             compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0);
  }
  EXPECT_EQ(zip_close(za), 0);
  return readBytes(path);
}

std::string validNpy() {
  return npyHeader(DType::F32, {4}).value() + std::string(16, 0x22);
}

} // namespace

TEST(Corruption, BaselineFilesAreValid) {
  EXPECT_EQ(stError(safetensorsImage(header(kA, kB), kData)), "");
  EXPECT_EQ(npyError(validNpy()), "");
  TempDir dir("corrupt-base");
  EXPECT_EQ(npzError(makeZip({{"x.npy", validNpy()}}, true, dir)), "");
}

TEST(Corruption, SafetensorsFileTooShortForLengthPrefix) {
  EXPECT_ERROR(stError(std::string("\x08\x00\x00", 3)),
               "'bad.safetensors': ", "only 3 bytes long",
               "8-byte header length");
}

TEST(Corruption, SafetensorsHeaderLengthBeyondLimit) {
  EXPECT_ERROR(stError(safetensorsImage(header(kA, kB), kData, 1ull << 40)),
               "header length is 1099511627776 bytes",
               "more than the 100000000-byte limit");
}

TEST(Corruption, SafetensorsTruncatedHeader) {
  std::string image = safetensorsImage(header(kA, kB), kData);
  EXPECT_ERROR(stError(image.substr(0, 40)), "the header is truncated",
               "says 110 bytes but only 32 bytes follow");
}

TEST(Corruption, SafetensorsTruncatedData) {
  TempDir dir("corrupt-st-trunc");
  std::string path = dir.file("t.safetensors");
  std::string image = safetensorsImage(header(kA, kB), kData);
  writeBytes(path, image.substr(0, image.size() - 5));
  auto f = SafetensorsFile::open(path);
  ASSERT_FALSE(f.isOk());
  EXPECT_ERROR(f.message(), path.c_str(), "the file is truncated",
               "describes 16 bytes of tensor data but only 11 bytes follow");
}

TEST(Corruption, SafetensorsBadJson) {
  EXPECT_ERROR(stError(safetensorsImage(R"({"a":{"dtype":"F32",})", "")),
               "the header is not valid JSON", "parse error",
               "line 1, column 21");
  EXPECT_ERROR(stError(safetensorsImage(std::string("{\"a\xff\":1}"), "")),
               "not valid JSON", "UTF-8");
}

TEST(Corruption, SafetensorsDeeplyNestedHeader) {
  // A million levels of nesting: parsed, reported and freed without
  // recursion (no stack overflow).
  const size_t depth = 1000000;
  std::string deep = std::string(depth, '[') + std::string(depth, ']');
  std::string a = "\"dtype\":" + deep + R"(,"shape":[2],"data_offsets":[0,8])";
  EXPECT_ERROR(stError(safetensorsImage(header(a, kB), kData)),
               "tensor 'a': 'dtype' is an array ([[...]]); expected a string");
}

TEST(Corruption, SafetensorsHeaderNotAnObject) {
  EXPECT_ERROR(stError(safetensorsImage("[1,2]", "")),
               "the header is an array; expected an object");
}

TEST(Corruption, SafetensorsUnknownDType) {
  std::string a = R"("dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8])";
  EXPECT_ERROR(stError(safetensorsImage(header(a, kB), kData)),
               "tensor 'a': unknown dtype 'F8_E4M3'",
               "supported: F16, BF16, F32");
  a = R"("dtype":32,"shape":[2],"data_offsets":[0,8])";
  EXPECT_ERROR(stError(safetensorsImage(header(a, kB), kData)),
               "tensor 'a': 'dtype' is a number (32); expected a string");
}

TEST(Corruption, SafetensorsShapeDoesNotMatchByteRange) {
  std::string a = R"("dtype":"F32","shape":[3],"data_offsets":[0,8])";
  EXPECT_ERROR(stError(safetensorsImage(header(a, kB), kData)),
               "tensor 'a': shape [3] of F32 needs 12 bytes but data_offsets "
               "[0, 8] span 8");
}

TEST(Corruption, SafetensorsOverlappingRanges) {
  std::string b = R"("dtype":"I16","shape":[2,2],"data_offsets":[4,12])";
  EXPECT_ERROR(stError(safetensorsImage(header(kA, b), kData)),
               "tensors 'a' [0, 8] and 'b' [4, 12] overlap");
}

TEST(Corruption, SafetensorsRangeOutsideDataSection) {
  std::string b = R"("dtype":"I16","shape":[2,2],"data_offsets":[64,72])";
  EXPECT_ERROR(stError(safetensorsImage(header(kA, b), kData)),
               "tensor 'b': data_offsets [64, 72] lie outside the data "
               "section, which has 16 bytes");
}

TEST(Corruption, SafetensorsHoleAndTrailingBytes) {
  std::string b = R"("dtype":"I16","shape":[2],"data_offsets":[12,16])";
  EXPECT_ERROR(stError(safetensorsImage(header(kA, b), kData)),
               "bytes [8, 12) of the data section belong to no tensor");
  b = R"("dtype":"I16","shape":[2],"data_offsets":[8,12])";
  EXPECT_ERROR(stError(safetensorsImage(header(kA, b), kData)),
               "the data section has 4 bytes after the last tensor");
}

TEST(Corruption, SafetensorsNegativeOrNonIntegerShape) {
  std::string a = R"("dtype":"F32","shape":[-2],"data_offsets":[0,8])";
  EXPECT_ERROR(stError(safetensorsImage(header(a, kB), kData)),
               "tensor 'a': shape[0] is -2; dimensions must be non-negative");
  a = R"("dtype":"F32","shape":[1,2.5],"data_offsets":[0,8])";
  EXPECT_ERROR(stError(safetensorsImage(header(a, kB), kData)),
               "tensor 'a': shape[1] is 2.5; expected a non-negative integer");
  a = R"("dtype":"F32","shape":"2","data_offsets":[0,8])";
  EXPECT_ERROR(stError(safetensorsImage(header(a, kB), kData)),
               "tensor 'a': 'shape' is a string");
  a = R"("dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,8])";
  EXPECT_ERROR(stError(safetensorsImage(header(a, kB), kData)),
               "tensor 'a': shape [4294967296, 4294967296, 4] of F32 is too "
               "large");
  // Empty, but the other dims alone overflow int64 (NumPy refuses these).
  a = R"("dtype":"F32","shape":[0,4611686018427387904,4],"data_offsets":[0,0])";
  EXPECT_ERROR(stError(safetensorsImage(header(a, kB), kData)),
               "tensor 'a': shape [0, 4611686018427387904, 4] of F32 is too "
               "large");
}

TEST(Corruption, SafetensorsDuplicateName) {
  std::string h = "{\"a\":{" + kA + "},\"a\":{" + kB + "}}";
  EXPECT_ERROR(stError(safetensorsImage(h, kData)),
               "tensor 'a' appears twice in the header");
  h = "{\"a\":{" + kA + ",\"dtype\":\"F32\"},\"b\":{" + kB + "}}";
  EXPECT_ERROR(stError(safetensorsImage(h, kData)),
               "tensor 'a': field 'dtype' appears twice");
}

TEST(Corruption, SafetensorsMissingOrExtraField) {
  std::string a = R"("dtype":"F32","shape":[2])";
  EXPECT_ERROR(stError(safetensorsImage(header(a, kB), kData)),
               "tensor 'a': missing field 'data_offsets'");
  a = kA + R"(,"offset":3)";
  EXPECT_ERROR(stError(safetensorsImage(header(a, kB), kData)),
               "tensor 'a': unexpected field 'offset'");
}

TEST(Corruption, SafetensorsBadDataOffsets) {
  std::string a = R"("dtype":"F32","shape":[2],"data_offsets":[0,8,9])";
  EXPECT_ERROR(stError(safetensorsImage(header(a, kB), kData)),
               "tensor 'a': 'data_offsets' is [0,8,9]; expected [begin, end]");
  a = R"("dtype":"F32","shape":[0],"data_offsets":[8,0])";
  EXPECT_ERROR(stError(safetensorsImage(header(a, kB), kData)),
               "tensor 'a': data_offsets [8, 0] end before they begin");
}

TEST(Corruption, SafetensorsBadMetadata) {
  std::string h = R"({"__metadata__":{"format":1}})";
  EXPECT_ERROR(stError(safetensorsImage(h, "")),
               "'__metadata__' value of 'format' is a number (1); metadata "
               "values must be strings");
  h = R"({"__metadata__":[1]})";
  EXPECT_ERROR(stError(safetensorsImage(h, "")), "'__metadata__' is an array");
}

TEST(Corruption, SafetensorsNotAFile) {
  TempDir dir("corrupt-st-dir");
  auto f = SafetensorsFile::open(dir.path().string());
  ASSERT_FALSE(f.isOk());
  EXPECT_ERROR(f.message(), "not a regular file");
  f = SafetensorsFile::open(dir.file("missing.safetensors"));
  ASSERT_FALSE(f.isOk());
  EXPECT_ERROR(f.message(), "cannot open", "missing.safetensors",
               "No such file");
}

TEST(Corruption, NpyBadMagicAndVersion) {
  std::string bytes = validNpy();
  bytes[1] = 'X';
  EXPECT_ERROR(npyError(bytes), "'bad.npy': not a .npy file (bad magic");
  bytes = validNpy();
  bytes[6] = 4;
  EXPECT_ERROR(npyError(bytes), "unsupported .npy format version 4.0");
  EXPECT_ERROR(npyError("\x93NUM"), "only 4 bytes long");
}

TEST(Corruption, NpyBigEndian) {
  EXPECT_ERROR(
      npyError(npyV1(
          "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", "abcd")),
      "descr '>f4' is big-endian", "astype('<f4')");
}

TEST(Corruption, NpyFortranOrderObjectAndStructured) {
  EXPECT_ERROR(
      npyError(npyV1("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }",
                     "abcd")),
      "fortran_order is True (column-major data)");
  EXPECT_ERROR(
      npyError(npyV1("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }",
                     "abcdefgh")),
      "descr '|O' is an object array");
  EXPECT_ERROR(npyError(npyV1("{'descr': [('x', '<f4')], 'fortran_order': "
                              "False, 'shape': (1,), }",
                              "abcd")),
               "structured (record) dtypes are not supported");
  EXPECT_ERROR(npyError(npyV1(
                   "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
                   "abcdefgh")),
               "unsupported dtype '<c8'", "<f2 <f4 <f8");
}

TEST(Corruption, NpyTruncatedAndTrailingData) {
  std::string bytes = validNpy();
  EXPECT_ERROR(npyError(bytes.substr(0, bytes.size() - 3)),
               "the array data is truncated",
               "shape [4] of <f4 needs 16 bytes but only 13 bytes follow");
  EXPECT_ERROR(npyError(bytes + "xyz"), "3 unexpected bytes after the array");
  EXPECT_ERROR(npyError(bytes.substr(0, 50)), "the header is truncated",
               "says 118 bytes but only 40 bytes follow");
}

TEST(Corruption, NpyHeaderSyntax) {
  struct Case {
    const char *dict;
    const char *message;
  } cases[] = {
      {"{'descr': '<f4', 'fortran_order': False}", "missing key 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}",
       "unexpected key 'x'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1)}",
       "shape (1) is not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
       "negative dimension -1"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1.5,)}",
       "is not a decimal integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [1]}",
       "shape must be a tuple"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}",
       "fortran_order must be True or False"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': "
       "(1,)}",
       "key 'descr' appears twice"},
      {"['descr', '<f4']", "not a Python dict literal"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x",
       "unexpected text after the closing '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': "
       "(99999999999999999999,)}",
       "is too large"},
  };
  for (const auto &c : cases)
    EXPECT_ERROR(npyError(npyV1(c.dict, "abcd")),
                 "'bad.npy': .npy header: ", c.message);
  // Empty, but the other dims alone overflow int64 (NumPy refuses these).
  EXPECT_ERROR(npyError(npyV1("{'descr': '<f4', 'fortran_order': False, "
                              "'shape': (0, 4611686018427387904)}",
                              "")),
               "'bad.npy': shape [0, 4611686018427387904] is too large");
}

TEST(Corruption, NpzNotAZipOrTruncated) {
  EXPECT_ERROR(npzError("this is not a zip file at all"),
               "'bad.npz': not a valid .npz (zip) archive");
  TempDir dir("corrupt-npz-trunc");
  std::string zip = makeZip({{"x.npy", validNpy()}}, false, dir);
  EXPECT_ERROR(npzError(zip.substr(0, zip.size() - 10)),
               "not a valid .npz (zip) archive");
}

TEST(Corruption, NpzCorruptMemberData) {
  TempDir dir("corrupt-npz-data");
  // Stored: one flipped data byte breaks the CRC.
  std::string zip = makeZip({{"x.npy", validNpy()}}, false, dir);
  size_t at = zip.find("\x93NUMPY");
  ASSERT_NE(at, std::string::npos);
  zip[at + 130] ^= 0x40;
  EXPECT_ERROR(npzError(zip), "member 'x.npy': corrupt data", "CRC");
  // Deflated: garbage in the middle of the stream.
  NamedTensors big = {{"x", patternTensor(DType::F32, {4096})}};
  ASSERT_TRUE(writeNpz(dir.file("c.npz"), big, true).isOk());
  zip = readBytes(dir.file("c.npz"));
  size_t nameLen = uint8_t(zip[26]) | uint8_t(zip[27]) << 8;
  size_t extraLen = uint8_t(zip[28]) | uint8_t(zip[29]) << 8;
  size_t start = 30 + nameLen + extraLen;
  for (size_t i = 0; i < 16; ++i)
    zip[start + 200 + i] = char(0xff);
  // (This garbage decodes to more than the member's declared bytes before
  // the stream breaks: inflating stops at the declared size.)
  EXPECT_ERROR(npzError(zip),
               "member 'x.npy': the data inflates to more than the 16512 "
               "bytes its .npy header declares",
               "a corrupt member or a zip bomb");
}

TEST(Corruption, NpzMemberIsABadNpy) {
  TempDir dir("corrupt-npz-npy");
  std::string bad = validNpy();
  bad[0] = 'P';
  EXPECT_ERROR(
      npzError(makeZip({{"ok.npy", validNpy()}, {"x.npy", bad}}, true, dir)),
      "'bad.npz' member 'x.npy': not a .npy file (bad magic");
}

TEST(Corruption, NpzForeignOrDuplicateMember) {
  TempDir dir("corrupt-npz-names");
  EXPECT_ERROR(npzError(makeZip({{"readme.txt", "hello"}}, false, dir)),
               "member 'readme.txt': not a .npy array");
  std::string zip =
      makeZip({{"a.npy", validNpy()}, {"b.npy", validNpy()}}, false, dir);
  for (size_t at = zip.find("b.npy"); at != std::string::npos;
       at = zip.find("b.npy", at))
    zip[at] = 'a';
  EXPECT_ERROR(npzError(zip), "'bad.npz': not a valid .npz (zip) archive: "
                              "two members have the same name");
}

TEST(Corruption, NpzMemberClaimsImpossibleSize) {
  TempDir dir("corrupt-npz-bomb");
  std::string zip = makeZip({{"x.npy", validNpy()}}, true, dir);
  auto setU32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i)
      zip[at + i] = char(v >> (8 * i));
  };
  // The central directory alone: local and central headers disagree.
  size_t cd = zip.find("PK\x01\x02");
  ASSERT_NE(cd, std::string::npos);
  setU32(cd + 24, 1u << 30);
  EXPECT_ERROR(npzError(zip), "'bad.npz': not a valid .npz (zip) archive",
               "inconsistent");
  // Both headers: 1 GiB from a few dozen compressed bytes is a zip bomb.
  setU32(22, 1u << 30);
  EXPECT_ERROR(npzError(zip),
               "'bad.npz': member 'x.npy': claims 1073741824 "
               "bytes from",
               "more than deflate can produce");
}

/// Sets the uncompressed size of the first member in both its local header
/// and the central directory (the sizes libzip checks for consistency).
void setMemberSize(std::string &zip, uint32_t size) {
  auto setU32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i)
      zip[at + i] = char(v >> (8 * i));
  };
  size_t cd = zip.find("PK\x01\x02");
  ASSERT_NE(cd, std::string::npos);
  setU32(22, size);
  setU32(cd + 24, size);
}

TEST(Corruption, NpzMemberLargerThanItsHeaderDeclares) {
  // A header declaring 4 floats, then 8 MiB of zeros: deflate makes ~8 KiB
  // of it. The directory's honest size disagrees with the header, so the
  // member is refused after its header is inflated, before the data is.
  TempDir dir("corrupt-npz-bigger");
  std::string bomb = validNpy() + std::string(8 << 20, '\0');
  std::string zip = makeZip({{"x.npy", bomb}}, true, dir);
  ASSERT_LT(zip.size(), 64u << 10);
  const std::string directory = "the archive's directory gives it " +
                                std::to_string(bomb.size()) + " bytes";
  EXPECT_ERROR(npzError(zip), "'bad.npz': member 'x.npy': ", directory.c_str(),
               "its .npy header declares 144 (shape [4] of <f4: 128 header "
               "+ 16 data bytes)");
}

TEST(Corruption, NpzMemberInflatesPastItsDeclaredSize) {
  // The same stream with the directory (both headers) rewritten to the
  // declared 144 bytes: inflating must stop after 144 bytes and fail.
  TempDir dir("corrupt-npz-inflates");
  std::string bomb = validNpy() + std::string(8 << 20, '\0');
  std::string zip = makeZip({{"x.npy", bomb}}, true, dir);
  setMemberSize(zip, 144);
  EXPECT_ERROR(npzError(zip), "'bad.npz': member 'x.npy': ",
               "the data inflates to more than the 144 bytes its .npy header "
               "declares (shape [4] of <f4: 128 header + 16 data bytes)",
               "reading stopped there");
  // Stored (not compressed) members are bounded the same way.
  zip = makeZip({{"x.npy", validNpy() + std::string(4096, '\0')}}, false, dir);
  size_t cd = zip.find("PK\x01\x02");
  ASSERT_NE(cd, std::string::npos);
  EXPECT_ERROR(npzError(zip), "'bad.npz': member 'x.npy': ",
               "the archive's directory gives it 4240 bytes but its .npy "
               "header declares 144");
}

TEST(Corruption, NpzMemberShorterThanItsHeaderDeclares) {
  // A header declaring 1000 floats with only 16 bytes of data; the
  // directory says what the header declares.
  TempDir dir("corrupt-npz-shorter");
  std::string shortMember =
      npyHeader(DType::F32, {1000}).value() + std::string(16, 0x22);
  std::string zip = makeZip({{"x.npy", shortMember}}, true, dir);
  EXPECT_ERROR(npzError(zip), "'bad.npz': member 'x.npy': ",
               "the archive's directory gives it 144 bytes but its .npy "
               "header declares 4128 (shape [1000] of <f4: 128 header + 4000 "
               "data bytes)");
  setMemberSize(zip, 4128);
  EXPECT_ERROR(npzError(zip), "'bad.npz': member 'x.npy': ",
               "the data ends after 144 bytes, but its .npy header declares "
               "4128");
  // A member that ends inside its header.
  zip = makeZip({{"x.npy", validNpy().substr(0, 60)}}, true, dir);
  EXPECT_ERROR(npzError(zip), "'bad.npz': member 'x.npy': ",
               "the data ends after 60 bytes, inside its 128-byte .npy "
               "header");
}

TEST(Corruption, NpzMemberHeaderTooLong) {
  // A version 2.0 header whose length field says 16 MiB.
  TempDir dir("corrupt-npz-longheader");
  std::string npy("\x93NUMPY\x02\x00\x00\x00\x00\x01", 12);
  npy += std::string(4096, ' ');
  EXPECT_ERROR(npzError(makeZip({{"x.npy", npy}}, true, dir)),
               "'bad.npz': member 'x.npy': the .npy header is 16777228 bytes "
               "long, more than the 1048576 bytes");
}

TEST(Corruption, ReadersNameMissingFiles) {
  auto t = readNpy("/nonexistent-dir/a.npy");
  ASSERT_FALSE(t.isOk());
  EXPECT_ERROR(t.message(), "cannot open '/nonexistent-dir/a.npy'");
  auto z = readNpz("/nonexistent-dir/a.npz");
  ASSERT_FALSE(z.isOk());
  EXPECT_ERROR(z.message(), "cannot open '/nonexistent-dir/a.npz'");
}
