//===- TraceReplay.h - A JSON trace through the tracing API -----*- C++ -*-===//
//
// The Python package (python/trellisc) records a function as a JSON trace
// ("trellisc-trace" v1, docs/guide/python.md): inputs, parameters, ops with
// the user's file:line:col. Replaying it through trace::Tracer builds the
// same verified trellis ops the C++ model builders build; every op gets a
// "user" location and every broken rule a TraceError naming the user's line.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_LIB_CAPI_TRACEREPLAY_H
#define TRELLIS_LIB_CAPI_TRACEREPLAY_H

#include "trellis/Trace/Tracer.h"

#include <nlohmann/json.hpp>

#include <string>

namespace trellis::capi {

/// One diagnostic as the C API reports it.
struct DiagRecord {
  std::string severity = "error";
  std::string message;
  std::string file;
  unsigned line = 0, column = 0;
  std::string kind; // "user", "builder", "config", "source" or ""
  std::string module;
  std::string config, configPath;
};

/// The parts of an MLIR location: module path, user/builder file:line:col,
/// config position.
DiagRecord recordFromLocation(mlir::Location loc);

struct ReplayResult {
  /// A malformed trace (a frontend bug, not the user's): set, nothing traced.
  std::string usageError;
  /// {"values": [T|null...], "inputs": [T...], "outputs": [T|null...]}.
  nlohmann::json info;
  std::string function = "main";
  std::string source = "<python>";
};

/// Replays `trace` into `tracer` (one function). The user's errors are the
/// tracer's (tracer.errors()).
ReplayResult replayTrace(trace::Tracer &tracer, const nlohmann::json &trace);

} // namespace trellis::capi

#endif // TRELLIS_LIB_CAPI_TRACEREPLAY_H
