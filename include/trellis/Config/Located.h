//===- Located.h - Config values that remember where they were written ----===//
//
// Every value read from pipeline.json or a sidecar is a Located<T>: the value
// plus its SourcePos (file, line, column, JSON path). The model builders turn
// a SourcePos into the "config" part of an op's MLIR location (it maps 1:1 on
// trellis::trace::ConfigPos), and every config error points at one.
//
// A value the file does not spell out (a constructor default such as
// `norm_type: "layer"`) is `defaulted`: its position is that of the object
// that would hold the key, and its path is the key's would-be path.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_CONFIG_LOCATED_H
#define TRELLIS_CONFIG_LOCATED_H

#include "trellis/Support/Result.h"

#include <cstdint>
#include <string>
#include <vector>

namespace trellis::config {

/// A position in a config file and the JSON path of the value there.
/// line == 0 means "no position in a file" (e.g. a run-time override; then
/// `file` names the origin, like "command line").
struct SourcePos {
  std::string file;
  uint32_t line = 0;
  uint32_t column = 0;
  std::string path;

  /// "file:line:col", or just "file" without a line.
  std::string location() const;
  /// "path (file:line:col)" for mentioning another value in a message.
  std::string describe() const;
};

template <typename T> struct Located {
  T value{};
  SourcePos pos;
  /// Not written in the file: `pos` is the enclosing object's position.
  bool defaulted = false;

  const T &operator*() const { return value; }
  const T *operator->() const { return &value; }
};

/// One finding about a config file.
struct Diagnostic {
  enum class Severity { Error, Warning };
  Severity severity = Severity::Error;
  SourcePos pos;
  std::string message;

  /// "file:line:col: json.path: message" (errors) or
  /// "file:line:col: warning: json.path: message".
  std::string render() const;
};

/// Collects every finding of a parse, so that a file with several problems
/// reports all of them at once.
class Diagnostics {
public:
  void error(const SourcePos &pos, std::string message);
  void warning(const SourcePos &pos, std::string message);
  void add(Diagnostic d) { list_.push_back(std::move(d)); }
  void append(const std::vector<Diagnostic> &more);

  bool hasErrors() const { return errors_ > 0; }
  size_t errorCount() const { return errors_; }
  const std::vector<Diagnostic> &all() const { return list_; }
  std::vector<Diagnostic> warnings() const;
  /// All errors rendered, one per line (warnings left out).
  Error toError() const;

private:
  std::vector<Diagnostic> list_;
  size_t errors_ = 0;
};

} // namespace trellis::config

#endif // TRELLIS_CONFIG_LOCATED_H
