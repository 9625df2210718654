//===- AttentionFp8Test.cpp - FP8 attention ops in the CPU executor -------===//
//
// trellis.attention / trellis.sparse.attention with precision = "fp8_e4m3"
// run ref::attentionFp8 / ref::sparseAttentionFp8 (whose math the reference
// tests check against the NumPy goldens); without q_gamma and k_gamma, or
// with a precision the executor does not know, the op fails with an error
// naming the op and the attribute. Ops are run one at a time through
// CpuExecutor::evalOp on hand-made instructions.
//
//===----------------------------------------------------------------------===//
#include "trellis/Reference/Kernels.h"
#include "trellis/Runtime/CpuExecutor.h"
#include "trellis/Support/Half.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

using namespace trellis;

namespace {

constexpr int64_t H = 2, D = 64;

HostTensor ramp(DType dtype, Shape shape, float step) {
  HostTensor t(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = float((i * 7919) % 53 - 26) * step;
    if (dtype == DType::F16)
      t.mutableData<uint16_t>()[i] = floatToHalf(v);
    else
      t.mutableData<float>()[i] = v;
  }
  return t;
}

HostTensor gamma() {
  HostTensor g(DType::F32, {H, D});
  for (int64_t i = 0; i < g.numel(); ++i)
    g.mutableData<float>()[i] = 0.5f + float(i % 11) / 10.0f;
  return g;
}

/// An attention instruction over operand slots 0..n-1, result in slot n.
Instr attentionInstr(const char *op, int operands,
                     std::vector<int64_t> segmentSizes, const char *precision) {
  Instr instr;
  instr.op = op;
  for (int i = 0; i < operands; ++i)
    instr.in.push_back(i);
  instr.out = {operands};
  instr.attrs["scale"] = 0.125;
  if (!segmentSizes.empty())
    instr.attrs["operandSegmentSizes"] = segmentSizes;
  if (precision)
    instr.attrs["precision"] = precision;
  return instr;
}

bool sameBytes(const HostTensor &a, const HostTensor &b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

} // namespace

TEST(CpuExecutorFp8Attention, DenseRunsTheE4M3Model) {
  Program program;
  HostTensor q = ramp(DType::F16, {2, 5, H, D}, 0.1f),
             k = ramp(DType::F16, {2, 5, H, D}, -0.07f),
             v = ramp(DType::F16, {2, 5, H, D}, 0.05f), g = gamma();
  auto r = CpuExecutor::evalOp(
      program,
      attentionInstr("trellis.attention", 5, {1, 1, 1, 1, 1}, "fp8_e4m3"),
      {q, k, v, g, g});
  ASSERT_TRUE(r) << r.message();
  auto expected = ref::attentionFp8(q, k, v, g, g, 0.125f);
  ASSERT_TRUE(expected) << expected.message();
  EXPECT_TRUE(sameBytes(std::get<HostTensor>((*r)[0]), *expected));
  // Without the attribute: the fp16 path, another result.
  auto plain = CpuExecutor::evalOp(
      program, attentionInstr("trellis.attention", 5, {1, 1, 1, 1, 1}, nullptr),
      {q, k, v, g, g});
  ASSERT_TRUE(plain) << plain.message();
  EXPECT_FALSE(sameBytes(std::get<HostTensor>((*plain)[0]), *expected));
}

TEST(CpuExecutorFp8Attention, SparseRunsTheE4M3Model) {
  Program program;
  const int64_t N = 9;
  HostTensor q = ramp(DType::F16, {N, H, D}, 0.1f),
             k = ramp(DType::F16, {N, H, D}, -0.07f),
             v = ramp(DType::F16, {N, H, D}, 0.05f), g = gamma();
  auto seg = std::make_shared<ref::Segments>();
  seg->rows = HostTensor(DType::I32, {N});
  const int32_t rows[] = {4, 0, 7, 2, 1, 8, 3, 6, 5};
  std::memcpy(seg->rows.mutableData<int32_t>(), rows, sizeof(rows));
  seg->offsets = HostTensor(DType::I32, {3});
  const int32_t off[] = {0, 3, 9};
  std::memcpy(seg->offsets.mutableData<int32_t>(), off, sizeof(off));
  auto r = CpuExecutor::evalOp(program,
                               attentionInstr("trellis.sparse.attention", 6,
                                              {1, 1, 1, 1, 1, 1}, "fp8_e4m3"),
                               {q, k, v, seg, g, g});
  ASSERT_TRUE(r) << r.message();
  auto expected = ref::sparseAttentionFp8(q, k, v, *seg, g, g, 0.125f);
  ASSERT_TRUE(expected) << expected.message();
  EXPECT_TRUE(sameBytes(std::get<HostTensor>((*r)[0]), *expected));
}

TEST(CpuExecutorFp8Attention, MissingGammasNameTheOpAndTheAttribute) {
  Program program;
  HostTensor q = ramp(DType::F16, {1, 4, H, D}, 0.1f), g = gamma();
  // No gammas at all, and only q_gamma.
  for (auto [operands, sizes] :
       {std::pair<int, std::vector<int64_t>>{3, {}},
        std::pair<int, std::vector<int64_t>>{4, {1, 1, 1, 1, 0}}}) {
    std::vector<RtValue> in = {q, q, q};
    if (operands == 4)
      in.push_back(g);
    auto r = CpuExecutor::evalOp(
        program,
        attentionInstr("trellis.attention", operands, sizes, "fp8_e4m3"), in);
    ASSERT_FALSE(r);
    EXPECT_NE(r.message().find("trellis.attention"), std::string::npos)
        << r.message();
    EXPECT_NE(r.message().find("fp8_e4m3"), std::string::npos) << r.message();
    EXPECT_NE(r.message().find("k_gamma"), std::string::npos) << r.message();
  }
}

TEST(CpuExecutorFp8Attention, UnknownPrecisionIsNamed) {
  Program program;
  HostTensor q = ramp(DType::F16, {1, 4, H, D}, 0.1f), g = gamma();
  auto r = CpuExecutor::evalOp(
      program, attentionInstr("trellis.attention", 5, {1, 1, 1, 1, 1}, "fp4"),
      {q, q, q, g, g});
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("unknown precision 'fp4'"), std::string::npos)
      << r.message();
}
