//===- HttpApi.h - trellis-serve's HTTP routes ------------------*- C++ -*-===//
//
// The routes of docs/guide/serve.md on a cpp-httplib server:
//   POST   /v1/infer                    queue a generation (?wait=1: the GLB)
//   GET    /v1/jobs/{id}                its state
//   GET    /v1/jobs/{id}/events         Server-Sent Events, from the start
//   GET    /v1/jobs/{id}/files/{name}   a file the job wrote
//   DELETE /v1/jobs/{id}                cancel
//   GET    /v1/health/live, /v1/health/ready, /metrics
//   GET    /, /web/...                  the web page
// Every error answer is JSON {"error": "...", "field"?: "..."}. With a token
// every route but the health checks and the page needs
// `Authorization: Bearer <token>` (or `?token=`, which EventSource and
// <model-viewer> can send), compared in constant time.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_TOOLS_SERVE_HTTPAPI_H
#define TRELLIS_TOOLS_SERVE_HTTPAPI_H

#include "tools/trellis-serve/Jobs.h"

#include <httplib.h>

#include <atomic>

namespace trellis::serve {

struct HttpOptions {
  std::string token;   ///< empty: no authentication
  std::string webRoot; ///< the page's files
  size_t maxBody = size_t(64) << 20;
};

class HttpApi {
public:
  HttpApi(Scheduler &scheduler, Metrics &metrics, const Program &program,
          HttpOptions options);
  /// Registers the routes and handlers on `server`.
  void install(httplib::Server &server);
  /// New generations get 503 from now on (SIGTERM).
  void drain() { draining_ = true; }

private:
  bool authorized(const httplib::Request &req) const;
  /// The 401 of a missing or wrong token (counted in the metrics).
  void refuse(httplib::Response &res);
  void infer(const httplib::Request &req, httplib::Response &res);
  void events(const std::shared_ptr<Job> &job, httplib::Response &res);
  void file(const Job &job, const std::string &name, httplib::Response &res);

  Scheduler &scheduler_;
  Metrics &metrics_;
  const Program &program_;
  HttpOptions options_;
  std::atomic<bool> draining_{false};
};

} // namespace trellis::serve

#endif // TRELLIS_TOOLS_SERVE_HTTPAPI_H
