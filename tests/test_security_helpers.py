"""Issue #36, the findings around the daemon: helper interpreters isolated from the working
folder (High 2), private temp files (Medium 4), git revisions never taken as options (Medium 6),
a session's plugins imported by --check and the TUI only when trusted (Medium 7), a local Ray
cluster on 127.0.0.1 with a private token (Medium 8), helpers that die with their parent (Low)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from cli_fakes import run, user_dirs  # noqa: F401 (fixtures)

PLANT = "import pathlib; pathlib.Path({marker!r}).write_text('imported from the working folder')\n"


def plant(folder: Path, *names: str) -> Path:
    """`numpy.py`, `yaml.py`, ... in `folder`, each leaving a marker file when imported."""
    marker = folder / "PLANTED-IMPORTED"
    for name in names:
        (folder / f"{name}.py").write_text(PLANT.format(marker=str(marker)))
    return marker


# -- High 2: helpers do not import from the working folder ------------------------------------
def test_helper_command_lines_leave_the_working_folder_off_sys_path(monkeypatch, tmp_path):
    from workbench.engine.daemon import client as daemon_client
    from workbench.engine.daemon.paths import DaemonPaths
    from workbench.helper_python import isolated_python

    assert isolated_python("-m", "x")[:2] == [sys.executable, "-P"]
    seen = {}

    class Popen:
        def __init__(self, argv, **kwargs):
            seen.update(argv=argv, cwd=kwargs.get("cwd"))
            self.pid = 1

    import types

    monkeypatch.setattr(daemon_client, "subprocess", types.SimpleNamespace(Popen=Popen, DEVNULL=subprocess.DEVNULL))
    folder = tmp_path / "d"
    folder.mkdir(mode=0o700)
    daemon_client._start(DaemonPaths(folder, "0123456789abcdef"), os.environ, 60)
    assert seen["argv"][:4] == [sys.executable, "-P", "-m", "workbench.engine.daemon.server"] and seen["cwd"] == "/"


@pytest.mark.slow
def test_manifest_build_does_not_import_a_module_planted_in_the_working_folder(tmp_path, monkeypatch):
    from workbench.plugins.manifest import build_in_subprocess, sources

    marker = plant(tmp_path, "numpy", "yaml", "torch")
    monkeypatch.chdir(tmp_path)
    built = build_in_subprocess(list(sources()), set())
    assert isinstance(built, dict)
    assert not marker.exists(), "manifest_build imported a module from the working folder"


@pytest.mark.slow
def test_the_forkserver_zygote_does_not_import_a_module_planted_in_the_working_folder(tmp_path):
    """The zygote is `python -c ...` (Python 3.11's forkserver ignores the parent's sys.path),
    which put the working folder first on sys.path; its preload imports numpy (torch)."""
    marker = plant(tmp_path, "numpy", "yaml")
    script = tmp_path.parent / f"{tmp_path.name}-zygote.py"
    script.write_text(textwrap.dedent("""
        import os
        from workbench.engine.pool import start_context
        if __name__ == "__main__":
            context = start_context("forkserver")
            context.set_forkserver_preload(["numpy", "yaml"])
            process = context.Process(target=os.getpid)
            process.start()
            process.join(60)
            print("exit", process.exitcode)
    """))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    script.unlink()
    assert "exit 0" in done.stdout, done.stderr
    assert not marker.exists(), "the zygote imported a module from the working folder"


@pytest.mark.slow
def test_the_planted_module_would_be_imported_without_the_guard(tmp_path):
    """The test above can fail: the same plant is imported by a plain `python -c`."""
    marker = plant(tmp_path, "numpy")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    subprocess.run([sys.executable, "-c", "import numpy"], cwd=tmp_path, env=env, timeout=60)
    assert marker.exists()


# -- Medium 4: private temp files -------------------------------------------------------------
def test_the_zygote_log_lives_in_a_private_folder_of_its_own(tmp_path, monkeypatch):
    import tempfile

    from workbench.engine import pool as workers
    from workbench.engine import private_tmp as tmps

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(tmps, "_PRIVATE_TMP", {})
    dead = tmp_path / f"{tmps.PRIVATE_TMP_PREFIX}{2 ** 22 + 12345}-abc"  # a pid above pid_max: gone
    dead.mkdir()
    live = tmp_path / f"{tmps.PRIVATE_TMP_PREFIX}{os.getpid()}-old"
    live.mkdir()
    log = workers.zygote_log_path()
    folder = log.parent
    st = os.lstat(folder)
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.getuid()
    assert folder.name.startswith(f"{tmps.PRIVATE_TMP_PREFIX}{os.getpid()}-") and folder != live
    assert not dead.exists() and live.exists(), "a dead process's folder is swept, a live one's kept"
    assert workers.zygote_log_path() == log


@pytest.mark.slow
def test_the_zygote_does_not_follow_a_planted_link(tmp_path):
    """engine/zygote.py's redirect (the part before torch), run with its log path a symlink."""
    target = tmp_path / "victim"
    target.write_text("keep")
    link = tmp_path / "zygote.log"
    link.symlink_to(target)
    source = (Path(__file__).parents[1] / "workbench" / "engine" / "worker" / "zygote.py").read_text()
    head = source.split("from workbench.trace import mark")[0]
    done = subprocess.run([sys.executable, "-c", head + "\nprint('written')\n"], capture_output=True, text=True,
                          env={**os.environ, "WORKBENCH_ZYGOTE_LOG": str(link)}, timeout=60)
    assert done.returncode == 0 and target.read_text() == "keep"
    plain = tmp_path / "plain.log"
    subprocess.run([sys.executable, "-c", head + "\nprint('written')\n"], timeout=60,
                   env={**os.environ, "WORKBENCH_ZYGOTE_LOG": str(plain)})
    assert plain.read_text().strip() == "written" and stat.S_IMODE(os.stat(plain).st_mode) == 0o600


# -- Medium 6: git revisions ------------------------------------------------------------------
def test_a_revision_that_git_would_take_as_an_option_is_a_session_problem(tmp_path):
    from workbench.session.api import SessionError, load_session

    session = tmp_path / "s.yaml"
    victim = tmp_path / "victim.txt"
    victim.write_text("data")
    session.write_text("schema_version: 1\nname: s\nruns:\n  - op: gelu\n    shape: {M: 4, N: 4}\n"
                       f"    compare: [pytorch, {{name: pytorch, rev: '--output={victim}'}}]\n")
    with pytest.raises(SessionError, match="must be a git revision"):
        load_session(session)
    assert victim.read_text() == "data"


def test_the_engine_refuses_such_a_revision_too(tmp_path):
    from workbench.engine.worker import ab_sides
    from workbench.errors import WorkbenchError
    from workbench.registry import discover

    impl = discover().op("gelu").impls["pytorch"]
    with pytest.raises(WorkbenchError, match="not a git revision"):
        ab_sides._at_revision(impl, "--output=/tmp/x", tmp_path)


@pytest.mark.slow
def test_check_reports_the_revision(capsys, tmp_path):
    session = tmp_path / "s.yaml"
    session.write_text("schema_version: 1\nname: s\nruns:\n  - op: gelu\n    shape: {M: 4, N: 4}\n"
                       "    compare: [pytorch, {name: pytorch, rev: '--output=x'}]\n")
    code, _out, err = run(capsys, "--check", str(session))
    assert code == 2 and "must be a git revision" in err


# -- Medium 7: plugins only when trusted ------------------------------------------------------
def _plugin_session(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "plugin-ran"
    (tmp_path / "mine.py").write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n")
    session = tmp_path / "s.yaml"
    session.write_text("schema_version: 1\nname: s\nplugins: [mine.py]\nruns: [{op: gelu, impls: [pytorch]}]\n")
    return session, marker


@pytest.mark.slow
def test_check_imports_a_sessions_plugins_only_with_trust_plugins(capsys, tmp_path, user_dirs):
    """user_dirs: a cache folder of the test's own. In the user's, a manifest of the same plugin
    text (an earlier run's, whose pytest folder had the same name) was read instead of importing
    the plugin, and the marker never appeared."""
    session, marker = _plugin_session(tmp_path)
    code, out, err = run(capsys, "--check", str(session))
    assert code == 2 and "not checked" in err and "mine.py" in err and "--trust-plugins" in err
    assert not marker.exists(), "--check ran the session's plugin without being asked"
    code, out, err = run(capsys, "--check", str(session), "--trust-plugins")
    assert code == 0 and marker.exists(), err


def test_shipped_sessions_are_trusted_and_others_are_not(tmp_path):
    from workbench.plugin_trust import declared_plugins, untrusted_plugins
    from workbench.session.paths import shipped_path

    session, _marker = _plugin_session(tmp_path)
    assert declared_plugins(session) == ["mine.py"]
    assert untrusted_plugins(session, trusted=False) == ["mine.py"]
    assert untrusted_plugins(session, trusted=True) == []
    assert untrusted_plugins(shipped_path("default-cpu"), trusted=False) == []
    example = Path(__file__).resolve().parents[1] / "examples" / "rmsnorm.yaml"
    assert declared_plugins(example) and untrusted_plugins(example, trusted=False) == []


def test_the_tui_asks_before_it_opens_a_session_with_plugins(tmp_path, monkeypatch, capsys):
    import argparse

    from rich.console import Console

    import importlib

    main = importlib.import_module("workbench.cli.main")

    session, _marker = _plugin_session(tmp_path)
    err = Console(stderr=True, width=1000)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False, raising=False)
    assert not main._plugins_trusted(session, argparse.Namespace(trust_plugins=False), err)
    assert "not opened" in capsys.readouterr().err
    assert main._plugins_trusted(session, argparse.Namespace(trust_plugins=True), err)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr("builtins.input", lambda question: "y")
    assert main._plugins_trusted(session, argparse.Namespace(trust_plugins=False), err)


# -- Medium 8: Ray --------------------------------------------------------------------------
def test_a_local_ray_cluster_listens_on_loopback_and_its_token_is_private(tmp_path):
    from workbench.engine.multi.ray_cluster import init_private

    token = tmp_path / ".ray" / "auth_token"
    seen = {}

    class Ray:
        def init(self, **kwargs):
            seen.update(kwargs)
            token.parent.mkdir()
            fd = os.open(token, os.O_WRONLY | os.O_CREAT, 0o666)  # as Ray writes it: subject to the umask
            os.close(fd)

    init_private(Ray(), {"HOME": str(tmp_path)})
    assert seen["_node_ip_address"] == "127.0.0.1"
    assert stat.S_IMODE(os.stat(token).st_mode) & 0o077 == 0
    seen.clear()
    token.unlink()
    token.parent.rmdir()
    init_private(Ray(), {"HOME": str(tmp_path), "RAY_ADDRESS": "10.0.0.2:6379"})  # a cluster of the user's
    assert "_node_ip_address" not in seen


# -- Low: manifest_build dies with the --check that started it ------------------------------
@pytest.mark.slow
def test_a_helper_started_with_die_with_parent_goes_with_its_parent(tmp_path):
    pid_file = tmp_path / "child.pid"
    parent = textwrap.dedent(f"""
        import subprocess, sys, pathlib
        from workbench.helper_python import die_with_parent
        child = subprocess.Popen(["sleep", "60"], preexec_fn=die_with_parent)
        pathlib.Path({str(pid_file)!r}).write_text(str(child.pid))
        import time; time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", parent])
    deadline = time.monotonic() + 60
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(pid_file.read_text())
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 5
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] if Path(f"/proc/{child}/stat").exists() else "X"
        if state in "ZX":
            break
        time.sleep(0.05)
    state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] if Path(f"/proc/{child}").exists() else "X"
    assert state in "ZX", "the helper outlived its killed parent"


# -- Low: a plugin's detached grandchild does not outlive its worker ---------------------------
@pytest.mark.slow
def test_a_detached_grandchild_stays_under_the_worker_and_dies_with_it(tmp_path):
    """A worker is a child subreaper (engine/entry.py): a helper that a plugin starts detached
    (setsid, its parent gone at once) is reparented to the worker, not to init, and
    kill_descendants (what WorkerProcess.close calls) ends it."""
    from workbench.engine.pool import kill_descendants

    pid_file = tmp_path / "helper.pid"
    worker = textwrap.dedent(f"""
        import ctypes, subprocess, time
        from workbench.engine.worker.entry import PR_SET_CHILD_SUBREAPER
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1)
        subprocess.run(["bash", "-c", "setsid sleep 60 & echo $! > {pid_file}"])  # bash leaves at once
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", worker])
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)
        helper = int(pid_file.read_text())
        time.sleep(0.2)
        parent = int(Path(f"/proc/{helper}/stat").read_text().rsplit(")", 1)[1].split()[1])
        assert parent == proc.pid, "the detached helper was not reparented to the worker"
        assert helper in kill_descendants(proc.pid)
        deadline = time.monotonic() + 5
        while Path(f"/proc/{helper}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
            try:
                if Path(f"/proc/{helper}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX":
                    break
            except OSError:
                break
        alive = Path(f"/proc/{helper}/stat").exists() and \
            Path(f"/proc/{helper}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
        assert not alive, "the helper outlived kill_descendants"
    finally:
        proc.kill()
        proc.wait()


def test_multiprocessing_temp_files_live_in_the_private_folder(tmp_path, monkeypatch):
    """A killed run left /tmp/pymp-* (and /tmp/workbench-worker-*.log): both now live in the
    process's private folder, which the next start sweeps."""
    import multiprocessing
    import tempfile

    from workbench.engine import pool as workers
    from workbench.engine import private_tmp as tmps

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(tmps, "_PRIVATE_TMP", {})
    config = multiprocessing.current_process()._config
    monkeypatch.setitem(config, "tempdir", None)
    config.pop("tempdir")
    workers.start_context("spawn")
    assert Path(config["tempdir"]) == workers.private_tmp()
