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
textual-plotext's PlotextPlot, less its import: its plot object and theme as there.

While a run streams (the app's `running`), a new build is made off the UI thread (one builder
thread for every chart, a plotext figure of its own per chart, one build at a time and one
start every STREAM_BUILD_S at most, of the newest drawing) and the chart shows its last build
until the new one arrives: a pane key never waits behind a plotext build (~20-30 ms of
Python on the 2-core CPU box at 200x50, the largest part of a redraw mid-run). Idle, a build is
made in the render, as before (what a test or a finished run shows is drawn at once).

A build is kept as terminal lines (Strips), read from plotext's character matrix: no ANSI
string is written (plotext's set_canvas) and parsed back (rich's Text.from_ansi), and a pane key
that shows the chart again copies its lines instead of rendering a Text afresh (that render was
~12 ms of every Timing-pane key on the 2-core CPU box, the build's ANSI round trip ~15 ms of each
redraw mid-run). The lines are the same cells and styles as the ANSI path's
(tests/test_chart_strips.py compares them).
"""

from __future__ import annotations

import time
from typing import Callable

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.message import Message
from textual.strip import Strip
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
        self._drawing = 0  # draw() calls so far: the drawing a build is of
        self._built: tuple[tuple, list[Strip]] | None = None  # (key, lines) of the current drawing's build
        self._last: list[Strip] | None = None  # the newest build of any key: shown while one is made
        self._building: tuple | None = None  # the key of the build in flight off the UI thread
        self._build_started = 0.0  # time.monotonic() of the last build started off the UI thread
        self._build_timer = None  # the timer that starts the next one (STREAM_BUILD_S)
        self._builder_plot = None  # the builder thread's own figure (plotext is not thread-safe)
        self.builds = 0  # builds so far (in the render or off the UI thread)
        self._fresh = False

    def draw(self, fn: Draw) -> "str | Text":
        """Keep `fn` for every later render; returns its caption (or what went wrong)."""
        self._draw_fn = fn
        self._drawing += 1
        self._built = None
        # while a run streams the builder thread draws it into a figure of its own: here it is
        # drawn into nothing, for its caption (plotext's figure reset and data, ~half of a
        # streaming redraw's UI-thread time on the 2-core CPU, was redone there anyway)
        off_thread = self._streaming() and self.is_mounted
        self._fresh = not off_thread  # plt holds fn's data, not yet built (the next render needs no redraw)
        try:
            caption = fn(NO_PLOT if off_thread else self.plt)
        except Exception as exc:  # noqa: BLE001 - a chart must never end the app
            caption = f"chart not drawn: {type(exc).__name__}: {exc}"
        if off_thread:
            # the lines on screen stay until the build arrives (_arrived refreshes): a refresh
            # now would render the same lines again, and the containers under them
            self._want_build()
        else:
            self.refresh()
        return caption

    def drop_last(self) -> None:
        """Forget the newest build: the next drawing is built at once, on the UI thread, not
        left to the builder while the old lines stay (a new run's first ~0.25 s showed the
        previous run's chart)."""
        self._last = None

    def _streaming(self) -> bool:
        """Builds go off the UI thread: a run streams and an earlier build is there to show."""
        return self._last is not None and bool(getattr(self.app, "running", False))

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

    def _build(self, plot, width: int, height: int, theme: str) -> list[Strip]:
        """The figure drawn into `plot` at this size and theme, one Strip per line (matrix_strips)."""
        plot.plotsize(width, height)
        plot._set_size(width, height)  # (textual-plotext issue 5: needed as well)
        plot.theme(theme)
        plot._set_sizes()  # plotext's Figure.build, less its set_canvas (the ANSI string)
        plot._build_matrix()
        return matrix_strips(plot.monitor.matrix)

    def _error_strips(self, exc: BaseException) -> list[Strip]:
        text = Text(f"chart not drawn: {type(exc).__name__}: {exc}", style="italic")
        lines = Segment.split_and_crop_lines(text.render(self.app.console), max(1, self.size.width), pad=False)
        return [Strip(line) for line in lines]

    def _strips(self) -> list[Strip]:
        """The lines of the current drawing at this size and theme: the kept build when its key
        matches; while a run streams, the last build while this one is made off the UI thread;
        else drawn and built now (an error becomes the chart's one line, not kept)."""
        if self._draw_fn is None:
            return []  # nothing drawn yet: no plotext needed
        key = self._key()
        if self._built is not None and self._built[0] == key:
            return self._built[1]
        if self._streaming():
            self._want_build()
            return self._last
        try:
            if not self._fresh:
                self._draw_fn(self.plt)  # fresh data: plotext never re-transforms its own output
            self._fresh = False
            built = self._build(self.plt, key[1], key[2], self._theme_name())
        except Exception as exc:  # noqa: BLE001
            return self._error_strips(exc)
        self.builds += 1
        self._built = (key, built)
        self._last = built
        return built

    def _key(self) -> tuple:
        """What a build is of: the drawing, this widget's size and the app's theme."""
        return self._drawing, self.size.width, self.size.height, self.app.theme

    def _want_build(self) -> None:
        """While a run streams: the current drawing is built off the UI thread, one build at a
        time, started at most every STREAM_BUILD_S (then the newest drawing): a pane key that
        comes while a build runs shares the interpreter with it."""
        if self._building is not None or self._build_timer is not None or not self._streaming():
            return  # (the build in flight asks again when it arrives; the timer starts the next)
        wait = self._build_started + STREAM_BUILD_S - time.monotonic()
        if wait > 0:
            self._build_timer = self.set_timer(wait, self._build_due)
        else:
            self._build_due()

    def _build_due(self) -> None:
        self._build_timer = None
        if not self.is_attached or self._building is not None:
            return
        if not self._streaming():  # the run ended meanwhile: the render builds it, at once
            self.refresh()
            return
        now = time.monotonic()
        key_pending = getattr(self.app, "key_pending", None)  # (runner.RunnerMixin: a key's frame comes first)
        if key_pending is not None and key_pending(now):
            self._build_timer = self.set_timer(KEY_WAIT_S, self._build_due)
            return
        key = self._key()
        if self._built is None or self._built[0] != key:
            self._build_started = now
            self._build_off_thread(key)

    def _build_off_thread(self, key: tuple) -> None:
        """Draw and build `key`'s chart on the builder thread; `_arrived` takes it on the UI thread."""
        self._building = key
        fn, theme = self._draw_fn, self._theme_name()

        def job() -> None:
            strips, error = None, None
            try:
                if self._builder_plot is None:
                    from textual_plotext.plot import Plot

                    self._builder_plot = Plot()
                fn(self._builder_plot)
                strips = self._build(self._builder_plot, key[1], key[2], theme)
            except Exception as exc:  # noqa: BLE001 - shown as the chart's line
                error = exc
            try:  # (post_message is thread-safe; the handler runs in the app's context)
                self.post_message(ChartPlot.Built(key, strips, error))
            except RuntimeError:  # the app's loop closed meanwhile: nothing to show it on
                pass

        _builder().submit(job)

    class Built(Message):
        """A build made off the UI thread (to the chart itself: it does not bubble)."""

        bubble = False

        def __init__(self, key: tuple, strips: list[Strip] | None, error: BaseException | None) -> None:
            super().__init__()
            self.key, self.strips, self.error = key, strips, error

    def on_chart_plot_built(self, message: Built) -> None:
        self._arrived(message.key, message.strips, message.error)

    def _arrived(self, key: tuple, strips: list[Strip] | None, error: BaseException | None) -> None:
        if self._building == key:
            self._building = None
        if not self.is_attached:
            return
        if strips is None:
            strips = self._error_strips(error)  # kept for its key: a failing drawing is not retried each frame
        else:
            self.builds += 1
            self._last = strips
        if key == self._key():
            self._built = (key, strips)
        else:
            self._want_build()  # a newer drawing (or size) came meanwhile
        self.refresh()

    def render_line(self, y: int) -> Strip:
        strips = self._strips()
        width = self.size.width
        if y < len(strips):
            return strips[y].crop_extend(0, width, None)
        return Strip.blank(width, self.visual_style.rich_style)


class _NoPlot:
    """A plotext stand-in whose every call does nothing: a drawing function run for its caption."""

    def __getattr__(self, name: str):
        return _nothing


def _nothing(*args, **kwargs) -> None:
    return None


NO_PLOT = _NoPlot()
_STYLES: dict = {}  # (fullground, style, background) of a plotext cell -> its rich Style
_BUILDER = None  # the thread that builds charts while a run streams (ChartPlot._build_off_thread)
# While a run streams a chart is built at most this often (its data is redrawn every REFRESH_S,
# 0.2 s): a build is ~20-30 ms of Python, and a pane key pressed during one shares the
# interpreter with it (the builder thread holds the GIL half the time).
STREAM_BUILD_S = 0.5
# ...and not while the app says a key press's frame comes first (its `key_pending`): the frame
# would share the interpreter with the build (the app's wall time to a pane key's frame was
# twice its CPU time in the slowest presses of the tmux measure on the H100); asked again
# every KEY_WAIT_S
KEY_WAIT_S = 0.05


def _builder():
    """One worker thread for every chart's builds, made on first use."""
    global _BUILDER
    if _BUILDER is None:
        from concurrent.futures import ThreadPoolExecutor

        _BUILDER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="workbench-chart")
    return _BUILDER


def _cell_style(colors: tuple) -> Style:
    """The rich Style of one plotext cell colouring: plotext's own SGR codes for it
    (plotext._utility.colors_to_ansi, as its set_canvas writes them) read by rich's decoder,
    once per distinct colouring (no Console: chart builds run off the UI thread)."""
    try:
        style = _STYLES.get(colors)
    except TypeError:  # an RGB colour given as a list
        colors = tuple(_hashable(color) for color in colors)
        style = _STYLES.get(colors)
    if style is None:
        from plotext._utility import colors_to_ansi

        decoded = Text.from_ansi(colors_to_ansi(colors[0], colors[1], colors[2]) + "x")
        style = Style.combine([Style.null(), *(span.style for span in decoded.spans if span.start == 0)])
        _STYLES[colors] = style
    return style


def _hashable(color):
    return tuple(color) if isinstance(color, list) else color


def matrix_strips(matrix) -> list[Strip]:
    """plotext's character matrix (plotext._matrix._matrix_class: marker, fullground, style and
    background per cell, row 0 at the bottom) as one Strip per line, top first: each run of
    cells of one colouring is one Segment, as set_canvas puts one SGR sequence before a run."""
    strips = []
    for row in matrix.Rows[::-1]:
        markers = matrix.marker[row]
        cells = list(zip(matrix.fullground[row], matrix.style[row], matrix.background[row]))
        segments = []
        start = 0
        for col in range(1, len(cells)):
            if cells[col] != cells[col - 1]:
                segments.append(Segment("".join(markers[start:col]), _cell_style(cells[start])))
                start = col
        if cells:
            segments.append(Segment("".join(markers[start:]), _cell_style(cells[start])))
        strips.append(Strip(segments))
    return strips


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
