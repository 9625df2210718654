//===- JobRequest.h - A generation request from its JSON body ---*- C++ -*-===//
//
// POST /v1/infer's body, checked field by field before the job is queued:
//
//   {"cond": "<base64 of a .npy>", "seed": 1, "formats": ["gs", "rf", "mesh"],
//    "ss": {"steps": 25, "cfg": 5.0}, "slat": {"steps": 25, "cfg": 5.0}}
//
// Only "cond" is required. A refusal names the field, what was expected and
// what was found, with the HTTP status it deserves (400 malformed, 422 well
// formed but unusable). Unknown fields are refused too: a typo ("step")
// would otherwise be silently ignored.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_TOOLS_SERVE_JOBREQUEST_H
#define TRELLIS_TOOLS_SERVE_JOBREQUEST_H

#include "trellis/Runtime/Engine.h"

#include <string>
#include <string_view>
#include <variant>

namespace trellis::serve {

/// Why a request was refused.
struct RequestError {
  int status;        ///< 400 or 422
  std::string field; ///< "cond", "ss.steps", ... ("" for the whole body)
  std::string message;
};

/// What a job runs: the engine's request without its output directory.
struct JobSpec {
  GenerationRequest request;
  std::vector<std::string> formats; ///< as given, for the job's JSON
};

/// Parses and checks a request body against the program the server runs
/// (the conditioning's shape comes from its slat_stage).
std::variant<JobSpec, RequestError> parseJobRequest(std::string_view body,
                                                    const Program &program);

/// Strict base64 (RFC 4648, padding required, no whitespace); nullopt on
/// any other character or a bad length.
std::optional<std::string> decodeBase64(std::string_view text);

} // namespace trellis::serve

#endif // TRELLIS_TOOLS_SERVE_JOBREQUEST_H
