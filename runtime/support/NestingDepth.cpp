//===- NestingDepth.cpp - A bound on bracket nesting before a parse -------===//
#include "trellis/Support/NestingDepth.h"

namespace trellis {

Status checkNestingDepth(std::string_view text, const std::string &name,
                         int limit) {
  int depth = 0;
  size_t line = 1, lineStart = 0;
  const size_t n = text.size();
  for (size_t i = 0; i < n; ++i) {
    char c = text[i];
    switch (c) {
    case '\n':
      ++line;
      lineStart = i + 1;
      break;
    case '/':
      if (i + 1 < n && text[i + 1] == '/')
        while (i + 1 < n && text[i + 1] != '\n')
          ++i;
      break;
    case '"':
      // A string literal: up to the next unescaped '"' (or the line's end,
      // where the parser will report the unterminated string).
      for (++i; i < n && text[i] != '"' && text[i] != '\n'; ++i)
        if (text[i] == '\\' && i + 1 < n && text[i + 1] != '\n')
          ++i;
      if (i < n && text[i] == '\n')
        --i; // counted as a line break next
      break;
    case '(':
    case '[':
    case '{':
    case '<':
      if (++depth > limit)
        return Error{name + ":" + std::to_string(line) + ":" +
                     std::to_string(i - lineStart + 1) + ": error: '" +
                     std::string(1, c) + "' opens nesting level " +
                     std::to_string(depth) + ", deeper than the " +
                     std::to_string(limit) +
                     " levels of ( [ { < an input may have (refused before "
                     "parsing: the parser needs stack space per level)"};
      break;
    case '>':
      if ((i > 0 && text[i - 1] == '-') || (i + 1 < n && text[i + 1] == '='))
        break; // "->", ">="
      [[fallthrough]];
    case ')':
    case ']':
    case '}':
      if (depth > 0)
        --depth;
      break;
    default:
      break;
    }
  }
  return Status::ok();
}

} // namespace trellis
