//===- Checkpoints.cpp - Traced weights checked against the checkpoints ---===//
#include "trellis/Models/Builders.h"
#include "trellis/Models/Manifest.h"

#include "llvm/ADT/StringRef.h"

namespace trellis::models {

void bindCheckpoints(
    trace::Tracer &t, const config::PipelineConfig &pipeline,
    std::map<std::string, std::shared_ptr<const SafetensorsFile>> files) {
  auto mapped = std::make_shared<
      std::map<std::string, std::shared_ptr<const SafetensorsFile>>>(
      std::move(files));
  t.setWeightLookup(
      [mapped](const std::string &model,
               const std::string &name) -> std::optional<trace::WeightInfo> {
        auto it = mapped->find(model);
        if (it == mapped->end())
          return std::nullopt;
        const SafetensorsEntry *e = it->second->find(name);
        if (!e)
          return std::nullopt;
        return trace::WeightInfo{e->dtype, e->shape};
      });
  // Weight errors name the config values that imply each expected shape.
  auto manifests = std::make_shared<std::map<std::string, ModelManifest>>();
  for (const config::ModelRef &m : pipeline.models)
    if (m.config)
      manifests->emplace(m.key, buildManifest(*m.config));
  t.setWeightOriginLookup(
      [manifests](const std::string &model, const std::string &name)
          -> std::optional<trace::WeightOrigin> {
        auto it = manifests->find(model);
        const ManifestTensor *tensor =
            it == manifests->end() ? nullptr : it->second.find(name);
        if (!tensor || tensor->shapeArgs.empty())
          return std::nullopt;
        // Point at the most specific width arg (mlp_ratio after
        // model_channels), not at the block count that names the module.
        const ArgRef *best = &tensor->shapeArgs.front();
        for (const ArgRef &a : tensor->shapeArgs) {
          llvm::StringRef n(a.name);
          if (!(n.starts_with("num_") && n.ends_with("blocks")))
            best = &a;
        }
        return trace::WeightOrigin{best->pos, tensor->describeShapeArgs()};
      });
}

} // namespace trellis::models
