"""Source-mapped errors: every op remembers the user's line that created it."""
import linecache
import os
import re
import sys

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class SourceLoc:
    """A position in the user's code: file, line, column span (1-based)."""

    __slots__ = ("file", "line", "col", "end_col", "module")

    def __init__(self, file, line, col=1, end_col=None, module=""):
        self.file, self.line, self.col = file, line, col
        self.end_col, self.module = end_col, module

    def __repr__(self):
        return f"{self.file}:{self.line}:{self.col}"


def user_location(module=""):
    """The innermost frame of the caller outside this package."""
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR + os.sep):
        frame = frame.f_back
    if frame is None:
        return SourceLoc("<unknown>", 0)
    line, col, end_col = frame.f_lineno, 1, None
    try:  # Python 3.11+: the exact column span of the expression
        positions = list(frame.f_code.co_positions())
        pos = positions[frame.f_lasti // 2]
        if pos[0] is not None and pos[2] is not None:
            line = pos[0]
            col = pos[2] + 1
            if pos[1] == pos[0] and pos[3] is not None:
                end_col = pos[3] + 1
    except (AttributeError, IndexError):
        pass
    return SourceLoc(frame.f_code.co_filename, line, col, end_col, module)


def render_location(file, line, col=1, end_col=None):
    """The source line and carets under the span."""
    text = linecache.getline(file, line).rstrip("\n") if line else ""
    if not text:
        return ""
    stripped = text.lstrip()
    indent = len(text) - len(stripped)
    start = max(col - 1, indent)
    end = end_col - 1 if end_col and end_col - 1 > start else len(text.rstrip())
    return f"    {stripped}\n" f"    {' ' * (start - indent)}{'^' * max(1, end - start)}"


# Internal op names -> what the user wrote.
_USER_NAMES = {
    "matmul": "matmul (@)",
    "add": "add (+)",
    "sub": "subtract (-)",
    "mul": "multiply (*)",
    "div": "divide (/)",
    "layer_norm": "layer_norm",
    "attention": "attention",
    "gelu": "gelu",
    "silu": "silu",
    "softmax": "softmax",
    "reshape": "reshape",
    "permute": "permute",
    "concat": "concat",
    "split": "split",
    "linear": "linear",
    "cast": "cast",
    "constant": "constant",
    "weight": "parameter",
}


def user_terms(message):
    """'trellis.matmul: 'trellis.matmul' op x' -> 'matmul (@): x'."""
    m = re.match(r"trellis\.(\w+): (?:'trellis\.\w+' op )?(.*)$", message, re.S)
    if m:
        name = _USER_NAMES.get(m.group(1), m.group(1))
        return f"{name}: {m.group(2)}"
    message = re.sub(
        r"'trellis\.(\w+)' op ", lambda g: _USER_NAMES.get(g.group(1), g.group(1)) + ": ", message
    )
    message = re.sub(r"'trellis\.(\w+)'", lambda g: _USER_NAMES.get(g.group(1), g.group(1)), message)
    return message.replace("(--check-finite)", "(check_finite)")


class TrellisError(Exception):
    """An error in the user's program, pointing at the user's line.

    The message starts with ``file:line:col: error: reason``, shows the code
    with carets under the expression, and names the module path when known.
    """

    def __init__(self, reason, loc=None, details=None):
        self.reason = reason
        self.file = loc.file if loc else None
        self.line = loc.line if loc else None
        self.column = loc.col if loc else None
        parts = []
        if loc is not None and loc.line:
            parts.append(f"{loc.file}:{loc.line}:{loc.col}: error: {reason}")
            code = render_location(loc.file, loc.line, loc.col, loc.end_col)
            if code:
                parts.append(code)
            if loc.module:
                parts.append(f"  in module: {loc.module}")
        else:
            parts.append(f"error: {reason}")
        if details:
            parts.append(details)
        super().__init__("\n".join(parts))


def combine(errors):
    """One TrellisError for several (the first one's location)."""
    if len(errors) == 1:
        return errors[0]
    first = errors[0]
    text = "\n\n".join(str(e) for e in errors)
    e = TrellisError.__new__(TrellisError)
    Exception.__init__(e, f"{len(errors)} errors:\n{text}")
    e.reason, e.file, e.line, e.column = first.reason, first.file, first.line, first.column
    return e


_AT = re.compile(r"at (?P<file>[^\s,()]+?):(?P<line>\d+):(?P<col>\d+)")


def runtime_error(message, locs=()):
    """A runtime message ('... (in mlp, at /x/model.py:12:5)') as a
    TrellisError pointing at that user line, with the code shown."""
    m = None
    for m in _AT.finditer(message):
        pass
    if m:
        file, line, col = m.group("file"), int(m.group("line")), int(m.group("col"))
        end_col = None
        for loc in locs:
            if loc.file == file and loc.line == line and loc.col == col:
                end_col = loc.end_col
        return TrellisError(user_terms(message), SourceLoc(file, line, col, end_col))
    return TrellisError(user_terms(message))
