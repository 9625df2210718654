//===- Located.cpp - Source positions and diagnostics of config files -----===//

#include "trellis/Config/Located.h"

namespace trellis::config {

std::string SourcePos::location() const {
  if (line == 0)
    return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

std::string SourcePos::describe() const {
  return path + " (" + location() + ")";
}

std::string Diagnostic::render() const {
  if (pos.file.empty() && pos.line == 0 && pos.path.empty())
    return message; // a message that carries its own location
  std::string out = pos.location() + ": ";
  if (severity == Severity::Warning)
    out += "warning: ";
  if (!pos.path.empty())
    out += pos.path + ": ";
  out += message;
  return out;
}

void Diagnostics::error(const SourcePos &pos, std::string message) {
  list_.push_back({Diagnostic::Severity::Error, pos, std::move(message)});
  ++errors_;
}

void Diagnostics::warning(const SourcePos &pos, std::string message) {
  list_.push_back({Diagnostic::Severity::Warning, pos, std::move(message)});
}

void Diagnostics::append(const std::vector<Diagnostic> &more) {
  for (const Diagnostic &d : more) {
    list_.push_back(d);
    if (d.severity == Diagnostic::Severity::Error)
      ++errors_;
  }
}

std::vector<Diagnostic> Diagnostics::warnings() const {
  std::vector<Diagnostic> out;
  for (const Diagnostic &d : list_)
    if (d.severity == Diagnostic::Severity::Warning)
      out.push_back(d);
  return out;
}

Error Diagnostics::toError() const {
  std::string message;
  for (const Diagnostic &d : list_) {
    if (d.severity != Diagnostic::Severity::Error)
      continue;
    if (!message.empty())
      message += '\n';
    message += d.render();
  }
  return Error{message};
}

} // namespace trellis::config
