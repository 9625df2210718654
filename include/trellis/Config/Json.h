//===- Json.h - A strict JSON reader that keeps source positions ----------===//
//
// pipeline.json and the checkpoint sidecars are small JSON files whose every
// value must keep its position (file:line:column) so that the ops it shapes
// carry it as an MLIR location and every config error can point at it.
//
// nlohmann/json (3.11) records no positions, and its SAX callbacks fire after
// the lexer has read past a token, so positions would have to be
// reconstructed from a tracking input adapter with look-ahead bookkeeping; it
// also accepts duplicate keys silently (last wins). This reader is a small
// recursive-descent parser instead: strict RFC 8259, no exceptions, and every
// value and object key records where it starts.
//
// Strictness: exactly one value; no comments, trailing commas, single quotes,
// NaN/Infinity, leading zeros or byte-order mark; strings must be valid UTF-8
// without raw control characters and with valid escapes (surrogates paired);
// numbers must be finite as doubles; duplicate keys are errors; nesting is
// limited to kMaxJsonDepth. Lines count from 1 at '\n'; columns count bytes
// from 1 (a tab is one column).
//
// Errors read "file:line:col: json.path: message", where the path is the
// position inside the document ("args.models", "params.cfg_interval[1]").
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_CONFIG_JSON_H
#define TRELLIS_CONFIG_JSON_H

#include "trellis/Support/Result.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trellis::config {

inline constexpr unsigned kMaxJsonDepth = 256;
/// Config files larger than this are refused before parsing. The parsed
/// tree keeps every value's position, about 15 to 30 times a file's size in
/// memory (measured with trellisc --compile-to=config: +147 MB for a 9.8 MB
/// array of numbers, +69 MB for 2.4 MB of nested arrays), so 1 MiB bounds it
/// to about 30 MB; TRELLIS's own config files are a few KB.
inline constexpr size_t kMaxJsonFileSize = 1u << 20;

/// A 1-based line and byte column.
struct TextPos {
  uint32_t line = 0;
  uint32_t column = 0;
};

class JsonValue {
public:
  enum class Kind : uint8_t { Null, Bool, Number, String, Array, Object };

  Kind kind() const { return kind_; }
  /// Where the value starts (its first character).
  TextPos pos() const { return pos_; }

  bool isNull() const { return kind_ == Kind::Null; }
  bool isBool() const { return kind_ == Kind::Bool; }
  bool isNumber() const { return kind_ == Kind::Number; }
  bool isString() const { return kind_ == Kind::String; }
  bool isArray() const { return kind_ == Kind::Array; }
  bool isObject() const { return kind_ == Kind::Object; }

  bool boolean() const { return bool_; }
  /// The number as a double (integers beyond 2^53 are rounded).
  double number() const { return number_; }
  /// True for numbers written without fraction or exponent ("25", not
  /// "25.0" or "2.5e1"): Python's json module reads only those as int.
  bool isIntegerLiteral() const { return intLiteral_; }
  /// The value of an integer literal that fits in int64.
  std::optional<int64_t> integer() const {
    return intFits_ ? std::optional<int64_t>(int_) : std::nullopt;
  }
  /// A string's decoded value, or a number's text as written.
  const std::string &text() const { return text_; }

  /// Elements of an array, member values of an object.
  size_t size() const { return items_.size(); }
  const JsonValue &operator[](size_t i) const { return items_[i]; }
  const std::vector<JsonValue> &items() const { return items_; }
  /// Object member keys (decoded) and their positions, parallel to items().
  const std::string &key(size_t i) const { return keys_[i]; }
  TextPos keyPos(size_t i) const { return keyPos_[i]; }
  /// The member called `key`, or null (also for non-objects).
  const JsonValue *find(std::string_view key) const;

  /// A short rendering for "found ..." in messages: the JSON text of
  /// scalars ("25", "\"25\"", "true", "null"), compact JSON for small arrays
  /// and objects, "an array of N elements" / "an object" otherwise.
  std::string describe() const;

private:
  friend class JsonParser;

  Kind kind_ = Kind::Null;
  bool bool_ = false;
  bool intLiteral_ = false;
  bool intFits_ = false;
  TextPos pos_;
  int64_t int_ = 0;
  double number_ = 0;
  std::string text_;
  std::vector<JsonValue> items_;
  std::vector<std::string> keys_;
  std::vector<TextPos> keyPos_;
};

/// A parsed file: its name as used in messages and its root value.
struct JsonDocument {
  std::string file;
  JsonValue root;
};

/// Parses `text` strictly; `file` names it in messages.
Result<JsonDocument> parseJson(std::string_view text, std::string file);

/// Reads and parses a file; messages name it as `path`.
Result<JsonDocument> readJsonFile(const std::string &path);

/// JSON string literal for `s` (quotes and escapes, UTF-8 passed through).
std::string jsonQuote(std::string_view s);

/// "a.b" from ("a", "b"); keys that are not [A-Za-z0-9_]+ are written
/// a["x.y"]. An empty path plus a key gives the key.
std::string jsonPathKey(const std::string &path, std::string_view key);
/// "a[3]".
std::string jsonPathIndex(const std::string &path, size_t index);

} // namespace trellis::config

#endif // TRELLIS_CONFIG_JSON_H
