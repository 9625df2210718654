//===- JsonTest.cpp - The position-keeping strict JSON reader -------------===//

#include "test/unit/config/ConfigTestUtil.h"

#include "trellis/Config/Json.h"

#include <gtest/gtest.h>

#include <cstdio>

using namespace trellis;
using namespace trellis::config;
using trellis::testutil::lineCol;

namespace {

TEST(Json, RecordsPositionsOfValuesAndKeys) {
  std::string text = "{\n  \"a\": 1,\n  \"b\": [true, null, \"x\"],\n"
                     "\t\"c\": {\"d\": -2.5e3}\n}\n";
  auto doc = parseJson(text, "f.json");
  ASSERT_TRUE(doc) << doc.message();
  const JsonValue &root = doc->root;
  EXPECT_EQ(root.pos().line, 1u);
  EXPECT_EQ(root.pos().column, 1u);
  ASSERT_TRUE(root.isObject());
  ASSERT_EQ(root.size(), 3u);
  EXPECT_EQ(root.key(0), "a");
  EXPECT_EQ(root.keyPos(0).line, 2u);
  EXPECT_EQ(root.keyPos(0).column, 3u);
  const JsonValue *a = root.find("a");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->pos().line, 2u);
  EXPECT_EQ(a->pos().column, 8u);
  EXPECT_TRUE(a->isIntegerLiteral());
  EXPECT_EQ(a->integer(), 1);
  const JsonValue *b = root.find("b");
  ASSERT_TRUE(b && b->isArray() && b->size() == 3);
  EXPECT_EQ((*b)[1].pos().column, 15u);
  EXPECT_TRUE((*b)[1].isNull());
  EXPECT_EQ((*b)[2].text(), "x");
  // A tab counts as one column.
  EXPECT_EQ(root.keyPos(2).line, 4u);
  EXPECT_EQ(root.keyPos(2).column, 2u);
  const JsonValue *d = root.find("c")->find("d");
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->isIntegerLiteral());
  EXPECT_DOUBLE_EQ(d->number(), -2500.0);
  EXPECT_EQ(d->text(), "-2.5e3");
  EXPECT_EQ(d->pos().line, 4u);
  EXPECT_EQ(d->pos().column, 13u);
}

TEST(Json, DecodesStringsAndKeepsNumberText) {
  auto doc = parseJson(R"(["a\"b\\c\/\n\u00e9\ud83d\ude00", 25, 25.0, 1e2,
                          -0, 12345678901234567890])",
                       "s.json");
  ASSERT_TRUE(doc) << doc.message();
  const JsonValue &r = doc->root;
  EXPECT_EQ(r[0].text(), "a\"b\\c/\n\xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_TRUE(r[1].isIntegerLiteral());
  EXPECT_FALSE(r[2].isIntegerLiteral());
  EXPECT_EQ(r[2].text(), "25.0");
  EXPECT_FALSE(r[3].isIntegerLiteral());
  EXPECT_TRUE(r[4].isIntegerLiteral());
  // An integer literal beyond int64 is still a number, but no integer.
  EXPECT_TRUE(r[5].isIntegerLiteral());
  EXPECT_FALSE(r[5].integer().has_value());
  EXPECT_EQ(r[1].describe(), "25");
  EXPECT_EQ(r[0].describe().front(), '"');
}

struct SyntaxCase {
  const char *text;
  const char *where;   // "line:col"
  const char *path;    // JSON path in the message
  const char *message; // a fragment of the message
};

class JsonSyntax : public ::testing::TestWithParam<SyntaxCase> {};

TEST_P(JsonSyntax, FailsWithPositionPathAndExpectation) {
  const SyntaxCase &c = GetParam();
  auto doc = parseJson(c.text, "bad.json");
  ASSERT_FALSE(doc) << c.text;
  std::string prefix =
      std::string("bad.json:") + c.where + ": " + c.path + ": ";
  EXPECT_EQ(doc.message().rfind(prefix, 0), 0u)
      << "message: " << doc.message() << "\nexpected prefix: " << prefix;
  EXPECT_NE(doc.message().find(c.message), std::string::npos)
      << "message: " << doc.message() << "\nexpected fragment: " << c.message;
  EXPECT_NE(doc.message().find("expected"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, JsonSyntax,
    ::testing::Values(
        SyntaxCase{"{\"a\": [1, 2,]}", "1:13", "a",
                   "found ']' (JSON has no trailing commas)"},
        SyntaxCase{"{\"a\": 1,\n \"b\": 2,\n \"a\": 3}", "3:2", "a",
                   "expected each key once, found \"a\" again (first at line "
                   "1, column 2)"},
        SyntaxCase{"{\"a\": 1 // note\n}", "1:9", "(top level)",
                   "expected ',' or '}' after an object member, found '/'"},
        SyntaxCase{"{\"x\": {\"steps\": 025}}", "1:17", "x.steps",
                   "leading zero"},
        SyntaxCase{"{\"s\": NaN}", "1:7", "s",
                   "expected a JSON value, found 'NaN'"},
        SyntaxCase{"{\"s\": \"abc\n\"}", "1:11", "s",
                   "strings cannot span lines"},
        SyntaxCase{"{\"s\": \"\\q\"}", "1:9", "s", "found 'q'"},
        SyntaxCase{"{\"s\": \"\xff\"}", "1:8", "s", "expected UTF-8 text"},
        SyntaxCase{"\xEF\xBB\xBF{}", "1:1", "(top level)", "byte-order mark"},
        SyntaxCase{"{\"a\": 1} x", "1:10", "(top level)",
                   "expected end of file"},
        SyntaxCase{"{\"a\": {\"b\": [1, 2 3]}}", "1:19", "a.b",
                   "expected ',' or ']'"},
        SyntaxCase{"{\"a\": 1e999}", "1:7", "a", "expected a finite number"},
        SyntaxCase{"", "1:1", "(top level)", "found end of file"},
        SyntaxCase{"{'a': 1}", "1:2", "(top level)", "single-quoted"},
        SyntaxCase{"{\"a\": \"\\ud800\"}", "1:14", "a", "low surrogate"},
        SyntaxCase{"{\"2d filter\": tru}", "1:15", "[\"2d filter\"]",
                   "found 'tru'"}));

TEST(Json, RejectsDeepNesting) {
  std::string deep(kMaxJsonDepth + 5, '[');
  auto doc = parseJson(deep, "deep.json");
  ASSERT_FALSE(doc);
  EXPECT_NE(doc.message().find("nesting deeper than"), std::string::npos);
  std::string ok(kMaxJsonDepth - 1, '[');
  ok += std::string(kMaxJsonDepth - 1, ']');
  EXPECT_TRUE(parseJson(ok, "ok.json"));
}

TEST(Json, PathsQuoteNonIdentifierKeys) {
  EXPECT_EQ(jsonPathKey("", "args"), "args");
  EXPECT_EQ(jsonPathKey("args", "models"), "args.models");
  EXPECT_EQ(jsonPathKey("r", "2d_filter_kernel_size"),
            "r.2d_filter_kernel_size");
  EXPECT_EQ(jsonPathKey("r", "a.b"), "r[\"a.b\"]");
  EXPECT_EQ(jsonPathIndex("p.cfg_interval", 1), "p.cfg_interval[1]");
}

TEST(Json, DescribeShortensLongValues) {
  std::string text = "[";
  for (int i = 0; i < 100; ++i) {
    if (i)
      text += ',';
    text += std::to_string(i);
  }
  text += "]";
  auto doc = parseJson(text, "x.json");
  ASSERT_TRUE(doc);
  EXPECT_EQ(doc->root.describe(), "an array of 100 elements");
  auto small = parseJson("[0.5]", "y.json");
  ASSERT_TRUE(small);
  EXPECT_EQ(small->root.describe(), "[0.5]");
}

TEST(Json, ReadJsonFileNamesTheFile) {
  auto missing = readJsonFile("/nonexistent/dir/pipeline.json");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.message().rfind("/nonexistent/dir/pipeline.json: ", 0), 0u);
}

// The size bound that keeps a parsed config's memory small (the tree is
// 15-30 times the text): one byte past 1 MiB is refused unread, naming the
// file and both sizes; 1 MiB itself is parsed.
TEST(Json, ReadJsonFileBoundsTheSize) {
  std::string path = ::testing::TempDir() + "/big_pipeline.json";
  auto write = [&](size_t bytes) {
    std::string text(bytes, ' '); // "[   ...   ]"
    text.front() = '[';
    text.back() = ']';
    FILE *f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  };
  write(kMaxJsonFileSize);
  EXPECT_TRUE(readJsonFile(path)) << "1 MiB must still be read";
  write(kMaxJsonFileSize + 1);
  auto big = readJsonFile(path);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.message(), path + ": expected a config file of at most 1048576 "
                                  "bytes (1 MiB), found 1048577 bytes");
  std::remove(path.c_str());
}

} // namespace
