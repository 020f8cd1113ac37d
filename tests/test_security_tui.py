"""Issue #36 in the TUI: opening a session whose `plugins:` would be imported asks first (ctrl+o);
no answer or "n" opens nothing, "y" opens it and is remembered for this TUI session."""

from __future__ import annotations

from tui_helpers import loaded, run_async, wait_for

from workbench.screens.dialogs import ConfirmScreen


@run_async
async def test_opening_a_session_with_plugins_asks_before_importing_them(tmp_path):
    from test_tui_runs import make_app

    session = tmp_path / "theirs.yaml"
    (tmp_path / "mine.py").write_text("raise SystemExit('imported')\n")
    session.write_text("schema_version: 1\nname: theirs\nplugins: [mine.py]\nruns: [{op: gelu, impls: [pytorch]}]\n")
    app = make_app(tmp_path)
    opened = []
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        app.open_path = lambda path, create=False: opened.append(path)
        app._open_answer((session, False))
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")
        await pilot.pause(0.1)
        assert opened == [] and not isinstance(app.screen, ConfirmScreen)
        app._open_answer((session, False))
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: opened == [session])
        app._open_answer((session, False))  # trusted once: not asked again
        await pilot.pause(0.1)
        assert opened == [session, session] and not isinstance(app.screen, ConfirmScreen)
