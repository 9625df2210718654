//===- Reader.h - Typed, position-keeping access to JSON objects ----------===//
//
// Internal to lib/Config. ObjectReader reads the members of one JSON object
// as typed Located<T> values. Every problem becomes a Diagnostic (and the
// reader returns a default-constructed value at the object's position), so a
// file's errors are all collected in one pass. finish() reports the keys no
// one asked for.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_LIB_CONFIG_READER_H
#define TRELLIS_LIB_CONFIG_READER_H

#include "trellis/Config/Json.h"
#include "trellis/Config/Located.h"

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trellis::config::detail {

struct IntRule {
  int64_t min;
  int64_t max;
  std::string what; // "a positive integer"
};

/// An integer in [1, max] ("a positive integer", with the limit named when
/// the value is too large).
IntRule positiveInt(int64_t max);
/// An integer in [0, max].
IntRule nonNegativeInt(int64_t max);

struct NumberRule {
  double min;
  bool minInclusive;
  double max;
  bool maxInclusive;
  std::string what; // "a positive number"
};

NumberRule positiveNumber();
NumberRule nonNegativeNumber();
NumberRule anyFiniteNumber();

inline constexpr int64_t kMaxChannels = 65536;
inline constexpr int64_t kMaxBlocks = 1024;
inline constexpr int64_t kMaxResolution = 4096;

/// SourcePos of a value at `path` in `file`.
SourcePos posOf(const std::string &file, const JsonValue &v,
                const std::string &path);

/// Checks `v` against a rule; on failure records "expected ..., found ..."
/// and returns nullopt.
std::optional<int64_t> checkInt(Diagnostics &diags, const SourcePos &pos,
                                const JsonValue &v, const IntRule &rule);
std::optional<double> checkNumber(Diagnostics &diags, const SourcePos &pos,
                                  const JsonValue &v, const NumberRule &rule);

template <typename E> struct EnumChoice {
  std::string_view spelling;
  E value;
};

class ObjectReader {
public:
  /// `obj` must be a JSON object.
  ObjectReader(Diagnostics &diags, const std::string &file,
               const JsonValue &obj, std::string path);

  const std::string &file() const { return file_; }
  const std::string &path() const { return path_; }
  const JsonValue &json() const { return obj_; }
  /// Position of the object itself.
  SourcePos pos() const;
  /// Path of a member (present or not).
  std::string pathOf(std::string_view key) const;
  /// Position for a value that is absent (defaulted or missing): the object's
  /// position with the key's path.
  SourcePos absentPos(std::string_view key) const;

  /// The member `key` (marked as used), or null if absent.
  const JsonValue *take(std::string_view key);
  /// Records "missing required key".
  void missing(std::string_view key, std::string_view what);

  Located<int64_t> integer(std::string_view key, const IntRule &rule,
                           std::optional<int64_t> dflt);
  Located<double> number(std::string_view key, const NumberRule &rule,
                         std::optional<double> dflt);
  Located<bool> boolean(std::string_view key, std::optional<bool> dflt);
  Located<std::string> string(std::string_view key,
                              std::optional<std::string> dflt);
  /// A nested object (required unless `optional`); null if absent or wrong.
  const JsonValue *object(std::string_view key, bool optional = false);

  /// A string enum. `unsupported` lists values TRELLIS knows but trellisc
  /// cannot compile, with a reason.
  template <typename E>
  Located<E> enumeration(
      std::string_view key, std::initializer_list<EnumChoice<E>> choices,
      std::optional<E> dflt,
      std::initializer_list<std::pair<std::string_view, std::string_view>>
          unsupported = {}) {
    Located<E> out;
    out.value = dflt.value_or(choices.begin()->value);
    const JsonValue *v = take(key);
    std::string expected;
    for (const auto &c : choices) {
      if (!expected.empty())
        expected += " or ";
      expected += jsonQuote(c.spelling);
    }
    if (!v) {
      out.pos = absentPos(key);
      out.defaulted = true;
      if (!dflt) {
        missing(key, "one of " + expected);
        markBad(key);
      }
      return out;
    }
    out.pos = posOf(file_, *v, pathOf(key));
    if (v->isString()) {
      for (const auto &c : choices)
        if (v->text() == c.spelling) {
          out.value = c.value;
          return out;
        }
      for (const auto &u : unsupported)
        if (v->text() == u.first) {
          diags_.error(out.pos, "expected " + expected + ", found " +
                                    v->describe() + " (" +
                                    std::string(u.second) + ")");
          markBad(key);
          return out;
        }
    }
    diags_.error(out.pos, "expected " + expected + ", found " + v->describe());
    markBad(key);
    return out;
  }

  /// Reports every member nobody took: as errors (`asError`) or warnings.
  /// `context` completes "expected <context> (<accepted keys>), found ...".
  void finish(bool asError, std::string_view context);

  Diagnostics &diags() { return diags_; }
  /// True if none of `keys` had a bad value (cross-field checks use this to
  /// avoid cascades from a value that was already reported).
  bool good(std::initializer_list<std::string_view> keys) const;
  /// Marks `key` as having a bad value.
  void markBad(std::string_view key) { bad_.emplace_back(key); }

private:
  Diagnostics &diags_;
  const std::string &file_;
  const JsonValue &obj_;
  std::string path_;
  std::vector<bool> used_;
  std::vector<std::string> asked_;
  std::vector<std::string> bad_;
};

} // namespace trellis::config::detail

#endif // TRELLIS_LIB_CONFIG_READER_H
