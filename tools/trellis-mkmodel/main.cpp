//===- main.cpp - trellis-mkmodel: synthetic TRELLIS model directories ----===//

#include "tools/trellis-mkmodel/MkModel.h"

#include "trellis/Models/Manifest.h"

#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>

using namespace trellis;

static const char kHelp[] =
    R"(usage: trellis-mkmodel --preset NAME --out DIR [--seed N] [--force]
                       [--only KEY[,KEY...]] [--layout-only] [--quiet]

Writes a synthetic TRELLIS model directory with seeded random weights:
  DIR/pipeline.json            the pipeline config (spec §1.2 sampler values)
  DIR/ckpts/<name>.json        one sidecar per model
  DIR/ckpts/<name>.safetensors the weights: every tensor TRELLIS loads, with
                               the exact names, shapes and dtypes
  DIR/cond.npy                 conditioning tokens [1, Lc, C] f32, each token
                               zero-mean and unit-variance
and then checks the directory as trellisc would (configs + weight headers).

Presets:
  image-large  TRELLIS-image-large: 6 checkpoints, 3.0 GB, the published
               file sizes byte for byte; cond [1, 1374, 1024]
  text-base    TRELLIS-text-base: the two text flow models in DIR/ckpts, the
               decoders (referenced as microsoft/TRELLIS-image-large/ckpts/...)
               in DIR/../TRELLIS-image-large/ckpts; cond and neg_cond
               [1, 77, 768]
  tiny         every model and op kind at toy sizes (about 10 MB) for CI;
               cond [1, 21, 128]

Options:
  --preset NAME   image-large, text-base or tiny
  --out DIR       output directory (created if needed)
  --seed N        weight seed, an unsigned 64-bit integer (default 0); each
                  tensor depends only on (seed, checkpoint, tensor name)
  --force         overwrite existing files (otherwise refuse)
  --only KEYS     write only these models (comma-separated pipeline keys,
                  e.g. sparse_structure_decoder); pipeline.json still lists
                  all of them, so the directory check is skipped
  --layout-only   the checkpoints' headers only: each .safetensors file has
                  its full size but the tensor data is a hole (zeros, no
                  disk space); enough for trellisc, trellis.exe --inspect
                  and its memory plans, not for a run
  --quiet         no progress on stderr
  --help          this text

Exit status: 0 on success, 1 on an error (the message names the file), 2 on a
usage error.
)";

static int usage(const std::string &message) {
  std::fprintf(stderr, "trellis-mkmodel: %s\n(see trellis-mkmodel --help)\n",
               message.c_str());
  return 2;
}

int main(int argc, char **argv) {
  mkmodel::Options options;
  bool havePreset = false, quiet = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string &out) -> bool {
      size_t eq = arg.find('=');
      if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
        out = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        return true;
      }
      if (i + 1 >= argc)
        return false;
      out = argv[++i];
      return true;
    };
    std::string v;
    std::string name = arg.substr(0, arg.find('='));
    if (name == "--help" || name == "-h") {
      std::fputs(kHelp, stdout);
      return 0;
    } else if (name == "--preset") {
      if (!value(v))
        return usage("--preset needs a value");
      auto p = mkmodel::parsePreset(v);
      if (!p)
        return usage("--preset: expected image-large, text-base or tiny, "
                     "found \"" +
                     v + "\"");
      options.preset = *p;
      havePreset = true;
    } else if (name == "--out") {
      if (!value(v) || v.empty())
        return usage("--out needs a directory");
      options.outDir = v;
    } else if (name == "--seed") {
      if (!value(v))
        return usage("--seed needs a value");
      uint64_t seed = 0;
      auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), seed);
      if (ec != std::errc() || ptr != v.data() + v.size() || v.empty())
        return usage("--seed: expected an unsigned 64-bit integer, found \"" +
                     v + "\"");
      options.seed = seed;
    } else if (name == "--force") {
      options.force = true;
    } else if (name == "--quiet") {
      quiet = true;
    } else if (name == "--layout-only") {
      options.layoutOnly = true;
    } else if (name == "--only") {
      if (!value(v) || v.empty())
        return usage("--only needs a comma-separated list of model keys");
      size_t start = 0;
      while (start <= v.size()) {
        size_t comma = v.find(',', start);
        std::string key = v.substr(start, comma - start);
        if (!key.empty())
          options.only.push_back(key);
        if (comma == std::string::npos)
          break;
        start = comma + 1;
      }
    } else {
      return usage("unknown argument \"" + arg + "\"");
    }
  }
  if (!havePreset)
    return usage("--preset is required");
  if (options.outDir.empty())
    return usage("--out is required");

  bool tty = isatty(fileno(stderr));
  bool pending = false; // a redrawable line is on screen
  if (!quiet)
    options.progress = [&](const std::string &line, bool sameLine) {
      if (sameLine && !tty)
        return; // only final lines in logs
      if (tty && pending)
        std::fputs("\r\033[K", stderr);
      std::fputs(line.c_str(), stderr);
      if (sameLine && tty) {
        pending = true;
      } else {
        std::fputc('\n', stderr);
        pending = false;
      }
      std::fflush(stderr);
    };

  Result<std::vector<mkmodel::WrittenFile>> written =
      mkmodel::writeModelDirectory(options);
  if (!written) {
    if (pending)
      std::fputc('\n', stderr);
    std::fprintf(stderr, "trellis-mkmodel: error: %s\n",
                 written.message().c_str());
    return 1;
  }
  uint64_t total = 0;
  for (const mkmodel::WrittenFile &f : written.value())
    total += f.bytes;
  if (options.only.empty()) {
    Status check = models::validateModelDirectory(options.outDir);
    if (!check) {
      std::fprintf(stderr,
                   "trellis-mkmodel: error: the written directory does not "
                   "check out:\n%s\n",
                   check.message().c_str());
      return 1;
    }
  }
  if (!quiet)
    std::fprintf(stderr,
                 "trellis-mkmodel: wrote %zu files, %llu bytes (%s, "
                 "seed %llu) to %s\n",
                 written->size(), (unsigned long long)total,
                 std::string(mkmodel::presetName(options.preset)).c_str(),
                 (unsigned long long)options.seed, options.outDir.c_str());
  return 0;
}
