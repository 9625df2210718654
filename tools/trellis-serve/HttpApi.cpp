//===- HttpApi.cpp - trellis-serve's HTTP routes --------------------------===//
#include "tools/trellis-serve/HttpApi.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace trellis::serve {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char *kJson = "application/json";

void sendJson(httplib::Response &res, int status, const json &body) {
  res.status = status;
  res.set_content(body.dump() + "\n", kJson);
}

void sendError(httplib::Response &res, int status, const std::string &message,
               const std::string &field = "") {
  json body = {{"error", message}};
  if (!field.empty())
    body["field"] = field;
  sendJson(res, status, body);
}

/// Compares without an early exit, so that the time does not tell how much
/// of a guessed token was right.
bool constantTimeEquals(const std::string &a, const std::string &b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

std::string contentType(const std::string &name) {
  auto ends = [&](const char *s) {
    std::string e = s;
    return name.size() >= e.size() &&
           name.compare(name.size() - e.size(), e.size(), e) == 0;
  };
  if (ends(".glb"))
    return "model/gltf-binary";
  if (ends(".json"))
    return kJson;
  return "application/octet-stream"; // .ply, .npz, .npy
}

std::optional<std::string> readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

} // namespace

HttpApi::HttpApi(Scheduler &scheduler, Metrics &metrics, const Program &program,
                 HttpOptions options)
    : scheduler_(scheduler), metrics_(metrics), program_(program),
      options_(std::move(options)) {}

bool HttpApi::authorized(const httplib::Request &req) const {
  std::string given;
  const std::string header = req.get_header_value("Authorization");
  if (header.rfind("Bearer ", 0) == 0)
    given = header.substr(7);
  else if (req.has_param("token"))
    given = req.get_param_value("token");
  return constantTimeEquals(given, options_.token);
}

void HttpApi::refuse(httplib::Response &res) {
  metrics_.rejected("unauthorized");
  res.set_header("WWW-Authenticate", "Bearer");
  sendError(res, 401,
            "this server needs a token: Authorization: Bearer <token>");
}

void HttpApi::install(httplib::Server &server) {
  server.set_payload_max_length(options_.maxBody);
  // An idle keep-alive connection holds SIGTERM's exit up to this long.
  server.set_keep_alive_timeout(2);
  // Event streams hold a thread each while their job runs.
  server.new_task_queue = [] { return new httplib::ThreadPool(64); };

  server.set_pre_routing_handler(
      [this](const httplib::Request &req, httplib::Response &res) {
        const std::string &p = req.path;
        bool guarded =
            (p.rfind("/v1/", 0) == 0 && p.rfind("/v1/health/", 0) != 0) ||
            p == "/metrics";
        // POST /v1/infer checks the token itself, after its body was read:
        // a refusal here would leave the body on a keep-alive connection.
        if (options_.token.empty() || !guarded || authorized(req) ||
            (req.method == "POST" && p == "/v1/infer"))
          return httplib::Server::HandlerResponse::Unhandled;
        refuse(res);
        return httplib::Server::HandlerResponse::Handled;
      });
  // The answers httplib makes itself (404 of an unknown route, 413 of a
  // body over --max-body, 400 of a malformed request) get a JSON body too.
  server.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request &req, httplib::Response &res) {
        if (!res.body.empty())
          return httplib::Server::HandlerResponse::Unhandled;
        std::string message = "HTTP " + std::to_string(res.status);
        if (res.status == 400)
          message = "malformed HTTP request";
        if (res.status == 404)
          message = "no route " + req.method + " " + req.path;
        if (res.status == 413) {
          // httplib limits a form-encoded body to 8 KiB, whatever --max-body
          // says.
          message = req.get_header_value("Content-Type") ==
                            "application/x-www-form-urlencoded"
                        ? "the body is form-encoded (curl -d without -H "
                          "'Content-Type: application/json'); send JSON"
                        : "the body is over the server's limit of " +
                              std::to_string(options_.maxBody) +
                              " bytes (--max-body)";
          metrics_.rejected("too_large");
        }
        sendError(res, res.status, message);
        return httplib::Server::HandlerResponse::Handled;
      }));

  server.Post("/v1/infer", [this](const httplib::Request &req,
                                  httplib::Response &res) { infer(req, res); });
  server.Get(R"(/v1/jobs/([0-9a-f]+))",
             [this](const httplib::Request &req, httplib::Response &res) {
               auto job = scheduler_.find(req.matches[1]);
               if (!job)
                 return sendError(res, 404, "no job " + req.matches[1].str());
               sendJson(res, 200, job->describe());
             });
  server.Delete(R"(/v1/jobs/([0-9a-f]+))", [this](const httplib::Request &req,
                                                  httplib::Response &res) {
    auto job = scheduler_.find(req.matches[1]);
    if (!job)
      return sendError(res, 404, "no job " + req.matches[1].str());
    if (job->finished())
      return sendError(res, 409,
                       std::string("the job has already ended (") +
                           stateName(job->state()) + ")");
    scheduler_.cancel(job->id);
    sendJson(res, 202, job->describe());
  });
  server.Get(R"(/v1/jobs/([0-9a-f]+)/events)",
             [this](const httplib::Request &req, httplib::Response &res) {
               auto job = scheduler_.find(req.matches[1]);
               if (!job)
                 return sendError(res, 404, "no job " + req.matches[1].str());
               events(job, res);
             });
  server.Get(R"(/v1/jobs/([0-9a-f]+)/files/([^/]+))",
             [this](const httplib::Request &req, httplib::Response &res) {
               auto job = scheduler_.find(req.matches[1]);
               if (!job)
                 return sendError(res, 404, "no job " + req.matches[1].str());
               file(*job, req.matches[2], res);
             });
  server.Get("/v1/health/live",
             [](const httplib::Request &, httplib::Response &res) {
               sendJson(res, 200, {{"status", "live"}});
             });
  server.Get("/v1/health/ready",
             [this](const httplib::Request &, httplib::Response &res) {
               bool ready = scheduler_.ready() && !draining_;
               sendJson(res, ready ? 200 : 503,
                        {{"status", ready ? "ready" : "not ready"}});
             });
  server.Get("/metrics",
             [this](const httplib::Request &, httplib::Response &res) {
               res.set_content(metrics_.render(scheduler_.queueDepth()),
                               "text/plain; version=0.0.4");
             });
  server.Get("/", [this](const httplib::Request &, httplib::Response &res) {
    auto page = readFile((fs::path(options_.webRoot) / "index.html").string());
    if (!page)
      return sendError(res, 404,
                       "the web page is not installed (no index.html in " +
                           options_.webRoot + "; --web-root)");
    res.set_content(*page, "text/html; charset=utf-8");
  });
  if (fs::is_directory(options_.webRoot))
    server.set_mount_point("/web", options_.webRoot);
}

void HttpApi::infer(const httplib::Request &req, httplib::Response &res) {
  if (!options_.token.empty() && !authorized(req))
    return refuse(res);
  if (draining_)
    return sendError(res, 503, "the server is shutting down");
  const std::string type = req.get_header_value("Content-Type");
  if (!type.empty() && type.rfind(kJson, 0) != 0) {
    metrics_.rejected("invalid");
    return sendError(res, 415,
                     "expected Content-Type application/json, found " + type);
  }
  auto parsed = parseJobRequest(req.body, program_);
  if (auto *e = std::get_if<RequestError>(&parsed)) {
    metrics_.rejected("invalid");
    return sendError(res, e->status, e->message, e->field);
  }
  auto job = scheduler_.submit(std::move(std::get<JobSpec>(parsed)));
  if (!job) {
    metrics_.rejected("queue_full");
    res.set_header("Retry-After", "5");
    return sendError(res, 429,
                     "the queue is full (--queue); retry in a few seconds");
  }
  if (req.get_param_value("wait") != "1") {
    res.set_header("Location", "/v1/jobs/" + job->id);
    return sendJson(res, 202, {{"id", job->id}});
  }
  // The synchronous form: the GLB when there is one, else the job.
  while (!job->waitFinished(std::chrono::seconds(1)))
    ;
  switch (job->state()) {
  case JobState::Done: {
    auto files = job->files();
    if (std::find(files.begin(), files.end(), "mesh.glb") != files.end())
      return file(*job, "mesh.glb", res);
    return sendJson(res, 200, job->describe());
  }
  case JobState::Cancelled:
    return sendJson(res, 409, job->describe());
  default:
    return sendJson(res, 500, job->describe());
  }
}

void HttpApi::events(const std::shared_ptr<Job> &job, httplib::Response &res) {
  auto next = std::make_shared<size_t>(0);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream", [job, next](size_t, httplib::DataSink &sink) {
        bool ended = false;
        auto events = job->eventsFrom(*next, std::chrono::seconds(15), ended);
        if (events.empty() &&
            !ended) { // a comment keeps proxies from timing out
          const std::string ping = ": keep-alive\n\n";
          return sink.write(ping.data(), ping.size());
        }
        for (const JobEvent &e : events) {
          std::string text =
              "event: " + e.type + "\ndata: " + e.data.dump() + "\n\n";
          if (!sink.write(text.data(), text.size()))
            return false;
          ++*next;
        }
        if (ended)
          sink.done();
        return true;
      });
}

void HttpApi::file(const Job &job, const std::string &name,
                   httplib::Response &res) {
  auto files = job.files();
  // Only names the job listed: no path from the request reaches the disk.
  if (std::find(files.begin(), files.end(), name) == files.end())
    return sendError(res, 404,
                     "job " + job.id + " has no file '" + name + "' (state " +
                         stateName(job.state()) + ")");
  auto bytes = readFile((fs::path(job.dir) / name).string());
  if (!bytes)
    return sendError(res, 410,
                     "the file '" + name + "' of job " + job.id +
                         " is gone (expired after --keep)");
  res.set_header("Content-Disposition",
                 "attachment; filename=\"" + name + "\"");
  res.set_content(*bytes, contentType(name));
}

} // namespace trellis::serve
