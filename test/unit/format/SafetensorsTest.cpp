//===- SafetensorsTest.cpp - Reader, writer and layout of safetensors -----===//
#include "trellis/Format/Safetensors.h"

#include "test/unit/format/TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sys/stat.h>

using namespace trellis;
using namespace trellis::test;

namespace {

std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i)
    s[i] = char(n >> (8 * i));
  return s;
}

std::string floatBytes(std::initializer_list<float> values) {
  std::string s;
  for (float v : values)
    s.append(reinterpret_cast<const char *>(&v), 4);
  return s;
}

/// Writes `tensors` with writeSafetensors, copying each one's bytes.
Status writeAll(const std::string &path,
                const std::vector<std::pair<std::string, HostTensor>> &tensors,
                const std::map<std::string, std::string> &metadata = {}) {
  std::vector<TensorSpec> specs;
  for (const auto &[name, t] : tensors)
    specs.push_back({name, t.dtype(), t.shape()});
  return writeSafetensors(
      path, specs,
      [&](size_t i, void *dst) {
        const HostTensor &t = tensors[i].second;
        if (t.nbytes())
          std::memcpy(dst, t.raw(), t.nbytes());
      },
      metadata);
}

} // namespace

// The byte vectors of the reference library's own tests
// (huggingface/safetensors, safetensors/src/tensor.rs: test_serialization,
// test_empty, test_serialization_forced_alignement).
TEST(SafetensorsWriter, MatchesReferenceSerialization) {
  TempDir dir("st-ref");
  std::string path = dir.file("a.safetensors");
  HostTensor t(DType::F32, {1, 2, 3});
  for (int i = 0; i < 6; ++i)
    t.mutableData<float>()[i] = float(i);
  ASSERT_TRUE(writeAll(path, {{"attn.0", t}}).isOk());
  std::string header =
      R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
  ASSERT_EQ(header.size(), 64u);
  EXPECT_EQ(readBytes(path),
            le64(64) + header + floatBytes({0, 1, 2, 3, 4, 5}));
}

TEST(SafetensorsWriter, MatchesReferenceEmptyAndMetadata) {
  TempDir dir("st-empty");
  std::string path = dir.file("e.safetensors");
  ASSERT_TRUE(writeAll(path, {}).isOk());
  EXPECT_EQ(readBytes(path), le64(8) + "{}      ");

  ASSERT_TRUE(writeAll(path, {}, {{"framework", "pt"}}).isOk());
  EXPECT_EQ(readBytes(path),
            le64(40) + R"({"__metadata__":{"framework":"pt"}})" + "     ");
}

TEST(SafetensorsWriter, MatchesReferenceForcedAlignment) {
  TempDir dir("st-align");
  std::string path = dir.file("a.safetensors");
  HostTensor t(DType::F32, {1, 1, 2, 3});
  for (int i = 0; i < 6; ++i)
    t.mutableData<float>()[i] = float(i);
  ASSERT_TRUE(writeAll(path, {{"attn0", t}}).isOk());
  std::string header =
      R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}})";
  EXPECT_EQ(readBytes(path), le64(72) + header + std::string(7, ' ') +
                                 floatBytes({0, 1, 2, 3, 4, 5}));
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.isOk()) << f.message();
  EXPECT_EQ((*f)->dataOffset(), 80u);
}

TEST(SafetensorsWriter, LaysOutByDescendingDTypeRankThenName) {
  // The reference sorts by its Dtype enum (BOOL < U8 < I8 < I16 < F16 <
  // BF16 < I32 < F32 < F64 < I64), descending, then by name bytewise.
  std::vector<TensorSpec> specs = {
      {"bool", DType::Bool, {3}},  {"u8", DType::U8, {3}},
      {"i8", DType::I8, {3}},      {"i16", DType::I16, {3}},
      {"f16", DType::F16, {3}},    {"bf16", DType::BF16, {3}},
      {"i32", DType::I32, {3}},    {"f32.b", DType::F32, {3}},
      {"f64", DType::F64, {3}},    {"i64", DType::I64, {3}},
      {"f32.a.2", DType::F32, {}}, {"f32.a.10", DType::F32, {2}},
      {"F32", DType::F32, {1}}};
  auto layout = planSafetensors(specs);
  ASSERT_TRUE(layout.isOk()) << layout.message();
  std::vector<std::string> names;
  for (size_t i : layout->order)
    names.push_back(specs[i].name);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "i64", "f64", "F32", "f32.a.10", "f32.a.2", "f32.b",
                       "i32", "bf16", "f16", "i16", "i8", "u8", "bool"}));
  EXPECT_EQ(layout->header.size() % 8, 0u);
  size_t close = layout->header.find_last_of('}');
  EXPECT_EQ(layout->header.find(' '),
            close + 1 == layout->header.size() ? std::string::npos : close + 1);
  EXPECT_LT(layout->header.size() - close - 1, 8u);
  // Offsets are contiguous in that order.
  uint64_t pos = 0;
  for (size_t i : layout->order) {
    EXPECT_EQ(layout->begin[i], pos);
    pos = layout->end[i];
  }
  EXPECT_EQ(layout->dataSize, pos);
}

TEST(SafetensorsRoundTrip, EveryDType) {
  TempDir dir("st-rt");
  std::string path = dir.file("all.safetensors");
  std::vector<std::pair<std::string, HostTensor>> tensors;
  unsigned seed = 0;
  for (DType dt : kAllDTypes) {
    std::string n(dtypeName(dt));
    tensors.push_back({n + ".mat", patternTensor(dt, {3, 5}, ++seed)});
    tensors.push_back({n + ".scalar", patternTensor(dt, {}, ++seed)});
    tensors.push_back({n + ".empty", patternTensor(dt, {0, 4}, ++seed)});
    tensors.push_back({n + ".vec", patternTensor(dt, {7}, ++seed)});
  }
  ASSERT_TRUE(writeAll(path, tensors, {{"format", "pt"}}).isOk());

  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.isOk()) << file.message();
  const SafetensorsFile &f = **file;
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.entries().size(), tensors.size());
  EXPECT_EQ(f.metadata(),
            (std::map<std::string, std::string>{{"format", "pt"}}));
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(f.fileSize(), uint64_t(st.st_size));
  uint64_t prevEnd = 0;
  for (const auto &e : f.entries()) {
    EXPECT_EQ(e.begin, prevEnd) << e.name; // data order
    prevEnd = e.end;
  }
  for (const auto &[name, t] : tensors) {
    const SafetensorsEntry *e = f.find(name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_EQ(e->name, name);
    HostTensor back = f.tensor(*e);
    EXPECT_TRUE(sameBytes(back, t)) << name;
    EXPECT_TRUE(back.isReadOnly());
    if (t.nbytes()) { // zero-copy: the view points into the mapping
      const auto *p = static_cast<const uint8_t *>(back.raw());
      EXPECT_EQ(p, static_cast<const uint8_t *>(f.tensor(*e).raw()));
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % dtypeSize(t.dtype()), 0u);
    }
  }
  EXPECT_EQ(f.find("nope"), nullptr);
}

TEST(SafetensorsRoundTrip, ViewsKeepTheMappingAlive) {
  TempDir dir("st-alive");
  std::string path = dir.file("a.safetensors");
  HostTensor t = patternTensor(DType::F32, {64, 64});
  ASSERT_TRUE(writeAll(path, {{"w", t}}).isOk());
  HostTensor view;
  {
    auto f = SafetensorsFile::open(path);
    ASSERT_TRUE(f.isOk()) << f.message();
    view = (*f)->tensor(*(*f)->find("w"));
  } // the file object is gone; the view still owns the mapping
  EXPECT_TRUE(sameBytes(view, t));
}

TEST(SafetensorsRoundTrip, NamesNeedingJsonEscapes) {
  TempDir dir("st-esc");
  std::string path = dir.file("e.safetensors");
  std::vector<std::string> names = {"q\"uote",   "back\\slash",
                                    "new\nline", "ctl\x1f",
                                    "tab\t",     "utf8-\xc3\xa9\xe2\x82\xac",
                                    "slash/ok",  ""};
  std::vector<std::pair<std::string, HostTensor>> tensors;
  for (const auto &n : names)
    tensors.push_back({n, patternTensor(DType::I16, {2})});
  ASSERT_TRUE(writeAll(path, tensors, {{"k\"", "v\\\x01"}}).isOk());
  std::string bytes = readBytes(path);
  // serde_json's spelling of the escapes.
  EXPECT_NE(bytes.find(R"("ctl\u001f")"), std::string::npos);
  EXPECT_NE(bytes.find(R"("new\nline")"), std::string::npos);
  EXPECT_NE(bytes.find(R"("k\"":"v\\\u0001")"), std::string::npos);
  EXPECT_NE(bytes.find("\"utf8-\xc3\xa9\xe2\x82\xac\""), std::string::npos);
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.isOk()) << f.message();
  for (const auto &n : names)
    EXPECT_NE((*f)->find(n), nullptr) << n;
  EXPECT_EQ((*f)->metadata().at("k\""), "v\\\x01");
}

TEST(SafetensorsWriter, StreamsOneTensorAtATimeInDataOrder) {
  TempDir dir("st-stream");
  std::string path = dir.file("s.safetensors");
  std::vector<TensorSpec> specs = {{"b", DType::F16, {1024, 1024}},
                                   {"a", DType::F16, {1024, 1024}},
                                   {"c", DType::F32, {512, 1024}}};
  std::vector<size_t> calls;
  Status st = writeSafetensors(path, specs, [&](size_t i, void *dst) {
    calls.push_back(i);
    size_t n = size_t(numElements(specs[i].shape)) * dtypeSize(specs[i].dtype);
    std::memset(dst, int(i + 1), n);
  });
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(calls, (std::vector<size_t>{2, 1, 0})); // c (F32), a, b
  auto layout = planSafetensors(specs);
  ASSERT_TRUE(layout.isOk());
  struct stat s;
  ASSERT_EQ(::stat(path.c_str(), &s), 0);
  EXPECT_EQ(uint64_t(s.st_size), layout->fileSize());
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.isOk()) << f.message();
  HostTensor b = (*f)->tensor(*(*f)->find("b"));
  EXPECT_EQ(static_cast<const uint8_t *>(b.raw())[12345], 1);
  HostTensor c = (*f)->tensor(*(*f)->find("c"));
  EXPECT_EQ(static_cast<const uint8_t *>(c.raw())[0], 3);
}

TEST(SafetensorsWriter, RejectsBadSpecsAndLeavesNoFile) {
  TempDir dir("st-bad");
  std::string path = dir.file("bad.safetensors");
  auto noFill = [](size_t, void *) {};
  struct Case {
    std::vector<TensorSpec> specs;
    const char *message;
  } cases[] = {
      {{{"a", DType::F32, {2}}, {"a", DType::F16, {2}}},
       "tensor 'a': the name appears twice"},
      {{{"__metadata__", DType::F32, {2}}}, "reserved for the metadata"},
      {{{"n", DType::F32, {2, -1}}}, "has a negative dimension"},
      {{{"bad\xff", DType::F32, {2}}}, "not valid UTF-8"},
      {{{"huge", DType::F64, {int64_t(1) << 40, int64_t(1) << 30}}},
       "overflows int64"},
  };
  for (const auto &c : cases) {
    Status st = writeSafetensors(path, c.specs, noFill);
    ASSERT_FALSE(st.isOk()) << c.message;
    EXPECT_NE(st.message().find(c.message), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
    EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  }
  Status st = writeSafetensors("/nonexistent-dir/x.safetensors",
                               {{"a", DType::F32, {1}}}, noFill);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("/nonexistent-dir/x.safetensors"),
            std::string::npos);
}

TEST(SafetensorsReader, AcceptsAnyJsonOrderAndFormatting) {
  // Hand-written: entries not in offset order, whitespace, metadata last.
  std::string header =
      R"( { "b" : {"shape":[2],"dtype":"I32","data_offsets":[8,16]},
    "a":{"data_offsets":[0,8],"dtype":"F32","shape":[2]},
    "__metadata__":{"x":"y"} } )";
  std::string data = floatBytes({1.5f, -2.0f});
  data += std::string("\x01\x00\x00\x00\x02\x00\x00\x00", 8);
  std::string image = safetensorsImage(header, data);
  auto f = SafetensorsFile::fromMemory(image.data(), image.size(), "mem");
  ASSERT_TRUE(f.isOk()) << f.message();
  ASSERT_EQ((*f)->entries().size(), 2u);
  EXPECT_EQ((*f)->entries()[0].name, "a");
  EXPECT_EQ((*f)->entries()[1].name, "b");
  EXPECT_EQ((*f)->metadata().at("x"), "y");
  // The header length is not a multiple of 8 here, so the F32 data is
  // misaligned in memory: tensor() hands out an aligned copy.
  HostTensor a = (*f)->tensor((*f)->entries()[0]);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.raw()) % 4, 0u);
  EXPECT_EQ(a.data<float>()[0], 1.5f);
  EXPECT_EQ(a.data<float>()[1], -2.0f);
  HostTensor b = (*f)->tensor((*f)->entries()[1]);
  EXPECT_EQ(b.data<int32_t>()[1], 2);
}

TEST(SafetensorsReader, ZeroSizedTensorsAndEmptyFile) {
  std::string header =
      R"({"z":{"dtype":"F16","shape":[0,3],"data_offsets":[0,0]},)"
      R"("s":{"dtype":"U8","shape":[],"data_offsets":[0,1]}})";
  std::string image = safetensorsImage(header, "\x07");
  auto f = SafetensorsFile::fromMemory(image.data(), image.size(), "mem");
  ASSERT_TRUE(f.isOk()) << f.message();
  EXPECT_EQ((*f)->tensor(*(*f)->find("z")).numel(), 0);
  EXPECT_EQ((*f)->tensor(*(*f)->find("s")).data<uint8_t>()[0], 7);
}
