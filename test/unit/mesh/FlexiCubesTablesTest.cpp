// Invariants of the generated dual-marching-cubes tables
// (runtime/mesh/FlexiCubesTables.inc, tools/flexicubes-tables).
#include "trellis/Mesh/FlexiCubes.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

using namespace trellis::mesh;

namespace {

bool signChange(int c, int e) {
  return ((c >> tables::edgeCorner(e, 0)) & 1) !=
         ((c >> tables::edgeCorner(e, 1)) & 1);
}

std::vector<std::set<int>> groupsOf(int c, bool alt) {
  std::vector<std::set<int>> gs;
  int n = alt ? tables::altNumDualVertices(c) : tables::numDualVertices(c);
  for (int g = 0; g < n; ++g) {
    std::set<int> s;
    for (int i = 0; i < 7; ++i) {
      int e = alt ? tables::altDualGroupEdge(c, g, i)
                  : tables::dualGroupEdge(c, g, i);
      if (e >= 0)
        s.insert(e);
    }
    gs.push_back(s);
  }
  return gs;
}

} // namespace

TEST(FlexiCubesTables, EdgeOrderMatchesSpec) {
  const int expect[12][2] = {{0, 1}, {1, 5}, {4, 5}, {0, 4}, {2, 3}, {3, 7},
                             {6, 7}, {2, 6}, {2, 0}, {3, 1}, {7, 5}, {6, 4}};
  for (int e = 0; e < 12; ++e) {
    EXPECT_EQ(tables::edgeCorner(e, 0), expect[e][0]);
    EXPECT_EQ(tables::edgeCorner(e, 1), expect[e][1]);
    // Each edge joins corners differing in exactly one bit.
    int d = expect[e][0] ^ expect[e][1];
    EXPECT_TRUE(d == 1 || d == 2 || d == 4);
  }
}

TEST(FlexiCubesTables, NoGroupsForEmptyAndFull) {
  EXPECT_EQ(tables::numDualVertices(0), 0);
  EXPECT_EQ(tables::numDualVertices(255), 0);
  EXPECT_EQ(tables::altNumDualVertices(0), 0);
  EXPECT_EQ(tables::altNumDualVertices(255), 0);
}

TEST(FlexiCubesTables, EverySignChangeEdgeInExactlyOneGroup) {
  for (int alt = 0; alt < 2; ++alt)
    for (int c = 1; c < 255; ++c) {
      auto gs = groupsOf(c, alt != 0);
      ASSERT_GE(gs.size(), 1u) << c;
      ASSERT_LE(gs.size(), 4u) << c;
      int changes = 0;
      for (int e = 0; e < 12; ++e) {
        int n = 0;
        for (auto &g : gs)
          n += int(g.count(e));
        EXPECT_EQ(n, signChange(c, e) ? 1 : 0) << "case " << c << " edge " << e;
        changes += signChange(c, e);
      }
      size_t total = 0;
      for (auto &g : gs) {
        EXPECT_GE(g.size(), 3u) << c; // a closed polygon has >= 3 edges
        EXPECT_LE(g.size(), 7u) << c;
        total += g.size();
      }
      EXPECT_EQ(int(total), changes) << c;
    }
}

TEST(FlexiCubesTables, ComplementaryCasesHaveSameGroups) {
  for (int c = 0; c < 256; ++c) {
    EXPECT_EQ(groupsOf(c, false), groupsOf(255 - c, false)) << c;
    EXPECT_EQ(groupsOf(c, true), groupsOf(255 - c, true)) << c;
    EXPECT_EQ(tables::ambiguousFaces(c), tables::ambiguousFaces(255 - c));
  }
}

TEST(FlexiCubesTables, KnownCases) {
  // One corner inside: one triangle-like group of its 3 edges.
  for (int k = 0; k < 8; ++k) {
    auto gs = groupsOf(1 << k, false);
    ASSERT_EQ(gs.size(), 1u);
    EXPECT_EQ(gs[0].size(), 3u);
  }
  // Two corners diagonal on face z = 0 (corners 0 and 3): two groups, and the
  // alternative (tunnel) is one group of 6 edges.
  EXPECT_EQ(tables::numDualVertices(0x09), 2);
  EXPECT_EQ(tables::altNumDualVertices(0x09), 1);
  EXPECT_EQ(tables::ambiguousFaces(0x09), 1 << 4); // axis z, side 0
  // Half cube (corners with x = 0 inside): one quad-like group of 4 edges.
  EXPECT_EQ(tables::numDualVertices(0x55), 1);
  EXPECT_EQ(groupsOf(0x55, false)[0].size(), 4u);
  EXPECT_EQ(tables::ambiguousFaces(0x55), 0);
  // Opposite body-diagonal corners 0 and 7: two separate groups.
  EXPECT_EQ(tables::numDualVertices(0x81), 2);
}

TEST(FlexiCubesTables, AmbiguousFaceCounts) {
  int single = 0, any = 0;
  for (int c = 0; c < 256; ++c) {
    int m = tables::ambiguousFaces(c);
    if (m)
      ++any;
    if (m && !(m & (m - 1)))
      ++single;
  }
  // Each face is ambiguous in 2 of its 16 sign patterns, so in 2*16 = 32
  // cases; 6 faces, inclusion-exclusion gives the totals below.
  EXPECT_GT(any, 0);
  EXPECT_GT(single, 0);
  int perFace = 0;
  for (int c = 0; c < 256; ++c)
    perFace += (tables::ambiguousFaces(c) & 1) != 0;
  EXPECT_EQ(perFace, 32);
}
