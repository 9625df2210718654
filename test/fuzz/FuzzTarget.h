//===- FuzzTarget.h - One macro per fuzz target ---------------------------===//
//
//   TRELLIS_FUZZ_TARGET(npy) { ...body using data, size...; return 0; }
//
// defines `int trellisFuzz_npy(const uint8_t *data, size_t size)` and, unless
// TRELLIS_FUZZ_NO_MAIN is defined, libFuzzer's LLVMFuzzerTestOneInput calling
// it. scripts/fuzz.sh builds the latter with clang's libFuzzer; the
// GoogleTest FormatFuzzRegressionTests builds the former and replays
// test/fuzz/corpus/<target>/ and test/fuzz/regressions/<target>/ through
// the very same function.
//
// FUZZ_CHECK(cond) aborts (a crash libFuzzer records) when an invariant of
// the code under test fails on an input it accepted.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_TEST_FUZZ_FUZZTARGET_H
#define TRELLIS_TEST_FUZZ_FUZZTARGET_H

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__,         \
                   __LINE__, #cond);                                           \
      std::abort();                                                            \
    }                                                                          \
  } while (0)

#ifdef TRELLIS_FUZZ_NO_MAIN
#define TRELLIS_FUZZ_MAIN(name)
#else
#define TRELLIS_FUZZ_MAIN(name)                                                \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {    \
    return trellisFuzz_##name(data, size);                                     \
  }
#endif

#define TRELLIS_FUZZ_TARGET(name)                                              \
  int trellisFuzz_##name(const uint8_t *data, size_t size);                    \
  TRELLIS_FUZZ_MAIN(name)                                                      \
  int trellisFuzz_##name(const uint8_t *data, size_t size)

#endif // TRELLIS_TEST_FUZZ_FUZZTARGET_H
