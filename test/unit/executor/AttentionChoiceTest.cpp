//===- AttentionChoiceTest.cpp - The attention kernel's wave model --------===//
//
// trellis_attn_sm90_long_sequence_config (runtime/kernels/attention.h) picks
// the 192- or 256-row sm_90a kernel for long d = 64 sequences. The
// expectations are the rankings measured on the H100
// (bench/attention/README.md).
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/attention.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace {

TrellisAttnParams shape(int seqs, int rows, int heads = 16, int d = 64) {
  TrellisAttnParams p{};
  p.num_seqs = seqs;
  p.seqlen_q = rows;
  p.heads = heads;
  p.head_dim = d;
  return p;
}

std::string pick(const TrellisAttnParams &p, int sms = 132) {
  const char *name = trellis_attn_sm90_long_sequence_config(&p, sms);
  return name ? name : "";
}

bool configured(const std::string &name) {
  for (int i = 0; i < trellis_attn_num_configs; ++i)
    if (name == trellis_attn_configs[i].name)
      return true;
  return false;
}

TEST(AttentionChoice, MeasuredRankings) {
  // SS self-attention, one sample and the CFG pair: 256-row tiles fill two
  // (four) waves.
  EXPECT_EQ(pick(shape(1, 4096)), "trellis_attn_sm90_d64_m256_n64_s4_mbrs");
  EXPECT_EQ(pick(shape(2, 4096)), "trellis_attn_sm90_d64_m256_n64_s4_mbrs");
  // SLat flow at N' = 4368: 128- and 256-row tiles leave a third wave of 8 %;
  // 192-row tiles fill three waves to 93 %.
  EXPECT_EQ(pick(shape(1, 4368)), "trellis_attn_sm90_d64_m192_n128_s3_mbrs");
}

TEST(AttentionChoice, DefaultsOutsideTheModel) {
  EXPECT_EQ(pick(shape(40, 512, 12)), "");     // Swin windows
  EXPECT_EQ(pick(shape(1, 4096, 8, 128)), ""); // other head dims
  EXPECT_EQ(pick(shape(1, 4096), 0), "");      // unknown SM count
}

TEST(AttentionChoice, EveryCandidateIsInstantiated) {
  // Shapes that make each candidate win, then: each name is in the table the
  // modules are built from.
  for (int rows : {1024, 1536, 2048, 3000, 4096, 4368, 6300, 8192, 20000})
    for (int seqs : {1, 2}) {
      std::string name = pick(shape(seqs, rows));
      ASSERT_FALSE(name.empty());
      EXPECT_TRUE(configured(name)) << name;
    }
  // The wave count decides: 2 × 16 × 11 = 352 tiles of 192 rows are 2.67
  // waves on 132 SMs (3), 2 × 16 × 8 = 256 tiles of 256 rows 1.94 (2).
  EXPECT_EQ(pick(shape(2, 2048)), "trellis_attn_sm90_d64_m256_n64_s4_mbrs");
  // On 96 SMs: 192-row tiles need 4 waves (4 × 192 / 428 = 1.79), 256-row
  // tiles 3 (3 × 256 / 417 = 1.84): 192 rows.
  EXPECT_EQ(pick(shape(2, 2048), 96),
            "trellis_attn_sm90_d64_m192_n128_s3_mbrs");
}

} // namespace
