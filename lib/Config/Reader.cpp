//===- Reader.cpp - Typed, position-keeping access to JSON objects --------===//

#include "lib/Config/Reader.h"

#include <cmath>

namespace trellis::config::detail {

IntRule positiveInt(int64_t max) { return {1, max, "a positive integer"}; }

IntRule nonNegativeInt(int64_t max) {
  return {0, max, "a non-negative integer"};
}

NumberRule positiveNumber() {
  return {0, false, std::numeric_limits<double>::infinity(), false,
          "a positive number"};
}

NumberRule nonNegativeNumber() {
  return {0, true, std::numeric_limits<double>::infinity(), false,
          "a non-negative number"};
}

NumberRule anyFiniteNumber() {
  return {-std::numeric_limits<double>::infinity(), false,
          std::numeric_limits<double>::infinity(), false, "a number"};
}

SourcePos posOf(const std::string &file, const JsonValue &v,
                const std::string &path) {
  return SourcePos{file, v.pos().line, v.pos().column, path};
}

std::optional<int64_t> checkInt(Diagnostics &diags, const SourcePos &pos,
                                const JsonValue &v, const IntRule &rule) {
  if (!v.isNumber() || !v.isIntegerLiteral()) {
    std::string found = v.describe();
    if (v.isNumber())
      found += " (a float; write an integer without '.' or exponent)";
    diags.error(pos, "expected " + rule.what + ", found " + found);
    return std::nullopt;
  }
  std::optional<int64_t> i = v.integer();
  if (!i || *i < rule.min) {
    diags.error(pos, "expected " + rule.what + ", found " + v.describe());
    return std::nullopt;
  }
  if (*i > rule.max) {
    diags.error(pos, "expected " + rule.what + " no larger than " +
                         std::to_string(rule.max) + ", found " + v.describe());
    return std::nullopt;
  }
  return *i;
}

std::optional<double> checkNumber(Diagnostics &diags, const SourcePos &pos,
                                  const JsonValue &v, const NumberRule &rule) {
  if (!v.isNumber()) {
    diags.error(pos, "expected " + rule.what + ", found " + v.describe());
    return std::nullopt;
  }
  double d = v.number();
  bool lowOk = rule.minInclusive ? d >= rule.min : d > rule.min;
  bool highOk = rule.maxInclusive ? d <= rule.max : d < rule.max;
  if (!std::isfinite(d) || !lowOk || !highOk) {
    diags.error(pos, "expected " + rule.what + ", found " + v.describe());
    return std::nullopt;
  }
  return d;
}

ObjectReader::ObjectReader(Diagnostics &diags, const std::string &file,
                           const JsonValue &obj, std::string path)
    : diags_(diags), file_(file), obj_(obj), path_(std::move(path)),
      used_(obj.size(), false) {}

SourcePos ObjectReader::pos() const { return posOf(file_, obj_, path_); }

std::string ObjectReader::pathOf(std::string_view key) const {
  return jsonPathKey(path_, key);
}

SourcePos ObjectReader::absentPos(std::string_view key) const {
  SourcePos p = pos();
  p.path = pathOf(key);
  return p;
}

const JsonValue *ObjectReader::take(std::string_view key) {
  asked_.emplace_back(key);
  for (size_t i = 0; i < obj_.size(); ++i)
    if (obj_.key(i) == key) {
      used_[i] = true;
      return &obj_[i];
    }
  return nullptr;
}

bool ObjectReader::good(std::initializer_list<std::string_view> keys) const {
  for (std::string_view k : keys)
    for (const std::string &b : bad_)
      if (b == k)
        return false;
  return true;
}

void ObjectReader::missing(std::string_view key, std::string_view what) {
  markBad(key);
  SourcePos p = pos();
  diags_.error(p, "expected key " + jsonQuote(key) + " (" + std::string(what) +
                      "), found an object without it");
}

Located<int64_t> ObjectReader::integer(std::string_view key,
                                       const IntRule &rule,
                                       std::optional<int64_t> dflt) {
  Located<int64_t> out;
  out.value = dflt.value_or(rule.min > 0 ? rule.min : 0);
  const JsonValue *v = take(key);
  if (!v) {
    out.pos = absentPos(key);
    out.defaulted = true;
    if (!dflt)
      missing(key, rule.what);
    return out;
  }
  out.pos = posOf(file_, *v, pathOf(key));
  if (std::optional<int64_t> i = checkInt(diags_, out.pos, *v, rule))
    out.value = *i;
  else
    markBad(key);
  return out;
}

Located<double> ObjectReader::number(std::string_view key,
                                     const NumberRule &rule,
                                     std::optional<double> dflt) {
  Located<double> out;
  out.value = dflt.value_or(1.0);
  const JsonValue *v = take(key);
  if (!v) {
    out.pos = absentPos(key);
    out.defaulted = true;
    if (!dflt)
      missing(key, rule.what);
    return out;
  }
  out.pos = posOf(file_, *v, pathOf(key));
  if (std::optional<double> d = checkNumber(diags_, out.pos, *v, rule))
    out.value = *d;
  else
    markBad(key);
  return out;
}

Located<bool> ObjectReader::boolean(std::string_view key,
                                    std::optional<bool> dflt) {
  Located<bool> out;
  out.value = dflt.value_or(false);
  const JsonValue *v = take(key);
  if (!v) {
    out.pos = absentPos(key);
    out.defaulted = true;
    if (!dflt)
      missing(key, "true or false");
    return out;
  }
  out.pos = posOf(file_, *v, pathOf(key));
  if (!v->isBool()) {
    diags_.error(out.pos, "expected true or false, found " + v->describe());
    markBad(key);
    return out;
  }
  out.value = v->boolean();
  return out;
}

Located<std::string> ObjectReader::string(std::string_view key,
                                          std::optional<std::string> dflt) {
  Located<std::string> out;
  out.value = dflt.value_or("");
  const JsonValue *v = take(key);
  if (!v) {
    out.pos = absentPos(key);
    out.defaulted = true;
    if (!dflt)
      missing(key, "a string");
    return out;
  }
  out.pos = posOf(file_, *v, pathOf(key));
  if (!v->isString() || v->text().empty()) {
    diags_.error(out.pos,
                 "expected a non-empty string, found " + v->describe());
    markBad(key);
    return out;
  }
  out.value = v->text();
  return out;
}

const JsonValue *ObjectReader::object(std::string_view key, bool optional) {
  const JsonValue *v = take(key);
  if (!v) {
    if (!optional)
      missing(key, "an object");
    return nullptr;
  }
  if (!v->isObject()) {
    diags_.error(posOf(file_, *v, pathOf(key)),
                 "expected an object, found " + v->describe());
    markBad(key);
    return nullptr;
  }
  return v;
}

void ObjectReader::finish(bool asError, std::string_view context) {
  std::string accepted;
  for (const std::string &k : asked_) {
    if (accepted.find("\"" + k + "\"") != std::string::npos)
      continue;
    if (!accepted.empty())
      accepted += ", ";
    accepted += jsonQuote(k);
  }
  for (size_t i = 0; i < obj_.size(); ++i) {
    if (used_[i])
      continue;
    SourcePos p{file_, obj_.keyPos(i).line, obj_.keyPos(i).column,
                pathOf(obj_.key(i))};
    std::string message = "expected " + std::string(context) + " (" + accepted +
                          "), found unknown key " + jsonQuote(obj_.key(i));
    if (asError)
      diags_.error(p, message);
    else
      diags_.warning(p, message + "; it is ignored");
  }
}

} // namespace trellis::config::detail
