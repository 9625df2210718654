//===- Normalize.cpp - The image tensor DINOv2 is given -------------------===//
//
// Spec §1.6: x = float32(u8) / 255, HWC -> CHW, then torchvision's Normalize
// (x - mean) / std in float32 with ImageNet's mean and std given as Python
// floats (float64 values rounded to float32 tensors); subtract, then divide.
//
//===----------------------------------------------------------------------===//
#include "trellis/Image/Preprocess.h"

namespace trellis {

HostTensor normalizeImage(const uint8_t *rgb, int64_t size) {
  // static_cast from the double, as torch.as_tensor(list, float32) rounds.
  const float mean[3] = {static_cast<float>(0.485), static_cast<float>(0.456),
                         static_cast<float>(0.406)};
  const float stdDev[3] = {static_cast<float>(0.229), static_cast<float>(0.224),
                           static_cast<float>(0.225)};
  HostTensor out(DType::F32, {3, size, size});
  float *dst = out.mutableData<float>();
  const int64_t plane = size * size;
  for (int64_t i = 0; i < plane; ++i)
    for (int c = 0; c < 3; ++c) {
      float x = float(rgb[i * 3 + c]) / 255.0f;
      dst[c * plane + i] = (x - mean[c]) / stdDev[c];
    }
  return out;
}

} // namespace trellis
