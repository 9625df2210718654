//===- Buffers.cpp - The computed buffers stored in TRELLIS checkpoints ---===//
//
// TRELLIS (trellis/modules/transformer/blocks.py AbsolutePositionEmbedder,
// trellis/models/structured_latent_vae/decoder_gs.py _build_perturbation)
// computes both buffers in float32 tensors; each step below is one of its
// float32 operations.
//
//===----------------------------------------------------------------------===//

#include "trellis/Models/Buffers.h"

#include <cmath>
#include <vector>

namespace trellis::models {

int64_t apeFrequencies(int64_t channels) { return channels / 3 / 2; }

static std::vector<float> apeOmegas(int64_t freqs) {
  std::vector<float> w(static_cast<size_t>(freqs));
  for (int64_t j = 0; j < freqs; ++j) {
    // arange(F, f32) / F, then 1 / 10000^e, each rounded to float32.
    float e = float(j) / float(freqs);
    float p = float(std::pow(10000.0, double(e)));
    w[size_t(j)] = 1.0f / p;
  }
  return w;
}

static void apeRow(const std::vector<float> &w, const int64_t pos[3],
                   int64_t channels, float *out) {
  int64_t f = int64_t(w.size());
  int64_t c = 0;
  for (int axis = 0; axis < 3; ++axis) {
    float x = float(pos[axis]);
    for (int64_t j = 0; j < f; ++j)
      out[c + j] = float(std::sin(double(x * w[size_t(j)])));
    for (int64_t j = 0; j < f; ++j)
      out[c + f + j] = float(std::cos(double(x * w[size_t(j)])));
    c += 2 * f;
  }
  for (; c < channels; ++c)
    out[c] = 0.0f;
}

void absolutePositionEmbedding(int64_t x, int64_t y, int64_t z,
                               int64_t channels, float *out) {
  std::vector<float> w = apeOmegas(apeFrequencies(channels));
  int64_t pos[3] = {x, y, z};
  apeRow(w, pos, channels, out);
}

void fillPositionEmbeddingGrid(int64_t side, int64_t channels, float *out) {
  std::vector<float> w = apeOmegas(apeFrequencies(channels));
  size_t row = 0;
  for (int64_t i = 0; i < side; ++i)
    for (int64_t j = 0; j < side; ++j)
      for (int64_t k = 0; k < side; ++k, ++row) {
        int64_t pos[3] = {i, j, k};
        apeRow(w, pos, channels, out + row * size_t(channels));
      }
}

double radicalInverse(unsigned base, uint64_t n) {
  double val = 0;
  double invBase = 1.0 / base;
  double invBaseN = invBase;
  while (n > 0) {
    uint64_t digit = n % base;
    val += double(digit) * invBaseN;
    n /= base;
    invBaseN *= invBase;
  }
  return val;
}

void fillOffsetPerturbation(int64_t numGaussians, double voxelSize,
                            float *out) {
  float vs = float(voxelSize);
  for (int64_t g = 0; g < numGaussians; ++g) {
    double h[3] = {double(g) / double(numGaussians), radicalInverse(2, g),
                   radicalInverse(3, g)};
    for (int a = 0; a < 3; ++a) {
      float v = float(h[a]);
      v = v * 2.0f;
      v = v - 1.0f;
      v = v / vs;
      out[g * 3 + a] = float(std::atanh(double(v)));
    }
  }
}

} // namespace trellis::models
