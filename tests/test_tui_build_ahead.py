"""The app's session build-ahead (screens/runner.py): a finished one gives its worker back and
logs its lines before the next run; one still compiling keeps on only while the session is the
one it was started for (an edit may have made a row launch-bound)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from workbench.screens.runner import RunnerMixin


class _Job:
    def __init__(self, done: bool):
        self.done, self.finished = done, False

    def poll(self) -> bool:
        return self.done

    def finish(self) -> list[str]:
        self.finished = True
        return ["built ahead: cuda: cuda build"]


def _app(session, job):
    logged: list = []
    app = SimpleNamespace(_ahead=(session, job), _ahead_lock=threading.Lock(),
                          log_pane=SimpleNamespace(add=lambda *a: logged.append(a)))
    return app, logged


def test_a_build_still_going_for_the_same_session_keeps_on():
    job = _Job(done=False)
    app, logged = _app("session", job)
    RunnerMixin._check_ahead(app, "session")
    assert app._ahead == ("session", job) and not job.finished and logged == []


def test_an_edited_session_stops_it_and_a_finished_one_is_collected():
    job = _Job(done=False)
    app, logged = _app("session", job)
    RunnerMixin._check_ahead(app, "edited session")
    assert app._ahead is None and job.finished and logged == [("built ahead: cuda: cuda build",)]
    done = _Job(done=True)
    app, logged = _app("session", done)
    RunnerMixin._check_ahead(app, "session")
    assert app._ahead is None and done.finished and len(logged) == 1
