// The bundle format: round trip, and every corruption is detected with its
// own message.
#include "trellis/Runtime/Bundle.h"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

using namespace trellis;
namespace fs = std::filesystem;

static Bundle sample() {
  Bundle b;
  b.set("program", "{\"functions\":[]}");
  b.set("ptx.attention", std::string(1000, 'x'));
  b.set("empty", "");
  return b;
}

TEST(Bundle, RoundTrip) {
  std::string bytes = sample().serialize();
  Result<Bundle> parsed = Bundle::parse(bytes, "mem");
  ASSERT_TRUE(parsed.isOk()) << parsed.message();
  ASSERT_EQ(parsed->sections().size(), 3u);
  EXPECT_EQ(*parsed->find("program"), "{\"functions\":[]}");
  EXPECT_EQ(parsed->find("ptx.attention")->size(), 1000u);
  EXPECT_EQ(*parsed->find("empty"), "");
  EXPECT_EQ(parsed->find("nope"), nullptr);
}

TEST(Bundle, DetectsCorruption) {
  std::string good = sample().serialize();
  auto expectError = [&](std::string bytes, const std::string &needle) {
    Result<Bundle> r = Bundle::parse(bytes, "x.bundle");
    ASSERT_FALSE(r.isOk()) << "accepted a bundle that should fail: " << needle;
    EXPECT_NE(r.message().find(needle), std::string::npos) << r.message();
  };
  expectError(good.substr(0, 10), "fewer than the 24-byte header");
  std::string badMagic = good;
  badMagic[0] = 'X';
  expectError(badMagic, "magic");
  std::string badVersion = good;
  badVersion[8] = 9;
  expectError(badVersion, "format version 9");
  std::string badTable = good;
  badTable[30] ^= 1;
  expectError(badTable, "section table checksum");
  std::string badPayload = good;
  badPayload[badPayload.size() - 5] ^= 1;
  expectError(badPayload, "checksum does not match");
  expectError(good.substr(0, good.size() - 500), "outside the data");
}

TEST(Bundle, EmbeddedInExecutable) {
  fs::path dir = fs::temp_directory_path() / "trellis-bundle-test";
  fs::create_directories(dir);
  fs::path runtime = dir / "runtime";
  std::ofstream(runtime, std::ios::binary) << "#!/bin/sh\necho runtime\n";
  fs::path exe = dir / "app.exe";
  ASSERT_TRUE(sample().writeExecutable(runtime.string(), exe.string()).isOk());
  EXPECT_TRUE((fs::status(exe).permissions() & fs::perms::owner_exec) !=
              fs::perms::none);
  Result<Bundle> b = Bundle::readEmbedded(exe.string());
  ASSERT_TRUE(b.isOk()) << b.message();
  EXPECT_EQ(*b->find("program"), "{\"functions\":[]}");
  Result<Bundle> bare = Bundle::readEmbedded(runtime.string());
  ASSERT_FALSE(bare.isOk());
  EXPECT_NE(bare.message().find("carries no bundle"), std::string::npos);
}
