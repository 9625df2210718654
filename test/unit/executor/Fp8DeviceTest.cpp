// The engine's FP8 device check (checkFp8Device,
// trellis/Runtime/Fp8Calibration.h): a program with FP8 linears starts only
// on a GPU of compute capability 9.0 (its cuBLASLt E4M3 GEMMs run on sm_90
// only); elsewhere the error names the program's precision, the GPU and its
// compute capability, what is needed and the alternatives. A program without
// FP8 linears runs on any GPU.
#include "trellis/Runtime/Fp8Calibration.h"

#include <gtest/gtest.h>

using namespace trellis;

TEST(Fp8Device, AProgramWithoutFp8LinearsRunsOnAnyGpu) {
  EXPECT_TRUE(checkFp8Device(false, 9, 0, "NVIDIA H100 80GB HBM3"));
  EXPECT_TRUE(checkFp8Device(false, 8, 9, "NVIDIA L4"));
  EXPECT_TRUE(checkFp8Device(false, 7, 5, "Tesla T4"));
}

TEST(Fp8Device, AnFp8ProgramRunsOnHopper) {
  EXPECT_TRUE(checkFp8Device(true, 9, 0, "NVIDIA H100 80GB HBM3"));
  EXPECT_TRUE(checkFp8Device(true, 9, 0, "NVIDIA H200"));
}

TEST(Fp8Device, AnFp8ProgramIsRefusedElsewhereNamingTheGpuAndTheWayOut) {
  Status s = checkFp8Device(true, 8, 9, "NVIDIA L4");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message(),
            "--precision=fp8: this program's FP8 linears and attention run "
            "as cuBLASLt E4M3 GEMMs and sm_90a kernels, which need a GPU of "
            "compute capability 9.0 (Hopper, sm_90); the GPU 'NVIDIA L4' has "
            "compute capability 8.9: "
            "recompile without --precision=fp8, or run with --gpu off for "
            "the CPU reference");
}

TEST(Fp8Device, NewerAndOlderArchitecturesAreRefusedToo) {
  // The runtime's FP8 path is sm_90a code (the E4M3 quantization kernels of
  // the sm_90a module, runtime/cuda/Fp8Gemm.cpp): any other compute
  // capability, newer ones included, loads the portable code, which has none.
  for (auto [major, minor] : {std::pair{7, 5}, std::pair{8, 0}, std::pair{8, 6},
                              std::pair{10, 0}, std::pair{12, 0}}) {
    Status s = checkFp8Device(true, major, minor, "some GPU");
    ASSERT_FALSE(s) << major << "." << minor;
    EXPECT_NE(s.message().find("'some GPU' has compute capability " +
                               std::to_string(major) + "." +
                               std::to_string(minor)),
              std::string::npos)
        << s.message();
  }
}

TEST(Fp8Device, AnUnnamedGpuIsThisGpu) {
  Status s = checkFp8Device(true, 8, 6, "");
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("; this GPU has compute capability 8.6:"),
            std::string::npos)
      << s.message();
}
