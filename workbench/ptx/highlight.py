"""Highlighting of PTX and SASS for the TUI (Rich only, no Textual).

    text = render(ptx)            # rich Text: Pygments' PTX lexer + emphasised instructions
    where = positions(ptx)        # kind -> 0-based line numbers, for jumping and filtering
    syn = syntax(ptx)             # rich Syntax (line numbers, theme) with the same emphasis

The important instructions get distinct styles on their opcode: global loads and stores, shared
loads and stores, shfl.sync, bar.sync, cp.async(.bulk.tensor), ldmatrix, mma, wgmma; in SASS
LDG, STG, LDS, STS, LDSM, SHFL, BAR, HGMMA, HMMA, LDGSTS, UTMALDG and spills (LDL/STL).
Text that looks like SASS (`/*0000*/` addresses) is treated as SASS. Where Pygments lacks its
PTX lexer, the text is plain apart from the emphasis.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from rich.style import Style
from rich.syntax import Syntax
from rich.text import Text

from workbench.ptx.counts import iter_instructions, load_store_key, prefix_key
from workbench.ptx.sass import SASS_KINDS, sass_opcode

PTX_STYLES: dict[str, str] = {
    "ld_global": "bold black on green3",
    "st_global": "bold white on red3",
    "ld_shared": "bold black on cyan3",
    "st_shared": "bold black on turquoise2",
    "shfl_sync": "bold black on yellow3",
    "bar_sync": "bold white on purple3",
    "cp_async_bulk_tensor": "bold white on blue3",
    "cp_async": "bold white on dodger_blue3",
    "ldmatrix": "bold black on orange3",
    "mma": "bold black on gold3",
    "wgmma": "bold black on gold1",
    "ld_local": "bold white on dark_orange3",
    "st_local": "bold white on dark_orange3",
}
SASS_STYLES: dict[str, str] = {
    "LDG": PTX_STYLES["ld_global"], "STG": PTX_STYLES["st_global"],
    "LDS": PTX_STYLES["ld_shared"], "STS": PTX_STYLES["st_shared"],
    "LDSM": PTX_STYLES["ldmatrix"], "STSM": PTX_STYLES["ldmatrix"],
    "SHFL": PTX_STYLES["shfl_sync"], "BAR": PTX_STYLES["bar_sync"],
    "HGMMA": PTX_STYLES["wgmma"], "HMMA": PTX_STYLES["mma"],
    "LDGSTS": PTX_STYLES["cp_async"], "UTMALDG": PTX_STYLES["cp_async_bulk_tensor"],
    "UTMASTG": PTX_STYLES["cp_async_bulk_tensor"],
    "LDL": PTX_STYLES["ld_local"], "STL": PTX_STYLES["st_local"],
}
DEFAULT_THEME = "monokai"
_SASS_ADDRESS = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/", re.MULTILINE)


def _as_text(code: Any) -> str:
    """A kernel's texts entry ({"ptx": ..., "sass": ...}) or a string -> the string (PTX first)."""
    if isinstance(code, dict):
        return code.get("ptx") or code.get("sass") or ""
    return code or ""


def is_sass(code: str) -> bool:
    """Whether the text is SASS (cuobjdump's `/*0000*/` instruction addresses)."""
    return bool(_SASS_ADDRESS.search(code))


def ptx_kind(opcode: str) -> str | None:
    """The emphasis kind of a PTX opcode (`ld.global.nc.v4.f32` -> `ld_global`), or None."""
    key = load_store_key(opcode)
    if key:
        kind = "_".join(key.split("_")[:2])
        return kind if kind in PTX_STYLES else None
    key = prefix_key(opcode)
    return key if key in PTX_STYLES else None


def _spans(code: str) -> Iterator[tuple[int, int, int, str]]:
    """(0-based line, start column, end column, kind) of every emphasised opcode."""
    lines = code.split("\n")
    if is_sass(code):
        for i, line in enumerate(lines):
            op = sass_opcode(line)
            kind = SASS_KINDS.get(op.split(".")[0]) if op else None
            if kind in SASS_STYLES:
                col = line.find(op, line.find("*/") + 2)
                yield i, col, col + len(op), kind
        return
    for ins in iter_instructions(code):
        kind = ptx_kind(ins.opcode)
        if kind is None:
            continue
        line = lines[ins.line - 1]
        col = _opcode_column(line, ins.opcode)
        if col >= 0:
            yield ins.line - 1, col, col + len(ins.opcode), kind


def _opcode_column(line: str, opcode: str) -> int:
    """Column of `opcode` as a whole token (not inside a comment or another word)."""
    for m in re.finditer(re.escape(opcode), line):
        before = line[m.start() - 1] if m.start() else " "
        after = line[m.end()] if m.end() < len(line) else " "
        if not (before.isalnum() or before in "._") and not (after.isalnum() or after in "._"):
            return m.start()
    return -1


def positions(code: Any) -> dict[str, list[int]]:
    """Kind -> sorted 0-based line numbers of the emphasised instructions (kinds present only)."""
    code = _as_text(code)
    found: dict[str, list[int]] = {}
    for line, _, _, kind in _spans(code):
        lines = found.setdefault(kind, [])
        if not lines or lines[-1] != line:
            lines.append(line)
    return found


def _styles(code: str) -> dict[str, str]:
    return SASS_STYLES if is_sass(code) else PTX_STYLES


def _base_text(code: str, theme: str) -> Text:
    if is_sass(code):
        text = Text(code)
        text.highlight_regex(r"/\*[0-9a-f]{4,}\*/", "dim")
        text.highlight_regex(r"\bU?R[0-9Z]+\b|\bU?P[0-9T]\b", "cyan")
        return text
    try:
        from pygments.lexers import PtxLexer  # noqa: F401 (Pygments >= 2.16)
        text = Syntax(code, "ptx", theme=theme).highlight(code)
    except Exception:  # no PTX lexer in this Pygments: plain text, emphasis still applied
        text = Text(code)
    if text.plain != code:  # Syntax appends a newline; keep offsets identical to `code`
        text = text[: len(code)] if text.plain.startswith(code) else Text(code)
    return text


def render(code: Any, theme: str = DEFAULT_THEME) -> Text:
    """PTX or SASS as a rich Text whose plain text is exactly `code`, important opcodes emphasised."""
    code = _as_text(code)
    text = _base_text(code, theme)
    styles = _styles(code)
    offsets = _line_offsets(code)
    for line, start, end, kind in _spans(code):
        text.stylize(Style.parse(styles[kind]), offsets[line] + start, offsets[line] + end)
    return text


def syntax(code: Any, theme: str = DEFAULT_THEME, line_numbers: bool = True) -> Syntax:
    """A rich Syntax of the PTX (or SASS, as plain text) with the same emphasis, for printing."""
    code = _as_text(code)
    lexer = "text" if is_sass(code) else "ptx"
    try:
        syn = Syntax(code, lexer, theme=theme, line_numbers=line_numbers)
    except Exception:
        syn = Syntax(code, "text", theme=theme, line_numbers=line_numbers)
    styles = _styles(code)
    lines = code.split("\n")
    for line, start, end, kind in _spans(code):
        # Syntax expands tabs before applying ranges: columns are on the expanded line
        col = len(lines[line][:start].expandtabs(syn.tab_size))
        syn.stylize_range(Style.parse(styles[kind]), (line + 1, col), (line + 1, col + end - start))
    return syn


def _line_offsets(code: str) -> list[int]:
    offsets, pos = [], 0
    for line in code.split("\n"):
        offsets.append(pos)
        pos += len(line) + 1
    return offsets
