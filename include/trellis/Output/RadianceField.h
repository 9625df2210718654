//===- RadianceField.h - The radiance-field decoder's output as .npz ------===//
//
// One batch item of the radiance-field decoder (spec §7.3): a Strivec /
// DFS-octree leaf set, one leaf per active voxel of the 64^3 grid, each with a
// rank-16 trivector field. Rendering it (diffoctreerast) is out of scope; the
// file keeps everything a renderer needs.
//
// writeRadianceFieldNpz writes these keys (numpy dtypes and shapes, N leaves):
//
//   "coords"      int32   [N, 4]        (b, x, y, z) voxel coordinates
//   "position"    float32 [N, 3]        (x, y, z + 0.5) / resolution, in
//   [0,1]^3 "depth"       uint8   [N, 1]        log2(resolution) = 6 for every
//   leaf "trivec"      float32 [N, 16, 3, 8] rank x axis x sample, AFTER the +1
//   "density"     float32 [N, 16]       per rank
//   "features_dc" float32 [N, 16, 1, 3] per rank, SH degree 0
//   "aabb"        float32 [6]           (-0.5, -0.5, -0.5, 1, 1, 1)
//
// density_shift is 0 for this decoder and is not stored.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_OUTPUT_RADIANCEFIELD_H
#define TRELLIS_OUTPUT_RADIANCEFIELD_H

#include "trellis/Support/HostTensor.h"
#include "trellis/Support/Result.h"

#include <array>
#include <string>

namespace trellis::output {

/// Rank R = 16 and samples per axis D = 8 of slat_dec_rf_swin8_B_64l8r16_fp16.
inline constexpr int64_t kRfRank = 16;
inline constexpr int64_t kRfDim = 8;
/// Channels of the decoder head: 16*3*8 trivec + 16 density + 16*3 colour.
inline constexpr int64_t kRfHeadChannels =
    kRfRank * 3 * kRfDim + kRfRank + kRfRank * 3;
static_assert(kRfHeadChannels == 448);

struct RadianceField {
  HostTensor coords;     ///< [N, 4] I32 (b, x, y, z)
  HostTensor trivec;     ///< [N, 16, 3, 8] F32, the +1 already applied
  HostTensor density;    ///< [N, 16] F32
  HostTensor featuresDc; ///< [N, 16, 1, 3] F32
  int resolution = 64;   ///< grid resolution; depth = log2(resolution)
  std::array<float, 6> aabb = {-0.5f, -0.5f, -0.5f, 1.0f, 1.0f, 1.0f};

  int64_t size() const;
  /// dtypes, shapes, resolution a power of two in [2, 128], coordinates
  /// inside the grid.
  Status validate() const;
};

/// Splits the decoder head output h [N, 448] F32 (channels: trivec [0,384),
/// density [384,400), features_dc [400,448), spec §7.3) and applies
/// trivec <- trivec + 1. `coords` is shared, the fields are new tensors.
Result<RadianceField> radianceFieldFromHead(const HostTensor &coords,
                                            const HostTensor &head);

/// The "position" array: (coords[:, 1:] + 0.5) / resolution, F32 [N, 3].
HostTensor radianceFieldPositions(const RadianceField &rf);

/// Writes the keys listed above (see the file comment), in that order.
Status writeRadianceFieldNpz(const std::string &path, const RadianceField &rf,
                             bool compress = false);

} // namespace trellis::output

#endif // TRELLIS_OUTPUT_RADIANCEFIELD_H
