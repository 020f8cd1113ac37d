"""Every compiler cache a cold start fills lies under workbench's cache folder (issue #39, item 2):
the workers' environment points Inductor, Triton, torch's extension builds and CuPy there."""

from __future__ import annotations

from pathlib import Path

from workbench.engine.plan import worker_env


def test_the_workers_compiler_caches_are_under_the_cache_folder(tmp_path):
    env = worker_env(tmp_path, environ={})  # a user who set none of them (their own are kept: test_vec_isa.py)
    caches = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "CUPY_CACHE_DIR")
    assert all(Path(env[name]).parent == tmp_path for name in caches), env
    assert len({env[name] for name in caches}) == len(caches)  # one folder each
