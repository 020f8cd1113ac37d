"""Shared fixtures; keep this small. Op-test helpers live in op_cases.py."""

from __future__ import annotations

import contextlib
import multiprocessing.process
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from workbench.machine import Machine, probe
from workbench.registry import Registry, discover


# -- the shipped kernels' manifest, built once per test session ----------------------------------
# The front end (--list, --check, the TUI catalog) reads declarations from a manifest cached under
# the user cache folder (workbench/plugins/manifest.py); a cold cache builds it in a subprocess. Tests that
# give the CLI an empty cache folder (cli_fakes.user_dirs) get a copy of it, so only the tests
# that really start children need the `slow` marker.
SESSION_MANIFESTS: list[Path] = []  # this session's manifest files (the cache folder keeps older ones too)


# -- no warm daemon outlives the test session (issue #39) ----------------------------------------
# The CLI uses a per-user warm daemon by default. The suite turns it off (WORKBENCH_DAEMON=0, which
# every CLI a test starts inherits) and points WORKBENCH_DAEMON_DIR at a folder of this session's:
# the daemon tests opt in with folders under it (daemon_folder()) and stop what they start; at the
# end every daemon process whose folder is under it is listed, killed, and fails the session.
DAEMON_ROOT = Path(tempfile.mkdtemp(prefix="wbt-"))  # short: a socket's path holds ~100 characters
os.environ["WORKBENCH_DAEMON"] = "0"
os.environ["WORKBENCH_DAEMON_DIR"] = str(DAEMON_ROOT / "default")


def daemon_folder() -> Path:
    """A fresh private folder for a daemon test, under the session's daemon root."""
    return Path(tempfile.mkdtemp(prefix="d", dir=DAEMON_ROOT))


DAEMON_MODULES = ("workbench.engine.daemon.server", "workbench.cli.tui_server")  # the engine's, the TUI's


def daemons_under(root: Path) -> list[int]:
    """Pids of live `python -m MODULE --dir D` processes of this user (MODULE: DAEMON_MODULES, the
    TUIs a warm TUI process forked included) with D under `root` (from /proc: what a daemon test
    left running)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            owner = (entry / "status").stat().st_uid
        except (OSError, IndexError):
            continue
        if not any(module in argv for module in DAEMON_MODULES) or "--dir" not in argv or owner != os.getuid() or state in "ZX":
            continue
        folder = argv[argv.index("--dir") + 1] if argv.index("--dir") + 1 < len(argv) else ""
        if os.path.realpath(folder).startswith(os.path.realpath(root) + os.sep):
            found.append(int(entry.name))
    return found


def pytest_sessionfinish(session, exitstatus):
    """Fail the session when a daemon a test started is still running (then kill it)."""
    import shutil
    import signal

    left = daemons_under(DAEMON_ROOT)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    shutil.rmtree(DAEMON_ROOT, ignore_errors=True)
    if left:
        print(f"\nworkbench daemon(s) {left} outlived the test session (killed now): a daemon test must stop "
              "what it starts")
        session.exitstatus = 1


def pytest_sessionstart(session):
    """Build (or find fresh) the shipped kernels' manifest in the default user cache folder, before
    any test runs: tests that read it there (load_session without a registry) and the copies
    seeded into tests' own cache folders then start nothing."""
    global SESSION_MANIFESTS
    from workbench.plugins.manifest import default_cache_dir, digest, manifests, sources, versions

    cache = default_cache_dir()
    found = sources()
    manifests(found, cache)
    env = versions()
    SESSION_MANIFESTS = [p for p in (cache / "manifest" / f"{digest(s, env)}.json" for s in found) if p.is_file()]


def seed_manifests(cache_dir: Path) -> None:
    """Copy this session's manifests (only those of the sources found now, not every stale one the
    user cache folder keeps) into `cache_dir/manifest` (a test's fresh cache folder)."""
    import shutil

    folder = Path(cache_dir) / "manifest"
    folder.mkdir(parents=True, exist_ok=True)
    for path in SESSION_MANIFESTS:
        shutil.copy2(path, folder / path.name)


@pytest.fixture(scope="session")
def registry() -> Registry:
    """The registry with the shipped kernels (entry point `workbench.ops`)."""
    return discover()


@pytest.fixture(scope="session")
def machine() -> Machine:
    return probe()


# -- `slow`: the tests that start Python child processes (pyproject's marker) ------------------------
# A test that starts an engine child, an op child, the CLI or an interpreter without the `slow`
# marker fails here, naming the marker, so `pytest -m "not slow"` stays quick and the marks stay
# true. Tools (nvcc, cuobjdump) are not children in this sense.
class ChildProcessInQuickTest(AssertionError):
    pass


def _python_argv(args, kwargs) -> bool:
    argv = args[0] if args else kwargs.get("args")
    first = argv[0] if isinstance(argv, (list, tuple)) and argv else str(argv or "").split(" ")[0]
    return Path(str(first)).name.startswith("python") or str(first) == sys.executable


@contextlib.contextmanager
def _no_children(where: str):
    popen_init, process_start = subprocess.Popen.__init__, multiprocessing.process.BaseProcess.start

    def refuse(what: str):
        raise ChildProcessInQuickTest(f"{where} starts a child process ({what}): mark it "
                                      "@pytest.mark.slow, so `pytest -m 'not slow'` stays quick")

    def guarded_popen(self, *args, **kwargs):
        if _python_argv(args, kwargs):
            refuse("a Python subprocess")
        popen_init(self, *args, **kwargs)

    def guarded_start(self):
        refuse("multiprocessing")

    subprocess.Popen.__init__, multiprocessing.process.BaseProcess.start = guarded_popen, guarded_start
    try:
        yield
    finally:
        subprocess.Popen.__init__, multiprocessing.process.BaseProcess.start = popen_init, process_start


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    with contextlib.nullcontext() if item.get_closest_marker("slow") else _no_children(item.nodeid):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    with contextlib.nullcontext() if item.get_closest_marker("slow") else _no_children(item.nodeid):
        yield


# -- order: the longest files first ---------------------------------------------------------------
# `make test` runs the files on two pytest-xdist workers (--dist loadfile: a file's module fixtures
# run once). A long file handed out last leaves one worker alone at the end, so the files that
# take longest on these 2-core machines go first (--durations=0, 2026-12-02: 102 s down to 36 s,
# of 1122 s in all). Order within a file is kept; files not named keep their order after these.
LONG_FILES = ("test_ops_triton.py", "test_tui_fixes.py", "test_ray_cluster.py", "test_cli_stop.py", "test_tui.py",
              "test_tui_snapshots.py", "test_tui_runs.py", "test_examples.py", "test_ptx_extract.py",
              "test_daemon_cli.py", "test_cuda_binding.py", "test_tui_plugins.py")


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FILES)))
