//===- ImageCondConfig.h - The image-conditioning model's config -*- C++
//-*-===//
//
// TRELLIS conditions on DINOv2 ViT-L/14 with 4 registers (image conditioning
// spec §2). We read its architecture from Hugging Face's `config.json` of
// facebook/dinov2-with-registers-large (spec §3.2): the file that sits
// beside the `model.safetensors` it describes. The conventional place is
// `<model dir>/image_cond_model/` (docs/guide/images.md).
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_CONFIG_IMAGECONDCONFIG_H
#define TRELLIS_CONFIG_IMAGECONDCONFIG_H

#include "trellis/Config/Json.h"
#include "trellis/Config/Located.h"
#include "trellis/Support/Result.h"

#include <string>
#include <vector>

namespace trellis::config {

/// The image-conditioning model's folder inside a model directory.
inline constexpr const char *kImageCondModelDir = "image_cond_model";

/// The DINOv2-with-registers architecture (spec §2.2), from config.json.
struct ImageCondArgs {
  std::string file; ///< the config.json it came from
  Located<int64_t> hiddenSize, numLayers, numHeads, patchSize, imageSize,
      numRegisterTokens, numChannels;
  Located<double> layerNormEps, mlpRatio;

  int64_t headDim() const { return *hiddenSize / *numHeads; }
  int64_t mlpHidden() const { return int64_t(*hiddenSize * *mlpRatio); }
  /// Patches per side: image_size / patch_size (37 at 518 / 14).
  int64_t gridSize() const { return *imageSize / *patchSize; }
  /// Tokens of the conditioning: CLS, the registers and the patches (1374).
  int64_t tokens() const {
    return 1 + *numRegisterTokens + gridSize() * gridSize();
  }
};

/// Validates a config.json document (unknown keys of Hugging Face's are
/// ignored; the ones that would change the math must have TRELLIS's values).
Result<ImageCondArgs>
parseImageCondConfig(const JsonDocument &doc,
                     std::vector<Diagnostic> *diagnostics = nullptr);
Result<ImageCondArgs>
readImageCondConfig(const std::string &path,
                    std::vector<Diagnostic> *diagnostics = nullptr);

} // namespace trellis::config

#endif // TRELLIS_CONFIG_IMAGECONDCONFIG_H
