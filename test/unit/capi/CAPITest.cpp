//===- CAPITest.cpp - libtrellisc.so + libtrellis_rt.so, via headers ------===//
#include "trellis/trellis_rt.h"
#include "trellis/trellisc.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace {

// y = gelu(x @ w^T) * 2 with x [2, 1..8, 4] (bounded), w [4, 4] a parameter.
const char *kTrace = R"({
  "format": "trellisc-trace", "version": 1, "name": "main",
  "locs": [{"file": "model.py", "line": 7, "col": 9, "module": "block"},
           {"file": "model.py", "line": 8, "col": 12}],
  "inputs": [{"name": "x", "dtype": "f32", "shape": [2, -1, 4], "bounds": [8],
              "loc": 0}],
  "weights": [{"name": "w", "dtype": "f32", "shape": [4, 4], "loc": 0}],
  "ops": [{"op": "linear", "in": [0, 1], "loc": 0},
          {"op": "gelu", "in": [2], "loc": 1},
          {"op": "constant", "in": [], "loc": 1,
           "attrs": {"dtype": "f32", "shape": [], "values": [2.0]}},
          {"op": "mul", "in": [3, 4], "loc": 1}],
  "outputs": [5]})";

struct Compiled {
  int rc = -1;
  trellisc_result *r = nullptr;
  ~Compiled() { trellisc_result_free(r); }
};

TEST(TrelliscCAPI, CompilesATraceToABundle) {
  Compiled c;
  c.rc = trellisc_compile_trace(kTrace, std::strlen(kTrace), nullptr, &c.r);
  ASSERT_EQ(c.rc, TRELLISC_OK) << trellisc_result_diagnostics_json(c.r);
  size_t size = 0;
  const void *bytes = trellisc_result_bundle(c.r, &size);
  ASSERT_NE(bytes, nullptr);
  EXPECT_EQ(std::memcmp(bytes, "TRELLISB", 8), 0);

  // Run it through the runtime's C ABI with a weight table.
  trellis_program *p = nullptr;
  trellis_error err{TRELLIS_OK, nullptr};
  ASSERT_EQ(trellis_program_from_memory(bytes, size, &p, &err), TRELLIS_OK)
      << err.message;
  std::vector<float> x(2 * 3 * 4), w(16, 0.0f);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float(i) / 10.0f;
  for (int i = 0; i < 4; ++i)
    w[i * 4 + i] = 1.0f; // identity
  trellis_tensor in{};
  in.dtype = TRELLIS_F32;
  in.rank = 3;
  in.shape[0] = 2, in.shape[1] = 3, in.shape[2] = 4;
  in.data = x.data();
  trellis_weight wt{};
  wt.model = "params";
  wt.name = "w";
  wt.tensor.dtype = TRELLIS_F32;
  wt.tensor.rank = 2;
  wt.tensor.shape[0] = wt.tensor.shape[1] = 4;
  wt.tensor.data = w.data();
  trellis_weights weights{&wt, 1, nullptr};
  trellis_tensor out{};
  ASSERT_EQ(
      trellis_program_call(p, "main", &in, 1, &weights, nullptr, &out, 1, &err),
      TRELLIS_OK)
      << err.message;
  ASSERT_EQ(out.rank, 3);
  EXPECT_EQ(out.shape[1], 3);
  const float *y = static_cast<const float *>(out.data);
  for (size_t i = 0; i < x.size(); ++i) {
    double v = x[i];
    double g =
        0.5 * v *
        (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(y[i], 2 * g, 1e-5) << i;
  }
  trellis_tensor_free(&out);

  // Above the bound: the error names the dimension and the bound.
  in.shape[1] = 9;
  std::vector<float> big(2 * 9 * 4);
  in.data = big.data();
  EXPECT_EQ(
      trellis_program_call(p, "main", &in, 1, &weights, nullptr, &out, 1, &err),
      TRELLIS_ERR_RUNTIME);
  ASSERT_NE(err.message, nullptr);
  EXPECT_NE(std::string(err.message).find("bound 8"), std::string::npos)
      << err.message;
  // No weight table: the error names the missing tensor.
  in.shape[1] = 3;
  in.data = x.data();
  EXPECT_NE(
      trellis_program_call(p, "main", &in, 1, nullptr, nullptr, &out, 1, &err),
      TRELLIS_OK);
  EXPECT_NE(std::string(err.message).find("'w'"), std::string::npos)
      << err.message;
  trellis_error_clear(&err);
  EXPECT_EQ(err.message, nullptr);
  trellis_program_close(p);
}

TEST(TrelliscCAPI, UserErrorsCarryTheUsersLine) {
  std::string trace = kTrace;
  // Make the weight [4, 3]: linear's contraction no longer matches.
  trace.replace(trace.find("\"shape\": [4, 4]"), 15, "\"shape\": [4, 3]");
  Compiled c;
  c.rc = trellisc_compile_trace(trace.data(), trace.size(), nullptr, &c.r);
  ASSERT_EQ(c.rc, TRELLISC_COMPILE_ERROR);
  ASSERT_GE(trellisc_result_num_diagnostics(c.r), 1u);
  trellisc_diagnostic d;
  ASSERT_EQ(trellisc_result_diagnostic(c.r, 0, &d), 0);
  EXPECT_STREQ(d.file, "model.py");
  EXPECT_EQ(d.line, 7u);
  EXPECT_EQ(d.column, 9u);
  EXPECT_STREQ(d.kind, "user");
  EXPECT_STREQ(d.module, "block");
  EXPECT_NE(std::string(d.message).find("linear"), std::string::npos);
  EXPECT_EQ(trellisc_result_diagnostic(c.r, 99, &d), -1);
  size_t size = 1;
  EXPECT_EQ(trellisc_result_bundle(c.r, &size), nullptr);
  EXPECT_EQ(size, 0u);
}

TEST(TrelliscCAPI, MalformedInputIsAUsageErrorNotAnAbort) {
  const char *bad[] = {"",
                       "{",
                       "[]",
                       R"({"format": "x", "version": 1})",
                       R"({"format": "trellisc-trace", "version": 1,
                           "inputs": [], "weights": [], "outputs": [3],
                           "ops": [{"op": "nope", "in": []}]})",
                       R"({"format": "trellisc-trace", "version": 1,
                           "inputs": [{"dtype": 5}], "weights": [],
                           "outputs": [], "ops": []})",
                       R"({"format": "trellisc-trace", "version": 1,
                           "inputs": [], "outputs": [], "ops": [],
                           "weights": [{"name": "w", "dtype": "f32",
                                        "shape": [-4, 2]}]})"};
  for (const char *text : bad) {
    Compiled c;
    c.rc = trellisc_compile_trace(text, std::strlen(text), nullptr, &c.r);
    EXPECT_EQ(c.rc, TRELLISC_USAGE_ERROR) << text;
    EXPECT_GE(trellisc_result_num_diagnostics(c.r), 1u) << text;
  }
  Compiled c;
  c.rc = trellisc_compile_trace(kTrace, std::strlen(kTrace),
                                R"({"target": "tpu"})", &c.r);
  EXPECT_EQ(c.rc, TRELLISC_USAGE_ERROR);
  Compiled p;
  p.rc = trellisc_compile_pipeline("/nonexistent/pipeline.json", nullptr, &p.r);
  EXPECT_EQ(p.rc, TRELLISC_COMPILE_ERROR);
  EXPECT_NE(std::string(trellisc_result_diagnostics_json(p.r))
                .find("/nonexistent/pipeline.json"),
            std::string::npos);
}

TEST(TrelliscCAPI, InferOnlyReportsTypes) {
  Compiled c;
  c.rc = trellisc_compile_trace(kTrace, std::strlen(kTrace),
                                R"({"infer_only": true})", &c.r);
  ASSERT_EQ(c.rc, TRELLISC_OK);
  std::string info = trellisc_result_info(c.r);
  EXPECT_NE(
      info.find(R"("outputs":[{"bounds":[8],"dtype":"f32","shape":[2,-1,4]}])"),
      std::string::npos)
      << info;
  size_t size = 0;
  EXPECT_EQ(trellisc_result_bundle(c.r, &size), nullptr);
}

TEST(TrellisRt, BadArgumentsAreErrorsNotCrashes) {
  trellis_error err{TRELLIS_OK, nullptr};
  trellis_program *p = nullptr;
  EXPECT_EQ(trellis_program_open("/nonexistent.bundle", &p, &err),
            TRELLIS_ERR_BUNDLE);
  EXPECT_NE(std::string(err.message).find("/nonexistent.bundle"),
            std::string::npos);
  EXPECT_EQ(trellis_program_from_memory("garbage", 7, &p, &err),
            TRELLIS_ERR_BUNDLE);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(trellis_run(nullptr, nullptr, nullptr, nullptr, &err),
            TRELLIS_ERR_INVALID_ARGUMENT);
  trellis_run_spec spec;
  trellis_run_spec_init(&spec);
  EXPECT_EQ(spec.struct_size, sizeof spec);
  EXPECT_EQ(spec.seed, 42u);
  EXPECT_TRUE(std::isnan(spec.ss.sigma_min));
  trellis_embeddings emb{};
  EXPECT_EQ(trellis_run(&spec, nullptr, &emb, nullptr, &err),
            TRELLIS_ERR_INVALID_ARGUMENT); // no program named
  trellis_error_clear(&err);
  EXPECT_EQ(trellis_dtype_size(TRELLIS_F16), 2u);
  EXPECT_EQ(trellis_rt_abi_version(), TRELLIS_RT_ABI_VERSION);
}

} // namespace
