//===- main.cpp - trellis-serve: generations over HTTP --------------------===//
//
// Loads one compiled program, keeps one engine per GPU and answers the API of
// docs/guide/serve.md until SIGTERM / SIGINT: then it refuses new
// generations (503), finishes the running ones, and exits 0.
//
//===----------------------------------------------------------------------===//
#include "tools/trellis-serve/HttpApi.h"

#include "trellis/Runtime/GpuExecutor.h"
#include "trellis/Runtime/MemoryBudget.h"

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <pthread.h>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace trellis;
using namespace trellis::serve;

namespace {

const char *kUsage =
    R"(usage: trellis-serve PROGRAM --model DIR [options]

Serves TRELLIS generations over HTTP (docs/guide/serve.md): POST /v1/infer,
GET /v1/jobs/{id}[/events|/files/NAME], DELETE /v1/jobs/{id}, /v1/health/*,
/metrics, and a web page at /.

  PROGRAM              a compiled pipeline: trellis.exe from trellisc (or a
                       .bundle written with --emit=bundle)
  --model DIR          the model directory (pipeline.json, ckpts/)
  --listen HOST:PORT   where to listen (default 127.0.0.1:8080; port 0: any
                       free port, printed at start)
  --devices LIST       GPU ordinals, one engine each ("0,1"), "all" (default:
                       every GPU; the CPU reference where there is none) or
                       "cpu"
  --queue N            jobs waiting at most (default 16); beyond: 429
  --deadline SECONDS   a job's limit from submission (default 600)
  --keep SECONDS       how long finished jobs and their files stay (default
                       3600)
  --work DIR           where job files go (default: a new directory under
                       $TMPDIR, removed at exit)
  --max-body BYTES     request body limit (default 67108864); beyond: 413
  --memory-budget SIZE the device memory each engine may allocate (6G,
                       4096M, ...; default: what its GPU has free); the
                       engine plans its stages against it at start and takes
                       the fastest memory form that fits, else the server
                       does not start (trellis.exe's option)
  --max-voxels N       the voxel count that plan assumes (default 32768)
  --token-file FILE    require "Authorization: Bearer <token>" (the file's
                       first line) on the API and /metrics
  --web-root DIR       the page's files (default: share/trellis-serve/web
                       beside this program's bin/)
  -h, --help           this text
)";

struct Options {
  std::string program, model, host = "127.0.0.1", devices = "all", work,
                              tokenFile, webRoot;
  int port = 8080;
  size_t queue = 16, maxBody = size_t(64) << 20, memoryBudget = 0;
  int64_t deadline = 600, keep = 3600, maxVoxels = 32768;
};

int usage(const std::string &message) {
  std::cerr << "trellis-serve: error: " << message << " (see --help)\n";
  return 2;
}

/// An integer option in [lo, hi]; the error names the option.
std::optional<int64_t> integer(const std::string &opt, const std::string &v,
                               int64_t lo, int64_t hi, std::string &error) {
  char *end = nullptr;
  errno = 0;
  long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || errno || n < lo || n > hi) {
    error = opt + " must be an integer in " + std::to_string(lo) + ".." +
            std::to_string(hi) + ", found '" + v + "'";
    return std::nullopt;
  }
  return n;
}

std::optional<Options> parse(int argc, char **argv, std::string &error) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc) {
        error = a + " needs a value";
        return std::nullopt;
      }
      return std::string(argv[++i]);
    };
    std::optional<std::string> v;
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      std::exit(0);
    } else if (a.rfind("--", 0) == 0 && a != "--") {
      if (!(v = value()))
        return std::nullopt;
      std::optional<int64_t> n;
      if (a == "--model") {
        o.model = *v;
      } else if (a == "--listen") {
        size_t colon = v->rfind(':');
        if (colon == std::string::npos || colon == 0) {
          error = "--listen must be HOST:PORT, found '" + *v + "'";
          return std::nullopt;
        }
        if (!(n = integer("--listen's port", v->substr(colon + 1), 0, 65535,
                          error)))
          return std::nullopt;
        o.host = v->substr(0, colon);
        o.port = int(*n);
      } else if (a == "--devices") {
        o.devices = *v;
      } else if (a == "--queue") {
        if (!(n = integer(a, *v, 1, 100000, error)))
          return std::nullopt;
        o.queue = size_t(*n);
      } else if (a == "--deadline") {
        if (!(n = integer(a, *v, 1, 7 * 86400, error)))
          return std::nullopt;
        o.deadline = *n;
      } else if (a == "--keep") {
        if (!(n = integer(a, *v, 0, 365 * 86400, error)))
          return std::nullopt;
        o.keep = *n;
      } else if (a == "--max-body") {
        if (!(n = integer(a, *v, 1024, int64_t(1) << 32, error)))
          return std::nullopt;
        o.maxBody = size_t(*n);
      } else if (a == "--memory-budget") {
        auto bytes = parseByteSize(*v);
        if (!bytes) {
          error = "--memory-budget: " + bytes.message();
          return std::nullopt;
        }
        o.memoryBudget = *bytes;
      } else if (a == "--max-voxels") {
        if (!(n = integer(a, *v, 1, int64_t(1) << 24, error)))
          return std::nullopt;
        o.maxVoxels = *n;
      } else if (a == "--work") {
        o.work = *v;
      } else if (a == "--token-file") {
        o.tokenFile = *v;
      } else if (a == "--web-root") {
        o.webRoot = *v;
      } else {
        error = "unknown option '" + a + "'";
        return std::nullopt;
      }
    } else if (o.program.empty()) {
      o.program = a;
    } else {
      error = "one PROGRAM only, found '" + o.program + "' and '" + a + "'";
      return std::nullopt;
    }
  }
  if (o.program.empty() || o.model.empty()) {
    error = "PROGRAM and --model DIR are required";
    return std::nullopt;
  }
  return o;
}

/// The GPU ordinals of --devices; empty: the CPU reference.
Result<std::vector<int>> devicesOf(const std::string &spec,
                                   const LoadedBundle &bundle) {
  if (spec == "cpu")
    return std::vector<int>{};
  const bool gpuCode = !BundleGpuCode::from(bundle).entries.empty();
  if (spec == "all") {
    if (!gpuCode) {
      std::cerr << "trellis-serve: the program is compiled for the CPU "
                   "reference: one CPU engine\n";
      return std::vector<int>{};
    }
    auto count = GpuExecutor::deviceCount();
    if (!count) {
      std::cerr << "trellis-serve: notice: no usable GPU (" << count.message()
                << "): one engine on the CPU reference\n";
      return std::vector<int>{};
    }
    std::vector<int> all;
    for (int d = 0; d < *count; ++d)
      all.push_back(d);
    return all;
  }
  if (!gpuCode)
    return Error{"--devices " + spec +
                 ": the program has no GPU code (compiled with "
                 "--target=cpu); use --devices cpu"};
  std::vector<int> out;
  std::stringstream s(spec);
  std::string item;
  while (std::getline(s, item, ',')) {
    std::string error;
    auto n = integer("--devices", item, 0, 1023, error);
    if (!n)
      return Error{error + " (expected \"all\", \"cpu\" or GPU ordinals "
                           "like 0,1)"};
    out.push_back(int(*n));
  }
  return out;
}

Result<std::string> readToken(const std::string &path) {
  std::ifstream in(path);
  std::string token;
  if (!in || !std::getline(in, token))
    return Error{"--token-file " + path + ": cannot read a line"};
  while (!token.empty() && (token.back() == '\r' || token.back() == ' '))
    token.pop_back();
  if (token.empty())
    return Error{"--token-file " + path + ": the first line is empty"};
  return token;
}

int serveMain(int argc, char **argv) {
  // SIGTERM / SIGINT go to one thread (sigwait below), not to a random one:
  // blocked before any thread exists (the CUDA driver starts its own at
  // cuInit), so that every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::string error;
  auto opts = parse(argc, argv, error);
  if (!opts)
    return usage(error);
  const auto fail = [](const std::string &m) {
    std::cerr << "trellis-serve: error: " << m << "\n";
    return 1;
  };
  if (!fs::is_directory(opts->model))
    return fail("--model " + opts->model + ": not a directory");
  // A trellis.exe carries its bundle at its end; else a bundle file.
  auto loaded = LoadedBundle::load(opts->program, /*embedded=*/true);
  if (!loaded) {
    auto plain = LoadedBundle::load(opts->program, /*embedded=*/false);
    if (!plain)
      return fail(opts->program + ": neither a compiled trellis.exe (" +
                  loaded.message() + ") nor a bundle (" + plain.message() +
                  ")");
    loaded = std::move(plain);
  }
  std::string token;
  if (!opts->tokenFile.empty()) {
    auto t = readToken(opts->tokenFile);
    if (!t)
      return fail(t.message());
    token = *t;
  }
  auto devices = devicesOf(opts->devices, *loaded);
  if (!devices)
    return fail(devices.message());

  bool ownWork = opts->work.empty();
  if (ownWork) {
    std::string tmpl = (fs::temp_directory_path() / "trellis-serve-XXXXXX");
    if (!::mkdtemp(tmpl.data()))
      return fail("cannot make a work directory under " +
                  fs::temp_directory_path().string());
    opts->work = tmpl;
  } else {
    std::error_code ec;
    fs::create_directories(opts->work, ec);
    if (ec)
      return fail("--work " + opts->work + ": " + ec.message());
  }
  if (opts->webRoot.empty())
    opts->webRoot =
        (fs::canonical("/proc/self/exe").parent_path().parent_path() /
         "share/trellis-serve/web")
            .string();

  Metrics metrics;
  SchedulerOptions so;
  so.modelDir = opts->model;
  so.workDir = opts->work;
  so.devices = *devices;
  so.queueLimit = opts->queue;
  so.keep = std::chrono::seconds(opts->keep);
  so.deadline = std::chrono::seconds(opts->deadline);
  so.memoryBudget = opts->memoryBudget;
  so.maxVoxels = opts->maxVoxels;
  Scheduler scheduler(*loaded, so, metrics);
  if (Status s = scheduler.start(); !s)
    return fail(s.message());

  HttpOptions ho;
  ho.token = token;
  ho.webRoot = opts->webRoot;
  ho.maxBody = opts->maxBody;
  HttpApi api(scheduler, metrics, loaded->program, ho);
  httplib::Server server;
  api.install(server);
  int port = opts->port;
  if (port == 0)
    port = server.bind_to_any_port(opts->host);
  else if (!server.bind_to_port(opts->host, port))
    port = -1;
  if (port < 0)
    return fail("cannot listen on " + opts->host + ":" +
                std::to_string(opts->port) +
                " (in use, or not an address "
                "of this machine)");
  std::cerr << "trellis-serve: listening on http://" << opts->host << ":"
            << port << "/ (work " << opts->work << ")" << std::endl;

  std::thread stopper([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    std::cerr << "trellis-serve: " << (sig == SIGTERM ? "SIGTERM" : "SIGINT")
              << ": finishing the running jobs" << std::endl;
    api.drain();
    scheduler.shutdown();
    server.stop();
  });
  server.listen_after_bind();
  // (listen_after_bind returns once stop() was called.)
  stopper.join();
  if (ownWork) {
    std::error_code ec;
    fs::remove_all(opts->work, ec);
  }
  std::cerr << "trellis-serve: stopped" << std::endl;
  return 0;
}

} // namespace

int main(int argc, char **argv) { return serveMain(argc, argv); }
