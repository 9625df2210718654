//===- Synthetic.cpp - Seeded synthetic weights and conditioning ----------===//

#include "tools/trellis-mkmodel/MkModel.h"

#include "trellis/Models/Buffers.h"
#include "trellis/Support/Half.h"

#include <cmath>
#include <cstring>

namespace trellis::mkmodel {

using config::ModelConfig;
using models::ManifestTensor;
using models::ModelManifest;
using models::TensorRole;

uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

uint64_t tensorKey(uint64_t seed, std::string_view checkpoint,
                   std::string_view tensor) {
  std::string name(checkpoint);
  name += '/';
  name.append(tensor);
  return mix64(fnv1a64(name) ^ mix64(seed));
}

namespace {

// Irwin–Hall(4) of 16-bit uniforms: mean 4·32767.5, variance 4·(2^32−1)/12.
constexpr int64_t kIrwinHallMean = 131070;
constexpr double kIrwinHallVariance = 1431655765.0;
// |z| < 0.01 is replaced by ±0.01 (in units of the integer sum: 378.4).
constexpr int64_t kMinAbsSum = 379;

struct NormalStream {
  uint64_t key;
  double invSd = 1.0 / std::sqrt(kIrwinHallVariance);

  double operator()(uint64_t i) const {
    uint64_t r = mix64(key + (i + 1) * 0x9E3779B97F4A7C15ull);
    int64_t s = int64_t(r & 0xFFFF) + int64_t((r >> 16) & 0xFFFF) +
                int64_t((r >> 32) & 0xFFFF) + int64_t(r >> 48);
    s -= kIrwinHallMean;
    if (s > -kMinAbsSum && s < kMinAbsSum)
      s = s < 0 ? -kMinAbsSum : kMinAbsSum;
    return double(s) * invSd;
  }
};

template <typename F> void writeValues(DType dtype, void *dst, int64_t n, F f) {
  if (dtype == DType::F16) {
    uint16_t *out = static_cast<uint16_t *>(dst);
    for (int64_t i = 0; i < n; ++i)
      out[i] = floatToHalf(float(f(uint64_t(i))));
  } else {
    float *out = static_cast<float *>(dst);
    for (int64_t i = 0; i < n; ++i)
      out[i] = float(f(uint64_t(i)));
  }
}

/// Inverse of the standard normal upper tail: z with P(Z > z) = q.
double upperQuantile(double q) {
  double lo = -40, hi = 40;
  for (int it = 0; it < 200; ++it) {
    double mid = 0.5 * (lo + hi);
    if (0.5 * std::erfc(mid / std::sqrt(2.0)) > q)
      lo = mid;
    else
      hi = mid;
  }
  return 0.5 * (lo + hi);
}

/// E[SiLU(γZ + β)] and E[SiLU(γZ + β)²] for Z ~ N(0, 1), by quadrature.
void siluMoments(double gamma, double beta, double &m1, double &m2) {
  constexpr int kSteps = 8192;
  constexpr double kRange = 10.0;
  double h = 2 * kRange / kSteps;
  double s1 = 0, s2 = 0;
  for (int i = 0; i <= kSteps; ++i) {
    double z = -kRange + i * h;
    double w = std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI) * h;
    if (i == 0 || i == kSteps)
      w *= 0.5;
    double x = gamma * z + beta;
    double a = x / (1 + std::exp(-x));
    s1 += w * a;
    s2 += w * a * a;
  }
  m1 = s1;
  m2 = s2;
}

bool isSSDecoderOutputBias(const ModelConfig &config, const ManifestTensor &t) {
  return config.kind == config::ModelKind::SparseStructureDecoder &&
         t.name == "out_layer.2.bias";
}

} // namespace

double syntheticNormal(uint64_t key, uint64_t index) {
  return NormalStream{key}(index);
}

double ssDecoderOutputBias(const std::vector<float> &gamma,
                           const std::vector<float> &beta,
                           const std::vector<float> &weight, double occupancy) {
  size_t channels = gamma.size();
  size_t taps = channels ? weight.size() / channels : 0;
  double mu = 0, var = 0;
  for (size_t c = 0; c < channels; ++c) {
    double m1, m2;
    siluMoments(gamma[c], beta[c], m1, m2);
    for (size_t k = 0; k < taps; ++k) {
      double w = weight[c * taps + k];
      mu += w * m1;
      var += w * w * (m2 - m1 * m1);
    }
  }
  return -mu - upperQuantile(occupancy) * std::sqrt(var);
}

namespace {

void fillGeneric(const ManifestTensor &t, uint64_t seed,
                 std::string_view checkpoint, void *dst) {
  NormalStream z{tensorKey(seed, checkpoint, t.name)};
  double mean = 0, sd = 0.02;
  switch (t.role) {
  case TensorRole::LinearWeight:
  case TensorRole::ConvWeight:
  case TensorRole::SparseConvWeight:
    sd = 1.0 / std::sqrt(double(t.fanIn() > 0 ? t.fanIn() : 1));
    break;
  case TensorRole::NormWeight:
  case TensorRole::RmsGamma:
    mean = 1.0;
    break;
  default:
    break;
  }
  writeValues(t.dtype, dst, t.numel(),
              [&](uint64_t i) { return mean + sd * z(i); });
}

std::vector<float> floatsOf(const ManifestTensor &t, const void *bytes) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::F16) {
    const uint16_t *h = static_cast<const uint16_t *>(bytes);
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = halfToFloat(h[i]);
  } else {
    std::memcpy(out.data(), bytes, out.size() * sizeof(float));
  }
  return out;
}

std::vector<float> genericValues(const ManifestTensor &t, uint64_t seed,
                                 std::string_view checkpoint) {
  std::vector<uint8_t> bytes(t.nbytes());
  fillGeneric(t, seed, checkpoint, bytes.data());
  return floatsOf(t, bytes.data());
}

} // namespace

void fillTensor(const ModelConfig &config, const ModelManifest &manifest,
                const ManifestTensor &t, uint64_t seed,
                std::string_view checkpoint, void *dst) {
  if (t.role == TensorRole::PositionEmbedding) {
    const config::SparseStructureFlowArgs *a = config.ssFlow();
    models::fillPositionEmbeddingGrid(*a->resolution / *a->patchSize,
                                      *a->modelChannels,
                                      static_cast<float *>(dst));
    return;
  }
  if (t.role == TensorRole::OffsetPerturbation) {
    const config::GaussianRepresentation *g = config.slatDecoder()->gaussian();
    models::fillOffsetPerturbation(*g->numGaussians, *g->voxelSize,
                                   static_cast<float *>(dst));
    return;
  }
  if (isSSDecoderOutputBias(config, t)) {
    const ManifestTensor *gamma = manifest.find("out_layer.0.weight");
    const ManifestTensor *beta = manifest.find("out_layer.0.bias");
    const ManifestTensor *weight = manifest.find("out_layer.2.weight");
    std::vector<float> g = genericValues(*gamma, seed, checkpoint);
    std::vector<float> b = genericValues(*beta, seed, checkpoint);
    std::vector<float> w = genericValues(*weight, seed, checkpoint);
    int64_t outs = t.numel();
    size_t perOut = w.size() / size_t(outs);
    for (int64_t o = 0; o < outs; ++o) {
      std::vector<float> wo(w.begin() + o * perOut,
                            w.begin() + (o + 1) * perOut);
      double bias = ssDecoderOutputBias(g, b, wo);
      static_cast<float *>(dst)[o] = float(bias);
    }
    return;
  }
  fillGeneric(t, seed, checkpoint, dst);
}

std::vector<float> tensorValues(const ModelConfig &config,
                                const ModelManifest &manifest,
                                const ManifestTensor &t, uint64_t seed,
                                std::string_view checkpoint) {
  std::vector<uint8_t> bytes(t.nbytes());
  fillTensor(config, manifest, t, seed, checkpoint, bytes.data());
  return floatsOf(t, bytes.data());
}

HostTensor syntheticCond(uint64_t seed, std::string_view name, int64_t tokens,
                         int64_t channels) {
  HostTensor out(DType::F32, {1, tokens, channels});
  float *data = out.mutableData<float>();
  NormalStream z{tensorKey(seed, name, name)};
  std::vector<double> row(static_cast<size_t>(channels));
  for (int64_t t = 0; t < tokens; ++t) {
    double mean = 0;
    for (int64_t c = 0; c < channels; ++c) {
      row[size_t(c)] = z(uint64_t(t * channels + c));
      mean += row[size_t(c)];
    }
    mean /= double(channels);
    double var = 0;
    for (int64_t c = 0; c < channels; ++c)
      var += (row[size_t(c)] - mean) * (row[size_t(c)] - mean);
    var /= double(channels);
    double inv = var > 0 ? 1.0 / std::sqrt(var) : 1.0;
    for (int64_t c = 0; c < channels; ++c)
      data[t * channels + c] = float((row[size_t(c)] - mean) * inv);
  }
  return out;
}

} // namespace trellis::mkmodel
