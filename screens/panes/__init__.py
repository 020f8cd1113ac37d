"""The result panes of the TUI and the one table that declares them (`PANES`).

Each pane is a widget in a module of this package (`timing.py`, `profile.py`, ...); the modules
beside them (`charts.py`, `chart_plot.py`, `kernel_names.py`, `ptx_view.py`, `ptx_split.py`) are
used by the panes only. Everything else the app knows of a pane comes from its row in `PANES`:
the tab (app.py), its key and its palette entry (commands.py), its label at 80 columns
(fitting.py), which panes get the run's results (editor.py) and its keys in the help (`?`).
How to add one: README.md in this folder.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.widget import Widget


@dataclass(frozen=True)
class Pane:
    """One pane of the TUI, declared once."""

    id: str  # the tab's id and the argument of action_pane ("timing"); lower case, a-z0-9_-
    title: str  # the tab's label and palette entry ("Timing")
    short: str  # the label where full titles do not fit (80 columns); its first 3 letters below that
    key: str  # the key that shows it (a Textual key name: "1")
    help: str  # the `?` screen's group for the pane's own keys (its class's BINDINGS); "" for none
    module: str  # its module in this package ("timing")
    cls: str  # the widget class in that module ("TimingPane")
    focus: str  # the selector (within the pane) that gets the keyboard when the pane is shown
    results: bool = True  # it shows the run's results (editor.py sets its `model`); the Log does not
    # A results pane is a container: its reactives (model, current, metric, ...) are declared
    # repaint=False. Its widgets repaint themselves when their watchers change them; a repaint of
    # the pane made every streamed redraw repaint the whole pane's region (each widget in it,
    # unchanged lines too: ~15% of a streaming frame on the 2-core CPU).

    def widget_class(self) -> type[Widget]:
        """The pane's widget class, imported on first use (no torch: the front end's rule)."""
        return _load(self.module, self.cls)


# The order is the tabs' order.
PANES: tuple[Pane, ...] = (
    Pane("timing", "Timing", "Time", "1", "Timing pane", "timing", "TimingPane", "#results-table"),
    Pane("profile", "Profile", "Prof", "2", "Profile pane", "profile", "ProfilePane", "#profile-table"),
    Pane("ptx", "PTX", "PTX", "3", "PTX pane", "ptx", "PtxPane", "#ptx-scroll"),
    Pane("traffic", "Traffic", "Traf", "4", "", "traffic", "TrafficPane", "#traffic-table"),
    Pane("log", "Log", "Log", "5", "", "log", "LogPane", "LogPane", results=False),
    Pane("diagnosis", "Diagnosis", "Diag", "6", "Diagnosis pane", "diagnosis", "DiagnosisPane", "#diagnosis-table"),
)

_ID = re.compile(r"^[a-z][a-z0-9_-]*$")


def check_table(panes: tuple[Pane, ...]) -> None:
    """Raise ValueError naming the first row that cannot be a pane: an id, key, title or help
    group used twice, an id that is not a CSS id, an empty title or short title."""
    seen: dict[str, dict[str, str]] = {"id": {}, "key": {}, "title": {}, "help": {}}
    for pane in panes:
        if not _ID.match(pane.id):
            raise ValueError(f"pane id {pane.id!r}: must be lower case letters, digits, '-' or '_' "
                             "(it is the tab's CSS id)")
        if not pane.title or not pane.short or not pane.key:
            raise ValueError(f"pane {pane.id!r}: title, short title and key must not be empty")
        for column in seen:
            value = getattr(pane, column)
            if not value:
                continue
            if value in seen[column] and column == "id":
                raise ValueError(f"pane id {value!r} is in the table twice (each pane's id must be its own)")
            if value in seen[column]:
                raise ValueError(f"pane {pane.id!r}: {column} {value!r} is taken by pane {seen[column][value]!r} "
                                 f"(each pane's {column} must be its own)")
            seen[column][value] = pane.id


check_table(PANES)
BY_ID = {pane.id: pane for pane in PANES}


def result_panes() -> list[tuple[str, type[Widget]]]:
    """(id, widget class) of every pane that shows the run's results, in tab order."""
    return [(pane.id, pane.widget_class()) for pane in PANES if pane.results]


def help_groups() -> list[tuple[str, object]]:
    """(group, the pane class's bindings) for the `?` screen, one per pane that has a help group."""
    return [(pane.help, pane.widget_class().BINDINGS) for pane in PANES if pane.help]


@cache
def _load(module: str, cls: str) -> type[Widget]:
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)
