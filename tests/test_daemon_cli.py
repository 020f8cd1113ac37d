"""The warm daemon for real (`--replay --daemon`, `--daemon-list`, `--daemon-stop`): processes
started through the CLI, each test in a private daemon folder (WORKBENCH_DAEMON_DIR) whose
daemons are stopped when it ends, and checked gone with their zygote and workers."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
from test_cli_stop import wait_for_line  # stderr lines up to one that names a finished row

pytestmark = pytest.mark.slow  # every test here starts the CLI and daemons (tests/conftest.py)

GELU = """schema_version: 1
name: daemon-gelu
settings: {device: cpu, warmup_ms: 1, rep_ms: 5, timeout_s: 120}
runs:
  - op: gelu
    impls: [manual, pytorch]
    shape: {M: 64, N: 64}
    dtype: float32
    actions: [check, bench]
"""
SLEEPS = """schema_version: 1
name: daemon-sleeps
settings: {{device: cpu, warmup_ms: 1, rep_ms: 1, min_samples: 3, timeout_s: 60}}
runs:
  - op: sleep
    impls: [manual]
    sweep: {{params: [sleep_ms], values: [{values}]}}
"""
WAIT_S = 120  # a cold worker imports torch: slow on a loaded 2-core machine (test_cli_stop's START_S)


def alive(pid) -> bool:
    """Whether `pid` is a live process (a zombie is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def descendants(pid: int) -> list[int]:
    """Every live process under `pid` (the daemon's zygote and workers), from /proc."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = [], [pid]
    while frontier:
        children = [p for p, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return [p for p in found if alive(p)]


def gone(pids, within_s: float = 10.0) -> list[int]:
    deadline = time.monotonic() + within_s
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


@pytest.fixture
def wb(tmp_path):
    """cli(*args) runs the CLI here; start(*args) starts it; the daemon folder is private to the
    test and every daemon in it is stopped at the end, its processes checked gone."""
    from workbench.engine.daemon.client import list_daemons, stop_daemons

    from conftest import daemon_folder

    folder = daemon_folder()
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_DATA_HOME": str(tmp_path / "data"),
           "WORKBENCH_DAEMON_DIR": str(folder)}
    env.pop("WORKBENCH_DAEMON", None)  # the suite's WORKBENCH_DAEMON=0: these tests are about the daemon

    def start(*args: str, extra_env=None) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "workbench", *args], cwd=tmp_path, text=True,
                                env={**env, **(extra_env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)

    def cli(*args: str, extra_env=None) -> subprocess.CompletedProcess:
        proc = start(*args, extra_env=extra_env)
        out, err = proc.communicate(timeout=WAIT_S * 2)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def session(text: str, name: str = "s.yaml") -> str:
        (tmp_path / name).write_text(text)
        return str(tmp_path / name)

    yield types.SimpleNamespace(cli=cli, start=start, session=session, env=env, folder=folder, tmp=tmp_path)
    left = [(d["pid"], descendants(d["pid"])) for d in list_daemons(folder) if isinstance(d.get("pid"), int)]
    stop_daemons(folder)
    shutil.rmtree(folder, ignore_errors=True)
    assert not gone([p for pid, under in left for p in (pid, *under)]), "a daemon or its worker outlived the test"


def replay(wb, path: str, *args: str, out: str = "out.json"):
    proc = wb.cli("--replay", path, "-o", str(wb.tmp / out), *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads((wb.tmp / out).read_text()), proc


def essentials(doc: dict) -> list[tuple]:
    keys = ("op", "impl", "label", "dtype", "status", "error", "run_index", "sweep_value")
    return [tuple(r.get(k) for k in keys) + ((r.get("check") or {}).get("passed"),) for r in doc["results"]]


def key_paths(value, prefix="") -> set[str]:
    if isinstance(value, dict):
        return {p for k, v in value.items() for p in {f"{prefix}.{k}"} | key_paths(v, f"{prefix}.{k}")}
    if isinstance(value, list):
        return {p for v in value for p in key_paths(v, f"{prefix}[]")}
    return set()


def test_two_invocations_share_one_daemon_which_lists_and_stops_with_its_workers(wb):
    path = wb.session(GELU)
    here, _ = replay(wb, path, "--no-daemon", out="here.json")
    first, _ = replay(wb, path, "--daemon", out="first.json")
    second, _ = replay(wb, path, "--daemon", out="second.json")
    d1, d2 = first["provenance"]["daemon"], second["provenance"]["daemon"]
    assert d1["pid"] == d2["pid"] and (d1["runs"], d2["runs"]) == (1, 2)
    assert d2["worker_starts"]["reused"] > d1["worker_starts"].get("reused", 0), d2
    assert d2["worker_starts"]["cold"] == d1["worker_starts"]["cold"], "the second run started no worker"
    assert "daemon" not in here["provenance"]
    # the same document as a run in this process, but for timings and provenance.daemon
    assert essentials(here) == essentials(second) and all(r[4] == "ok" for r in essentials(second))
    measured = (".provenance.daemon", ".results[].diagnosis[].")  # findings follow the measured times
    assert ({p for p in key_paths(here) if not p.startswith(measured)}
            == {p for p in key_paths(second) if not p.startswith(measured)})

    listed = wb.cli("--daemon-list", "--format", "json")
    daemons = json.loads(listed.stdout)
    assert [(d["pid"], d["runs"], d["state"]) for d in daemons] == [(d2["pid"], 2, "idle")], listed.stderr
    log = (wb.folder / f"d-{d2['fingerprint']}.log").read_text()
    assert "run 2 done" in log and "(cancelled)" not in log, log  # the client's close is no cancel
    assert "runs 2" in wb.cli("--daemon-list").stdout
    import workbench  # which checkout and Python it runs: two checkouts' daemons told apart
    root = str(Path(workbench.__file__).resolve().parent.parent)
    assert daemons[0]["package"] == root and daemons[0]["python"] and root in wb.cli("--daemon-list").stdout
    pids = [d2["pid"], *descendants(d2["pid"])]
    assert daemons[0]["zygote_pid"] in pids and all(w["pid"] in pids for w in daemons[0]["workers"])
    stopped = wb.cli("--daemon-stop")
    assert stopped.returncode == 0 and "1 workbench daemon(s) stopped" in stopped.stdout
    assert gone(pids, within_s=5) == []
    assert wb.cli("--daemon-list").stdout.startswith("0 workbench daemon(s) running")


def test_the_idle_timeout_ends_the_daemon_and_its_workers(wb):
    doc, _ = replay(wb, wb.session(SLEEPS.format(values="5")), "--daemon", "--daemon-idle", "4")
    daemon = doc["provenance"]["daemon"]
    assert daemon["idle_timeout_s"] == 4.0
    pids = [daemon["pid"], *descendants(daemon["pid"])]
    assert len(pids) >= 3, "the daemon, its zygote and a warm worker"
    assert gone(pids, within_s=60) == []
    assert not (wb.folder / f"d-{daemon['fingerprint']}.sock").exists()
    assert "idle for 4 s" in (wb.folder / f"d-{daemon['fingerprint']}.log").read_text()


def test_a_stale_socket_is_replaced_and_another_fingerprint_gets_its_own_daemon(wb):
    from workbench.engine.daemon.client import connect, list_daemons
    from workbench.engine.daemon.paths import DaemonPaths, fingerprint

    def status(environ):
        from workbench.engine.daemon import wire

        conn = connect(DaemonPaths.of(wb.folder, fingerprint(environ)), start=True, environ=environ)
        wire.send(conn, wire.Kind.status)
        info = wire.recv(conn)[1]
        conn.close()
        return info

    first = status(wb.env)
    os.kill(first["pid"], signal.SIGKILL)
    assert gone([first["pid"]]) == [] and Path(first["socket"]).exists(), "a dead daemon's socket stays"
    second = status(wb.env)
    assert second["pid"] != first["pid"] and second["socket"] == first["socket"]
    other = status({**wb.env, "TORCHINDUCTOR_SOME_KNOB": "1"})
    assert other["pid"] != second["pid"] and other["fingerprint"] != second["fingerprint"]
    assert sorted(d["pid"] for d in list_daemons(wb.folder)) == sorted([second["pid"], other["pid"]])


def test_signals_and_a_killed_client_cancel_the_run_and_the_daemon_serves_the_next(wb):
    path = wb.session(SLEEPS.format(values="20, 30, 8000, 8001"))
    proc = wb.start("--replay", path, "--daemon", "-o", str(wb.tmp / "term.json"))
    wait_for_line(proc, "[2/4]")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    doc = json.loads((wb.tmp / "term.json").read_text())
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert doc["cancelled"] is True and doc["cancel_signal"] == "SIGTERM"
    assert [r["status"] for r in doc["results"]] == ["ok", "ok", "skipped", "skipped"]
    assert doc["provenance"]["daemon"]["runs"] == 1

    killed = wb.start("--replay", path, "--daemon", "-o", str(wb.tmp / "killed.json"))
    wait_for_line(killed, "[2/4]")
    killed.kill()
    killed.wait(10)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        daemons = json.loads(wb.cli("--daemon-list", "--format", "json").stdout)
        if daemons and daemons[0]["state"] == "idle":
            break
    assert daemons[0]["state"] == "idle" and daemons[0]["runs"] == 2, daemons
    after, _ = replay(wb, wb.session(SLEEPS.format(values="20"), "short.yaml"), "--daemon", out="after.json")
    assert [r["status"] for r in after["results"]] == ["ok"]
    assert after["provenance"]["daemon"]["runs"] == 3 and after["provenance"]["daemon"]["pid"] == daemons[0]["pid"]


def test_daemon_stop_mid_run_ends_the_replay_with_exit_2_and_says_so(wb):
    """--daemon-stop while the daemon serves a replay: the replay exited 0 with skipped rows and
    no word (a new user's try); now exit 2 (as a daemon lost mid-run), a line saying what
    happened, and the finished rows written."""
    path = wb.session(SLEEPS.format(values="20, 30, 8000, 8001"))
    proc = wb.start("--replay", path, "--daemon", "-o", str(wb.tmp / "stopped.json"))
    wait_for_line(proc, "[2/4]")
    assert wb.cli("--daemon-stop").returncode == 0
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert "the workbench daemon was stopped during the run" in err
    doc = json.loads((wb.tmp / "stopped.json").read_text())
    assert doc["cancelled"] is True and [r["status"] for r in doc["results"]][:2] == ["ok", "ok"]


def test_the_daemon_is_the_default_and_the_opt_outs_run_in_process(wb):
    """Issue #39: a plain --replay uses (and starts) the daemon and says so in one line;
    --no-daemon, WORKBENCH_DAEMON=0 and --strict run in this process; a second plain replay
    reuses the daemon the first started."""
    path = wb.session(SLEEPS.format(values="5"))
    first, proc = replay(wb, path, out="first.json")
    assert first["provenance"]["daemon"]["runs"] == 1
    assert [line for line in proc.stderr.splitlines() if "started a workbench daemon" in line], proc.stderr
    second, proc = replay(wb, path, out="second.json")
    assert second["provenance"]["daemon"]["pid"] == first["provenance"]["daemon"]["pid"]
    assert "started a workbench daemon" not in proc.stderr
    for args, extra in ((("--no-daemon",), None), ((), {"WORKBENCH_DAEMON": "0"}), (("--strict",), None)):
        proc = wb.cli("--replay", path, "-o", str(wb.tmp / "here.json"), *args, extra_env=extra)
        assert proc.returncode == 0, proc.stderr
        assert "daemon" not in json.loads((wb.tmp / "here.json").read_text())["provenance"], args


def test_a_stopped_daemon_is_replaced_with_one_line(wb, monkeypatch):
    """A daemon that accepts and never answers (SIGSTOP): the client kills it (its pid verified
    as this user's daemon of this folder) and starts a fresh one, saying so."""
    from workbench.engine.daemon.client import connect
    from workbench.engine.daemon.paths import DaemonPaths, fingerprint

    paths = DaemonPaths.of(wb.folder, fingerprint(wb.env))
    conn = connect(paths, start=True, environ=wb.env)
    old = conn.peer_pid
    conn.close()
    os.kill(old, signal.SIGSTOP)
    from workbench.engine.daemon import client as daemon_client

    monkeypatch.setattr(daemon_client, "CLIENT_HANDSHAKE_S", 1.0)
    notes = []
    conn = connect(paths, start=True, environ=wb.env, note=notes.append)
    try:
        assert conn.peer_pid != old and gone([old]) == []
        assert any(f"workbench daemon {old} did not answer" in n for n in notes), notes
    finally:
        conn.close()


def test_the_session_finish_check_sees_a_daemon_left_running(wb):
    """conftest's pytest_sessionfinish fails the suite on any daemon under its folder: the
    listing it uses finds a live one and not a stopped one."""
    from conftest import DAEMON_ROOT, daemons_under

    from workbench.engine.daemon.client import connect, stop_daemons
    from workbench.engine.daemon.paths import DaemonPaths, fingerprint

    conn = connect(DaemonPaths.of(wb.folder, fingerprint(wb.env)), start=True, environ=wb.env)
    pid = conn.peer_pid
    conn.close()
    assert pid in daemons_under(DAEMON_ROOT)
    stop_daemons(wb.folder)
    assert gone([pid]) == [] and pid not in daemons_under(DAEMON_ROOT)


def test_the_replay_watch_runs_its_first_cycle_in_the_daemon_and_leaves_none_of_its_own(wb):
    """Issue #39: `--replay FILE --watch` starts (first watch) and reuses (second watch) the warm
    daemon for its first cycle, and leaves nothing running of its own when Ctrl-C ends it; its
    daemon is this user's warm daemon, which --daemon-stop ends with its workers."""
    path = wb.session(SLEEPS.format(values="5"))
    notes = []
    for number in (1, 2):
        out = wb.tmp / f"watch{number}.json"
        proc = wb.start("--replay", path, "--watch", "-o", str(out))
        seen = wait_for_line(proc, "save one to re-run")
        notes.append(any("started a workbench daemon" in line for line in seen))
        doc = json.loads(out.read_text())
        assert doc["provenance"]["daemon"]["runs"] == number, doc["provenance"]
        deadline = time.monotonic() + 10
        while len(descendants(proc.pid)) < 2 and time.monotonic() < deadline:  # the watch's own pool warming up
            time.sleep(0.1)
        daemon = doc["provenance"]["daemon"]["pid"]  # the first watch's child too (its own session): it stays
        under = set(descendants(proc.pid)) - {daemon, *descendants(daemon)}  # the watch's worker and zygote
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=WAIT_S) == 130, proc.stderr.read()
        left = gone([p for p in under if p != proc.pid], within_s=30)
        assert left == [], [(p, Path(f"/proc/{p}/cmdline").read_bytes()[:200]) for p in left]
    assert notes == [True, False], notes  # started by the first watch, reused by the second
    daemons = json.loads(wb.cli("--daemon-list", "--format", "json").stdout)
    assert [d["runs"] for d in daemons] == [2]
    pids = [daemons[0]["pid"], *descendants(daemons[0]["pid"])]
    assert wb.cli("--daemon-stop").returncode == 0 and gone(pids, within_s=10) == []


def test_the_daemon_starts_before_the_session_is_read_and_a_refused_session_ends_it(wb):
    """Issue #39: a replay starts the daemon before it reads and checks its session (the daemon's
    start and its zygote's torch import overlap that work) and says so once; a session it then
    refuses (exit 2) ends the daemon it started: nothing is left running."""
    from conftest import daemons_under

    bad = wb.session(GELU.replace("impls: [manual, pytorch]", "impls: [manual, no_such_impl]"), "bad.yaml")
    # a refused session, a path that is not there, a name that is no session (raised, not returned)
    for argv in (("--replay", bad), ("--replay", str(wb.tmp / "typo.yaml")), ("--replay", "no_such_session")):
        proc = wb.cli(*argv, "-o", str(wb.tmp / "bad.json"))
        assert proc.returncode == 2, proc.stderr
        deadline = time.monotonic() + 30
        while daemons_under(wb.folder) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert daemons_under(wb.folder) == [], argv
    doc, proc = replay(wb, wb.session(GELU))
    assert proc.stderr.count("started a workbench daemon") == 1 and doc["provenance"]["daemon"]["runs"] == 1
    trace = wb.tmp / "trace.txt"  # a second daemon for another environment: the order of its steps
    proc = wb.cli("--replay", wb.session(GELU, "t.yaml"), "-o", str(wb.tmp / "t.json"),
                  extra_env={"WORKBENCH_TRACE": str(trace), "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    steps = [line.split(" ", 2)[2].strip() for line in trace.read_text().splitlines()]
    assert steps.index("client: daemon started early") < steps.index("client: connecting to the daemon")
    assert "daemon: prewarm, the zygote is starting" in steps  # the zygote started as the daemon listened
