//===- Buffers.h - The computed buffers stored in TRELLIS checkpoints -----===//
//
// Two checkpoints store buffers that are functions of their args (spec §1.5,
// Appendix C): the sparse structure flow's `pos_emb` (the absolute position
// embedding of the patch grid, spec §3.6) and the Gaussian decoder's
// `offset_perturbation` (a Hammersley point set, spec §7.2, Appendix B).
// These reproduce TRELLIS's float32 arithmetic step by step (with
// transcendental functions evaluated in double and rounded once), so they
// match the stored buffers exactly or to the last bit.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_MODELS_BUFFERS_H
#define TRELLIS_MODELS_BUFFERS_H

#include <cstddef>
#include <cstdint>

namespace trellis::models {

/// Number of APE frequencies for `channels`: floor(channels / 3 / 2).
int64_t apeFrequencies(int64_t channels);

/// APE of one integer position (x, y, z) into out[channels]:
/// [sin(x·ω), cos(x·ω), sin(y·ω), cos(y·ω), sin(z·ω), cos(z·ω)] with
/// ω_j = 1 / 10000^(j/F), zero-padded to `channels`.
void absolutePositionEmbedding(int64_t x, int64_t y, int64_t z,
                               int64_t channels, float *out);

/// pos_emb of SparseStructureFlowModel: rows n = i·s² + j·s + k for the
/// s³ patch grid (i slowest), each APE(i, j, k). `out` holds s³·channels.
void fillPositionEmbeddingGrid(int64_t side, int64_t channels, float *out);

/// Radical inverse (van der Corput) of n in `base`, as TRELLIS computes it
/// in double.
double radicalInverse(unsigned base, uint64_t n);

/// offset_perturbation [G, 3]: atanh((2·h_g − 1) / voxel_size) with
/// h_g = (g/G, radinv₂(g), radinv₃(g)). `out` holds 3·G floats.
void fillOffsetPerturbation(int64_t numGaussians, double voxelSize, float *out);

} // namespace trellis::models

#endif // TRELLIS_MODELS_BUFFERS_H
