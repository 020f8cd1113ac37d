"""Plugin sessions in the TUI: the README's own example opens with its runs (the session's
`plugins:` load as replay loads them), a missing plugin says so on screen, and watch mode
(`workbench FILE --watch`) re-runs what a save changed, keeps the last good result after a
broken edit and names its file and line. The catalog and the session are the real ones (the
plugins are declared through manifests: a subprocess, so these tests are `slow`); the engine is
a stand-in (no engine children)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tui_helpers import run_async, wait_for
from watch_fakes import PLUGIN, SESSION, rows_engine
from workbench.screens.app import WorkbenchApp
from workbench.engine.options import RunOptions
from workbench.screens.panes.log import LogPane

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def readme_session() -> str:
    """The session file the manual's "Benchmark your own kernel" section writes (docs/usage.md)."""
    text = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    return text.split("cat > my-session.yaml <<'YAML'\n", 1)[1].split("\nYAML\n", 1)[0] + "\n"


def log_text(app) -> str:
    return "\n".join(text for _, text in app.query_one(LogPane).entries)


@run_async
async def test_the_readmes_plugin_session_opens_with_its_runs(tmp_path):
    (tmp_path / "tests" / "plugins").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "plugins" / "my_ops.py", tmp_path / "tests" / "plugins" / "my_ops.py")
    session = tmp_path / "my-session.yaml"
    session.write_text(readme_session())
    app = WorkbenchApp(session, RunOptions(cache_dir=tmp_path / "cache"), data_dir=tmp_path / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.ws.catalog is not None and app.ws.session.runs, 60)
        await pilot.pause(0.3)
        assert "my-relu" in app.title_text()
        assert app.ws.catalog.op("relu") is not None                   # the plugin's own op
        assert "manual_erf" in [i.name for i in app.ws.catalog.op("gelu").impls]  # added to a shipped op
        assert [t for _, t in app.ws.run_titles()] == ["relu 1024x1024 f32", "gelu 1024x1024 f32"]
        assert app.ws.run is not None and app.ws.run.op == "relu"       # the first run is on screen
        sub, _ = app.ws.begin_run()
        assert sub.plugins == (str((tmp_path / "tests" / "plugins" / "my_ops.py").resolve()),)  # for the engine


@run_async
async def test_a_session_naming_a_missing_plugin_says_so_on_screen(tmp_path):
    session = tmp_path / "lost.yaml"
    session.write_text(SESSION.replace("mine.py", "nowhere/mine.py"))
    app = WorkbenchApp(session, RunOptions(cache_dir=tmp_path / "cache"), data_dir=tmp_path / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "plugins[0]" in log_text(app), 60)
        assert "no such file or folder" in log_text(app) and "nowhere/mine.py" in log_text(app)
        await wait_for(pilot, lambda: any("nowhere/mine.py" in n.message for n in app._notifications), 10)


@run_async
async def test_watch_mode_reruns_what_a_save_changed_and_survives_a_broken_edit(tmp_path):
    plugin, session = tmp_path / "mine.py", tmp_path / "watched.yaml"
    plugin.write_text(PLUGIN)
    session.write_text(SESSION)
    engine = rows_engine()
    options = RunOptions(cache_dir=tmp_path / "cache")
    app = WorkbenchApp(session, options, engine=engine, data_dir=tmp_path / "data", watch=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.runs_finished >= 1, 60)   # watch mode runs at once
        assert engine.calls == [["manual_mine", "pytorch"]]
        assert "watching watched.yaml, mine.py" in log_text(app)
        plugin.write_text(PLUGIN.replace("MEDIAN_MS = 2.0", "MEDIAN_MS = 1.5"))
        await wait_for(pilot, lambda: app.runs_finished >= 2, 60)
        assert engine.calls[-1] == ["manual_mine"]                  # pytorch kept its result
        assert "manual_mine: 2 ms -> 1.5 ms (-25.0%)" in log_text(app)
        assert "kept (their code did not change): pytorch" in log_text(app)
        rows = app.ws.models[0].rows
        assert rows[("pytorch", None)].status == "ok" and rows[("manual_mine", None)].get("timing", "median_ms") == 1.5

        plugin.write_text(PLUGIN.replace("def build(", "def build(("))
        await wait_for(pilot, lambda: "nothing re-ran" in log_text(app), 60)
        assert re.search(rf"{re.escape(str(plugin.resolve()))}:9: SyntaxError", log_text(app))
        assert app.runs_finished == 2 and rows[("manual_mine", None)].get("timing", "median_ms") == 1.5

        plugin.write_text(PLUGIN.replace("MEDIAN_MS = 2.0", "MEDIAN_MS = 1.25"))
        await wait_for(pilot, lambda: app.runs_finished >= 3, 60)   # fixed: it runs again
        assert "manual_mine: 1.5 ms -> 1.25 ms" in log_text(app)

        session.write_text(SESSION.replace("N: 8", "N: 16"))          # the session file itself
        await wait_for(pilot, lambda: app.runs_finished >= 4, 60)
        assert engine.calls[-1] == ["manual_mine", "pytorch"], log_text(app)[-2500:]  # re-read: both rows
        assert app.ws.session.runs[0].shape == {"M": 4, "N": 16} and app.ws.index == 0


@run_async
async def test_watch_mode_shows_an_edit_that_fails_its_check_as_failed_with_the_last_good_marked(tmp_path):
    """A fresh user's find: after an edit broke a kernel's check, the Log said so but the table
    said `ok ... pass`, the status bar `done: 2 ok`, and the results file kept `ok`, check passed,
    under the broken file's sha256. The row is failed everywhere now; its last good figures are
    in its notes and detail, marked as the earlier code's, and in the file under `last_good`."""
    import json

    from workbench.plugins.sources import sha256_file
    from workbench.screens.panes.timing import row_detail, table_cells
    from workbench.screens.sessions_io import results_file

    plugin, session = tmp_path / "mine.py", tmp_path / "watched.yaml"
    plugin.write_text(PLUGIN)
    session.write_text(SESSION)
    good_sha = sha256_file(plugin)
    engine = rows_engine()
    app = WorkbenchApp(session, RunOptions(cache_dir=tmp_path / "cache"), engine=engine, data_dir=tmp_path / "data",
                       watch=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.runs_finished >= 1, 60)
        plugin.write_text(PLUGIN.replace("FAIL = None", 'FAIL = "check failed: elementwise gate (first inputs): x"'))
        await wait_for(pilot, lambda: app.runs_finished >= 2, 60)
        await pilot.pause(0.2)
        row = app.ws.models[0].rows[("manual_mine", None)]
        assert row.status == "failed" and row.check["passed"] is False
        assert "1 failed" in app.run_bar.status and "1 ok" in app.run_bar.status   # was "done: 2 ok"
        done = [line for line in log_text(app).splitlines() if line.startswith("run 0 done:")]
        assert len(done) == 2 and "1 failed" in done[-1] and "2 ok" not in done[-1]
        cells = table_cells(row)
        assert cells[1].startswith("failed") and cells[2] == "-"            # no time as the current code's
        assert "last good (earlier code) 2 ms" in cells[-1]
        assert f"mine.py sha256 {good_sha[:12]}" in row_detail(row).plain
        assert "the row is failed now (last good, from the earlier code: 2 ms)" in log_text(app)
        doc = json.loads(results_file(session, tmp_path / "data", "watched").read_text())
        mine = next(r for r in doc["results"] if r["label"] == "manual_mine")
        assert mine["status"] == "failed" and mine["check"]["passed"] is False
        assert [p["sha256"] for p in mine["last_good"]["plugins"]] == [good_sha]
        assert [p["sha256"] for p in doc["provenance"]["plugins"]] == [sha256_file(plugin)] != [good_sha]
