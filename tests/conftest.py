"""Shared fixtures; keep this small. Op-test helpers live in op_cases.py."""

from __future__ import annotations

import contextlib
import multiprocessing.process
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.machine import Machine, probe
from workbench.registry import Registry, discover


# -- the shipped kernels' manifest, built once per test session ----------------------------------
# The front end (--list, --check, the TUI catalog) reads declarations from a manifest cached under
# the user cache folder (workbench/plugins/manifest.py); a cold cache builds it in a subprocess. Tests that
# give the CLI an empty cache folder (cli_fakes.user_dirs) get a copy of it, so only the tests
# that really start children need the `slow` marker.
SESSION_MANIFESTS: Path | None = None


def pytest_sessionstart(session):
    """Build (or find fresh) the shipped kernels' manifest in the default user cache folder, before
    any test runs: tests that read it there (load_session without a registry) and the copies
    seeded into tests' own cache folders then start nothing."""
    global SESSION_MANIFESTS
    from workbench.plugins.manifest import default_cache_dir, manifests, sources

    cache = default_cache_dir()
    manifests(sources(), cache)
    SESSION_MANIFESTS = cache / "manifest"


def seed_manifests(cache_dir: Path) -> None:
    """Copy the session's manifests into `cache_dir/manifest` (a test's fresh cache folder)."""
    import shutil

    if SESSION_MANIFESTS is not None and SESSION_MANIFESTS.is_dir():
        shutil.copytree(SESSION_MANIFESTS, Path(cache_dir) / "manifest", dirs_exist_ok=True)


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
