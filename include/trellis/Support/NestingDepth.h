//===- NestingDepth.h - A bound on bracket nesting before a parse ---------===//
//
// MLIR's parser recurses once (or more) per nested region, parenthesis,
// bracket or angle bracket, so a hostile .mlir text of 100000 nested '('
// overflows the stack. trellisc and trellis-opt scan the text first
// (outside string literals and comments) and refuse one that nests deeper
// than a limit no real program comes near.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_SUPPORT_NESTINGDEPTH_H
#define TRELLIS_SUPPORT_NESTINGDEPTH_H

#include "trellis/Support/Result.h"

#include <string>
#include <string_view>

namespace trellis {

/// The deepest nesting of ( [ { < a .mlir input may have.
inline constexpr int kMaxMlirNesting = 512;

/// Fails where `text` first opens a bracket at depth `limit` + 1, with
/// "NAME:LINE:COL: error: ..." naming the bracket, the limit and the depth.
/// Brackets inside "..." strings and // comments are not counted; '>' of
/// "->" and ">=" does not close.
Status checkNestingDepth(std::string_view text, const std::string &name,
                         int limit = kMaxMlirNesting);

} // namespace trellis

#endif // TRELLIS_SUPPORT_NESTINGDEPTH_H
