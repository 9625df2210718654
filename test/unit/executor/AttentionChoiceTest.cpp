//===- AttentionChoiceTest.cpp - Choosing an attention configuration ------===//
//
// trellis_attn_default_config and trellis_attn_choose
// (runtime/kernels/attention.h), which the compiler's trellis-tile-attention
// and the runtime share: the short-sequence defaults per family, and the
// wave model that picks the 192- or 256-row sm_90a kernel for long d = 64
// sequences. The expectations are the rankings measured on the H100
// (bench/attention/README.md).
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/attention.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

const char *kM192 = "trellis_attn_sm90_d64_m192_n128_s3_mbrs";
const char *kM256 = "trellis_attn_sm90_d64_m256_n64_s4_mbrs";

/// The sm_90a candidates of a d = 64 op whose length is known at run time,
/// as trellis-tile-attention lists them: the default, then the long ones.
std::vector<const TrellisAttnConfig *> sm90Candidates(int d = 64) {
  std::vector<const TrellisAttnConfig *> c{
      trellis_attn_default_config(TRELLIS_ATTN_SM90A, d)};
  for (const char *name : {kM192, kM256})
    c.push_back(trellis_attn_find(name));
  return c;
}

std::string pick(long long seqs, long long rows, long long heads = 16,
                 int sms = 132, int d = 64) {
  auto c = sm90Candidates(d);
  return trellis_attn_choose(c.data(), int(c.size()), rows, seqs, heads, sms)
      ->name;
}

TEST(AttentionChoice, Defaults) {
  EXPECT_STREQ(trellis_attn_default_config(TRELLIS_ATTN_SM90A, 64)->name,
               "trellis_attn_sm90_d64_m128_n64_s4");
  EXPECT_STREQ(trellis_attn_default_config(TRELLIS_ATTN_SM90A, 80)->name,
               "trellis_attn_sm90_d80_m128_n64_s4");
  EXPECT_STREQ(trellis_attn_default_config(TRELLIS_ATTN_SM90A, 128)->name,
               "trellis_attn_sm90_d128_m128_n128_s3");
  EXPECT_STREQ(trellis_attn_default_config(TRELLIS_ATTN_SM80, 64)->name,
               "trellis_attn_sm80_d64_m128_n64_s2");
  EXPECT_STREQ(trellis_attn_default_config(TRELLIS_ATTN_SM75, 128)->name,
               "trellis_attn_sm75_d128_m64_n64_s1");
  EXPECT_EQ(trellis_attn_default_config(TRELLIS_ATTN_SM90A, 96), nullptr);
  EXPECT_EQ(trellis_attn_find("trellis_attn_sm90_d64_m128_n64"), nullptr);
}

TEST(AttentionChoice, MeasuredRankings) {
  // SS self-attention, one sample and the CFG pair: 256-row tiles fill two
  // (four) waves.
  EXPECT_EQ(pick(1, 4096), kM256);
  EXPECT_EQ(pick(2, 4096), kM256);
  // SLat flow at N' = 4368: 128- and 256-row tiles leave a third wave of 8 %;
  // 192-row tiles fill three waves to 93 %.
  EXPECT_EQ(pick(1, 4368), kM192);
}

TEST(AttentionChoice, DefaultsOutsideTheModel) {
  const std::string m128 = "trellis_attn_sm90_d64_m128_n64_s4";
  EXPECT_EQ(pick(40, 512, 12), m128);    // Swin windows
  EXPECT_EQ(pick(1, 4096, 16, 0), m128); // unknown SM count
  // Only the default listed (the compiler knew the length was short).
  const TrellisAttnConfig *only[] = {
      trellis_attn_default_config(TRELLIS_ATTN_SM90A, 64)};
  EXPECT_EQ(trellis_attn_choose(only, 1, 4096, 2, 16, 132)->name, m128);
  // Configurations without a long-sequence rate are never chosen over it.
  const TrellisAttnConfig *other[] = {
      trellis_attn_default_config(TRELLIS_ATTN_SM90A, 128),
      trellis_attn_find("trellis_attn_sm90_d128_m128_n64_s3")};
  EXPECT_STREQ(trellis_attn_choose(other, 2, 8192, 2, 16, 132)->name,
               "trellis_attn_sm90_d128_m128_n128_s3");
}

TEST(AttentionChoice, TheWaveCountDecides) {
  for (int rows : {1024, 1536, 2048, 3000, 4096, 4368, 6300, 8192, 20000})
    for (int seqs : {1, 2}) {
      std::string name = pick(seqs, rows);
      EXPECT_TRUE(name == kM192 || name == kM256) << rows << " " << name;
    }
  // 2 × 16 × 11 = 352 tiles of 192 rows are 2.67 waves on 132 SMs (3),
  // 2 × 16 × 8 = 256 tiles of 256 rows 1.94 (2).
  EXPECT_EQ(pick(2, 2048), kM256);
  // On 96 SMs: 192-row tiles need 4 waves (4 × 192 / 428 = 1.79), 256-row
  // tiles 3 (3 × 256 / 417 = 1.84): 192 rows.
  EXPECT_EQ(pick(2, 2048, 16, 96), kM192);
}

} // namespace
