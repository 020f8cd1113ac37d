"""Source locations in Triton's intermediate stages: TTIR and TTGIR (MLIR), LLIR (LLVM IR).

MLIR prints an operation's location at the end of its line, `loc(#loc12)` or inline
(`loc("file.py":143:16)`), and defines the aliases at the bottom of the module:

    #loc6  = loc("/path/softmax.py":143:30)           a file location
    #loc33 = loc("x"(#loc6))                           a named location (a variable's name)
    #loc42 = loc(callsite(#loc10 at #loc37))           inlined code: callee at caller
    #loc50 = loc(fused[#loc3, #loc4])                  fused locations (the first is kept)

LLVM IR attaches `!dbg !N` to an instruction; `!N = !DILocation(line:, column:, scope:,
inlinedAt:)`, and the scope chain (`DILexicalBlockFile`, `DILexicalBlock`, `DISubprogram`) names
the `DIFile(filename:, directory:)`. Both give, per line, the frames innermost first, like
`lineinfo.ptx_line_frames`. Only what Triton 3.x prints is handled; anything else is skipped.
"""

from __future__ import annotations

import os
import re

from workbench.ptx.lineinfo import Frame, Frames

_MLIR_DEF = re.compile(r"^#loc(\d*)\s*=\s*loc\((.*)\)\s*$")
_FILE_LOC = re.compile(r'^"((?:[^"\\]|\\.)*)":(\d+):(\d+)')
_NAMED = re.compile(r'^"((?:[^"\\]|\\.)*)"\s*\(')
_LLVM_DEF = re.compile(r"^!(\d+)\s*=\s*(?:distinct\s+)?!(\w+)\((.*)\)\s*$")
_LLVM_FIELD = re.compile(r'(\w+):\s*("(?:[^"\\]|\\.)*"|[^,]+)')
_DBG = re.compile(r"!dbg\s+!(\d+)")


# -- MLIR (TTIR, TTGIR) -------------------------------------------------------------------------
def split_top(text: str, sep: str) -> list[str]:
    """Split at `sep` outside parentheses, brackets and string literals."""
    parts, depth, start, i, quoted = [], 0, 0, 0, False
    while i < len(text):
        ch = text[i]
        if ch == '"' and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        elif not quoted and ch in "([<":
            depth += 1
        elif not quoted and ch in ")]>":
            depth -= 1
        elif not quoted and depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            start = i = i + len(sep)
            continue
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


class _MlirLocs:
    def __init__(self, text: str) -> None:
        self.defs = {m.group(1): m.group(2) for m in map(_MLIR_DEF.match, text.splitlines()) if m}
        self.memo: dict[str, Frames] = {}

    def alias(self, key: str) -> Frames:
        if key not in self.memo:
            self.memo[key] = ()  # a cycle resolves to nothing
            self.memo[key] = self.expr(self.defs.get(key, "unknown"))
        return self.memo[key]

    def expr(self, text: str) -> Frames:
        text = text.strip()
        if text.startswith("#loc"):
            return self.alias(text[4:])
        if text.startswith("callsite(") and text.endswith(")"):
            callee, *caller = split_top(text[len("callsite("):-1], " at ")
            return self.expr(callee) + (self.expr(caller[0]) if caller else ())
        if text.startswith("fused"):
            inner = text[text.find("[") + 1:text.rfind("]")]
            return next((f for f in map(self.expr, split_top(inner, ",")) if f), ())
        m = _FILE_LOC.match(text)
        if m:
            return (Frame(m.group(1), int(m.group(2))),) if int(m.group(2)) else ()
        m = _NAMED.match(text)
        if m and text.endswith(")"):
            return self.expr(text[m.end():-1])
        return ()


def trailing_loc(line: str) -> str | None:
    """The expression inside the `loc(...)` that ends `line`, or None."""
    text = line.rstrip()
    if not text.endswith(")"):
        return None
    depth, quoted = 0, False
    for i in range(len(text) - 1, -1, -1):
        ch = text[i]
        if ch == '"' and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        elif not quoted and ch == ")":
            depth += 1
        elif not quoted and ch == "(":
            depth -= 1
            if depth == 0:
                return text[i + 1:-1] if text[max(i - 3, 0):i] == "loc" else None
    return None


def mlir_line_frames(ir: str) -> dict[int, Frames]:
    """1-based line of every located operation in TTIR/TTGIR text -> its frames, innermost first."""
    locs = _MlirLocs(ir)
    found: dict[int, Frames] = {}
    for line_no, raw in enumerate(ir.splitlines(), start=1):
        if raw.startswith("#"):
            continue
        expr = trailing_loc(raw)
        frames = locs.expr(expr) if expr is not None else ()
        if frames:
            found[line_no] = frames
    return found


# -- LLVM IR -----------------------------------------------------------------------------------------
def _llvm_nodes(ir: str) -> dict[str, tuple[str, dict[str, str]]]:
    nodes = {}
    for m in map(_LLVM_DEF.match, ir.splitlines()):
        if m:
            fields = {k: v.strip().strip('"') for k, v in _LLVM_FIELD.findall(m.group(3))}
            nodes[m.group(1)] = (m.group(2), fields)
    return nodes


def _ref(value: str | None) -> str | None:
    return value[1:] if value and value.startswith("!") and value[1:].isdigit() else None


def _scope_file(nodes: dict, ref: str | None, depth: int = 0) -> str | None:
    """The file path of a scope: its own `file:` or its parent scope's."""
    while ref is not None and ref in nodes and depth < 64:
        kind, fields = nodes[ref]
        if kind == "DIFile":
            name, folder = fields.get("filename", ""), fields.get("directory", "")
            return name if os.path.isabs(name) or not folder else os.path.join(folder, name)
        ref, depth = _ref(fields.get("file")) or _ref(fields.get("scope")), depth + 1
    return None


def _llvm_frames(nodes: dict, ref: str | None) -> Frames:
    frames, seen = [], set()
    while ref is not None and ref in nodes and ref not in seen:
        seen.add(ref)
        kind, fields = nodes[ref]
        if kind != "DILocation":
            break
        line = int(fields.get("line", "0") or 0)
        path = _scope_file(nodes, _ref(fields.get("scope")))
        if line and path:
            frames.append(Frame(path, line))
        ref = _ref(fields.get("inlinedAt"))
    return tuple(frames)


def llir_line_frames(ir: str) -> dict[int, Frames]:
    """1-based line of every instruction with a `!dbg` location in LLVM IR -> its frames."""
    nodes = _llvm_nodes(ir)
    found: dict[int, Frames] = {}
    for line_no, raw in enumerate(ir.splitlines(), start=1):
        if raw.startswith(("!", "define", "declare")):
            continue
        m = _DBG.search(raw)
        frames = _llvm_frames(nodes, m.group(1)) if m else ()
        if frames:
            found[line_no] = frames
    return found
