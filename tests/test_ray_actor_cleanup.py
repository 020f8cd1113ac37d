"""The Ray actor's copies of the sender's plugin files (engine/ray_actor.PlaceActor.run) exist
while the run uses them and are removed when it ends: a new user found 123 leftover
workbench-ray-plugins-* folders in /tmp. Driven without Ray (the generator is the actor's method)."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

from workbench.engine.multi.ray_actor import PLUGINS_PREFIX, PlaceActor, remove_when_done
from workbench.engine.multi.ship import pack


def _session_and_options(plugin: Path):
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Session:
        plugins: tuple = (str(plugin),)

    @dataclass(frozen=True)
    class Options:
        kernels: tuple = ()
    return Session(), Options()


def test_the_plugin_copies_exist_during_the_run_and_are_gone_after_it(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    plugin = tmp_path / "home" / "rmsnorm.py"
    plugin.parent.mkdir()
    plugin.write_text("X = 1\n")
    seen = {}

    def run_plan(session, on_event, stop, options):
        copy = Path(session.plugins[0])
        seen["copy"], seen["text"] = copy, copy.read_text()
        on_event(SimpleNamespace(kind="row"))
        return {"results": []}
    session, options = _session_and_options(plugin)
    items = list(PlaceActor().run(run_plan, session, options, pack([str(plugin)])))
    assert [i[0] for i in items] == ["event", "doc"] and seen["text"] == "X = 1\n"
    assert seen["copy"] != plugin and seen["copy"].name == "rmsnorm.py"
    assert not seen["copy"].exists() and not list(tmp_path.glob(f"{PLUGINS_PREFIX}*"))


def test_a_run_cut_short_removes_its_copies_once_its_thread_ends(tmp_path):
    folder = tmp_path / f"{PLUGINS_PREFIX}x"
    folder.mkdir()
    release = threading.Event()
    thread = threading.Thread(target=release.wait)
    thread.start()
    remove_when_done(thread, folder)
    assert folder.exists()  # the run still holds it
    release.set()
    thread.join()
    for _ in range(200):
        if not folder.exists():
            break
        threading.Event().wait(0.01)
    assert not folder.exists()


def test_a_run_without_plugins_makes_no_folder(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    session, options = _session_and_options(tmp_path / "unused.py")
    session = type(session)(plugins=())
    items = list(PlaceActor().run(lambda *a, **k: {"results": []}, session, options, pack([])))
    assert items == [("doc", {"results": []}, {})] and not list(tmp_path.iterdir())
