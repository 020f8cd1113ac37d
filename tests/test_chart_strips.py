"""ChartPlot keeps a chart's build as Strips read from plotext's matrix (screens/panes/
chart_plot.matrix_strips): every cell's character and style must equal what plotext's ANSI
canvas gives through rich's decoder, the path it replaces (PlotextPlot.render)."""

import random

import pytest

pytest.importorskip("plotext")
pytest.importorskip("textual_plotext")

from rich.console import Console  # noqa: E402
from rich.text import Text  # noqa: E402
from textual_plotext.plot import Plot, _rgbify_theme, _sequence  # noqa: E402

from workbench.screens.panes import charts  # noqa: E402
from workbench.screens.panes.chart_plot import matrix_strips  # noqa: E402


def _cells_of_ansi(plot, width: int) -> list[list[tuple[str, object]]]:
    text = Text.from_ansi(plot.build())
    console = Console(width=width, color_system="truecolor")
    lines = console.render_lines(text, console.options.update(width=width, no_wrap=True, overflow="crop"),
                                 pad=False)  # as Textual renders a widget's Text
    return [[(ch, seg.style) for seg in line for ch in seg.text] for line in lines][:-1]  # the last "\n"


def _cells_of_strips(strips) -> list[list[tuple[str, object]]]:
    return [[(ch, seg.style) for seg in strip for ch in seg.text] for strip in strips]


def _themed(plot: Plot) -> None:
    from plotext._dict import themes

    themes.setdefault("test-auto", _rgbify_theme((30, 30, 40), (30, 30, 40), (220, 220, 220), "default", _sequence))
    plot.theme("test-auto")


def _line(plot):
    plot.clear_figure()
    plot.plot([1, 2, 3, 4], [1, 4, 9, 16], color="red+", marker="braille")
    plot.scatter([1, 3], [2, 8], color=(10, 200, 30), marker="dot")
    plot.title("a line")


def _log_medians(plot):
    random.seed(3)
    plot.clear_figure()
    plot.xscale("log")
    for y, value in enumerate([0.01, 0.5, 12.0], start=1):
        plot.plot([value * 0.9, value * 1.1], [y, y], color=y + 2, marker="─")
        plot.scatter([value], [y], color="blue", marker="●")
    plot.yticks([1, 2, 3], ["triton", "pytorch", "compiled"])


def _chart_app():
    """An app of one ChartPlot whose `running` a test sets (as RunnerMixin.running)."""
    from textual.app import App

    from workbench.screens.panes.chart_plot import ChartPlot

    class _One(App):
        running = False

        def compose(self):
            yield ChartPlot()
    return _One()


def _drawing(values, calls: list | None = None, caption: str = "caption"):
    """A chart drawing of `values` for ChartPlot.draw; each call's (thread id, plt) goes to `calls`."""
    import threading

    def draw(plt):
        if calls is not None:
            calls.append((threading.get_ident(), plt))
        plt.clear_figure()
        plt.plot([1, 2, 3], values)
        return caption.format(values=values)
    return draw


def _shown(plot) -> list[str]:
    """The text of each line a ChartPlot draws now."""
    return [plot.render_line(y).text for y in range(plot.size.height)]


@pytest.mark.parametrize("draw", [_line, _log_medians])
@pytest.mark.parametrize("size", [(60, 16), (137, 23)])
@pytest.mark.parametrize("theme", [None, "test-auto"])
def test_the_matrix_lines_are_the_ansi_canvas_cell_for_cell(draw, size, theme):
    plot = Plot()
    draw(plot)
    plot.plotsize(*size)
    plot._set_size(*size)
    if theme:
        _themed(plot)
    expected = _cells_of_ansi(plot, size[0])  # plot.build(): sizes, matrix, then the ANSI canvas
    strips = matrix_strips(plot.monitor.matrix)  # the same matrix, read directly
    got = _cells_of_strips(strips)
    assert len(got) == len(expected) == size[1]
    for row, (a, b) in enumerate(zip(got, expected)):
        assert a == b, f"line {row} differs"
    assert all(strip.cell_length == size[0] for strip in strips)


def test_a_timing_chart_with_thinned_samples_is_the_ansi_canvas_too():
    from types import SimpleNamespace

    random.seed(7)
    rows = [SimpleNamespace(samples_ms=[random.gauss(1.0 + i, 0.05) for _ in range(2000)], label=f"impl{i}")
            for i in range(3)]
    plot = Plot()
    charts.live_samples(plot, rows)
    plot.plotsize(120, 20)
    plot._set_size(120, 20)
    expected = _cells_of_ansi(plot, 120)
    assert _cells_of_strips(matrix_strips(plot.monitor.matrix)) == expected


def test_while_a_run_streams_a_chart_is_built_off_the_ui_thread_and_shows_its_last_build_meanwhile():
    """With the app `running`, a new drawing's build is made on the builder thread: the render
    in between shows the previous build's lines, and the new lines replace them when it arrives.
    Idle, the build is made in the render (on the UI thread)."""
    import asyncio
    import threading

    from workbench.screens.panes.chart_plot import ChartPlot

    threads = []

    def line(values):
        def draw(plt):
            threads.append(threading.get_ident())
            plt.clear_figure()
            plt.plot([1, 2, 3], values)
            return "caption"
        return draw

    def shown(plot) -> list[str]:
        return [plot.render_line(y).text for y in range(plot.size.height)]

    async def go():
        app = _chart_app()
        async with app.run_test(size=(60, 20)) as pilot:
            plot = app.query_one(ChartPlot)
            ui = threading.get_ident()
            plot.draw(line([1, 4, 9]))
            await pilot.pause()
            first = shown(plot)
            assert plot.builds == 1 and set(threads) == {ui}
            app.running = True
            threads.clear()
            plot.draw(line([9, 4, 1]))  # draws on the UI thread for its caption
            assert shown(plot) == first  # the last build, while the new one is made
            for _ in range(100):
                await pilot.pause(0.02)
                if plot.builds == 2:
                    break
            assert plot.builds == 2
            assert any(thread != ui for thread in threads)  # drawn again, and built, on the builder thread
            assert shown(plot) != first
            app.running = False
            plot.draw(line([2, 2, 2]))
            assert shown(plot) != first and plot.builds == 3  # idle: built in the render, at once
    asyncio.run(go())


def test_while_a_run_streams_builds_start_at_most_every_stream_build_s_of_the_newest_drawing(monkeypatch):
    """Three drawings within STREAM_BUILD_S while a run streams: the first is built at once, the
    second is never built (the third replaced it before its turn), the third when due."""
    import asyncio
    import threading

    from workbench.screens.panes import chart_plot
    from workbench.screens.panes.chart_plot import ChartPlot

    monkeypatch.setattr(chart_plot, "STREAM_BUILD_S", 0.4)
    built = []

    def line(name, values):
        def draw(plt):
            if threading.current_thread() is not threading.main_thread():
                built.append(name)
            plt.clear_figure()
            plt.plot([1, 2, 3], values)
            return name
        return draw

    async def go():
        app = _chart_app()
        async with app.run_test(size=(60, 20)) as pilot:
            plot = app.query_one(ChartPlot)
            plot.draw(line("idle", [1, 1, 1]))
            await pilot.pause()
            app.running = True
            plot.draw(line("a", [1, 4, 9]))
            for _ in range(50):
                await pilot.pause(0.01)
                if built:
                    break
            plot.draw(line("b", [9, 4, 1]))
            plot.draw(line("c", [2, 5, 2]))
            await pilot.pause(0.1)
            assert built == ["a"]  # b and c wait for their turn (STREAM_BUILD_S after a's start)
            for _ in range(100):
                await pilot.pause(0.02)
                if built[-1] == "c" and plot._built is not None and plot._built[0] == plot._key():
                    break
            assert built == ["a", "c"]
            assert plot._built[0] == plot._key()  # the lines on screen are c's
    asyncio.run(go())


def test_a_drawing_waiting_for_its_turn_when_the_run_ends_is_built_then(monkeypatch):
    """A drawing made while a run streams waits for its turn (STREAM_BUILD_S); the run ends
    meanwhile, with no drawing after it: the chart shows that drawing when its turn comes."""
    import asyncio

    from workbench.screens.panes import chart_plot
    from workbench.screens.panes.chart_plot import ChartPlot

    def line(values):
        def draw(plt):
            plt.clear_figure()
            plt.plot([1, 2, 3], values)
            return "caption"
        return draw

    monkeypatch.setattr(chart_plot, "STREAM_BUILD_S", 0.3)

    async def go():
        app = _chart_app()
        async with app.run_test(size=(60, 20)) as pilot:
            plot = app.query_one(ChartPlot)
            plot.draw(line([1, 1, 1]))
            await pilot.pause()
            app.running = True
            plot.draw(line([1, 4, 9]))  # built at once (off the UI thread)
            for _ in range(100):
                await pilot.pause(0.02)
                if plot._building is None and plot._built is not None:
                    break
            plot.draw(line([9, 4, 1]))  # waits for its turn
            app.running = False  # the run ends before it
            for _ in range(100):
                await pilot.pause(0.02)
                if plot._built is not None and plot._built[0] == plot._key():
                    break
            assert plot._built is not None and plot._built[0] == plot._key()
    asyncio.run(go())


def test_while_a_run_streams_the_ui_thread_draws_only_for_the_caption_and_the_chart_is_right_after():
    """Streaming, `draw` runs the drawing on the UI thread into NO_PLOT (a figure that does
    nothing) for its caption; the builder thread draws it into a figure of its own. The run
    ending before that drawing is built, the render draws it into the chart's own figure: the
    lines are the drawing's, as an idle draw of it makes them."""
    import asyncio
    import threading

    from workbench.screens.panes import chart_plot
    from workbench.screens.panes.chart_plot import ChartPlot

    calls: list = []

    def line(values):
        return _drawing(values, calls, caption="caption {values}")

    shown = _shown

    async def go():
        app = _chart_app()
        async with app.run_test(size=(60, 20)) as pilot:
            plot = app.query_one(ChartPlot)
            plot.draw(line([9, 4, 1]))
            await pilot.pause()
            expected = shown(plot)  # drawn idle
            plot.draw(line([1, 1, 1]))
            await pilot.pause()
            assert shown(plot) != expected
            ui = threading.get_ident()
            calls.clear()
            app.running = True
            chart_plot.STREAM_BUILD_S, saved = 5.0, chart_plot.STREAM_BUILD_S  # the next build waits
            try:
                plot._build_started = __import__("time").monotonic()
                assert plot.draw(line([9, 4, 1])) == "caption [9, 4, 1]"
                assert calls == [(ui, chart_plot.NO_PLOT)]  # for its caption only: the chart's figure untouched
                app.running = False  # the run ends before its build
                plot.refresh()
                await pilot.pause()
                assert shown(plot) == expected
                assert any(thread == ui and plt is plot.plt for thread, plt in calls[1:])
            finally:
                chart_plot.STREAM_BUILD_S = saved
    asyncio.run(go())


def test_a_streaming_build_does_not_start_while_a_key_press_frame_comes_first():
    """The app's key_pending (runner.RunnerMixin) holds a due build back until the key's frame
    is drawn: the build would share the interpreter with it."""
    import asyncio

    from workbench.screens.panes.chart_plot import ChartPlot

    line = _drawing

    async def go():
        app = _chart_app()
        pending = [False]
        app.key_pending = lambda now: pending[0]
        async with app.run_test(size=(60, 20)) as pilot:
            plot = app.query_one(ChartPlot)
            plot.draw(line([1, 1, 1]))
            await pilot.pause()
            app.running = True
            pending[0] = True
            plot._build_started = 0.0  # its turn has come
            plot.draw(line([1, 4, 9]))
            await pilot.pause(0.2)
            assert plot._building is None and plot.builds == 1 and plot._build_timer is not None
            pending[0] = False
            for _ in range(100):
                await pilot.pause(0.02)
                if plot.builds == 2:
                    break
            assert plot.builds == 2
    asyncio.run(go())
