//===- MkModel.cpp - Writing a synthetic model directory ------------------===//

#include "tools/trellis-mkmodel/MkModel.h"

#include "trellis/Config/ImageCondConfig.h"
#include "trellis/Format/Npy.h"
#include "trellis/Format/Safetensors.h"
#include "trellis/Support/AtomicFile.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace trellis::mkmodel {

namespace fs = std::filesystem;

namespace {

/// `dir/rel` with "dir/../x" folded lexically after resolving the existing
/// part of `dir`: the text presets write to "<out>/../TRELLIS-image-large",
/// and "<out>/.." must name the same directory before <out> exists (for the
/// overwrite check) as after (for trellisc's resolver).
std::string joinPath(const std::string &dir, const std::string &rel) {
  std::error_code ec;
  fs::path base = fs::weakly_canonical(fs::path(dir), ec);
  if (ec)
    base = fs::path(dir);
  return (base / rel).lexically_normal().string();
}

Status writeText(const std::string &path, const std::string &text) {
  AtomicFile f(path);
  if (!f.status())
    return f.status();
  f.write(text);
  return f.commit();
}

uint64_t fileSize(const std::string &path) {
  std::error_code ec;
  uintmax_t n = fs::file_size(path, ec);
  return ec ? 0 : uint64_t(n);
}

std::string megabytes(uint64_t bytes) {
  return std::to_string((bytes + 500000) / 1000000) + " MB";
}

} // namespace

Status writeSafetensorsLayout(const std::string &path,
                              const std::vector<TensorSpec> &specs) {
  auto layout = planSafetensors(specs);
  if (!layout)
    return Error{"cannot write '" + path + "': " + layout.message()};
  AtomicFile out(path);
  if (!out.status())
    return out.status();
  uint8_t prefix[8];
  const uint64_t n = layout->header.size();
  for (int i = 0; i < 8; ++i)
    prefix[i] = uint8_t(n >> (8 * i));
  out.write(prefix, 8);
  out.write(layout->header);
  TRELLIS_RETURN_IF_ERROR(out.commit());
  std::error_code ec;
  std::filesystem::resize_file(path, 8 + n + layout->dataSize, ec);
  if (ec)
    return Error{"cannot size '" + path + "': " + ec.message()};
  return Status::ok();
}

Result<std::vector<WrittenFile>> writeModelDirectory(const Options &options) {
  if (options.outDir.empty())
    return Error{"no output directory given (--out DIR)"};
  PresetPlan plan = planPreset(options.preset);

  const ImageCondModelPlan imagePlan = imageCondModelPlan(options.preset);
  const bool withImageModel =
      imagePlan.layers > 0 &&
      (options.only.empty() ||
       std::find(options.only.begin(), options.only.end(),
                 config::kImageCondModelDir) != options.only.end());
  std::vector<const CheckpointPlan *> selected;
  for (const std::string &key : options.only) {
    if (imagePlan.layers > 0 && key == config::kImageCondModelDir)
      continue;
    bool found = false;
    for (const CheckpointPlan &c : plan.checkpoints)
      found |= c.key == key;
    if (!found) {
      std::string keys;
      for (const CheckpointPlan &c : plan.checkpoints)
        keys += (keys.empty() ? "" : ", ") + c.key;
      if (imagePlan.layers > 0)
        keys += std::string(", ") + config::kImageCondModelDir;
      return Error{"--only: expected a model key of the " +
                   std::string(presetName(options.preset)) + " preset (" +
                   keys + "), found \"" + key + "\""};
    }
  }
  for (const CheckpointPlan &c : plan.checkpoints) {
    bool take = options.only.empty();
    for (const std::string &key : options.only)
      take |= c.key == key;
    if (take)
      selected.push_back(&c);
  }

  // Every file this run writes, checked before anything is written.
  std::vector<std::string> targets = {joinPath(options.outDir, "pipeline.json"),
                                      joinPath(options.outDir, "cond.npy")};
  if (plan.writeNegCond)
    targets.push_back(joinPath(options.outDir, "neg_cond.npy"));
  const std::string imageDir =
      joinPath(options.outDir, config::kImageCondModelDir);
  if (withImageModel)
    targets.insert(targets.end(), {joinPath(imageDir, "config.json"),
                                   joinPath(imageDir, "model.safetensors")});
  for (const CheckpointPlan *c : selected) {
    targets.push_back(joinPath(options.outDir, c->relativeBase + ".json"));
    targets.push_back(
        joinPath(options.outDir, c->relativeBase + ".safetensors"));
  }
  std::error_code ec;
  if (!options.force)
    for (const std::string &t : targets)
      if (fs::exists(t, ec))
        return Error{t + ": the file exists; pass --force to overwrite it"};
  for (const std::string &t : targets) {
    fs::path parent = fs::path(t).parent_path();
    if (!parent.empty()) {
      fs::create_directories(parent, ec);
      if (ec)
        return Error{parent.string() +
                     ": cannot create the directory: " + ec.message()};
    }
  }

  auto say = [&](const std::string &line, bool sameLine) {
    if (options.progress)
      options.progress(line, sameLine);
  };
  std::vector<WrittenFile> written;

  for (const CheckpointPlan *c : selected) {
    Result<CheckpointModel> model = checkpointModel(*c);
    if (!model)
      return model.takeError();
    std::string base = joinPath(options.outDir, c->relativeBase);
    TRELLIS_RETURN_IF_ERROR(writeText(base + ".json", c->sidecarJson));
    written.push_back({base + ".json", fileSize(base + ".json")});

    const models::ModelManifest &manifest = model->manifest;
    std::vector<TensorSpec> specs = manifest.specs();
    uint64_t total = manifest.dataBytes(), done = 0;
    int lastStep = -1;
    std::string label = c->relativeBase + ".safetensors";
    const uint64_t kLarge = 64ull << 20;
    auto fill = [&](size_t index, void *dst) {
      const models::ManifestTensor &t = manifest.tensors[index];
      fillTensor(model->config, manifest, t, options.seed, c->stem(), dst);
      done += t.nbytes();
      if (total >= kLarge) {
        int step = int(done * 20 / total); // 5% steps
        if (step != lastStep && step < 20) {
          lastStep = step;
          say(label + ": " + std::to_string(step * 5) + "% (" +
                  megabytes(done) + " of " + megabytes(total) + ")",
              true);
        }
      }
    };
    std::string path = base + ".safetensors";
    TRELLIS_RETURN_IF_ERROR(options.layoutOnly
                                ? writeSafetensorsLayout(path, specs)
                                : writeSafetensors(path, specs, fill));
    uint64_t bytes = fileSize(path);
    written.push_back({path, bytes});
    say(label + ": " + std::to_string(manifest.tensors.size()) + " tensors, " +
            std::to_string(bytes) + " bytes",
        false);
  }

  if (withImageModel) {
    TRELLIS_ASSIGN_OR_RETURN(std::vector<WrittenFile> files,
                             writeImageCondModel(imageDir, imagePlan,
                                                 options.seed,
                                                 options.layoutOnly));
    say(std::string(config::kImageCondModelDir) + "/model.safetensors: " +
            std::to_string(imageCondTensors(imagePlan).size()) + " tensors, " +
            std::to_string(files.back().bytes) + " bytes",
        false);
    written.insert(written.end(), files.begin(), files.end());
  }

  std::string pipelinePath = joinPath(options.outDir, "pipeline.json");
  TRELLIS_RETURN_IF_ERROR(writeText(pipelinePath, plan.pipelineJson));
  written.push_back({pipelinePath, fileSize(pipelinePath)});

  std::string condPath = joinPath(options.outDir, "cond.npy");
  HostTensor cond =
      syntheticCond(options.seed, "cond", plan.condTokens, plan.condChannels);
  TRELLIS_RETURN_IF_ERROR(writeNpy(condPath, cond));
  written.push_back({condPath, fileSize(condPath)});
  if (plan.writeNegCond) {
    std::string negPath = joinPath(options.outDir, "neg_cond.npy");
    HostTensor neg = syntheticCond(options.seed, "neg_cond", plan.condTokens,
                                   plan.condChannels);
    TRELLIS_RETURN_IF_ERROR(writeNpy(negPath, neg));
    written.push_back({negPath, fileSize(negPath)});
  }
  return written;
}

} // namespace trellis::mkmodel
