//===- Normalize.cpp - The image tensor DINOv2 is given -------------------===//
//
// Spec §1.6: x = float32(u8) / 255, HWC -> CHW, then torchvision's Normalize
// (x - mean) / std in float32 with ImageNet's mean and std given as Python
// floats (float64 values rounded to float32 tensors); subtract, then divide.
//
//===----------------------------------------------------------------------===//
#include "trellis/Image/Preprocess.h"

#include <cstring>

namespace trellis {

Result<ConditioningImages>
prepareConditioningImages(const std::vector<RgbaImage> &images,
                          const std::vector<std::string> &names,
                          const PreprocessOptions &options) {
  const int64_t s = kCondImageSize, n = int64_t(images.size());
  ConditioningImages out{HostTensor(DType::F32, {n, 3, s, s}),
                         HostTensor(DType::U8, {n, s, s, 3})};
  for (int64_t i = 0; i < n; ++i) {
    TRELLIS_ASSIGN_OR_RETURN(
        PreprocessedImage pre,
        preprocessImage(images[size_t(i)], options, names.at(size_t(i))));
    HostTensor x = normalizeImage(pre.rgb.data(), s);
    std::memcpy(out.normalized.mutableData<float>() + i * 3 * s * s,
                x.data<float>(), x.nbytes());
    std::memcpy(out.rgb.mutableData<uint8_t>() + i * s * s * 3, pre.rgb.data(),
                pre.rgb.size());
  }
  return out;
}

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
