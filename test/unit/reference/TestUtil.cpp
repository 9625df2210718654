//===- TestUtil.cpp - Helpers of the reference kernel tests ---------------===//
#include "test/unit/reference/TestUtil.h"

#include "trellis/Format/Npy.h"

#include <cmath>
#include <cstring>
#include <sstream>

namespace trellis::reftest {

HostTensor tensorF32(const Shape &shape, const std::vector<float> &v) {
  HostTensor t(DType::F32, shape);
  if (size_t(t.numel()) != v.size())
    throw std::runtime_error("tensorF32: value count does not match shape");
  std::memcpy(t.mutableRaw(), v.data(), v.size() * sizeof(float));
  return t;
}

HostTensor tensorF16(const Shape &shape, const std::vector<float> &v) {
  HostTensor t(DType::F16, shape);
  if (size_t(t.numel()) != v.size())
    throw std::runtime_error("tensorF16: value count does not match shape");
  for (size_t i = 0; i < v.size(); ++i)
    t.mutableData<uint16_t>()[i] = floatToHalf(v[i]);
  return t;
}

HostTensor tensorI32(const Shape &shape, const std::vector<int32_t> &v) {
  HostTensor t(DType::I32, shape);
  if (size_t(t.numel()) != v.size())
    throw std::runtime_error("tensorI32: value count does not match shape");
  std::memcpy(t.mutableRaw(), v.data(), v.size() * sizeof(int32_t));
  return t;
}

HostTensor tensorI64(const Shape &shape, const std::vector<int64_t> &v) {
  HostTensor t(DType::I64, shape);
  if (size_t(t.numel()) != v.size())
    throw std::runtime_error("tensorI64: value count does not match shape");
  std::memcpy(t.mutableRaw(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

std::vector<float> values(const HostTensor &t) {
  HostTensor f = t.toFloat32();
  return std::vector<float>(f.data<float>(), f.data<float>() + f.numel());
}

HostTensor golden(const std::string &caseName, const std::string &name) {
  std::string path = std::string(TRELLIS_SOURCE_DIR) + "/test/golden/data/" +
                     caseName + "/" + name + ".npy";
  return ok(readNpy(path));
}

double goldenScalar(const std::string &caseName, const std::string &name) {
  HostTensor t = golden(caseName, name);
  if (t.numel() != 1)
    throw std::runtime_error(caseName + "/" + name + " is not a scalar");
  if (t.dtype() == DType::F64)
    return t.data<double>()[0];
  if (t.dtype() == DType::I64)
    return double(t.data<int64_t>()[0]);
  return double(values(t)[0]);
}

static std::string header(const HostTensor &a, const HostTensor &e) {
  return std::string(dtypeName(a.dtype())) + " " + shapeToString(a.shape()) +
         " vs expected " + std::string(dtypeName(e.dtype())) + " " +
         shapeToString(e.shape());
}

::testing::AssertionResult sameTensor(const HostTensor &actual,
                                      const HostTensor &expected) {
  if (actual.dtype() != expected.dtype() || actual.shape() != expected.shape())
    return ::testing::AssertionFailure() << header(actual, expected);
  if (actual.nbytes() &&
      std::memcmp(actual.raw(), expected.raw(), actual.nbytes()) != 0) {
    std::vector<float> a = values(actual), e = values(expected);
    for (size_t i = 0; i < a.size(); ++i)
      if (std::memcmp(&a[i], &e[i], sizeof(float)) != 0)
        return ::testing::AssertionFailure()
               << "first difference at flat index " << i << ": " << a[i]
               << " vs " << e[i];
    return ::testing::AssertionFailure() << "bytes differ";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult allClose(const HostTensor &actual,
                                    const HostTensor &expected, double atol,
                                    double rtol) {
  if (actual.dtype() != expected.dtype() || actual.shape() != expected.shape())
    return ::testing::AssertionFailure() << header(actual, expected);
  std::vector<float> a = values(actual), e = values(expected);
  size_t bad = 0, worst = 0;
  double worstExcess = -1, maxErr = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double err = std::fabs(double(a[i]) - double(e[i]));
    double allowed = atol + rtol * std::fabs(double(e[i]));
    bool nanMismatch = std::isnan(a[i]) != std::isnan(e[i]);
    if (std::isnan(a[i]) && std::isnan(e[i]))
      continue;
    if (std::isinf(e[i]) && a[i] == e[i])
      continue;
    maxErr = std::max(maxErr, err);
    if (nanMismatch || !(err <= allowed)) {
      ++bad;
      if (err - allowed > worstExcess) {
        worstExcess = err - allowed;
        worst = i;
      }
    }
  }
  if (bad)
    return ::testing::AssertionFailure()
           << bad << " of " << a.size() << " elements outside atol " << atol
           << " + rtol " << rtol << "; worst at flat index " << worst << ": "
           << a[worst] << " vs " << e[worst] << " (max |err| " << maxErr << ")";
  return ::testing::AssertionSuccess() << "max |err| " << maxErr;
}

static int32_t orderedHalf(uint16_t h) {
  // Ordered integer line of fp16: negative values mirrored below zero, so
  // that +0 and -0 coincide and neighbours differ by 1.
  return (h & 0x8000) ? -int32_t(h & 0x7fff) : int32_t(h);
}

::testing::AssertionResult halfUlpClose(const HostTensor &actual,
                                        const HostTensor &expected, int maxUlp,
                                        double maxFractionDiffering,
                                        double absSlack) {
  if (actual.dtype() != DType::F16 || expected.dtype() != DType::F16 ||
      actual.shape() != expected.shape())
    return ::testing::AssertionFailure() << header(actual, expected);
  const uint16_t *a = actual.data<uint16_t>();
  const uint16_t *e = expected.data<uint16_t>();
  int64_t n = actual.numel(), differ = 0, worst = 0, worstUlp = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = std::abs(orderedHalf(a[i]) - orderedHalf(e[i]));
    if (std::fabs(halfToFloat(a[i]) - halfToFloat(e[i])) <= absSlack)
      d = 0;
    if (d)
      ++differ;
    if (d > worstUlp) {
      worstUlp = d;
      worst = i;
    }
  }
  double frac = n ? double(differ) / double(n) : 0.0;
  if (worstUlp > maxUlp || frac > maxFractionDiffering)
    return ::testing::AssertionFailure()
           << differ << " of " << n << " elements differ (allowed fraction "
           << maxFractionDiffering << "); worst " << worstUlp
           << " ulp (allowed " << maxUlp << ") at flat index " << worst << ": "
           << halfToFloat(a[worst]) << " vs " << halfToFloat(e[worst]);
  return ::testing::AssertionSuccess()
         << differ << " of " << n << " differ, worst " << worstUlp << " ulp";
}

double maxAbs(const HostTensor &t) {
  double m = 0;
  for (float v : values(t))
    m = std::max(m, double(std::fabs(v)));
  return m;
}

double halfUlpAt(double m) {
  if (m < std::ldexp(1.0, -14))
    return std::ldexp(1.0, -24);
  return std::ldexp(1.0, int(std::floor(std::log2(m))) - 10);
}

} // namespace trellis::reftest
