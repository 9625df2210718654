//===- TestUtil.h - Helpers of the reference kernel tests -----------------===//
#ifndef TRELLIS_TEST_REFERENCE_TESTUTIL_H
#define TRELLIS_TEST_REFERENCE_TESTUTIL_H

#include "trellis/Reference/Kernels.h"
#include "trellis/Support/Half.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace trellis::reftest {

/// The value of a Result, or a thrown error (GoogleTest reports it as a
/// failure of the test with the message).
template <typename T> T ok(Result<T> r) {
  if (!r)
    throw std::runtime_error(r.message());
  return std::move(r).value();
}

HostTensor tensorF32(const Shape &shape, const std::vector<float> &v);
/// f16 tensor of the given values (rounded to nearest even).
HostTensor tensorF16(const Shape &shape, const std::vector<float> &v);
HostTensor tensorI32(const Shape &shape, const std::vector<int32_t> &v);
HostTensor tensorI64(const Shape &shape, const std::vector<int64_t> &v);

/// All values of a float or integer tensor as floats.
std::vector<float> values(const HostTensor &t);

/// The golden array test/golden/data/<caseName>/<name>.npy (throws if it
/// cannot be read).
HostTensor golden(const std::string &caseName, const std::string &name);
/// A 0-d (scalar) golden parameter as double.
double goldenScalar(const std::string &caseName, const std::string &name);

/// Same dtype, shape and bytes.
::testing::AssertionResult sameTensor(const HostTensor &actual,
                                      const HostTensor &expected);

/// Same dtype and shape, and |a − e| <= atol + rtol·|e| elementwise.
::testing::AssertionResult allClose(const HostTensor &actual,
                                    const HostTensor &expected, double atol,
                                    double rtol);

/// Both f16 of one shape; every element within `maxUlp` units in the last
/// place of fp16 (distance along the ordered fp16 values), and at most
/// `maxFractionDiffering` of them differ at all. Elements within `absSlack`
/// of the expected value count as equal (for f32 cancellation near zero).
::testing::AssertionResult halfUlpClose(const HostTensor &actual,
                                        const HostTensor &expected, int maxUlp,
                                        double maxFractionDiffering = 1.0,
                                        double absSlack = 0.0);

/// Maximum |e| over a tensor.
double maxAbs(const HostTensor &t);

/// The spacing of fp16 numbers at magnitude m (2^(⌊log2 m⌋ − 10)).
double halfUlpAt(double m);

} // namespace trellis::reftest

#endif // TRELLIS_TEST_REFERENCE_TESTUTIL_H
