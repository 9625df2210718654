//===- Generation.h - One generation of the TRELLIS pipeline ----*- C++ -*-===//
//
// Private to runtime/app: the stage order of one generation (inputs -> ss_stage
// -> slat_stage -> decoders), seeded noise, and the output files handed to the
// engine's writer thread. Engine::run (Engine.cpp) owns the long-lived state
// and calls runGeneration for each request.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_RUNTIME_APP_GENERATION_H
#define TRELLIS_RUNTIME_APP_GENERATION_H

#include "trellis/Runtime/Engine.h"

namespace trellis {

/// Runs `request` through `session`; files go to `writer` (not waited for).
/// `stats` gets the stage and GPU times and the voxel count.
/// `voxelsKnown` (may be empty) is called with stage 1's voxel count before
/// any sparse stage runs; an error it returns ends the generation.
Result<PipelineResult>
runGeneration(const LoadedBundle &bundle, Session &session,
              OutputWriter &writer, const GenerationRequest &request,
              PipelineObserver &observer, GenerationStats &stats,
              const std::function<Status(int64_t)> &voxelsKnown = {});

/// Whether `name` (a file name, no folder) is one a generation writes into its
/// output folder (ss_latent.npy ... mesh.glb, per-sample _<b> names too).
bool isGenerationOutputName(const std::string &name);

} // namespace trellis

#endif // TRELLIS_RUNTIME_APP_GENERATION_H
