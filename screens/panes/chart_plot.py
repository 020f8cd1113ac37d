"""A textual-plotext plot that draws from our own data on every render.

plotext transforms the data of a log axis in place when it builds the figure, so building the
same figure twice (a resize, the sidebar toggled) took log10 of log10 values: `math domain
error` from inside Textual's render, which ended the app. Here the figure is cleared and drawn
afresh from a callback before each build, and any plotting error becomes a line in the chart.

A build is kept for the next render of the same drawing at the same size and theme: Textual
renders a widget again when it comes back on screen (a pane key), and plotext's build was the
largest part of a pane switch mid-run (~0.2 s a chart on the 2-core CPU under load).

plotext and textual-plotext are imported at the first drawing, not with this module: the first
frame shows no chart (no results yet), and their import was ~10% of the app's before it
(issue #39: nothing the first frame does not show is imported before it). The widget is
textual-plotext's PlotextPlot, less its import: its plot object, theme and render as there.
"""

from __future__ import annotations

from typing import Callable

from rich.text import Text
from textual.widget import Widget

Draw = Callable[[object], "str | Text"]  # draws into `plt`, returns the caption


class ChartPlot(Widget):
    """`draw(fn)`: `fn(plt)` plots (it clears first, as every charts.* function does)."""

    DEFAULT_CSS = """
    ChartPlot {
        width: 1fr;
        height: 1fr;
    }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._plot = None  # textual_plotext's Plot, made (and the module imported) on first use
        self._draw_fn: Draw | None = None
        self._built: tuple[tuple, object] | None = None  # (key, renderable) of the last build
        self.builds = 0  # plotext builds so far (render() calls that drew)
        self._fresh = False

    def draw(self, fn: Draw) -> "str | Text":
        """Keep `fn` for every later render; returns its caption (or what went wrong)."""
        self._draw_fn = fn
        self._built = None
        self._fresh = True  # plt holds fn's data, not yet built (the next render needs no redraw)
        try:
            caption = fn(self.plt)
        except Exception as exc:  # noqa: BLE001 - a chart must never end the app
            caption = f"chart not drawn: {type(exc).__name__}: {exc}"
        self.refresh()
        return caption

    @property
    def plt(self):
        """The plotext plotting object (textual_plotext.plot.Plot), imported on first use."""
        if self._plot is None:
            from textual_plotext.plot import Plot

            self._plot = Plot()
        return self._plot

    def _theme_name(self) -> str:
        """PlotextPlot's "auto" theme: the app theme's surface and foreground colours,
        registered with plotext once per app theme."""
        from plotext._dict import themes
        from textual.color import Color
        from textual_plotext.plot import _rgbify_theme, _sequence

        name = f"textual-auto-{self.app.theme}"
        if name not in themes:
            variables = self.app.theme_variables
            surface = Color.parse(variables.get("surface")).rgb
            themes[name] = _rgbify_theme(surface, surface, Color.parse(variables.get("foreground")).rgb, "default",
                                         _sequence)
        return name

    def _build(self):
        """PlotextPlot.render: the figure at this widget's size and theme, as rich Text."""
        plot = self.plt
        plot.plotsize(self.size.width, self.size.height)
        plot._set_size(self.size.width, self.size.height)  # (textual-plotext issue 5: needed as well)
        plot.theme(self._theme_name())
        return Text.from_ansi(plot.build())

    def render(self):
        if self._draw_fn is None:
            return Text("")  # nothing drawn yet: no plotext needed
        key = (id(self._draw_fn), self.size.width, self.size.height, self.app.theme)
        if self._built is not None and self._built[0] == key:
            return self._built[1]
        try:
            if self._draw_fn is not None and not self._fresh:
                self._draw_fn(self.plt)  # fresh data: plotext never re-transforms its own output
            self._fresh = False
            built = self._build()
        except Exception as exc:  # noqa: BLE001
            return Text(f"chart not drawn: {type(exc).__name__}: {exc}", style="italic")
        self.builds += 1
        self._built = (key, built)
        return built



class DrawnWhenShown:
    """For a pane holding a ChartPlot: while a run streams and the pane is off screen (another
    pane's key), `draw_later(*args)` keeps what to draw instead, and the pane's Show draws it
    (`_draw_shown(*args)`, the pane's own drawing method) a frame after the pane is painted with
    its last build; a run's last update, and any edit while idle, is drawn at once. Mid-run, the
    Timing pane's frame took 60-90 ms on the H200 against 30-45 ms for Profile, mostly a plotext
    build behind the key."""

    _pending: tuple | None = None  # the arguments of the drawing waiting for the pane to show

    def draw_later(self, *args) -> bool:
        """True when the drawing was kept for later (the caller returns); else it is due now."""
        if not self.is_on_screen and bool(getattr(self.app, "running", False)):
            self._pending = args
            return True
        self._pending = None
        return False

    def on_show(self) -> None:
        pending = self._pending
        if pending is not None:
            self.call_after_refresh(lambda: self._pending is pending and self._draw_shown(*pending))

    def _draw_shown(self, *args) -> None:
        raise NotImplementedError
