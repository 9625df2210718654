//===- ConfigFixtures.h - TRELLIS-image-large configs as text -------------===//
//
// A valid pipeline.json and the six sidecars of TRELLIS-image-large (spec
// §1.2, §1.3), written out by hand (not by trellis-mkmodel), one key per
// line so that tests can point at exact positions.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_TEST_UNIT_CONFIG_CONFIGFIXTURES_H
#define TRELLIS_TEST_UNIT_CONFIG_CONFIGFIXTURES_H

#include "test/unit/config/ConfigTestUtil.h"

#include <string>
#include <utility>
#include <vector>

namespace trellis::testutil {

inline const std::string kPipelineJson = R"({
  "name": "TrellisImageTo3DPipeline",
  "args": {
    "models": {
      "sparse_structure_flow_model": "ckpts/ss_flow",
      "sparse_structure_decoder": "ckpts/ss_dec",
      "slat_flow_model": "ckpts/slat_flow",
      "slat_decoder_gs": "ckpts/dec_gs",
      "slat_decoder_rf": "ckpts/dec_rf",
      "slat_decoder_mesh": "ckpts/dec_mesh"
    },
    "sparse_structure_sampler": {
      "name": "FlowEulerGuidanceIntervalSampler",
      "args": {"sigma_min": 1e-05},
      "params": {"steps": 25, "cfg_strength": 5.0, "cfg_interval": [0.5, 1.0], "rescale_t": 3.0}
    },
    "slat_sampler": {
      "name": "FlowEulerGuidanceIntervalSampler",
      "args": {"sigma_min": 2e-05},
      "params": {"steps": 26, "cfg_strength": 3.5, "cfg_interval": [0.5, 0.95], "rescale_t": 2.5}
    },
    "slat_normalization": {
      "mean": [-2.1687545776367188, -0.004347046371549368, -0.13352349400520325, -0.08418072760105133, -0.5271206498146057, 0.7238689064979553, -1.1414450407028198, 1.2039363384246826],
      "std": [2.377650737762451, 2.386378288269043, 2.124418020248413, 2.1748552322387695, 2.663944721221924, 2.371192216873169, 2.6217446327209473, 2.684523105621338]
    },
    "image_cond_model": "dinov2_vitl14_reg"
  }
}
)";

inline const std::string kSSFlowJson = R"({
  "name": "SparseStructureFlowModel",
  "args": {
    "resolution": 16,
    "in_channels": 8,
    "out_channels": 8,
    "model_channels": 1024,
    "cond_channels": 1024,
    "num_blocks": 24,
    "num_heads": 16,
    "mlp_ratio": 4,
    "patch_size": 1,
    "pe_mode": "ape",
    "qk_rms_norm": true,
    "use_fp16": true
  }
}
)";

inline const std::string kSSDecoderJson = R"({
  "name": "SparseStructureDecoder",
  "args": {
    "out_channels": 1,
    "latent_channels": 8,
    "num_res_blocks": 2,
    "num_res_blocks_middle": 2,
    "channels": [512, 128, 32],
    "use_fp16": true
  }
}
)";

inline const std::string kSLatFlowJson = R"({
  "name": "ElasticSLatFlowModel",
  "args": {
    "resolution": 64,
    "in_channels": 8,
    "out_channels": 8,
    "model_channels": 1024,
    "cond_channels": 1024,
    "num_blocks": 24,
    "num_heads": 16,
    "mlp_ratio": 4,
    "patch_size": 2,
    "num_io_res_blocks": 2,
    "io_block_channels": [128],
    "pe_mode": "ape",
    "qk_rms_norm": true,
    "use_fp16": true
  }
}
)";

inline std::string decoderJson(const std::string &cls,
                               const std::string &representation) {
  return R"({
  "name": ")" +
         cls + R"(",
  "args": {
    "resolution": 64,
    "model_channels": 768,
    "latent_channels": 8,
    "num_blocks": 12,
    "num_heads": 12,
    "mlp_ratio": 4,
    "attn_mode": "swin",
    "window_size": 8,
    "use_fp16": true,
    "representation_config": )" +
         representation + R"(
  }
}
)";
}

inline const std::string kGaussianRepresentation = R"({
      "lr": {"_xyz": 1.0, "_features_dc": 1.0, "_opacity": 1.0, "_scaling": 1.0, "_rotation": 0.1},
      "perturb_offset": true,
      "voxel_size": 1.5,
      "num_gaussians": 32,
      "2d_filter_kernel_size": 0.1,
      "3d_filter_kernel_size": 0.0009,
      "scaling_bias": 0.004,
      "opacity_bias": 0.1,
      "scaling_activation": "softplus"
    })";

inline const std::string kGaussianDecoderJson =
    decoderJson("ElasticSLatGaussianDecoder", kGaussianRepresentation);
inline const std::string kRadianceFieldDecoderJson =
    decoderJson("ElasticSLatRadianceFieldDecoder", R"({"rank": 16, "dim": 8})");
inline const std::string kMeshDecoderJson =
    decoderJson("ElasticSLatMeshDecoder", R"({"use_color": true})");

/// (relative path without extension, sidecar text) of the six models.
inline std::vector<std::pair<std::string, std::string>> imageLargeSidecars() {
  return {{"ckpts/ss_flow", kSSFlowJson},
          {"ckpts/ss_dec", kSSDecoderJson},
          {"ckpts/slat_flow", kSLatFlowJson},
          {"ckpts/dec_gs", kGaussianDecoderJson},
          {"ckpts/dec_rf", kRadianceFieldDecoderJson},
          {"ckpts/dec_mesh", kMeshDecoderJson}};
}

/// Writes pipeline.json and the sidecars (no weights) into `dir`.
inline void writeConfigDirectory(const std::string &dir,
                                 const std::string &pipeline = kPipelineJson) {
  writeFile(dir + "/pipeline.json", pipeline);
  for (const auto &[rel, text] : imageLargeSidecars())
    writeFile(dir + "/" + rel + ".json", text);
}

} // namespace trellis::testutil

#endif // TRELLIS_TEST_UNIT_CONFIG_CONFIGFIXTURES_H
