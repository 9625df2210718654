//===- DType.cpp ----------------------------------------------------------===//
#include "trellis/Support/DType.h"

namespace trellis {

namespace {
struct DTypeNameEntry {
  DType type;
  std::string_view name;
};
constexpr DTypeNameEntry kNames[] = {
    {DType::F16, "F16"},  {DType::BF16, "BF16"}, {DType::F32, "F32"},
    {DType::F64, "F64"},  {DType::I8, "I8"},     {DType::U8, "U8"},
    {DType::I16, "I16"},  {DType::I32, "I32"},   {DType::I64, "I64"},
    {DType::Bool, "BOOL"}};
} // namespace

std::string_view dtypeName(DType t) {
  for (const auto &e : kNames)
    if (e.type == t)
      return e.name;
  return "?";
}

std::optional<DType> parseDTypeName(std::string_view name) {
  for (const auto &e : kNames)
    if (e.name == name)
      return e.type;
  return std::nullopt;
}

} // namespace trellis
