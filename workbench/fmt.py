"""The one number formatter of the CLI tables and the TUI panes: pure functions, units in the output."""

from __future__ import annotations

import math
import re
from typing import Any, TypeGuard

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CONTROL_BUT_LINES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: Any, *, lines: bool = False) -> str:
    """`text` with every control character written out (`\x1b`, `\n`): a session's name or an
    impl's label that reached the terminal raw could clear the screen or hide output. lines:
    keep newlines and tabs (a message of several lines)."""
    return (_CONTROL_BUT_LINES if lines else _CONTROL).sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))


def clip(text: str, limit: int) -> str:
    """`text` whole when it fits in `limit` characters, else cut at the last space before the
    limit with an ellipsis: an error cut mid-word ("run with --force to ") read as another one."""
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip() + "…"


def is_number(value: Any) -> TypeGuard[float]:
    """A real, finite number (bools and NaN are not)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def ms(value: float | None) -> str:
    """A duration given in ms, shown in the unit that reads best (µs below 1 ms, s above 10 s)."""
    if not is_number(value):
        return "-"
    if value < 1.0:
        return f"{value * 1000:.3g} µs"
    if value < 10_000:
        return f"{value:.4g} ms"
    return f"{value / 1000:.3g} s"


def spread(p20: float | None, p80: float | None, median: float | None) -> str:
    """p20..p80 around the median as a percentage of it: '±0.4%' where the two sides are alike,
    '-0.5/+4852%' where one side is more than twice the other and at least 1% (a symmetric
    '±2426%' beside a 706 us median would hide that the median sits at the low edge)."""
    if not (is_number(p20) and is_number(p80) and is_number(median)) or median <= 0:
        return "-"
    below, above = (median - p20) / median * 100, (p80 - median) / median * 100
    if max(below, above) >= 1 and max(below, above) > 2 * min(below, above):
        return f"-{_pct(below)}/+{_pct(above)}%"
    pct = (p80 - p20) / 2 / median * 100
    return f"±{_pct(pct)}%"


def _pct(value: float) -> str:
    return f"{value:.2g}" if value < 10 else f"{value:.0f}"


def number(value: float | None, digits: int = 4) -> str:
    """`digits` significant digits, thousands separated from 10**digits up; '-' for no number
    (None, a bool, not a number), 'inf' / 'nan' as such."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-"
    if not math.isfinite(value):
        return str(value)
    if abs(value) >= 10 ** digits:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def grouped(value: float | None, digits: int = 4) -> str:
    """number(), with thousands separated from 1,000 up, not from 10**digits: a column of
    microseconds read '13,800' above '2317' (the Profile pane)."""
    if not is_number(value) or not math.isfinite(value):
        return number(value, digits)
    rounded = value if abs(value) >= 10 ** digits else float(f"{value:.{digits}g}")  # 9999.6 -> 10000, not 1e+04
    return f"{rounded:,.0f}" if abs(rounded) >= 1000 else number(value, digits)


def si(value: float | None) -> str:
    """A count with an SI prefix: 2415919104 -> '2.42 G'."""
    if not is_number(value):
        return "-"
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}"
    return f"{value:.3g}"


def percent(value: float | None) -> str:
    return f"{value:.1f}%" if is_number(value) else "-"


def size_bytes(value: float | None) -> str:
    """Bytes in binary units: 2147483648 -> '2 GiB'."""
    if not is_number(value):
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.3g} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1024
    return "-"


def check(record: dict | None) -> str:
    """'pass', 'FAIL (rel 0.03)' (the largest relative error) or '-' from a check record."""
    if not record:
        return "-"
    if record.get("passed"):
        return "pass"
    rel = record.get("max_rel_err")
    return f"FAIL (rel {rel:.1g})" if is_number(rel) else "FAIL"
