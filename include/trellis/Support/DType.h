//===- DType.h - Element types shared by formats, runtime and reference ---===//
//
// The element types trellisc moves around outside MLIR: in safetensors
// headers, .npy files, the bundle and the reference backend. No LLVM here.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_SUPPORT_DTYPE_H
#define TRELLIS_SUPPORT_DTYPE_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace trellis {

enum class DType : uint8_t { F16, BF16, F32, F64, I8, U8, I16, I32, I64, Bool };

/// Size of one element in bytes.
constexpr size_t dtypeSize(DType t) {
  switch (t) {
  case DType::I8:
  case DType::U8:
  case DType::Bool:
    return 1;
  case DType::F16:
  case DType::BF16:
  case DType::I16:
    return 2;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F64:
  case DType::I64:
    return 8;
  }
  return 0;
}

/// The safetensors spelling ("F16", "F32", "I32", ...).
std::string_view dtypeName(DType t);
/// Parses a safetensors dtype name; nullopt for unknown names.
std::optional<DType> parseDTypeName(std::string_view name);

} // namespace trellis

#endif // TRELLIS_SUPPORT_DTYPE_H
