"""Safe YAML reading with line marks (CONTRACTS.md, "Session file").

`read_yaml(text)` composes the document with PyYAML's SafeLoader, records the line of every
mapping key and sequence item by its path (`runs[1].shape.K`), refuses any tag the safe loader
does not own (`!!python/object/apply:...` is a problem with its line, and nothing is
constructed), refuses duplicate keys, and only then constructs plain Python data.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

# Tags whose constructors SafeLoader owns: plain data only.
SAFE_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in (
    "null", "bool", "int", "float", "str", "seq", "map", "timestamp", "binary", "merge",
    "omap", "pairs", "set", "value"))
MAX_NODES = 100_000  # after alias expansion: refuses "billion laughs" documents
# Caps applied before and while composing, so a hostile or mistaken file is refused in bounded
# time and memory (measured without them: a 50 MB session took 370 s and 7.3 GB before "more than 100000
# values"; 500 nested `[` was a RecursionError, a 5000-digit integer a ValueError traceback).
MAX_FILE_BYTES = 1 << 20  # 1 MiB: the shipped sessions are under 4 KiB
MAX_DEPTH = 64            # nested mappings and lists; a session needs about 6
MAX_INT_DIGITS = 100      # a shape or sweep value is far below; Python refuses str->int past 4300


_FILE_LINE = re.compile(r"\.\w+:\d+\b")  # `plug.py:2`, a line of another file in a message


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a session: where (dotted path, line) and what."""

    path: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        """`path: message (line N)`; `(session file line N)` when the message carries a line of
        another file (a plugin's `plug.py:2: SyntaxError`: two bare line numbers read as one)."""
        where = f"{self.path}: " if self.path else ""
        of = "session file line" if _FILE_LINE.search(self.message) else "line"
        line = f" ({of} {self.line})" if self.line else ""
        return f"{where}{self.message}{line}"

    def as_dict(self) -> dict:
        return {"path": self.path, "line": self.line, "message": self.message}


class Problems:
    """Collects problems, attaching the line of the path (or of its nearest ancestor)."""

    def __init__(self, marks: Mapping[str, int] | None = None):
        self.marks = dict(marks or {})
        self.items: list[Problem] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(Problem(path, message, self.line(path)))

    def line(self, path: str) -> int | None:
        while True:
            if path in self.marks:
                return self.marks[path]
            if not path:
                return None
            path = parent_path(path)

    def __bool__(self) -> bool:
        return bool(self.items)


def parent_path(path: str) -> str:
    """`runs[1].shape.K` -> `runs[1].shape` -> `runs[1]` -> `runs` -> ``."""
    return re.sub(r"(\.[^.\[\]]*|\[\d+\]|^[^.\[\]]+)$", "", path)


def child_path(path: str, key: object) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def show(value: object) -> str:
    """A value as the message shows it: text in double quotes, YAML words for true/null and for
    the non-finite floats (`.inf`, `-.inf`, `.nan`, as the file spells them; JSON said Infinity)."""
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
    try:
        text = json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def read_yaml(text: str) -> tuple[Any, dict[str, int], list[Problem]]:
    """Parse one YAML document safely: (data, marks path -> line, problems).

    data is None when there are problems (a parse error, an unsafe tag, a duplicate key, a
    limit: MAX_FILE_BYTES of text, MAX_DEPTH levels, MAX_NODES values, MAX_INT_DIGITS digits).
    """
    if len(text) > MAX_FILE_BYTES:  # characters: at most 4x that in bytes, refused before any parse
        return None, {}, [Problem("", size_message(len(text), "characters"))]
    try:
        loader = _CappedLoader(text)
    except yaml.reader.ReaderError as exc:
        line = text[:exc.position].count("\n") + 1
        return None, {}, [Problem("", f"not valid YAML: {exc.reason} (character #x{exc.character:04x})"
                                      if isinstance(exc.character, int) else f"not valid YAML: {exc.reason}", line)]
    try:
        try:
            node = loader.get_single_node()
        except _Limit as exc:
            return None, {}, [Problem("", exc.message, exc.line)]
        except yaml.MarkedYAMLError as exc:
            return None, {}, [_parse_problem(exc, text)]
        except yaml.YAMLError as exc:
            return None, {}, [Problem("", f"not valid YAML: {exc}")]
        except RecursionError:  # not reached under MAX_DEPTH; a clean problem all the same
            return None, {}, [Problem("", f"nested too deeply: at most {MAX_DEPTH} levels of mappings and lists")]
        if node is None:
            return None, {}, [Problem("", "the file is empty; a session is a mapping with "
                                          "schema_version, name and runs")]
        marks: dict[str, int] = {}
        problems = Problems()
        _walk(node, "", marks, problems, {})
        if problems:
            return None, marks, [Problem(p.path, p.message, p.line or marks.get(p.path)) for p in problems.items]
        try:
            data = loader.construct_document(node)
        except yaml.MarkedYAMLError as exc:
            return None, marks, [_parse_problem(exc, text)]
        except (ValueError, OverflowError, RecursionError) as exc:  # a value its constructor refuses
            return None, marks, [Problem("", f"a value cannot be read: {exc}")]
        return data, marks, []
    finally:
        loader.dispose()


def size_message(size: int, unit: str = "bytes") -> str:
    return (f"the file is {size} {unit}; a session file holds at most {MAX_FILE_BYTES} bytes (1 MiB): "
            "refused before reading it")


class _Limit(Exception):
    """A cap reached while composing: one problem at the line where it was reached."""

    def __init__(self, message: str, mark):
        super().__init__(message)
        self.message, self.line = message, (mark.line + 1 if mark is not None else None)


class _CappedLoader(yaml.SafeLoader):
    """SafeLoader whose composer stops at MAX_DEPTH levels and MAX_NODES nodes (aliases not yet
    expanded: `_walk` counts those), before the rest of the file is scanned: PyYAML's composer
    recurses once a level (RecursionError at ~330) and builds every node of a 5M-item list."""

    _depth = 0
    _nodes = 0

    def compose_node(self, parent, index):
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise _Limit(f"more than {MAX_NODES} values: a session holds at most {MAX_NODES}; refused",
                         self.peek_event().start_mark)
        if self._depth >= MAX_DEPTH:
            raise _Limit(f"nested more than {MAX_DEPTH} levels deep (mappings and lists): a session is at most "
                         f"{MAX_DEPTH} deep; refused", self.peek_event().start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _parse_problem(exc: yaml.MarkedYAMLError, text: str) -> Problem:
    """One Problem for a YAML syntax error, at the line a person has to edit.

    PyYAML marks where it noticed the error (`problem_mark`), which for an unclosed quote or
    bracket or a key without its ':' is the line after the culprit; the culprit is the
    `context_mark` ("while scanning a simple key", "while parsing a flow sequence"). Those errors
    are placed at the context's line and name both lines; the others at the problem's line.
    """
    last_line = max(1, len(text.splitlines()))

    def line_of(mark) -> int | None:  # "end of stream" is past the last line
        return min(mark.line + 1, last_line) if mark else None

    context_line, problem_line = line_of(exc.context_mark), line_of(exc.problem_mark)
    if context_line and problem_line and context_line != problem_line:
        if str(exc.context or "").startswith(("while scanning", "while parsing a flow")):
            what = f"{exc.context} {exc.problem or ''} (noticed on line {problem_line})"
            return Problem("", f"not valid YAML: {what}", context_line)
        what = f"{exc.context} (from line {context_line}) {exc.problem or ''}"
        return Problem("", f"not valid YAML: {what}", problem_line)
    what = " ".join(str(s) for s in (exc.context, exc.problem) if s)
    return Problem("", f"not valid YAML: {what or exc}", problem_line or context_line)


def _walk(node: Node, path: str, marks: dict[str, int], problems: Problems, sizes: dict[int, int]) -> int:
    """Record lines, check tags and duplicate keys; return the node count after alias expansion."""
    if id(node) in sizes:  # an alias: counted again, not walked again
        return sizes[id(node)]
    sizes[id(node)] = 1
    if node.tag not in SAFE_TAGS:
        tag = node.tag.replace("tag:yaml.org,2002:", "!!")
        problems.add(path, f"tag {tag} is not allowed: sessions are plain data, read with the safe loader")
        marks.setdefault(path, node.start_mark.line + 1)
    elif node.tag == "tag:yaml.org,2002:int" and isinstance(node, ScalarNode) and len(node.value) > MAX_INT_DIGITS:
        problems.items.append(Problem(path, f"an integer of {len(node.value)} characters: at most {MAX_INT_DIGITS} "
                                            "digits are read", node.start_mark.line + 1))
    count = 1
    if isinstance(node, MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value) if isinstance(key_node, ScalarNode) else "?"
            child = child_path(path, key)
            if key in seen and key != "<<":
                first, line = marks.get(child), key_node.start_mark.line + 1  # the problem is the repeat's line
                problems.items.append(Problem(child, f"duplicate key {show(key)}" + (
                    f" (first at line {first})" if first and first != line else ""), line))
            seen.add(key)
            marks.setdefault(child, key_node.start_mark.line + 1)
            count += _walk(key_node, child, {}, problems, sizes)  # keys carry tags too
            count += _walk(value_node, child, marks, problems, sizes)
    elif isinstance(node, SequenceNode):
        for index, item in enumerate(node.value):
            child = child_path(path, index)
            marks.setdefault(child, item.start_mark.line + 1)
            count += _walk(item, child, marks, problems, sizes)
    sizes[id(node)] = count
    if count > MAX_NODES and not problems.items:
        problems.add(path, f"more than {MAX_NODES} values here (YAML aliases counted as expanded): a session holds "
                           f"at most {MAX_NODES}; refused")
    return count
