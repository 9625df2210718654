//===- BatchOutput.cpp - A manifest's jobs as resumable folders -----------===//
#include "runtime/app/BatchOutput.h"

#include "trellis/Support/AtomicFile.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <regex>
#include <sstream>
#include <unistd.h>
#include <vector>

namespace trellis {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

/// "I/N" or an environment variable's value as an integer; nullopt if not.
std::optional<int64_t> wholeNumber(const std::string &s) {
  int64_t n = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size())
    return std::nullopt;
  return n;
}

const std::regex &temporaryName() {
  static const std::regex re("\\.(.+)\\.tmp-(.+)-([0-9]+)");
  return re;
}

/// This machine's name, as temporary folder names carry it.
std::string hostName() {
  char host[256] = "";
  ::gethostname(host, sizeof host - 1);
  std::string h = host;
  for (char &c : h)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_')
      c = '_';
  return h.empty() ? "host" : h;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  size_t i = size_t(std::ceil(p / 100.0 * double(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

} // namespace

Result<Shard> shardOf(const std::string &option) {
  Shard s;
  if (!option.empty()) {
    size_t slash = option.find('/');
    auto i = wholeNumber(option.substr(0, slash));
    auto n = slash == std::string::npos ? std::nullopt
                                        : wholeNumber(option.substr(slash + 1));
    if (!i || !n || *n < 1 || *i < 0 || *i >= *n)
      return Error{"--shard must be I/N with 0 <= I < N, found '" + option +
                   "'"};
    s.index = *i;
    s.count = *n;
    return s;
  }
  const char *id = std::getenv("SLURM_ARRAY_TASK_ID");
  const char *count = std::getenv("SLURM_ARRAY_TASK_COUNT");
  if (!id || !count)
    return s;
  const char *min = std::getenv("SLURM_ARRAY_TASK_MIN");
  auto i = wholeNumber(id), n = wholeNumber(count);
  auto m = min ? wholeNumber(min) : std::optional<int64_t>(0);
  if (!i || !n || !m || *n < 1 || *i - *m < 0 || *i - *m >= *n)
    return Error{std::string("Slurm's array variables make no shard: "
                             "SLURM_ARRAY_TASK_ID=") +
                 id + ", SLURM_ARRAY_TASK_MIN=" + (min ? min : "(unset)") +
                 ", SLURM_ARRAY_TASK_COUNT=" + count +
                 " (an array with a step, --array=0-9:2, is not supported: "
                 "give --shard I/N)"};
  s.index = *i - *m;
  s.count = *n;
  return s;
}

JobRecord recordOf(const std::string &jobDir) {
  std::error_code ec;
  if (fs::is_regular_file(fs::path(jobDir) / "done.json", ec))
    return JobRecord::Done;
  if (fs::is_regular_file(fs::path(jobDir) / "failed.json", ec))
    return JobRecord::Failed;
  return JobRecord::None;
}

Status removeStaleTemporaries(const std::string &out) {
  std::error_code ec;
  if (!fs::is_directory(out, ec))
    return Status::ok();
  for (const fs::directory_entry &e : fs::directory_iterator(out, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || !std::regex_match(name, m, temporaryName()))
      continue;
    // Only this machine's: on a shared file system another node's task may
    // still be writing its folder.
    const std::string host = m[2].str(), pid = m[3].str();
    if (host != hostName() || pid == std::to_string(::getpid()) ||
        fs::exists("/proc/" + pid, ec))
      continue; // another node's, or its process still runs
    fs::remove_all(e.path(), ec);
    if (ec)
      return Error{"cannot remove the unfinished job folder '" +
                   e.path().string() + "': " + ec.message()};
  }
  return Status::ok();
}

Result<std::string> makeTemporary(const std::string &out,
                                  const std::string &id) {
  fs::path tmp = fs::path(out) / ("." + id + ".tmp-" + hostName() + "-" +
                                  std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec)
    return Error{"cannot create '" + tmp.string() + "': " + ec.message()};
  return tmp.string();
}

Status commitJob(const std::string &tmp, const std::string &jobDir,
                 const std::string &name, const json &record) {
  AtomicFile f((fs::path(tmp) / name).string());
  f.write(record.dump(2) + "\n");
  TRELLIS_RETURN_IF_ERROR(f.commit());
  std::error_code ec;
  fs::remove_all(jobDir, ec); // an earlier failed attempt (--retry-failed)
  fs::rename(tmp, jobDir, ec);
  if (ec)
    return Error{"cannot rename '" + tmp + "' to '" + jobDir +
                 "': " + ec.message()};
  return Status::ok();
}

std::string fileCrc32(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  uLong crc = crc32(0L, Z_NULL, 0);
  std::vector<char> buf(size_t(1) << 20);
  while (in) {
    in.read(buf.data(), std::streamsize(buf.size()));
    crc = crc32(crc, reinterpret_cast<const Bytef *>(buf.data()),
                uInt(in.gcount()));
  }
  std::ostringstream s;
  s << std::hex << std::setw(8) << std::setfill('0') << crc;
  return s.str();
}

std::string utcNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int summarizeBatch(const std::string &out, std::ostream &os) {
  std::error_code ec;
  if (!fs::is_directory(out, ec)) {
    os << "trellis.exe --summarize: '" << out << "' is not a directory\n";
    return 2;
  }
  std::vector<json> done, failed;
  std::vector<std::string> unreadable;
  for (const fs::directory_entry &e : fs::directory_iterator(out, ec)) {
    if (!e.is_directory() || e.path().filename().string().starts_with("."))
      continue;
    for (const char *name : {"done.json", "failed.json"}) {
      fs::path p = e.path() / name;
      if (!fs::is_regular_file(p, ec))
        continue;
      std::ifstream in(p);
      json j = json::parse(in, nullptr, false);
      if (j.is_discarded() || !j.is_object())
        unreadable.push_back(p.string());
      else
        (name[0] == 'd' ? done : failed).push_back(j);
    }
  }
  if (done.empty() && failed.empty() && unreadable.empty()) {
    os << "trellis.exe --summarize: no job record (done.json / failed.json) "
          "in '"
       << out << "'\n";
    return 2;
  }
  std::vector<double> walls;
  double wallSum = 0, gpuSum = 0;
  int64_t voxels = 0;
  std::map<std::string, int> shards, backends;
  for (const json &j : done) {
    double w = j.value("wall_seconds", 0.0);
    walls.push_back(w);
    wallSum += w;
    gpuSum += j.value("gpu_seconds", 0.0);
    voxels += j.value("voxels", int64_t(0));
    ++shards[j.value("shard", std::string("?"))];
    ++backends[j.value("backend", std::string("?"))];
  }
  auto fixed = [](double v, int d = 3) {
    std::ostringstream s;
    s << std::fixed << std::setprecision(d) << v;
    return s.str();
  };
  os << "| jobs done | failed | wall per generation p50 / p90 / p99 s | "
        "GPU-hours (the jobs' wall time) | GPU busy hours (events) | voxels "
        "per job (mean) |\n"
     << "|---|---|---|---|---|---|\n"
     << "| " << done.size() << " | " << failed.size() << " | "
     << fixed(percentile(walls, 50)) << " / " << fixed(percentile(walls, 90))
     << " / " << fixed(percentile(walls, 99)) << " | "
     << fixed(wallSum / 3600, 4) << " | " << fixed(gpuSum / 3600, 4) << " | "
     << (done.empty() ? 0 : voxels / int64_t(done.size())) << " |\n";
  os << "\nby shard:";
  for (const auto &[s, n] : shards)
    os << " " << s << " " << n;
  os << "; backend:";
  for (const auto &[b, n] : backends)
    os << " " << b << " " << n;
  os << "\n";
  std::sort(failed.begin(), failed.end(), [](const json &a, const json &b) {
    return a.value("id", "") < b.value("id", "");
  });
  for (const json &j : failed)
    os << "failed " << j.value("id", "?") << ": " << j.value("error", "?")
       << "\n";
  for (const std::string &p : unreadable)
    os << "unreadable record: " << p << "\n";
  return failed.empty() && unreadable.empty() ? 0 : 1;
}

} // namespace trellis
