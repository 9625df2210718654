// The fusion passes keep the numbers: the tiny synthetic pipeline's ss_stage
// (the SS flow sampler and decoder) and slat_stage (the SLat flow sampler on
// about 3% of 32³ voxels) are interpreted on the CPU reference before and
// after each pass and the latents compared (relative L2).
//
// Tolerances: passes that only move or re-express the same kernel calls
// (specialize-guidance + LICM, the linear GELU epilogue and the attention
// head norms, which the CPU reference applies as the unfused ops, and the
// token chunks of the MLPs, whose rows are independent) must be bit-exact.
// The fused LayerNorm + modulate drops one fp16 rounding of the normalized
// values (≤ 2^-11 relative each) and the zero-conditioning fold replaces
// Σ softmax·v by v (f32 weights summing to 1 within a few ulps), so those
// differ in fp16 rounding points only: after 5 sampler steps of a 2-block
// fp16 model that is a few 1e-4 relative; 1e-3 bounds it (measured: 6.7e-4
// for norm+modulate, 0 for the zero-conditioning fold, dense and sparse; the
// whole fusion pipeline 6.7e-4 at batch 1 and 6.5e-4 at batch 2 on
// ss_stage, 9.7e-4 on slat_stage, against 2e-3).
#include "lib/Target/HostProgram.h"
#include "lib/Transforms/Passes.h"
#include "trellis/Config/PipelineConfig.h"
#include "trellis/Conversion/Partition.h"
#include "trellis/Format/Safetensors.h"
#include "trellis/Models/Builders.h"
#include "trellis/Runtime/CpuExecutor.h"
#include "trellis/Trace/Tracer.h"

#include "tools/trellis-mkmodel/MkModel.h"

#include "dialect/TrellisDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <map>

using namespace trellis;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kCondTokens = 21;
constexpr int64_t kSteps = 5; // t = 1, .9, .75, .5 guided; .43 not

class FusionNumeric : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = (fs::temp_directory_path() /
            ("trellis-fusion-" + std::to_string(::getpid())))
               .string();
    mkmodel::Options o;
    o.preset = mkmodel::Preset::Tiny;
    o.seed = 1;
    o.outDir = dir_;
    o.force = true;
    auto written = mkmodel::writeModelDirectory(o);
    ASSERT_TRUE(written.isOk()) << written.message();
    auto pipeline = config::loadPipeline(dir_ + "/pipeline.json");
    ASSERT_TRUE(pipeline.isOk()) << pipeline.message();
    pipeline_ = new config::PipelineConfig(std::move(*pipeline));
    files_ = new std::map<std::string, std::shared_ptr<const SafetensorsFile>>;
    baselines_ = new std::map<int64_t, HostTensor>;
    for (const config::ModelRef &m : pipeline_->models) {
      if (!m.config)
        continue;
      auto file = SafetensorsFile::open(m.weightsPath());
      ASSERT_TRUE(file.isOk()) << file.message();
      (*files_)[m.key] = *file;
    }
  }
  static void TearDownTestSuite() {
    delete pipeline_;
    delete files_;
    delete baselines_;
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  /// The pipeline after the graph phase (as trellisc --compile-to=graph).
  mlir::OwningOpRef<mlir::ModuleOp> graphModule(int64_t batch) {
    trace::Tracer tracer(context_);
    tracer.setWeightLookup(
        [](const std::string &model,
           const std::string &name) -> std::optional<trace::WeightInfo> {
          auto it = files_->find(model);
          if (it == files_->end())
            return std::nullopt;
          const SafetensorsEntry *e = it->second->find(name);
          if (!e)
            return std::nullopt;
          return trace::WeightInfo{e->dtype, e->shape};
        });
    models::PipelineOptions options;
    options.condTokens = kCondTokens;
    options.batch = batch;
    models::buildPipeline(tracer, *pipeline_, options);
    EXPECT_FALSE(tracer.hasErrors()) << tracer.errors().front().render();
    mlir::OwningOpRef<mlir::ModuleOp> module = tracer.takeModule();
    mlir::PassManager pm(&context_);
    pm.addPass(mlir::createCanonicalizerPass());
    pm.addPass(mlir::createCSEPass());
    EXPECT_TRUE(mlir::succeeded(pm.run(*module)));
    return module;
  }

  /// The first result of `stage` on the CPU reference, with `steps` sampler
  /// steps (0: the pipeline's); `*ms` gets the CPU time of the run (of all
  /// threads: stable on a loaded machine with TRELLIS_REF_THREADS=1).
  /// With `error`, a failed run stores its message there (no failure).
  HostTensor runStage(mlir::ModuleOp module, const std::string &stage,
                      std::vector<RtValue> inputs, int64_t steps = kSteps,
                      double *ms = nullptr, std::string *error = nullptr) {
    auto serialized = serializeHostProgram(module, {stage});
    EXPECT_TRUE(mlir::succeeded(serialized));
    if (mlir::failed(serialized))
      return {};
    auto program =
        Program::parse(serialized->program, serialized->locations, "test");
    EXPECT_TRUE(program.isOk()) << program.message();
    if (!program)
      return {};
    CpuExecutor exec(
        *program,
        [](const std::string &model,
           const std::string &name) -> Result<HostTensor> {
          auto it = files_->find(model);
          const SafetensorsEntry *e =
              it == files_->end() ? nullptr : it->second->find(name);
          if (!e)
            return Error{"no tensor '" + name + "' of '" + model + "'"};
          return it->second->tensor(*e);
        });
    if (steps > 0) {
      SamplerRunOverrides overrides;
      overrides.steps = steps;
      exec.setSamplerOverrides(stage, overrides);
    }
    std::clock_t start = std::clock();
    auto out = exec.run(stage, std::move(inputs));
    if (ms)
      *ms = 1000.0 * double(std::clock() - start) / CLOCKS_PER_SEC;
    if (error && !out)
      *error = out.message();
    else
      EXPECT_TRUE(out.isOk()) << out.message();
    if (!out)
      return {};
    return std::get<HostTensor>((*out)[0]);
  }

  /// ss_stage's latent on the CPU reference, kSteps sampler steps.
  HostTensor runSsStage(mlir::ModuleOp module, int64_t batch) {
    HostTensor cond = mkmodel::syntheticCond(7, "cond", kCondTokens, 128);
    HostTensor noise(DType::F32, {batch, 8, 8, 8, 8});
    for (int64_t i = 0; i < noise.numel(); ++i)
      noise.mutableData<float>()[i] = float(mkmodel::syntheticNormal(99, i));
    return runStage(module, "ss_stage", {cond, noise});
  }

  /// slat_stage's latent [N, 8] on the CPU reference: about 3% of the
  /// 32³ voxels of each of `batch` samples (coords in row-major order).
  HostTensor runSlatStage(mlir::ModuleOp module, int64_t batch,
                          int64_t steps = kSteps, double *ms = nullptr) {
    std::vector<int32_t> rows;
    for (int32_t b = 0; b < batch; ++b)
      for (int32_t i = 0; i < 32 * 32 * 32; ++i)
        if (std::abs(mkmodel::syntheticNormal(5 + uint64_t(b), uint64_t(i))) >
            2.17) // P(|z| > 2.17) = 3%
          rows.insert(rows.end(), {b, i / 1024, i / 32 % 32, i % 32});
    int64_t n = int64_t(rows.size()) / 4;
    HostTensor coords(DType::I32, {n, 4});
    std::copy(rows.begin(), rows.end(), coords.mutableData<int32_t>());
    HostTensor cond = mkmodel::syntheticCond(7, "cond", kCondTokens, 128);
    HostTensor noise(DType::F32, {n, 8});
    for (int64_t i = 0; i < noise.numel(); ++i)
      noise.mutableData<float>()[i] = float(mkmodel::syntheticNormal(98, i));
    return runStage(module, "slat_stage", {coords, cond, noise}, steps, ms);
  }

  static double relativeL2(const HostTensor &a, const HostTensor &b) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < a.numel(); ++i) {
      double d = double(a.data<float>()[i]) - double(b.data<float>()[i]);
      num += d * d;
      den += double(b.data<float>()[i]) * double(b.data<float>()[i]);
    }
    return std::sqrt(num / den);
  }

  /// Runs ss_stage before and after `passes`; returns the relative L2
  /// distance of the latents and the transformed module in `after`.
  double compare(const std::function<void(mlir::OpPassManager &)> &passes,
                 mlir::OwningOpRef<mlir::ModuleOp> *after = nullptr,
                 int64_t batch = 1) {
    mlir::OwningOpRef<mlir::ModuleOp> module = graphModule(batch);
    // The unfused latent is the same for every test: computed once.
    if (!baselines_->count(batch))
      baselines_->emplace(batch, runSsStage(*module, batch));
    const HostTensor &before = baselines_->at(batch);
    mlir::PassManager pm(&context_);
    passes(pm);
    pm.addPass(mlir::trellis::createTrellisVerifyLocations());
    EXPECT_TRUE(mlir::succeeded(pm.run(*module)));
    HostTensor transformed = runSsStage(*module, batch);
    EXPECT_EQ(before.numel(), batch * 8 * 512);
    EXPECT_EQ(transformed.numel(), before.numel());
    double err = before.numel() && transformed.numel() == before.numel()
                     ? relativeL2(transformed, before)
                     : INFINITY;
    std::cout << "relative L2 = " << err << "\n";
    if (after)
      *after = std::move(module);
    return err;
  }

  static int64_t count(mlir::Operation *root, llvm::StringRef name) {
    int64_t n = 0;
    root->walk([&](mlir::Operation *op) {
      n += op->getName().getStringRef() == name;
    });
    return n;
  }

  static void specialize(mlir::OpPassManager &pm) {
    pm.addPass(mlir::trellis::createTrellisSpecializeGuidance());
    pm.addPass(mlir::createLoopInvariantCodeMotionPass());
  }

  mlir::MLIRContext context_;
  static std::string dir_;
  static config::PipelineConfig *pipeline_;
  static std::map<std::string, std::shared_ptr<const SafetensorsFile>> *files_;
  static std::map<int64_t, HostTensor> *baselines_;
};

std::string FusionNumeric::dir_;
config::PipelineConfig *FusionNumeric::pipeline_ = nullptr;
std::map<std::string, std::shared_ptr<const SafetensorsFile>>
    *FusionNumeric::files_ = nullptr;
std::map<int64_t, HostTensor> *FusionNumeric::baselines_ = nullptr;

TEST_F(FusionNumeric, SpecializeGuidanceAndHoistingAreExact) {
  mlir::OwningOpRef<mlir::ModuleOp> after;
  EXPECT_EQ(compare(specialize, &after), 0.0);
  // The sampler has two regions and the K/V projections of cond and
  // neg_cond (2 blocks each) run once, outside it.
  mlir::trellis::FlowSampleOp sampler;
  after->lookupSymbol<mlir::func::FuncOp>("ss_stage")
      .walk([&](mlir::trellis::FlowSampleOp op) { sampler = op; });
  ASSERT_TRUE(sampler);
  EXPECT_TRUE(sampler.isSpecialized());
  int64_t hoisted = 0;
  for (mlir::Operation &op : *sampler->getBlock())
    hoisted += mlir::isa<mlir::trellis::LinearOp>(op);
  EXPECT_EQ(hoisted, 4);
}

// trellis-hoist-time runs the τ-only ops (t-embedder, adaLN modulation) on
// the [steps] rows of the grid instead of the [B] rows of one step: the same
// ops on the same values (the reference kernels compute rows independently),
// so the latents are bit-identical, at batch 1 and 2 (where τ [2] selects
// the same row twice). The run uses kSteps = 5 of the 25 compiled steps
// (the run-time override applies to the time grid too).
TEST_F(FusionNumeric, HoistTimeIsExact) {
  for (int64_t batch : {1, 2}) {
    mlir::OwningOpRef<mlir::ModuleOp> after;
    EXPECT_EQ(compare(
                  [](mlir::OpPassManager &pm) {
                    specialize(pm);
                    pm.addPass(mlir::trellis::createTrellisHoistTime());
                    pm.addPass(mlir::createCSEPass());
                  },
                  &after, batch),
              0.0);
    // One grid and one table (CSE merged the two regions' copies); each
    // region selects its row once; nothing in the sampler embeds τ.
    mlir::Operation *ss = after->lookupSymbol("ss_stage");
    EXPECT_EQ(count(ss, "trellis.time_grid"), 1);
    EXPECT_EQ(count(ss, "trellis.time_row"), 2);
    EXPECT_EQ(count(ss, "trellis.timestep_embedding"), 1);
    mlir::trellis::FlowSampleOp sampler;
    after->lookupSymbol("ss_stage")->walk([&](mlir::trellis::FlowSampleOp op) {
      sampler = op;
    });
    ASSERT_TRUE(sampler);
    EXPECT_EQ(count(sampler, "trellis.timestep_embedding"), 0);
    EXPECT_EQ(count(sampler, "trellis.silu"), 0);
  }
}

TEST_F(FusionNumeric, HoistTimeSlatIsExact) {
  for (int64_t batch : {1, 2}) {
    mlir::OwningOpRef<mlir::ModuleOp> module = graphModule(batch);
    mlir::PassManager pm(&context_);
    specialize(pm);
    ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
    HostTensor before = runSlatStage(*module, batch);
    mlir::PassManager hoist(&context_);
    hoist.addPass(mlir::trellis::createTrellisHoistTime());
    hoist.addPass(mlir::createCSEPass());
    hoist.addPass(mlir::trellis::createTrellisVerifyLocations());
    ASSERT_TRUE(mlir::succeeded(hoist.run(*module)));
    EXPECT_EQ(count(module->lookupSymbol("slat_stage"), "trellis.time_row"), 2);
    HostTensor after = runSlatStage(*module, batch);
    ASSERT_GT(before.numel(), 0);
    ASSERT_EQ(after.numel(), before.numel());
    EXPECT_EQ(relativeL2(after, before), 0.0) << "batch " << batch;
  }
}

// The tables have the compiled steps' rows: a run-time override with more
// steps is an error that says so (fewer steps use the first rows).
// The time tables hold max(compiled steps, max-steps) rows: a run-time steps
// override above the compiled 25 runs (and matches the program without the
// pass) while it fits, and is refused with a message past the capacity.
TEST_F(FusionNumeric, HoistTimeStepsOverride) {
  HostTensor cond = mkmodel::syntheticCond(7, "cond", kCondTokens, 128);
  HostTensor noise(DType::F32, {1, 8, 8, 8, 8});
  for (int64_t i = 0; i < noise.numel(); ++i)
    noise.mutableData<float>()[i] = float(mkmodel::syntheticNormal(99, i));
  mlir::OwningOpRef<mlir::ModuleOp> plain = graphModule(1);
  mlir::PassManager pm(&context_);
  specialize(pm);
  ASSERT_TRUE(mlir::succeeded(pm.run(*plain)));
  mlir::OwningOpRef<mlir::ModuleOp> hoisted = plain->clone();
  mlir::OwningOpRef<mlir::ModuleOp> tight = plain->clone();
  mlir::PassManager wide(&context_), narrow(&context_);
  wide.addPass(mlir::trellis::createTrellisHoistTime());
  narrow.addPass(mlir::trellis::createTrellisHoistTime(
      mlir::trellis::TrellisHoistTimeOptions{/*maxSteps=*/0}));
  ASSERT_TRUE(mlir::succeeded(wide.run(*hoisted)));
  ASSERT_TRUE(mlir::succeeded(narrow.run(*tight)));

  HostTensor a = runStage(*plain, "ss_stage", {cond, noise}, /*steps=*/26);
  HostTensor b = runStage(*hoisted, "ss_stage", {cond, noise}, /*steps=*/26);
  EXPECT_EQ(relativeL2(a, b), 0.0);

  std::string error;
  runStage(*tight, "ss_stage", {cond, noise}, /*steps=*/26, nullptr, &error);
  EXPECT_NE(error.find("the sampler runs 26 steps, but the program's time "
                       "tables hold 25"),
            std::string::npos)
      << error;
}

// Batch 2 with a batch-1 condition: the conditions are repeated above the
// two-region sampler.
TEST_F(FusionNumeric, FusionPipelineBatch2) {
  mlir::OwningOpRef<mlir::ModuleOp> after;
  double err = compare(
      [](mlir::OpPassManager &pm) { mlir::trellis::buildFusionPipeline(pm); },
      &after, /*batch=*/2);
  EXPECT_LT(err, 2e-3);
  mlir::trellis::FlowSampleOp sampler;
  after->lookupSymbol("ss_stage")->walk([&](mlir::trellis::FlowSampleOp op) {
    sampler = op;
  });
  ASSERT_TRUE(sampler);
  EXPECT_TRUE(sampler.isSpecialized());
}

TEST_F(FusionNumeric, FoldZeroConditioning) {
  mlir::OwningOpRef<mlir::ModuleOp> after;
  double err = compare(
      [](mlir::OpPassManager &pm) {
        specialize(pm);
        pm.addPass(mlir::trellis::createTrellisFoldZeroConditioning());
        pm.addPass(mlir::createLoopInvariantCodeMotionPass());
      },
      &after);
  EXPECT_LT(err, 1e-3);
  // ss_stage: the 2 self-attentions of each region and the 2
  // cross-attentions of the conditional one remain.
  EXPECT_EQ(count(after->lookupSymbol("ss_stage"), "trellis.attention"), 6);
}

// slat_stage: the zero-condition fold of the sparse cross-attention (N voxel
// rows, dynamic). Measured: 0 at batch 1 and 2 (the f32 softmax weights of
// the 21 identical keys are exactly 1/21 each and sum to 1 within the f16
// rounding of v).
TEST_F(FusionNumeric, FoldZeroConditioningSlat) {
  for (int64_t batch : {1, 2}) {
    mlir::OwningOpRef<mlir::ModuleOp> module = graphModule(batch);
    double beforeMs = 0, afterMs = 0;
    HostTensor before = runSlatStage(*module, batch, kSteps, &beforeMs);
    // The unconditional region's 2 sparse cross-attentions (one per block).
    EXPECT_EQ(count(module->lookupSymbol("slat_flow_model"),
                    "trellis.sparse.cross_attention"),
              2);
    mlir::PassManager pm(&context_);
    specialize(pm);
    pm.addPass(mlir::trellis::createTrellisFoldZeroConditioning());
    pm.addPass(mlir::createLoopInvariantCodeMotionPass());
    pm.addPass(mlir::trellis::createTrellisVerifyLocations());
    ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
    // Only the conditional region's cross-attentions remain, and no
    // repeated rows: the folded out-projection is added as one row.
    mlir::Operation *slat = module->lookupSymbol("slat_stage");
    EXPECT_EQ(count(slat, "trellis.sparse.cross_attention"), 2);
    EXPECT_EQ(count(slat, "trellis.broadcast_rows"), batch == 1 ? 0 : 1);
    HostTensor after = runSlatStage(*module, batch, kSteps, &afterMs);
    ASSERT_GT(before.numel(), 0);
    ASSERT_EQ(after.numel(), before.numel());
    double err = relativeL2(after, before);
    std::cout << "slat_stage batch " << batch << " N = " << before.dim(0)
              << ": relative L2 = " << err << ", " << kSteps
              << " steps: " << beforeMs << " ms CPU before, " << afterMs
              << " ms CPU after\n";
    EXPECT_LT(err, 1e-3);
  }
}

// The SLat flow's upsampling block on the coarse rows: the same products
// and sums, bit for bit; no conv reads upsampled rows any more, and only the
// block's 32-channel results (tiny: io channels 32) are upsampled.
TEST_F(FusionNumeric, SinkUpsampleSlatIsExact) {
  mlir::OwningOpRef<mlir::ModuleOp> module = graphModule(1);
  HostTensor before = runSlatStage(*module, 1);
  mlir::PassManager pm(&context_);
  specialize(pm);
  pm.addPass(mlir::trellis::createTrellisSinkUpsample());
  pm.addPass(mlir::createLoopInvariantCodeMotionPass());
  pm.addPass(mlir::createCSEPass());
  pm.addPass(mlir::trellis::createTrellisVerifyLocations());
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  HostTensor after = runSlatStage(*module, 1);
  ASSERT_GT(before.numel(), 0);
  ASSERT_EQ(after.numel(), before.numel());
  EXPECT_EQ(relativeL2(after, before), 0.0);
  mlir::Operation *stage = module->lookupSymbol("slat_stage");
  // One map for the two sampler regions (hoisted, shared).
  EXPECT_EQ(count(stage, "trellis.sparse.parent_neighbor_map"), 1);
  int64_t upsampledConvs = 0, wideUpsamples = 0;
  stage->walk([&](mlir::trellis::SparseConv3dOp conv) {
    upsampledConvs +=
        !!conv.getFeats().getDefiningOp<mlir::trellis::SparseUpsampleOp>();
  });
  stage->walk([&](mlir::trellis::SparseUpsampleOp up) {
    wideUpsamples += up.getFeats().getType().getDimSize(1) != 32;
  });
  EXPECT_EQ(upsampledConvs, 0);
  EXPECT_EQ(wideUpsamples, 0);
}

// trellis-partition-cuda's form of the sparse resampling ops (an index from
// the coordinates + gather_rows / segment_mean) gives bit for bit the same
// latent on the CPU reference; with two samples the res blocks' per-sample
// modulation goes through batch_index + gather_rows too.
TEST_F(FusionNumeric, PartitionResamplingSlatIsExact) {
  for (int64_t batch : {1, 2}) {
    mlir::OwningOpRef<mlir::ModuleOp> module = graphModule(batch);
    mlir::PassManager pm(&context_);
    mlir::trellis::buildFusionPipeline(pm);
    ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
    HostTensor before = runSlatStage(*module, batch);
    ASSERT_TRUE(
        mlir::succeeded(trellis::partitionForCuda(*module, {"slat_stage"})));
    mlir::Operation *stage = module->lookupSymbol("slat_stage");
    EXPECT_EQ(count(stage, "trellis.sparse.upsample"), 0);
    EXPECT_EQ(count(stage, "trellis.sparse.downsample"), 0);
    EXPECT_EQ(count(stage, "trellis.sparse.batch_broadcast"), 0);
    EXPECT_EQ(count(stage, "trellis.segment_mean"), 1);
    EXPECT_GE(count(stage, "trellis.gather_rows"), batch == 2 ? 2 : 1);
    // One index per coordinate pair, outside the sampler.
    EXPECT_EQ(count(stage, "trellis.sparse.child_rows"), 1);
    EXPECT_EQ(count(stage, "trellis.sparse.parent_rows"), 1);
    HostTensor after = runSlatStage(*module, batch);
    ASSERT_GT(before.numel(), 0);
    ASSERT_EQ(after.numel(), before.numel());
    EXPECT_EQ(relativeL2(after, before), 0.0) << "batch " << batch;
  }
}

// The whole fusion pipeline on slat_stage.
TEST_F(FusionNumeric, FusionPipelineSlat) {
  mlir::OwningOpRef<mlir::ModuleOp> module = graphModule(1);
  double beforeMs = 0, afterMs = 0;
  HostTensor before = runSlatStage(*module, 1, kSteps, &beforeMs);
  mlir::PassManager pm(&context_);
  mlir::trellis::buildFusionPipeline(pm);
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  HostTensor after = runSlatStage(*module, 1, kSteps, &afterMs);
  ASSERT_EQ(after.numel(), before.numel());
  double err = relativeL2(after, before);
  std::cout << "slat_stage fusion pipeline: relative L2 = " << err << ", "
            << beforeMs << " ms CPU before, " << afterMs << " ms CPU after\n";
  EXPECT_LT(err, 2e-3);
}

// Negative: a negative condition that is an input (as text-base's CLIP
// embedding of the empty prompt) is not folded, whatever its values.
TEST_F(FusionNumeric, FoldZeroConditioningKeepsInputNegCond) {
  mlir::OwningOpRef<mlir::ModuleOp> module = graphModule(1);
  // Make the zero neg_cond constant of slat_stage a function argument.
  auto slat = module->lookupSymbol<mlir::func::FuncOp>("slat_stage");
  ASSERT_TRUE(slat);
  mlir::trellis::ConstantOp zero;
  slat.walk([&](mlir::trellis::ConstantOp op) {
    auto t = mlir::cast<mlir::RankedTensorType>(op.getType());
    if (t.getRank() == 3 && t.getDimSize(1) == kCondTokens)
      zero = op;
  });
  ASSERT_TRUE(zero);
  mlir::Type negType = zero.getType();
  mlir::BlockArgument neg = slat.getBody().addArgument(negType, zero.getLoc());
  zero.getResult().replaceAllUsesWith(neg);
  zero.erase();
  llvm::SmallVector<mlir::Type> inputs(slat.getArgumentTypes());
  inputs.push_back(negType);
  slat.setFunctionType(mlir::FunctionType::get(
      &context_, inputs, slat.getFunctionType().getResults()));
  mlir::PassManager pm(&context_);
  specialize(pm);
  pm.addPass(mlir::trellis::createTrellisFoldZeroConditioning());
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  EXPECT_EQ(count(slat, "trellis.sparse.cross_attention"), 4);
  EXPECT_EQ(count(slat, "trellis.broadcast_rows"), 0);
}

TEST_F(FusionNumeric, FuseNormModulate) {
  mlir::OwningOpRef<mlir::ModuleOp> after;
  double err = compare(
      [](mlir::OpPassManager &pm) {
        pm.addPass(mlir::trellis::createTrellisFuseNormModulate());
      },
      &after);
  EXPECT_GT(count(after->getOperation(), "trellis.layer_norm_modulate"), 0);
  EXPECT_LT(err, 1e-3);
}

TEST_F(FusionNumeric, FuseLinearActivationIsExact) {
  mlir::OwningOpRef<mlir::ModuleOp> after;
  EXPECT_EQ(compare(
                [](mlir::OpPassManager &pm) {
                  pm.addPass(
                      mlir::trellis::createTrellisFuseLinearActivation());
                },
                &after),
            0.0);
  EXPECT_EQ(count(after->getOperation(), "trellis.gelu"), 0);
}

TEST_F(FusionNumeric, FuseLinearResidualIsExact) {
  mlir::OwningOpRef<mlir::ModuleOp> before = graphModule(1), after;
  // The CPU reference rounds the product before adding the residual, as
  // the unfused pair: bit for bit.
  EXPECT_EQ(compare(
                [](mlir::OpPassManager &pm) {
                  pm.addPass(mlir::trellis::createTrellisFuseLinearResidual());
                },
                &after),
            0.0);
  // One per block: the residual after the cross-attention.
  int64_t adds = count(before->getOperation(), "trellis.add");
  int64_t fused = 0;
  after->walk([&](mlir::trellis::LinearOp op) { fused += !!op.getResidual(); });
  EXPECT_GT(fused, 0);
  EXPECT_EQ(count(after->getOperation(), "trellis.add"), adds - fused);
}

// Each gated residual (plus the folded unconditional cross-attention row)
// with the LayerNorm that reads it next, against the program with the
// norm-modulate fusion and the zero-conditioning fold only: bit for bit,
// dense and sparse.
TEST_F(FusionNumeric, FuseResidualNormIsExact) {
  mlir::OwningOpRef<mlir::ModuleOp> module = graphModule(1);
  mlir::PassManager pm(&context_);
  specialize(pm);
  pm.addPass(mlir::trellis::createTrellisFoldZeroConditioning());
  pm.addPass(mlir::trellis::createTrellisFuseNormModulate());
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  HostTensor ssBefore = runSsStage(*module, 1);
  HostTensor slatBefore = runSlatStage(*module, 1);
  mlir::PassManager fuse(&context_);
  fuse.addPass(mlir::trellis::createTrellisFuseResidualNorm());
  fuse.addPass(mlir::trellis::createTrellisVerifyLocations());
  ASSERT_TRUE(mlir::succeeded(fuse.run(*module)));
  // Per stage, two sampler regions of 2 blocks, 4 gated residuals each. In
  // the SS flow all fuse, the last block's MLP residual with the f32 output
  // layer's cast and LayerNorm (f32_result); in the SLat flow that residual
  // feeds the output blocks (convs) and stays.
  for (auto [stage, fused, wide] :
       {std::tuple("ss_stage", 8, 2), std::tuple("slat_stage", 6, 0)}) {
    mlir::Operation *fn = module->lookupSymbol(stage);
    EXPECT_EQ(count(fn, "trellis.gated_residual_norm"), fused) << stage;
    EXPECT_EQ(count(fn, "trellis.gated_residual"), 8 - fused) << stage;
    int f32Results = 0;
    fn->walk([&](mlir::Operation *op) {
      f32Results +=
          op->getName().getStringRef() == "trellis.gated_residual_norm" &&
          op->hasAttr("f32_result");
    });
    EXPECT_EQ(f32Results, wide) << stage;
  }
  HostTensor ssAfter = runSsStage(*module, 1);
  HostTensor slatAfter = runSlatStage(*module, 1);
  ASSERT_GT(ssBefore.numel(), 0);
  ASSERT_GT(slatBefore.numel(), 0);
  EXPECT_EQ(relativeL2(ssAfter, ssBefore), 0.0);
  EXPECT_EQ(relativeL2(slatAfter, slatBefore), 0.0);
}

// The GEMM before each residual-stream norm into the norm's op, against the
// program with the fusions before it in the pipeline (the norm-modulate,
// linear-residual and residual-norm fusions): bit for bit, dense and sparse
// (the CPU reference runs the unfused ops in turn).
TEST_F(FusionNumeric, FuseLinearNormIsExact) {
  mlir::OwningOpRef<mlir::ModuleOp> module = graphModule(1);
  mlir::PassManager pm(&context_);
  specialize(pm);
  pm.addPass(mlir::trellis::createTrellisFoldZeroConditioning());
  pm.addPass(mlir::trellis::createTrellisFuseNormModulate());
  pm.addPass(mlir::trellis::createTrellisFuseLinearResidual());
  pm.addPass(mlir::trellis::createTrellisFuseResidualNorm());
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  HostTensor ssBefore = runSsStage(*module, 1);
  HostTensor slatBefore = runSlatStage(*module, 1);
  mlir::PassManager fuse(&context_);
  fuse.addPass(mlir::trellis::createTrellisFuseLinearNorm());
  fuse.addPass(mlir::trellis::createTrellisVerifyLocations());
  ASSERT_TRUE(mlir::succeeded(fuse.run(*module)));
  // Per stage, two sampler regions of 2 blocks. Every gated_residual_norm
  // (its h is the output projection or fc2, a linear of its own) takes its
  // linear in, except the SS flow's 2 f32_result ones (the f32 output
  // layer): SS 8 - 2 = 6, SLat 6 (FuseResidualNormIsExact's counts).
  // `linear … residual` + norm: the conditional region's cross-attention
  // projection and its LayerNorm-modulate, once per block (the
  // unconditional region's is the folded row, a `plus`): 2 per stage; in
  // the SLat flow also each region's output block (skip linear + the conv's
  // residual, then the output LayerNorm): 2 more. SS 6 + 2 = 8, SLat
  // 6 + 2 + 2 = 10; no gated_residual_norm but the f32_result ones is left.
  for (auto [stage, fused, ungated, left] :
       {std::tuple("ss_stage", 8, 2, 2), std::tuple("slat_stage", 10, 4, 0)}) {
    mlir::Operation *fn = module->lookupSymbol(stage);
    EXPECT_EQ(count(fn, "trellis.linear_residual_norm"), fused) << stage;
    EXPECT_EQ(count(fn, "trellis.gated_residual_norm"), left) << stage;
    int64_t noGate = 0;
    fn->walk([&](mlir::trellis::LinearResidualNormOp op) {
      noGate += !op.getGate();
    });
    EXPECT_EQ(noGate, ungated) << stage;
  }
  HostTensor ssAfter = runSsStage(*module, 1);
  HostTensor slatAfter = runSlatStage(*module, 1);
  ASSERT_GT(ssBefore.numel(), 0);
  ASSERT_GT(slatBefore.numel(), 0);
  EXPECT_EQ(relativeL2(ssAfter, ssBefore), 0.0);
  EXPECT_EQ(relativeL2(slatAfter, slatBefore), 0.0);
}

TEST_F(FusionNumeric, FormAttentionIsExact) {
  mlir::OwningOpRef<mlir::ModuleOp> after;
  EXPECT_EQ(compare(
                [](mlir::OpPassManager &pm) {
                  pm.addPass(mlir::trellis::createTrellisFormAttention());
                },
                &after),
            0.0);
  // The dense flow model's norms all fold (the SLat model's feed
  // trellis.sparse.attention, which has no gains).
  EXPECT_EQ(count(after->lookupSymbol("sparse_structure_flow_model"),
                  "trellis.head_rms_norm"),
            0);
}

TEST_F(FusionNumeric, ChunkMlpIsExact) {
  mlir::OwningOpRef<mlir::ModuleOp> after;
  // 512 tokens in chunks of 100: 5 full chunks and one of 12.
  EXPECT_EQ(compare(
                [](mlir::OpPassManager &pm) {
                  pm.addPass(mlir::trellis::createTrellisChunkMlp(
                      mlir::trellis::TrellisChunkMlpOptions{100, 0}));
                },
                &after),
            0.0);
  EXPECT_EQ(count(after->lookupSymbol("sparse_structure_flow_model"),
                  "trellis.concat"),
            2);
}

TEST_F(FusionNumeric, FusionPipeline) {
  double err = compare(
      [](mlir::OpPassManager &pm) { mlir::trellis::buildFusionPipeline(pm); });
  EXPECT_LT(err, 2e-3);
}

// The branches' common prefix computed once per step: bit for bit the
// same latents as without it, for both samplers; the shared region holds
// the first block's self-attention (and, in the SLat flow, the input blocks'
// convs), the unconditional region no longer does.
TEST_F(FusionNumeric, ShareGuidancePrefixIsExact) {
  for (bool slat : {false, true}) {
    mlir::OwningOpRef<mlir::ModuleOp> without = graphModule(1);
    mlir::OwningOpRef<mlir::ModuleOp> with = graphModule(1);
    mlir::PassManager pmWithout(&context_), pmWith(&context_);
    mlir::trellis::buildFusionPipeline(pmWithout, /*sharePrefix=*/false);
    mlir::trellis::buildFusionPipeline(pmWith);
    ASSERT_TRUE(mlir::succeeded(pmWithout.run(*without)));
    ASSERT_TRUE(mlir::succeeded(pmWith.run(*with)));
    HostTensor a = slat ? runSlatStage(*without, 1) : runSsStage(*without, 1);
    HostTensor b = slat ? runSlatStage(*with, 1) : runSsStage(*with, 1);
    ASSERT_GT(a.numel(), 0);
    ASSERT_EQ(a.numel(), b.numel());
    EXPECT_EQ(relativeL2(b, a), 0.0) << (slat ? "slat_stage" : "ss_stage");
    mlir::Operation *stage =
        with->lookupSymbol(slat ? "slat_stage" : "ss_stage");
    int64_t samplers = 0;
    stage->walk([&](mlir::trellis::FlowSampleOp op) {
      ++samplers;
      ASSERT_TRUE(op.hasSharedPrefix());
      // Self-attentions (the dense ones with q/k gains; cross-attention has
      // none).
      auto selfAttention = [&](mlir::Operation *inner) -> bool {
        if (slat)
          return mlir::isa<mlir::trellis::SparseAttentionOp>(inner);
        auto a = mlir::dyn_cast<mlir::trellis::AttentionOp>(inner);
        return a && a.getKGamma();
      };
      int64_t shared = 0, cond = 0, uncond = 0;
      for (auto [region, n] : {std::pair{&op.getSharedBody(), &shared},
                               std::pair{&op.getBody(), &cond},
                               std::pair{&op.getUncondBody(), &uncond}})
        region->walk(
            [&, n = n](mlir::Operation *inner) { *n += selfAttention(inner); });
      EXPECT_EQ(shared, 1); // block 0's
      EXPECT_EQ(cond, uncond);
      EXPECT_GE(cond, 1); // the other blocks' (tiny: 2 blocks)
      if (slat) {
        int64_t convs = 0;
        op.getSharedBody().walk(
            [&](mlir::trellis::SparseConv3dOp) { ++convs; });
        EXPECT_EQ(convs, 4); // input_blocks.0 and .1, two convs each
      }
    });
    EXPECT_EQ(samplers, 1);
  }
}

TEST_F(FusionNumeric, FusionAndTilingLowMemory) {
  // The tiling phase after fusion, MLPs in chunks: chunking is exact and the
  // attention tiles do not change the reference, so the fusion error.
  double err = compare([](mlir::OpPassManager &pm) {
    mlir::trellis::buildFusionPipeline(pm);
    mlir::trellis::buildTilingPipeline(
        pm, mlir::trellis::TilingOptions{/*mlpChunkTokens=*/128});
  });
  EXPECT_LT(err, 2e-3);
}

// trellis.broadcast_rows only survives the fold where repeated rows meet a
// full tensor; its kernel on its own: every [2, 3] row equals the row.
TEST(FusedOpKernels, BroadcastRows) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<mlir::trellis::TrellisDialect, mlir::func::FuncDialect>();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
    func.func @main(%r: tensor<1x2x3xf16>) -> tensor<2x4x2x3xf16> {
      %b = trellis.broadcast_rows %r : (tensor<1x2x3xf16>) -> tensor<2x4x2x3xf16>
      return %b : tensor<2x4x2x3xf16>
    })mlir",
                                                        &ctx);
  ASSERT_TRUE(module);
  auto serialized = serializeHostProgram(*module, {"main"});
  ASSERT_TRUE(mlir::succeeded(serialized));
  auto program =
      Program::parse(serialized->program, serialized->locations, "test");
  ASSERT_TRUE(program.isOk()) << program.message();
  CpuExecutor exec(*program, nullptr);
  HostTensor row(DType::F16, {1, 2, 3});
  for (int i = 0; i < 6; ++i)
    row.mutableData<uint16_t>()[i] = uint16_t(0x3c00 + i); // 1.0 + i ulp
  auto out = exec.run("main", {row});
  ASSERT_TRUE(out.isOk()) << out.message();
  const HostTensor &y = std::get<HostTensor>((*out)[0]);
  ASSERT_EQ(y.shape(), (Shape{2, 4, 2, 3}));
  for (int64_t i = 0; i < y.numel(); ++i)
    EXPECT_EQ(y.data<uint16_t>()[i], uint16_t(0x3c00 + i % 6)) << i;
}

// The dynamic form: the leading dimension from `like` at run time.
TEST(FusedOpKernels, BroadcastRowsLike) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<mlir::trellis::TrellisDialect, mlir::func::FuncDialect>();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
    func.func @main(%r: tensor<1x2x3xf16>, %q: tensor<?x2x5xf32, #trellis.bounds<[64]>>)
        -> tensor<?x2x3xf16, #trellis.bounds<[64]>> {
      %b = trellis.broadcast_rows %r, %q
             : (tensor<1x2x3xf16>, tensor<?x2x5xf32, #trellis.bounds<[64]>>)
             -> tensor<?x2x3xf16, #trellis.bounds<[64]>>
      return %b : tensor<?x2x3xf16, #trellis.bounds<[64]>>
    })mlir",
                                                        &ctx);
  ASSERT_TRUE(module);
  auto serialized = serializeHostProgram(*module, {"main"});
  ASSERT_TRUE(mlir::succeeded(serialized));
  auto program =
      Program::parse(serialized->program, serialized->locations, "test");
  ASSERT_TRUE(program.isOk()) << program.message();
  CpuExecutor exec(*program, nullptr);
  HostTensor row(DType::F16, {1, 2, 3});
  for (int i = 0; i < 6; ++i)
    row.mutableData<uint16_t>()[i] = uint16_t(0x3c00 + i);
  for (int64_t n : {1, 7}) {
    HostTensor q(DType::F32, {n, 2, 5});
    auto out = exec.run("main", {row, q});
    ASSERT_TRUE(out.isOk()) << out.message();
    const HostTensor &y = std::get<HostTensor>((*out)[0]);
    ASSERT_EQ(y.shape(), (Shape{n, 2, 3}));
    for (int64_t i = 0; i < y.numel(); ++i)
      EXPECT_EQ(y.data<uint16_t>()[i], uint16_t(0x3c00 + i % 6)) << i;
  }
}

/// trellis.linear_residual_norm on the CPU reference against the unfused ops
/// it stands for, in every form (gate or not, plus, modulate / affine /
/// plain LayerNorm), f16 and f32: both results bit for bit. (`E` is the
/// element type; a reshape to the same type stands for "no plus"; `plus` is
/// x-shaped: the reference's add broadcasts a [B, C] row only for B = 1.)
TEST(FusedOpKernels, LinearResidualNorm) {
  const std::string text = R"mlir(
!a = tensor<2x5x24xE>
!w = tensor<16x24xE>
!b = tensor<16xE>
!x = tensor<2x5x16xE>
!v = tensor<2x16xE>
!n = tensor<16xf32>
func.func @fused_gated_modulate(%a: !a, %w: !w, %b: !b, %x: !x, %g: !v, %p: !x,
    %s: !v, %c: !v, %nw: !n, %nb: !n) -> (!x, !x) {
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x gate %g modulate %s, %c
             {eps = 1.0e-05 : f64} : (!a, !w, !b, !x, !v, !v, !v) -> (!x, !x)
  return %r, %y : !x, !x
}
func.func @unfused_gated_modulate(%a: !a, %w: !w, %b: !b, %x: !x, %g: !v, %p: !x,
    %s: !v, %c: !v, %nw: !n, %nb: !n) -> (!x, !x) {
  %h = trellis.linear %a, %w, %b : (!a, !w, !b) -> !x
  %r0 = trellis.gated_residual %x, %h, %g : (!x, !x, !v) -> !x
  %r = trellis.reshape %r0 : (!x) -> !x
  %y = trellis.layer_norm_modulate %r, %s, %c {eps = 1.0e-05 : f64} : (!x, !v, !v) -> !x
  return %r, %y : !x, !x
}
func.func @fused_gated_affine(%a: !a, %w: !w, %b: !b, %x: !x, %g: !v, %p: !x,
    %s: !v, %c: !v, %nw: !n, %nb: !n) -> (!x, !x) {
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x gate %g affine %nw, %nb
             {eps = 1.0e-05 : f64} : (!a, !w, !b, !x, !v, !n, !n) -> (!x, !x)
  return %r, %y : !x, !x
}
func.func @unfused_gated_affine(%a: !a, %w: !w, %b: !b, %x: !x, %g: !v, %p: !x,
    %s: !v, %c: !v, %nw: !n, %nb: !n) -> (!x, !x) {
  %h = trellis.linear %a, %w, %b : (!a, !w, !b) -> !x
  %r0 = trellis.gated_residual %x, %h, %g : (!x, !x, !v) -> !x
  %r = trellis.reshape %r0 : (!x) -> !x
  %y = trellis.layer_norm %r, %nw, %nb {eps = 1.0e-05 : f64} : (!x, !n, !n) -> !x
  return %r, %y : !x, !x
}
func.func @fused_plus_modulate(%a: !a, %w: !w, %b: !b, %x: !x, %g: !v, %p: !x,
    %s: !v, %c: !v, %nw: !n, %nb: !n) -> (!x, !x) {
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x gate %g plus %p modulate %s, %c
             {eps = 1.0e-05 : f64} : (!a, !w, !b, !x, !v, !x, !v, !v) -> (!x, !x)
  return %r, %y : !x, !x
}
func.func @unfused_plus_modulate(%a: !a, %w: !w, %b: !b, %x: !x, %g: !v, %p: !x,
    %s: !v, %c: !v, %nw: !n, %nb: !n) -> (!x, !x) {
  %h = trellis.linear %a, %w, %b : (!a, !w, !b) -> !x
  %r0 = trellis.gated_residual %x, %h, %g : (!x, !x, !v) -> !x
  %r = trellis.add %r0, %p : (!x, !x) -> !x
  %y = trellis.layer_norm_modulate %r, %s, %c {eps = 1.0e-05 : f64} : (!x, !v, !v) -> !x
  return %r, %y : !x, !x
}
func.func @fused_plus_plain(%a: !a, %w: !w, %b: !b, %x: !x, %g: !v, %p: !x,
    %s: !v, %c: !v, %nw: !n, %nb: !n) -> (!x, !x) {
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x gate %g plus %p
             {eps = 1.0e-05 : f64} : (!a, !w, !b, !x, !v, !x) -> (!x, !x)
  return %r, %y : !x, !x
}
func.func @unfused_plus_plain(%a: !a, %w: !w, %b: !b, %x: !x, %g: !v, %p: !x,
    %s: !v, %c: !v, %nw: !n, %nb: !n) -> (!x, !x) {
  %h = trellis.linear %a, %w, %b : (!a, !w, !b) -> !x
  %r0 = trellis.gated_residual %x, %h, %g : (!x, !x, !v) -> !x
  %r = trellis.add %r0, %p : (!x, !x) -> !x
  %y = trellis.layer_norm %r {eps = 1.0e-05 : f64} : (!x) -> !x
  return %r, %y : !x, !x
}
func.func @fused_add_modulate(%a: !a, %w: !w, %b: !b, %x: !x, %g: !v, %p: !x,
    %s: !v, %c: !v, %nw: !n, %nb: !n) -> (!x, !x) {
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x modulate %s, %c
             {eps = 1.0e-05 : f64} : (!a, !w, !b, !x, !v, !v) -> (!x, !x)
  return %r, %y : !x, !x
}
func.func @unfused_add_modulate(%a: !a, %w: !w, %b: !b, %x: !x, %g: !v, %p: !x,
    %s: !v, %c: !v, %nw: !n, %nb: !n) -> (!x, !x) {
  %h = trellis.linear %a, %w, %b : (!a, !w, !b) -> !x
  %r0 = trellis.add %x, %h : (!x, !x) -> !x
  %r = trellis.reshape %r0 : (!x) -> !x
  %y = trellis.layer_norm_modulate %r, %s, %c {eps = 1.0e-05 : f64} : (!x, !v, !v) -> !x
  return %r, %y : !x, !x
}
func.func @fused_add_affine(%a: !a, %w: !w, %b: !b, %x: !x, %g: !v, %p: !x,
    %s: !v, %c: !v, %nw: !n, %nb: !n) -> (!x, !x) {
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x affine %nw, %nb
             {eps = 1.0e-05 : f64} : (!a, !w, !b, !x, !n, !n) -> (!x, !x)
  return %r, %y : !x, !x
}
func.func @unfused_add_affine(%a: !a, %w: !w, %b: !b, %x: !x, %g: !v, %p: !x,
    %s: !v, %c: !v, %nw: !n, %nb: !n) -> (!x, !x) {
  %h = trellis.linear %a, %w, %b : (!a, !w, !b) -> !x
  %r0 = trellis.add %x, %h : (!x, !x) -> !x
  %r = trellis.reshape %r0 : (!x) -> !x
  %y = trellis.layer_norm %r, %nw, %nb {eps = 1.0e-05 : f64} : (!x, !n, !n) -> !x
  return %r, %y : !x, !x
}
func.func @fused_add_plain(%a: !a, %w: !w, %b: !b, %x: !x, %g: !v, %p: !x,
    %s: !v, %c: !v, %nw: !n, %nb: !n) -> (!x, !x) {
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x
             {eps = 1.0e-05 : f64} : (!a, !w, !b, !x) -> (!x, !x)
  return %r, %y : !x, !x
}
func.func @unfused_add_plain(%a: !a, %w: !w, %b: !b, %x: !x, %g: !v, %p: !x,
    %s: !v, %c: !v, %nw: !n, %nb: !n) -> (!x, !x) {
  %h = trellis.linear %a, %w, %b : (!a, !w, !b) -> !x
  %r0 = trellis.add %x, %h : (!x, !x) -> !x
  %r = trellis.reshape %r0 : (!x) -> !x
  %y = trellis.layer_norm %r {eps = 1.0e-05 : f64} : (!x) -> !x
  return %r, %y : !x, !x
}
)mlir";
  const char *forms[] = {"gated_modulate", "gated_affine", "plus_modulate",
                         "plus_plain",     "add_modulate", "add_affine",
                         "add_plain"};
  for (DType dtype : {DType::F16, DType::F32}) {
    std::string source = text;
    for (size_t at = source.find("xE>"); at != std::string::npos;
         at = source.find("xE>", at + 1))
      source.replace(at + 1, 1, dtype == DType::F16 ? "f16" : "f32");
    mlir::MLIRContext ctx;
    ctx.loadDialect<mlir::trellis::TrellisDialect, mlir::func::FuncDialect>();
    auto module = mlir::parseSourceString<mlir::ModuleOp>(source, &ctx);
    ASSERT_TRUE(module);
    std::vector<std::string> entries;
    for (const char *form : forms)
      for (const char *prefix : {"fused_", "unfused_"})
        entries.push_back(prefix + std::string(form));
    auto serialized = serializeHostProgram(*module, entries);
    ASSERT_TRUE(mlir::succeeded(serialized));
    auto program =
        Program::parse(serialized->program, serialized->locations, "test");
    ASSERT_TRUE(program.isOk()) << program.message();
    CpuExecutor exec(*program, nullptr);
    // Inputs of a few units (the gates and scales smaller), seeded.
    std::vector<RtValue> inputs;
    const std::pair<Shape, double> specs[] = {
        {{2, 5, 24}, 1.0}, {{16, 24}, 0.3},   {{16}, 0.5},    {{2, 5, 16}, 2.0},
        {{2, 16}, 0.5},    {{2, 5, 16}, 1.0}, {{2, 16}, 0.5}, {{2, 16}, 0.3},
        {{16}, 1.0},       {{16}, 0.5}};
    uint64_t seed = 11;
    for (auto [shape, scale] : specs) {
      HostTensor v(DType::F32, shape);
      for (int64_t i = 0; i < v.numel(); ++i)
        v.mutableData<float>()[i] =
            float(scale * mkmodel::syntheticNormal(seed, uint64_t(i)));
      ++seed;
      bool normAffine = shape.size() == 1 && inputs.size() >= 8;
      auto cast = ref::cast(v, normAffine ? DType::F32 : dtype);
      ASSERT_TRUE(cast.isOk());
      inputs.push_back(*cast);
    }
    for (const char *form : forms) {
      auto fused = exec.run("fused_" + std::string(form), inputs);
      auto unfused = exec.run("unfused_" + std::string(form), inputs);
      ASSERT_TRUE(fused.isOk()) << form << ": " << fused.message();
      ASSERT_TRUE(unfused.isOk()) << form << ": " << unfused.message();
      for (int i = 0; i < 2; ++i) {
        const HostTensor &u = std::get<HostTensor>((*fused)[i]);
        const HostTensor &v = std::get<HostTensor>((*unfused)[i]);
        ASSERT_EQ(u.dtype(), dtype) << form;
        ASSERT_EQ(u.shape(), v.shape()) << form;
        EXPECT_EQ(std::memcmp(u.raw(), v.raw(), u.nbytes()), 0)
            << form << " result " << i << " (" << dtypeName(dtype) << ")";
      }
    }
  }
}

/// The fused LayerNorm + modulate against the unfused pair: identical in f32
/// (the pair's intermediate rounding to f32 is the identity); in f16 within
/// what the pair's extra rounding of the normalized value n allows: half an
/// ulp of n times |1 + scale|, plus the result's own rounding (one ulp).
TEST(FusedOpKernels, LayerNormModulate) {
  for (DType dtype : {DType::F32, DType::F16}) {
    HostTensor x(DType::F32, {2, 5, 64}), shift(DType::F32, {2, 64}),
        scale(DType::F32, {2, 64});
    for (int64_t i = 0; i < x.numel(); ++i)
      x.mutableData<float>()[i] =
          float(3.0 * mkmodel::syntheticNormal(1, i) + 0.5);
    for (int64_t i = 0; i < shift.numel(); ++i) {
      shift.mutableData<float>()[i] = float(mkmodel::syntheticNormal(2, i));
      scale.mutableData<float>()[i] = float(mkmodel::syntheticNormal(3, i));
    }
    auto xs = ref::cast(x, dtype), ss = ref::cast(shift, dtype),
         cs = ref::cast(scale, dtype);
    ASSERT_TRUE(xs.isOk() && ss.isOk() && cs.isOk());
    auto norm = ref::layerNorm(*xs, -1, 1e-6f);
    ASSERT_TRUE(norm.isOk());
    auto unfused = ref::modulate(*norm, *ss, *cs);
    auto fused = ref::layerNormModulate(*xs, *ss, *cs, 1e-6f);
    ASSERT_TRUE(unfused.isOk() && fused.isOk()) << fused.message();
    ASSERT_EQ(fused->dtype(), dtype);
    HostTensor a = fused->toFloat32(), b = unfused->toFloat32(),
               n = norm->toFloat32(), c = cs->toFloat32();
    auto ulp = [](float y) {
      return std::ldexp(1.0f, std::ilogb(std::max(std::abs(y), 0x1p-14f)) - 10);
    };
    for (int64_t i = 0; i < a.numel(); ++i) {
      float u = a.data<float>()[i], v = b.data<float>()[i];
      if (dtype == DType::F32) {
        ASSERT_EQ(u, v) << i;
        continue;
      }
      float s = c.data<float>()[(i / (5 * 64)) * 64 + i % 64];
      ASSERT_LE(std::abs(u - v),
                ulp(v) + 0.5f * ulp(n.data<float>()[i]) * std::abs(1 + s))
          << i;
    }
  }
}

} // namespace

// trellis-chunk-mlp on the fused form with a residual (the decoders' ungated
// `x + mlp(norm(x))` after trellis-fuse-linear-residual): the CPU reference
// gives the same bits before and after, 300 tokens in chunks of 64.
TEST(TilingNumeric, ChunkMlpWithResidualIsExact) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<mlir::trellis::TrellisDialect, mlir::func::FuncDialect>();
  const char *source = R"mlir(
    func.func @main(%x: tensor<1x300x16xf16>, %r: tensor<1x300x16xf16>,
                    %w1: tensor<64x16xf16>, %b1: tensor<64xf16>,
                    %w2: tensor<16x64xf16>, %b2: tensor<16xf16>)
        -> tensor<1x300x16xf16> {
      %h = trellis.linear %x, %w1, %b1 {activation = "gelu_tanh"}
             : (tensor<1x300x16xf16>, tensor<64x16xf16>, tensor<64xf16>) -> tensor<1x300x64xf16>
      %y = trellis.linear %h, %w2, %b2 residual %r
             : (tensor<1x300x64xf16>, tensor<16x64xf16>, tensor<16xf16>, tensor<1x300x16xf16>)
             -> tensor<1x300x16xf16>
      return %y : tensor<1x300x16xf16>
    })mlir";
  std::vector<HostTensor> inputs;
  uint32_t state = 12345;
  for (Shape shape : {Shape{1, 300, 16}, Shape{1, 300, 16}, Shape{64, 16},
                      Shape{64}, Shape{16, 64}, Shape{16}}) {
    HostTensor t(DType::F16, shape);
    for (int64_t i = 0; i < t.numel(); ++i) {
      state = state * 1664525u + 1013904223u;
      // Halves in [-1, 1): sign, exponent 0x38..0x3b, random mantissa.
      t.mutableData<uint16_t>()[i] =
          uint16_t(((state >> 16) & 0x8000) | 0x3800 | ((state >> 8) & 0x3ff));
    }
    inputs.push_back(std::move(t));
  }
  auto run = [&](bool chunked) -> std::vector<uint16_t> {
    auto module = mlir::parseSourceString<mlir::ModuleOp>(source, &ctx);
    EXPECT_TRUE(module);
    if (!module)
      return {};
    if (chunked) {
      mlir::PassManager pm(&ctx);
      mlir::trellis::buildTilingPipeline(
          pm, mlir::trellis::TilingOptions{/*mlpChunkTokens=*/64});
      EXPECT_TRUE(mlir::succeeded(pm.run(*module)));
      int64_t splits = 0;
      module->walk([&](mlir::trellis::SplitOp) { ++splits; });
      EXPECT_EQ(splits, 2); // the input and the residual
    }
    auto serialized = serializeHostProgram(*module, {"main"});
    EXPECT_TRUE(mlir::succeeded(serialized));
    auto program =
        Program::parse(serialized->program, serialized->locations, "test");
    EXPECT_TRUE(program.isOk()) << program.message();
    CpuExecutor exec(*program, nullptr);
    std::vector<RtValue> args(inputs.begin(), inputs.end());
    auto out = exec.run("main", std::move(args));
    EXPECT_TRUE(out.isOk()) << out.message();
    const HostTensor &y = std::get<HostTensor>((*out)[0]);
    return {y.data<uint16_t>(), y.data<uint16_t>() + y.numel()};
  };
  std::vector<uint16_t> whole = run(false), chunked = run(true);
  ASSERT_EQ(whole.size(), size_t(300 * 16));
  EXPECT_EQ(chunked, whole);
}
