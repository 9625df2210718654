//===- NoAttentionImages.cpp - Builds without the CUDA toolkit ------------===//
#include <string_view>

namespace trellis {
std::string_view embeddedImage(std::string_view) { return {}; }
} // namespace trellis
