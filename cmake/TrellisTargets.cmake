# Helpers that give each target the right flags.
#
# Two kinds of C++ live in this project:
#  * compiler code that includes LLVM/MLIR headers: built with LLVM's flags
#    (its definitions, no exceptions since Debian's LLVM has LLVM_ENABLE_EH=OFF),
#    linked against the shared libMLIR.so and libLLVM.so;
#  * runtime and file-format code: ordinary C++20, no LLVM headers, no LLVM flags.

set(TRELLIS_WARNING_FLAGS -Wall -Wextra -Wno-unused-parameter)
if(TRELLIS_WERROR)
  list(APPEND TRELLIS_WARNING_FLAGS -Werror)
endif()

# Ordinary C++ target (runtime, formats, reference kernels). Public headers
# are included as "trellis/...", internal ones by their path from the
# repository root ("runtime/cuda/GpuExecutorImpl.h").
function(trellis_plain_target target)
  target_compile_options(${target} PRIVATE ${TRELLIS_WARNING_FLAGS})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
endfunction()

# Target that includes LLVM/MLIR headers.
function(trellis_llvm_target target)
  trellis_plain_target(${target})
  separate_arguments(_llvm_defs NATIVE_COMMAND "${LLVM_DEFINITIONS}")
  target_compile_definitions(${target} PUBLIC ${_llvm_defs})
  target_include_directories(${target} SYSTEM PUBLIC
    ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}>)
  if(NOT LLVM_ENABLE_EH)
    target_compile_options(${target} PUBLIC -fno-exceptions)
  endif()
  if(NOT LLVM_ENABLE_RTTI)
    target_compile_options(${target} PUBLIC -fno-rtti)
  endif()
  # MLIR's headers trigger this one under GCC 12.
  target_compile_options(${target} PRIVATE -Wno-dangling-reference -Wno-maybe-uninitialized)
  target_link_libraries(${target} PUBLIC MLIR LLVM)
endfunction()

# add_library + flags. Usage: trellis_add_library(name [LLVM] SOURCES... [DEPS ...])
function(trellis_add_library name)
  cmake_parse_arguments(ARG "LLVM;SHARED" "" "DEPS" ${ARGN})
  if(ARG_SHARED)
    add_library(${name} SHARED ${ARG_UNPARSED_ARGUMENTS})
  else()
    add_library(${name} STATIC ${ARG_UNPARSED_ARGUMENTS})
  endif()
  if(ARG_LLVM)
    trellis_llvm_target(${name})
  else()
    trellis_plain_target(${name})
  endif()
  if(ARG_DEPS)
    target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  endif()
endfunction()

# GoogleTest executable registered with CTest under the "unit" label.
# Usage: trellis_add_unittest(name [LLVM] SOURCES... DEPS ...)
function(trellis_add_unittest name)
  cmake_parse_arguments(ARG "LLVM" "" "DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_UNPARSED_ARGUMENTS})
  if(ARG_LLVM)
    trellis_llvm_target(${name})
  else()
    trellis_plain_target(${name})
  endif()
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main Threads::Threads)
  target_compile_definitions(${name} PRIVATE
    TRELLIS_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    TRELLIS_BINARY_DIR="${PROJECT_BINARY_DIR}")
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/unittests")
  add_dependencies(trellis-unittests ${name})
endfunction()
