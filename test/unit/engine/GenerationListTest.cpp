//===- GenerationListTest.cpp - trellis.exe's generation list -------------===//
#include "runtime/app/GenerationList.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

using namespace trellis;
namespace fs = std::filesystem;

namespace {

std::string writeManifest(const std::string &name, const std::string &text) {
  fs::path dir = fs::temp_directory_path() / "trellis-genlist-test";
  fs::create_directories(dir);
  fs::path p = dir / name;
  std::ofstream(p) << text;
  return p.string();
}

/// The manifest's error, or else what is wrong with its entries (a bad line
/// is an entry to record as failed, not an error of the whole manifest).
std::string errorOf(const std::string &text) {
  auto r = readGenerationManifest(writeManifest("bad.jsonl", text), "/out");
  if (!r)
    return r.message();
  std::string problems;
  for (const GenerationSpec &g : *r)
    problems += g.invalid.empty() ? "" : g.invalid + "\n";
  return problems;
}

} // namespace

TEST(GenerationList, ManifestLinesBecomeGenerations) {
  std::string path = writeManifest(
      "good.jsonl",
      "{\"id\": \"chair\", \"cond\": \"c/chair.npy\", \"seed\": 7}\n"
      "\n"
      "{\"id\": \"lamp-2\", \"cond\": \"/abs/lamp.npy\", \"seed\": 0, "
      "\"coords\": \"lamp_coords.npy\"}\n");
  auto r = readGenerationManifest(path, "/out");
  ASSERT_TRUE(bool(r)) << r.message();
  ASSERT_EQ(r->size(), 2u);
  const fs::path base = fs::path(path).parent_path();
  EXPECT_EQ((*r)[0].id, "chair");
  EXPECT_EQ((*r)[0].cond, (base / "c/chair.npy").string());
  EXPECT_EQ((*r)[0].seed, 7u);
  EXPECT_EQ((*r)[0].outDir, "/out/chair");
  EXPECT_EQ((*r)[0].origin, path + ":1");
  EXPECT_EQ((*r)[1].cond, "/abs/lamp.npy");
  EXPECT_EQ((*r)[1].coords, (base / "lamp_coords.npy").string());
  EXPECT_EQ((*r)[1].origin, path + ":3");
}

// "image": one picture or the pictures of one multi-image generation,
// relative to the manifest like the other paths.
TEST(GenerationList, ManifestImages) {
  std::string path = writeManifest(
      "images.jsonl",
      "{\"id\": \"one\", \"image\": \"pics/a.png\", \"seed\": 1}\n"
      "{\"id\": \"three\", \"image\": [\"a.png\", \"/abs/b.jpg\", "
      "\"c.png\"], \"seed\": 2}\n");
  auto r = readGenerationManifest(path, "/out");
  ASSERT_TRUE(bool(r)) << r.message();
  ASSERT_EQ(r->size(), 2u);
  const fs::path base = fs::path(path).parent_path();
  EXPECT_TRUE((*r)[0].cond.empty());
  EXPECT_EQ((*r)[0].images,
            std::vector<std::string>{(base / "pics/a.png").string()});
  EXPECT_EQ((*r)[1].images.size(), 3u);
  EXPECT_EQ((*r)[1].images[1], "/abs/b.jpg");
}

TEST(GenerationList, ManifestErrorsNameTheLineAndField) {
  EXPECT_NE(errorOf("{\"id\": \"a\", \"cond\": \"a.npy\", \"image\": "
                    "\"a.png\", \"seed\": 1}")
                .find("bad.jsonl:1: fields 'cond' and 'image' exclude each "
                      "other"),
            std::string::npos);
  EXPECT_NE(errorOf("{\"id\": \"a\", \"image\": [], \"seed\": 1}")
                .find("field 'image' must be an image path or a non-empty "
                      "list of them, found []"),
            std::string::npos);
  EXPECT_NE(errorOf("{\"id\": \"a\", \"image\": [3], \"seed\": 1}")
                .find("field 'image' must be an image path"),
            std::string::npos);
  EXPECT_NE(errorOf("{\"id\": \"a\", \"cond\": \"a.npy\", \"seed\": 1}\n"
                    "not json\n")
                .find("bad.jsonl:2: expected one JSON object"),
            std::string::npos);
  EXPECT_NE(errorOf("{\"id\": \"a\", \"cond\": \"a.npy\", \"seeed\": 1}")
                .find("unknown field 'seeed'"),
            std::string::npos);
  EXPECT_NE(errorOf("{\"id\": \"../up\", \"cond\": \"a.npy\", \"seed\": 1}")
                .find("field 'id'"),
            std::string::npos);
  EXPECT_NE(errorOf("{\"id\": \"a\", \"cond\": \"a.npy\", \"seed\": -1}")
                .find("field 'seed' must be an integer"),
            std::string::npos);
  EXPECT_NE(errorOf("{\"id\": \"a\", \"seed\": 1}").find("field 'cond'"),
            std::string::npos);
  EXPECT_NE(errorOf("{\"id\": \"a\", \"cond\": \"a.npy\", \"seed\": 1}\n"
                    "{\"id\": \"a\", \"cond\": \"b.npy\", \"seed\": 2}")
                .find(":2: id 'a' appears twice"),
            std::string::npos);
  EXPECT_NE(errorOf("\n\n").find("lists no generation"), std::string::npos);
  auto missing = readGenerationManifest("/nonexistent/m.jsonl", "/out");
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(missing.message().find("cannot open '/nonexistent/m.jsonl'"),
            std::string::npos);
}

TEST(GenerationList, ABadLineIsAnEntryToRecord) {
  auto r = readGenerationManifest(
      writeManifest("mixed.jsonl",
                    "{\"id\": \"a\", \"cond\": \"a.npy\", \"seed\": 1}\n"
                    "not json\n"
                    "{\"id\": \"b\", \"cond\": \"b.npy\", \"seed\": 2, "
                    "\"ss\": {\"steps\": 0}}\n"
                    "{\"id\": \"c\", \"cond\": \"c.npy\", \"seed\": 3, "
                    "\"slat\": {\"steps\": 4, \"cfg\": 2.5}, \"formats\": "
                    "[\"mesh\"]}\n"),
      "/out");
  ASSERT_TRUE(bool(r)) << r.message();
  ASSERT_EQ(r->size(), 4u);
  EXPECT_TRUE((*r)[0].invalid.empty());
  EXPECT_EQ((*r)[1].id, "line-2");
  EXPECT_EQ((*r)[1].outDir, "/out/line-2");
  EXPECT_NE((*r)[1].invalid.find("mixed.jsonl:2: expected one JSON object"),
            std::string::npos);
  EXPECT_NE((*r)[2].invalid.find("field 'ss.steps' must be an integer in "
                                 "1..10000, found 0"),
            std::string::npos);
  EXPECT_TRUE((*r)[3].invalid.empty());
  EXPECT_EQ((*r)[3].slat->steps, 4);
  EXPECT_EQ((*r)[3].slat->cfgStrength, 2.5);
  EXPECT_EQ(*(*r)[3].formats, std::vector<std::string>{"mesh"});
  for (size_t i = 0; i < r->size(); ++i)
    EXPECT_EQ((*r)[i].index, i); // the unit of --shard
}

TEST(GenerationList, RepeatedCondsGetNumberedFolders) {
  auto one = generationsFromConds({"a.npy"}, "", 3, "/out");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].outDir, "/out");
  auto two = generationsFromConds({"a.npy", "b.npy"}, "c.npy", 3, "/out");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].outDir, "/out/1");
  EXPECT_EQ(two[1].cond, "b.npy");
  EXPECT_EQ(two[1].coords, "c.npy");
  EXPECT_EQ(two[1].seed, 3u);
}
