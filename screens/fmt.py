"""Formatting for the TUI: the numbers come from workbench.fmt (the one formatter the CLI
tables use too); here only what is the TUI's own (timer marks, row titles, the F-key hint)."""

from __future__ import annotations

from typing import Any

from workbench.fmt import check, grouped, is_number, ms, number, percent, printable, si, size_bytes, spread  # noqa: F401


def timer(name: str | None, interpreted: bool = False) -> str:
    """The timer's name, marked when the figure is not GPU speed (CPU clock, Triton interpreter)."""
    if not name:
        return "-"
    if name == "interpreter" or (name == "perf_counter" and interpreted):
        return "interpreter (not GPU speed)"
    if name == "perf_counter":
        return "perf_counter (CPU)"
    return name


def row_title(label: str, sweep_value: Any) -> str:
    """`triton`, or `triton @ 4096` for a sweep point; control characters in a session's label
    written out (`\x1b`: an escape that reached the terminal could clear the screen)."""
    label = printable(label)
    return label if sweep_value is None else f"{label} @ {sweep_value}"


def fit_title(label: str, sweep_value: Any, width: int) -> str:
    """row_title in at most `width` cells: the label cut with '…' before its ' @ value' (the
    sweep value is what tells the rows apart); the whole title where it fits."""
    title = row_title(label, sweep_value)
    if len(title) <= width:
        return title
    suffix = title[len(printable(label)):]  # '' or ' @ 4096'
    keep = max(1, width - len(suffix) - 1)
    return printable(label)[:keep] + "…" + suffix


CLI_FORCE_HINT = "(run with --force to try)"
TUI_FORCE_HINT = "(press F, or \"Run anyway\" in ctrl+p, to run it)"


def tui_text(text: str | None) -> str:
    """An engine message in the TUI's words: its --force hint becomes the F key."""
    return (text or "").replace(CLI_FORCE_HINT, TUI_FORCE_HINT)


def short_folder(folder) -> str:
    """A folder for a Log line: `~/...` under the home directory, else as given, with a trailing
    `/` (a folder, not a file)."""
    from pathlib import Path

    path = Path(folder)
    try:
        text = "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        text = str(path)
    return text.rstrip("/") + "/"
