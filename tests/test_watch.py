"""Watch mode's core: the file watcher, `path:line` of errors, code digests,
re-running only what an edit changed, the last good result kept after a broken edit, and the
lines that compare a row with its previous result. The engine is a stand-in that makes a record
per row it is asked to run (its median read from the plugin file, so an edit changes it); the
cycles declare the plugins through manifests (a subprocess: those tests are `slow`)."""

from __future__ import annotations

import re
import threading
import types

import pytest

from watch_fakes import PLUGIN, SESSION, rows_engine
from workbench.engine.plan import RunOptions
from workbench.error_location import describe_error, locate
from workbench.errors import WorkbenchError
from workbench.watch.files import FileWatcher
from workbench.registry import Registry, discover
from workbench.watch.diff import change_line, ptx_changes
from workbench.watch.cycle import WatchState
from workbench.results.record import Flag, flag_kinds, read_record


# -- the file watcher --------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def watcher_on(path, clock) -> FileWatcher:
    return FileWatcher([path], poll_s=0.01, settle_s=0.2, gone_s=1.0, clock=clock)


def test_an_edit_is_reported_once_it_has_settled(tmp_path):
    path, clock = tmp_path / "k.py", Clock()
    path.write_text("a = 1\n")
    watcher = watcher_on(path, clock)
    path.write_text("a = 2\n")
    assert watcher.poll() == []            # just written: the editor may still be writing
    clock.now = 0.1
    assert watcher.poll() == []
    clock.now = 0.5
    assert watcher.poll() == [path.absolute()]
    assert watcher.poll() == []            # reported once


def test_a_save_that_changes_nothing_starts_nothing(tmp_path):
    path, clock = tmp_path / "k.py", Clock()
    path.write_text("a = 1\n")
    watcher = watcher_on(path, clock)
    path.write_text("a = 1\n")             # `:w` twice, `touch`
    path.touch()
    clock.now = 1.0
    assert watcher.poll() == []


def test_write_then_rename_over_and_delete_then_recreate_are_one_change(tmp_path):
    path, clock = tmp_path / "k.py", Clock()
    path.write_text("a = 1\n")
    watcher = watcher_on(path, clock)
    temp = tmp_path / ".k.py.swp"
    temp.write_text("a = 2\n")
    temp.replace(path)                      # safe write: a new inode renamed over the original
    assert watcher.poll() == []
    clock.now = 0.5
    assert watcher.poll() == [path.absolute()]
    path.unlink()                           # vim's backup dance: the file is gone for a moment
    clock.now = 1.0
    assert watcher.poll() == []
    clock.now = 1.5
    assert watcher.poll() == []             # settled but gone, within gone_s: wait for it
    path.write_text("a = 3\n")
    clock.now = 1.6
    assert watcher.poll() == []
    clock.now = 2.0
    assert watcher.poll() == [path.absolute()]
    path.unlink()
    clock.now = 2.1
    assert watcher.poll() == []
    clock.now = 3.2
    assert watcher.poll() == [path.absolute()]  # gone for longer than gone_s: deleted


def test_wait_returns_none_when_stopped_and_sees_a_new_file_in_a_folder(tmp_path):
    stop = threading.Event()
    watcher = FileWatcher([tmp_path], poll_s=0.01, settle_s=0.02)
    threading.Timer(0.1, lambda: (tmp_path / "new_op.py").write_text("x = 1\n")).start()
    assert watcher.wait(stop, timeout_s=5) == [tmp_path.absolute()]
    stop.set()
    assert watcher.wait(stop) is None


# -- where an error is -------------------------------------------------------------------------
def test_a_plugin_that_does_not_import_names_its_file_and_line(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("x = 1\ny = (\n")
    with pytest.raises(WorkbenchError, match=rf"{re.escape(str(bad))}:2: SyntaxError"):
        discover([bad], entry_points=False, registry=Registry())
    buggy = tmp_path / "buggy.py"
    buggy.write_text("def f():\n    return undefined_name\n\nf()\n")
    with pytest.raises(WorkbenchError, match=rf"{re.escape(str(buggy))}:2: NameError"):
        discover([buggy], entry_points=False, registry=Registry())


def test_an_error_inside_a_library_names_the_plugin_line_that_called_it(tmp_path):
    plugin = tmp_path / "calls_json.py"
    plugin.write_text("import json\n\ndef build():\n    return json.loads('{')\n")
    namespace: dict = {}
    exec(compile(plugin.read_text(), str(plugin), "exec"), namespace)
    with pytest.raises(ValueError) as info:
        namespace["build"]()
    assert str(locate(info.value)) == f"{plugin}:4"
    assert describe_error(info.value).startswith(f"{plugin}:4: JSONDecodeError: ")


def test_a_wrapped_error_names_the_line_its_cause_was_raised_at(tmp_path):
    """Triton's interpreter re-raises a kernel's NameError as InterpreterError from the launch."""
    plugin = tmp_path / "interp.py"
    plugin.write_text("def kernel():\n    return nope\n\n\ndef launch():\n    try:\n        kernel()\n"
                      "    except NameError as e:\n        raise RuntimeError(repr(e)) from e\n")
    namespace: dict = {}
    exec(compile(plugin.read_text(), str(plugin), "exec"), namespace)
    with pytest.raises(RuntimeError) as info:
        namespace["launch"]()
    assert str(locate(info.value)) == f"{plugin}:2"


def test_a_triton_compile_error_counts_its_line_from_the_kernel_def(tmp_path):
    """A CompilationError's node.lineno counts from the `def` of its @triton.jit function."""
    plugin = tmp_path / "kern.py"
    plugin.write_text("import triton\n\n\n@triton.jit\ndef _k(x_ptr):\n    y = 1\n    tl.bogus()\n")

    class CompilationError(Exception):  # the shape of triton.compiler.errors.CompilationError
        def __init__(self):
            self.src, self.node = "def _k(x_ptr):\n    y = 1\n    tl.bogus()\n", types.SimpleNamespace(lineno=3)
            super().__init__("at 3:4:\ndef _k(x_ptr):\n    y = 1\n    tl.bogus()\n    ^\nNameError('tl')")

    where = locate(CompilationError(), files=[plugin])
    assert str(where) == f"{plugin}:7"
    assert describe_error(CompilationError(), [plugin]).endswith("CompilationError: NameError('tl')")


@pytest.fixture()
def watched(tmp_path):
    (tmp_path / "mine.py").write_text(PLUGIN)
    (tmp_path / "watched.yaml").write_text(SESSION)
    return tmp_path


def cycle(state, engine):
    """One cycle; manifests (built in a subprocess when a plugin changed) cached under the test's folder."""
    options = RunOptions(device="cpu", cache_dir=state.session_path.parent / "cache")
    return state.run_cycle(options=options, on_event=lambda e: None, stop=threading.Event(), engine=engine)


@pytest.mark.slow  # the plugins' manifests are built in a subprocess
def test_only_the_rows_an_edit_changed_run_again(watched):
    state, engine = WatchState(watched / "watched.yaml"), rows_engine()
    first = cycle(state, engine)
    assert first.error is None and engine.calls == [["manual_mine", "pytorch"]]
    assert {p.name for p in first.files} == {"watched.yaml", "mine.py"}
    assert cycle(state, engine).reran == ()               # nothing changed: nothing runs
    plugin = watched / "mine.py"
    plugin.write_text(PLUGIN.replace("MEDIAN_MS = 2.0", "MEDIAN_MS = 1.5"))
    third = cycle(state, engine)
    assert engine.calls[-1] == ["manual_mine"]              # the shipped pytorch row kept its result
    (key, text, level), = third.lines
    assert key[1] == "manual_mine" and level == "info"
    assert "2 ms -> 1.5 ms (-25.0%)" in text and "ptx ld_global_v4 0 -> 4" in text
    session = (watched / "watched.yaml").read_text()
    (watched / "watched.yaml").write_text(session.replace("N: 8", "N: 16"))
    assert cycle(state, engine).reran and engine.calls[-1] == ["manual_mine", "pytorch"]  # the session: both


@pytest.mark.slow  # the plugins' manifests are built in a subprocess
def test_a_broken_edit_keeps_the_last_good_result_and_says_where(watched):
    state, engine = WatchState(watched / "watched.yaml"), rows_engine()
    cycle(state, engine)
    plugin = watched / "mine.py"
    plugin.write_text(PLUGIN.replace("def build(", "def build(("))
    broken = cycle(state, engine)
    assert re.search(rf"{re.escape(str(plugin.resolve()))}:9: SyntaxError", broken.error)
    assert broken.doc is state.doc and len(engine.calls) == 1    # nothing ran; the document stays
    assert plugin.resolve() in broken.files                      # still watched, so a fix is seen
    plugin.write_text(PLUGIN.replace("FAIL = None", f'FAIL = "{plugin}:12: NameError: name \'nope\' is not defined"'))
    failed = cycle(state, engine)
    (key, text, level), = failed.lines
    assert level == "error" and f"{plugin}:12: NameError" in text
    assert "the row is failed now (last good, from the earlier code: 2 ms)" in text
    row = next(r for r in failed.doc["results"] if r["label"] == "manual_mine")
    assert row["status"] == "failed" and "NameError" in row["error"] and row["timing"] is None
    assert row["last_good"]["record"]["status"] == "ok" and row["last_good"]["record"]["timing"]["median_ms"] == 2.0


@pytest.mark.slow  # the plugins' manifests are built in a subprocess
def test_an_edit_that_fails_its_check_is_failed_in_the_document_with_the_last_good_under_its_own_sha(watched):
    """A fresh user's find: after an edit broke a kernel's check, the document still said `ok`,
    check passed, under the provenance sha256 of the broken file. The row is the new code's
    failure now; the last good figures sit under `last_good` with the sha256 they were measured from."""
    from workbench.plugins.sources import sha256_file

    state, engine = WatchState(watched / "watched.yaml"), rows_engine()
    plugin = watched / "mine.py"
    good_sha = sha256_file(plugin)
    cycle(state, engine)
    plugin.write_text(PLUGIN.replace("FAIL = None", 'FAIL = "check failed: elementwise gate (first inputs): x"'))
    broken_sha = sha256_file(plugin)
    failed = cycle(state, engine)
    doc = failed.doc
    assert [p["sha256"] for p in doc["provenance"]["plugins"]] == [broken_sha]   # the document: the broken file
    row = next(r for r in doc["results"] if r["label"] == "manual_mine")
    assert row["status"] == "failed" and row["check"]["passed"] is False and row["error"].startswith("check failed")
    assert row["timing"] is None                                      # no figure claims to be the broken code's
    last = row["last_good"]
    assert last["record"]["status"] == "ok" and last["record"]["timing"]["median_ms"] == 2.0
    assert [p["sha256"] for p in last["plugins"]] == [good_sha]        # measured from the earlier file
    assert last["changed"] == [{"path": str(plugin.resolve()), "sha256_then": good_sha, "sha256_now": broken_sha}]
    assert Flag.of(row["flags"][-1]) is Flag.WATCH_FAILED and f"mine.py sha256 {good_sha[:12]}" in row["flags"][-1]
    pytorch = next(r for r in doc["results"] if r["label"] == "pytorch")
    assert pytorch["status"] == "ok" and "last_good" not in pytorch   # its code did not change
    assert read_record(row).to_dict()["last_good"] == last            # the record type keeps it

    plugin.write_text(PLUGIN.replace("MEDIAN_MS = 2.0", "MEDIAN_MS = 1.5"))  # fixed
    fixed = cycle(state, engine)
    (_, text, level), = fixed.lines
    assert level == "info" and "2 ms -> 1.5 ms (-25.0%)" in text      # against the last good figures
    row = next(r for r in fixed.doc["results"] if r["label"] == "manual_mine")
    assert row["status"] == "ok" and "last_good" not in row and not any(Flag.of(f) for f in row["flags"])


@pytest.mark.slow  # the plugins' manifests are built in a subprocess
def test_a_failed_edit_of_another_shape_gets_no_last_good(watched):
    """A fresh user's find: one save changed the session's shape and broke the kernel; the failed
    row carried the old shape's figures as its last good. Another problem's figures are not."""
    state, engine = WatchState(watched / "watched.yaml"), rows_engine()
    cycle(state, engine)
    (watched / "watched.yaml").write_text(SESSION.replace("M: 4, N: 8", "M: 2, N: 8"))
    (watched / "mine.py").write_text(PLUGIN.replace("FAIL = None", 'FAIL = "check failed: elementwise gate"'))
    failed = cycle(state, engine)
    row = next(r for r in failed.doc["results"] if r["label"] == "manual_mine")
    assert row["status"] == "failed" and row["shape"] == {"M": 2, "N": 8}
    assert "last_good" not in row and not any(Flag.of(f) is Flag.WATCH_FAILED for f in row["flags"])
    line = next(text for key, text, _level in failed.lines if key[1] == "manual_mine")
    assert "last good" not in line


@pytest.mark.slow  # the plugins' manifests are built in a subprocess
def test_a_session_that_does_not_load_is_a_cycle_with_its_problems(watched):
    state, engine = WatchState(watched / "watched.yaml"), rows_engine()
    (watched / "watched.yaml").write_text(SESSION.replace("N: 8", "N: eight"))
    bad = cycle(state, engine)
    assert "runs[0].shape.N" in bad.error and "(line 7)" in bad.error and engine.calls == []


@pytest.mark.slow  # the plugins' manifests are built in a subprocess
def test_a_cancelled_rerun_keeps_the_previous_record_flagged_as_an_earlier_runs(watched):
    """A cancel during the re-run of an edited row: its earlier figures stay, but flagged (they are
    not the edited code's), as the TUI flags the rows a cancel left unmeasured."""
    from workbench import events as ev

    state, engine = WatchState(watched / "watched.yaml"), rows_engine()
    cycle(state, engine)
    (watched / "mine.py").write_text(PLUGIN.replace("MEDIAN_MS = 2.0", "MEDIAN_MS = 1.5"))

    def cancelling(session, *, on_event, **kwargs):
        def cancel(event):
            if isinstance(event, ev.Result) and event.row[1] == "manual_mine":
                event.record.update(status="skipped", error="cancelled", timing=None)
            on_event(event)
        return engine(session, on_event=cancel, **kwargs)
    row = next(r for r in cycle(state, cancelling).doc["results"] if r["label"] == "manual_mine")
    assert row["status"] == "ok" and row["timing"]["median_ms"] == 2.0 and Flag.KEPT in flag_kinds(row["flags"])


# -- the lines ---------------------------------------------------------------------------------
@pytest.mark.slow  # the plugins' manifests are built in a subprocess
def test_only_what_the_code_computes_counts(watched):
    """A comment or an unused constant re-runs nothing; a constant the builder reads does."""
    state, engine = WatchState(watched / "watched.yaml"), rows_engine()
    cycle(state, engine)
    plugin = watched / "mine.py"
    plugin.write_text(PLUGIN.replace('"""mine"""', '"""mine"""\n    # a comment\n') + "UNUSED = 3\n")
    assert cycle(state, engine).reran == () and engine.calls[-1] == []
    plugin.write_text(PLUGIN.replace("MEDIAN_MS = 2.0", "MEDIAN_MS = 3.0"))
    assert [key[1] for key in cycle(state, engine).reran] == ["manual_mine"]


def test_change_lines_name_time_bandwidth_and_the_ptx_counts_that_moved():
    def rec(median, gbps, v4, spills, status="ok"):
        return {"status": status, "timing": {"median_ms": median}, "traffic": {"gbps": gbps},
                "ptx": {"kernels": [{"name": "k", "counts": {"ld_global_v4": v4, "ld_global": 2, "ld_global_total": v4 + 2},
                                     "registers": 40, "spills": spills}]}}
    text, level = change_line(rec(0.512, 4190.0, 0, 8), rec(0.498, 4310.0, 4, 0))
    assert level == "info"
    assert text == "0.512 ms -> 0.498 ms (-2.7%) · 4190 -> 4310 GB/s · ptx ld_global_v4 0 -> 4, spills 8 -> 0"
    assert ptx_changes(rec(1, 1, 4, 0), {"ptx": None}) == []
    assert change_line(None, rec(0.0123, None, 0, 0))[0] == "ok · 12.3 µs"
    # a change across a unit's edge reads in one unit (a fresh user saw '72.18 µs -> 0.1098 ms')
    assert change_line(rec(0.07218, 1.0, 0, 0), rec(0.1098, 1.0, 0, 0))[0].startswith("72.18 µs -> 109.8 µs (+52.1%)")
    assert change_line(rec(0.1098, 1.0, 0, 0), rec(0.07218, 1.0, 0, 0))[0].startswith("109.8 µs -> 72.18 µs")
    assert change_line(rec(1, 1, 0, 0), {"status": "unavailable", "error": "needs a CUDA GPU"}) == (
        "unavailable: needs a CUDA GPU", "warning")


def test_a_change_timed_on_a_contended_cpu_says_so():
    """A new user's watch printed `59.64 ms -> 90.71 µs (-99.8%)` for an edit of a constant; the
    59.64 ms had been timed while other processes held the cores (flagged in the table only)."""
    from workbench.results.record import Flag

    busy = Flag.CPU_CONTENDED.format(detail="other processes held the cores")
    old = {"status": "ok", "timing": {"median_ms": 59.64}, "flags": [busy]}
    new = {"status": "ok", "timing": {"median_ms": 0.09071}}
    text, _ = change_line(old, new)
    assert "-99.8%" in text and "CPU contended before: the change may be the host's" in text
    text, _ = change_line({**old, "flags": []}, new)
    assert "contended" not in text


def test_a_row_whose_shape_or_dtype_changed_is_not_compared_as_a_speedup():
    """An edit of M from 256 to 128 printed '-50.2%' as if the kernel got faster (a new user's
    try); a changed problem is named instead, and only its new speed shown."""
    from workbench.watch.diff import change_line

    old = {"status": "ok", "shape": {"M": 256, "N": 8}, "dtype": "bfloat16", "timing": {"median_ms": 0.2}}
    new = {**old, "shape": {"M": 128, "N": 8}, "timing": {"median_ms": 0.1}}
    text, level = change_line(old, new)
    assert text.startswith("ok · shape M 256 -> 128: not compared") and "%" not in text and level == "info"
    assert "dtype bfloat16 -> float32: not compared" in change_line(old, {**old, "dtype": "float32"})[0]
    assert "-50.0%" in change_line(old, {**old, "timing": {"median_ms": 0.1}})[0]  # same problem: compared


def test_a_plugin_moved_away_is_still_watched_for_its_return(tmp_path):
    """mv plugin.py plugin.py.bak while watching: the watch list dropped it, so moving it back
    went unseen until the session file was saved again (a new user's try)."""
    from workbench.watch.cycle import watched_files

    session = tmp_path / "s.yaml"
    session.write_text("schema_version: 1\nname: s\nplugins: [mine.py]\nruns: [{op: gelu}]\n")
    assert (tmp_path / "mine.py").resolve() in watched_files(session)  # missing: watched all the same
    (tmp_path / "mine.py").write_text("x = 1\n")
    assert watched_files(session).count((tmp_path / "mine.py").resolve()) == 1
