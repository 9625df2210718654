//===- Json.cpp - A strict JSON reader that keeps source positions --------===//

#include "trellis/Config/Json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_set>

namespace trellis::config {

//===----------------------------------------------------------------------===//
// Paths and quoting
//===----------------------------------------------------------------------===//

static bool isIdentifierKey(std::string_view key) {
  if (key.empty())
    return false;
  for (char c : key)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '_'))
      return false;
  return true;
}

std::string jsonQuote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += char(c);
      }
    }
  }
  out += '"';
  return out;
}

std::string jsonPathKey(const std::string &path, std::string_view key) {
  if (isIdentifierKey(key))
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  return path + "[" + jsonQuote(key) + "]";
}

std::string jsonPathIndex(const std::string &path, size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

//===----------------------------------------------------------------------===//
// JsonValue
//===----------------------------------------------------------------------===//

const JsonValue *JsonValue::find(std::string_view key) const {
  if (kind_ != Kind::Object)
    return nullptr;
  for (size_t i = 0; i < keys_.size(); ++i)
    if (keys_[i] == key)
      return &items_[i];
  return nullptr;
}

static void compact(const JsonValue &v, std::string &out, size_t limit) {
  if (out.size() > limit)
    return;
  switch (v.kind()) {
  case JsonValue::Kind::Null:
    out += "null";
    return;
  case JsonValue::Kind::Bool:
    out += v.boolean() ? "true" : "false";
    return;
  case JsonValue::Kind::Number:
    out += v.text();
    return;
  case JsonValue::Kind::String:
    out += jsonQuote(v.text());
    return;
  case JsonValue::Kind::Array:
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i)
        out += ", ";
      compact(v[i], out, limit);
    }
    out += ']';
    return;
  case JsonValue::Kind::Object:
    out += '{';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i)
        out += ", ";
      out += jsonQuote(v.key(i));
      out += ": ";
      compact(v[i], out, limit);
    }
    out += '}';
    return;
  }
}

std::string JsonValue::describe() const {
  constexpr size_t kLimit = 60;
  std::string out;
  compact(*this, out, kLimit);
  if (out.size() <= kLimit)
    return out;
  switch (kind_) {
  case Kind::Array:
    return "an array of " + std::to_string(size()) +
           (size() == 1 ? " element" : " elements");
  case Kind::Object:
    return "an object with " + std::to_string(size()) +
           (size() == 1 ? " key" : " keys");
  case Kind::String: {
    size_t cut = 40;
    while (cut > 0 && (uint8_t(text_[cut]) & 0xC0) == 0x80)
      --cut; // do not split a UTF-8 sequence
    return jsonQuote(text_.substr(0, cut)) + "... (" +
           std::to_string(text_.size()) + " bytes)";
  }
  default:
    return out.substr(0, kLimit) + "...";
  }
}

//===----------------------------------------------------------------------===//
// Parser
//===----------------------------------------------------------------------===//

class JsonParser {
public:
  JsonParser(std::string_view text, const std::string &file)
      : text_(text), file_(file) {}

  Result<JsonValue> parseDocument() {
    if (text_.size() >= 3 && uint8_t(text_[0]) == 0xEF &&
        uint8_t(text_[1]) == 0xBB && uint8_t(text_[2]) == 0xBF)
      return fail("expected a JSON value, found a UTF-8 byte-order mark "
                  "(save the file without BOM)");
    skipWhitespace();
    JsonValue root;
    if (!parseValue(root, 0))
      return Error{error_};
    skipWhitespace();
    if (pos_ < text_.size())
      return fail("expected end of file after the top-level value, found " +
                  describeHere());
    return root;
  }

private:
  std::string_view text_;
  const std::string &file_;
  size_t pos_ = 0;
  uint32_t line_ = 1, column_ = 1;
  std::vector<std::string> path_; // components, already rendered
  std::string error_;

  TextPos here() const { return {line_, column_}; }
  bool atEnd() const { return pos_ >= text_.size(); }
  char peek() const { return atEnd() ? '\0' : text_[pos_]; }

  void advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      column_ = 1;
    } else {
      ++column_;
    }
    ++pos_;
  }

  std::string currentPath() const {
    std::string p;
    for (const std::string &c : path_)
      p += c;
    if (!p.empty() && p[0] == '.')
      p.erase(0, 1);
    return p.empty() ? "(top level)" : p;
  }

  Error fail(const std::string &message) { return failAt(here(), message); }
  Error failAt(TextPos at, const std::string &message) {
    error_ = file_ + ":" + std::to_string(at.line) + ":" +
             std::to_string(at.column) + ": " + currentPath() + ": " + message;
    return Error{error_};
  }

  std::string describeHere() const {
    if (atEnd())
      return "end of file";
    unsigned char c = uint8_t(text_[pos_]);
    if (c >= 0x20 && c < 0x7f) {
      // Show the whole bare word for things like NaN, True, undefined.
      if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
        size_t end = pos_;
        while (end < text_.size() && end - pos_ < 20 &&
               ((text_[end] >= 'a' && text_[end] <= 'z') ||
                (text_[end] >= 'A' && text_[end] <= 'Z') ||
                (text_[end] >= '0' && text_[end] <= '9') || text_[end] == '_'))
          ++end;
        std::string word = "'";
        word.append(text_.substr(pos_, end - pos_));
        word += '\'';
        return word;
      }
      std::string one = "'";
      one += char(c);
      one += '\'';
      return one;
    }
    char buf[16];
    std::snprintf(buf, sizeof buf, "byte 0x%02x", c);
    return buf;
  }

  void skipWhitespace() {
    while (!atEnd()) {
      char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
        advance();
      else
        break;
    }
  }

  bool parseValue(JsonValue &out, unsigned depth) {
    if (depth >= kMaxJsonDepth) {
      fail("nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels");
      return false;
    }
    out.pos_ = here();
    char c = peek();
    switch (c) {
    case '{':
      return parseObject(out, depth);
    case '[':
      return parseArray(out, depth);
    case '"':
      out.kind_ = JsonValue::Kind::String;
      return parseString(out.text_);
    case 't':
      return parseLiteral(out, "true", JsonValue::Kind::Bool, true);
    case 'f':
      return parseLiteral(out, "false", JsonValue::Kind::Bool, false);
    case 'n':
      return parseLiteral(out, "null", JsonValue::Kind::Null, false);
    default:
      if (c == '-' || (c >= '0' && c <= '9'))
        return parseNumber(out);
      if (c == '\'') {
        fail("expected a JSON value, found a single-quoted string (JSON "
             "strings use double quotes)");
        return false;
      }
      if (c == '/') {
        fail("expected a JSON value, found a comment (JSON has no comments)");
        return false;
      }
      fail("expected a JSON value, found " + describeHere());
      return false;
    }
  }

  bool parseLiteral(JsonValue &out, std::string_view word, JsonValue::Kind kind,
                    bool value) {
    if (text_.substr(pos_, word.size()) != word) {
      fail("expected a JSON value, found " + describeHere());
      return false;
    }
    for (size_t i = 0; i < word.size(); ++i)
      advance();
    char next = peek();
    if ((next >= 'a' && next <= 'z') || (next >= 'A' && next <= 'Z') ||
        (next >= '0' && next <= '9') || next == '_') {
      pos_ -= word.size();
      column_ -= uint32_t(word.size());
      fail("expected a JSON value, found " + describeHere());
      return false;
    }
    out.kind_ = kind;
    out.bool_ = value;
    return true;
  }

  bool parseNumber(JsonValue &out) {
    TextPos start = here();
    size_t begin = pos_;
    bool integral = true;
    if (peek() == '-')
      advance();
    if (peek() == '0') {
      advance();
      if (peek() >= '0' && peek() <= '9') {
        failAt(start, "expected a number, found a leading zero in " +
                          std::string(text_.substr(begin, pos_ - begin + 1)) +
                          " (JSON numbers have no leading zeros)");
        return false;
      }
    } else if (peek() >= '1' && peek() <= '9') {
      while (peek() >= '0' && peek() <= '9')
        advance();
    } else {
      if (text_.substr(pos_, 8) == "Infinity")
        fail("expected a number, found '-Infinity' (JSON has no infinities)");
      else
        fail("expected a digit after '-', found " + describeHere());
      return false;
    }
    if (peek() == '.') {
      integral = false;
      advance();
      if (!(peek() >= '0' && peek() <= '9')) {
        fail("expected a digit after the decimal point, found " +
             describeHere());
        return false;
      }
      while (peek() >= '0' && peek() <= '9')
        advance();
    }
    if (peek() == 'e' || peek() == 'E') {
      integral = false;
      advance();
      if (peek() == '+' || peek() == '-')
        advance();
      if (!(peek() >= '0' && peek() <= '9')) {
        fail("expected a digit in the exponent, found " + describeHere());
        return false;
      }
      while (peek() >= '0' && peek() <= '9')
        advance();
    }
    std::string_view lexeme = text_.substr(begin, pos_ - begin);
    out.kind_ = JsonValue::Kind::Number;
    out.text_ = std::string(lexeme);
    out.intLiteral_ = integral;
    double d = 0;
    auto [ptr, ec] =
        std::from_chars(lexeme.data(), lexeme.data() + lexeme.size(), d);
    if (ec == std::errc::result_out_of_range) {
      // Underflow to 0 is harmless; overflow is not representable.
      bool tiny = false;
      size_t e = lexeme.find_first_of("eE");
      if (e != std::string_view::npos && e + 1 < lexeme.size() &&
          lexeme[e + 1] == '-')
        tiny = true;
      if (!tiny) {
        failAt(start, "expected a finite number, found " + out.text_ +
                          " (out of the range of a double)");
        return false;
      }
      d = 0;
    } else if (ec != std::errc() || ptr != lexeme.data() + lexeme.size()) {
      failAt(start, "expected a number, found " + out.text_);
      return false;
    }
    out.number_ = d;
    if (integral) {
      int64_t v = 0;
      auto [p2, ec2] =
          std::from_chars(lexeme.data(), lexeme.data() + lexeme.size(), v);
      out.intFits_ = ec2 == std::errc() && p2 == lexeme.data() + lexeme.size();
      out.int_ = out.intFits_ ? v : 0;
    }
    return true;
  }

  static void appendUtf8(std::string &out, uint32_t cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  bool parseHex4(uint32_t &value) {
    value = 0;
    for (int i = 0; i < 4; ++i) {
      char c = peek();
      uint32_t digit;
      if (c >= '0' && c <= '9')
        digit = uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f')
        digit = uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        digit = uint32_t(c - 'A' + 10);
      else {
        fail("expected 4 hex digits after \\u, found " + describeHere());
        return false;
      }
      value = value * 16 + digit;
      advance();
    }
    return true;
  }

  /// Validates one UTF-8 sequence starting at pos_ and copies it to out.
  bool copyUtf8(std::string &out) {
    unsigned char c = uint8_t(text_[pos_]);
    size_t len;
    uint32_t cp, min;
    if (c < 0x80) {
      len = 1;
      cp = c;
      min = 0;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
      min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
      min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
      min = 0x10000;
    } else {
      fail("expected UTF-8 text, found " + describeHere());
      return false;
    }
    if (pos_ + len > text_.size()) {
      fail("expected UTF-8 text, found a truncated multi-byte sequence");
      return false;
    }
    for (size_t i = 1; i < len; ++i) {
      unsigned char cc = uint8_t(text_[pos_ + i]);
      if ((cc & 0xC0) != 0x80) {
        fail("expected UTF-8 text, found an invalid multi-byte sequence");
        return false;
      }
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      fail("expected UTF-8 text, found an overlong or invalid code point");
      return false;
    }
    out.append(text_.data() + pos_, len);
    pos_ += len;
    ++column_;
    column_ += uint32_t(len - 1);
    return true;
  }

  bool parseString(std::string &out) {
    advance(); // opening quote
    out.clear();
    while (true) {
      if (atEnd()) {
        fail("expected a closing '\"', found end of file");
        return false;
      }
      unsigned char c = uint8_t(text_[pos_]);
      if (c == '"') {
        advance();
        return true;
      }
      if (c < 0x20) {
        fail(c == '\n' ? "expected a closing '\"' before the end of the line "
                         "(strings cannot span lines)"
                       : "expected a printable character in a string, found "
                         "a raw control character (escape it)");
        return false;
      }
      if (c == '\\') {
        advance();
        char e = peek();
        switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          advance();
          break;
        case 'b':
          out += '\b';
          advance();
          break;
        case 'f':
          out += '\f';
          advance();
          break;
        case 'n':
          out += '\n';
          advance();
          break;
        case 'r':
          out += '\r';
          advance();
          break;
        case 't':
          out += '\t';
          advance();
          break;
        case 'u': {
          advance();
          uint32_t cp;
          if (!parseHex4(cp))
            return false;
          if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail("expected a valid \\u escape, found an unpaired low "
                 "surrogate");
            return false;
          }
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (peek() != '\\' || pos_ + 1 >= text_.size() ||
                text_[pos_ + 1] != 'u') {
              fail("expected a \\u low surrogate after a high surrogate, "
                   "found " +
                   describeHere());
              return false;
            }
            advance();
            advance();
            uint32_t lo;
            if (!parseHex4(lo))
              return false;
            if (lo < 0xDC00 || lo > 0xDFFF) {
              fail("expected a \\u low surrogate after a high surrogate");
              return false;
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          appendUtf8(out, cp);
          break;
        }
        default:
          fail("expected a valid escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t "
               "\\uXXXX), found " +
               describeHere());
          return false;
        }
        continue;
      }
      if (!copyUtf8(out))
        return false;
    }
  }

  bool parseArray(JsonValue &out, unsigned depth) {
    out.kind_ = JsonValue::Kind::Array;
    advance(); // [
    skipWhitespace();
    if (peek() == ']') {
      advance();
      return true;
    }
    while (true) {
      path_.push_back(std::string("[") + std::to_string(out.items_.size()) +
                      "]");
      out.items_.emplace_back();
      bool ok = parseValue(out.items_.back(), depth + 1);
      if (!ok)
        return false;
      skipWhitespace();
      path_.pop_back();
      char c = peek();
      if (c == ',') {
        advance();
        skipWhitespace();
        if (peek() == ']') {
          fail("expected a value after ',', found ']' (JSON has no trailing "
               "commas)");
          return false;
        }
        continue;
      }
      if (c == ']') {
        advance();
        return true;
      }
      fail("expected ',' or ']' after an array element, found " +
           describeHere());
      return false;
    }
  }

  bool parseObject(JsonValue &out, unsigned depth) {
    out.kind_ = JsonValue::Kind::Object;
    advance(); // {
    skipWhitespace();
    if (peek() == '}') {
      advance();
      return true;
    }
    std::unordered_set<std::string> seen;
    while (true) {
      if (peek() != '"') {
        if (peek() == '}')
          fail("expected a key after ',', found '}' (JSON has no trailing "
               "commas)");
        else if (peek() == '\'')
          fail("expected a key in double quotes, found a single-quoted key");
        else
          fail("expected a key in double quotes, found " + describeHere());
        return false;
      }
      TextPos keyPos = here();
      std::string key;
      if (!parseString(key))
        return false;
      if (!seen.insert(key).second) {
        TextPos first{};
        for (size_t i = 0; i < out.keys_.size(); ++i)
          if (out.keys_[i] == key)
            first = out.keyPos_[i];
        std::string dup = jsonPathKey("", key);
        path_.push_back(dup[0] == '[' ? dup : "." + dup);
        failAt(keyPos, "expected each key once, found " + jsonQuote(key) +
                           " again (first at line " +
                           std::to_string(first.line) + ", column " +
                           std::to_string(first.column) + ")");
        return false;
      }
      skipWhitespace();
      if (peek() != ':') {
        fail("expected ':' after the key " + jsonQuote(key) + ", found " +
             describeHere());
        return false;
      }
      advance();
      skipWhitespace();
      std::string component = jsonPathKey("", key);
      path_.push_back(component[0] == '[' ? component : "." + component);
      out.keys_.push_back(std::move(key));
      out.keyPos_.push_back(keyPos);
      out.items_.emplace_back();
      if (!parseValue(out.items_.back(), depth + 1))
        return false;
      path_.pop_back();
      skipWhitespace();
      char c = peek();
      if (c == ',') {
        advance();
        skipWhitespace();
        continue;
      }
      if (c == '}') {
        advance();
        return true;
      }
      fail("expected ',' or '}' after an object member, found " +
           describeHere());
      return false;
    }
  }
};

Result<JsonDocument> parseJson(std::string_view text, std::string file) {
  JsonParser parser(text, file);
  Result<JsonValue> root = parser.parseDocument();
  if (!root)
    return root.takeError();
  return JsonDocument{std::move(file), std::move(root.value())};
}

Result<JsonDocument> readJsonFile(const std::string &path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return Error{path + ": expected a JSON file, found a directory"};
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Error{path + ": cannot open the file for reading"};
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (size < 0)
    return Error{path + ": cannot read the file"};
  if (uint64_t(size) > kMaxJsonFileSize)
    return Error{path + ": expected a config file of at most " +
                 std::to_string(kMaxJsonFileSize) + " bytes (1 MiB), found " +
                 std::to_string(size) + " bytes"};
  in.seekg(0);
  std::string text(size_t(size), '\0');
  if (size > 0 && !in.read(text.data(), size))
    return Error{path + ": cannot read the file"};
  if (size == 0)
    return Error{path + ":1:1: (top level): expected a JSON value, found an "
                        "empty file"};
  return parseJson(text, path);
}

} // namespace trellis::config
