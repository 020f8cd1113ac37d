"""engine/vec_isa.py: Inductor's CPU ISA check recorded once per host and reused by later workers."""

from __future__ import annotations

import functools
import json
import sys
from types import SimpleNamespace

import pytest

from workbench.engine.measure import vec_isa

linux_x86 = pytest.mark.skipif(vec_isa.host_key() is None, reason="needs Linux on x86_64 with a C++ compiler")


class FakeISA:
    def __init__(self, flags: str):
        self.flags = flags

    def __str__(self) -> str:
        return self.flags


def fake_inductor(cpu_flags, valid_flags, asked=True):
    supported = [FakeISA("avx512 amx_tile"), FakeISA("avx512"), FakeISA("avx2")]

    @functools.cache
    def valid_vec_isa_list():
        return [isa for isa in supported if str(isa) in valid_flags]

    if asked:
        valid_vec_isa_list()
    return SimpleNamespace(supported_vec_isa_list=supported, x86_isa_checker=lambda: list(cpu_flags),
                           valid_vec_isa_list=valid_vec_isa_list)


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    monkeypatch.setattr(vec_isa, "_recorded", False)
    monkeypatch.delenv(vec_isa.ENV, raising=False)
    return tmp_path


@linux_x86
def test_a_check_that_passed_every_claimed_isa_is_reused_by_the_next_worker(fresh, monkeypatch):
    assert vec_isa.worker_env(fresh) == {}  # nothing recorded yet: Inductor checks
    monkeypatch.setitem(sys.modules, "torch._inductor.cpu_vec_isa",
                        fake_inductor(["avx2", "avx512"], {"avx512", "avx2"}))
    assert vec_isa.record_if_checked(fresh) is True
    record = json.loads(vec_isa.record_path(fresh).read_text())
    assert record["claimed"] == record["valid"] == ["avx512", "avx2"] and record["all_claimed_valid"] is True
    assert vec_isa.worker_env(fresh) == {vec_isa.ENV: "1"}
    assert vec_isa.record_if_checked(fresh) is False  # once per process
    assert vec_isa.worker_env(fresh, {vec_isa.ENV: "0"}) == {}  # the user's own switch stands


@linux_x86
def test_a_refused_isa_or_another_host_key_means_checking_again(fresh, monkeypatch, tmp_path_factory):
    monkeypatch.setitem(sys.modules, "torch._inductor.cpu_vec_isa",
                        fake_inductor(["avx2", "avx512"], {"avx2"}))  # the compiler cannot build avx512
    assert vec_isa.record_if_checked(fresh) is True
    assert json.loads(vec_isa.record_path(fresh).read_text())["all_claimed_valid"] is False
    assert vec_isa.worker_env(fresh) == {}
    record = json.loads(vec_isa.record_path(fresh).read_text())
    vec_isa.record_path(fresh).write_text(json.dumps({**record, "all_claimed_valid": True}))
    assert vec_isa.worker_env(fresh) == {vec_isa.ENV: "1"}
    # another compiler (CXX) is another key: the record does not apply to it
    bin_dir = tmp_path_factory.mktemp("bin")
    other = bin_dir / "other-c++"
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    assert vec_isa.host_key({"CXX": str(other), "PATH": str(bin_dir)}) != vec_isa.host_key()
    assert vec_isa.worker_env(fresh, {"CXX": str(other), "PATH": str(bin_dir)}) == {}
    vec_isa.record_path(fresh).write_text("{not json")
    assert vec_isa.worker_env(fresh) == {}


def test_nothing_is_recorded_where_inductor_did_not_check(fresh, monkeypatch):
    monkeypatch.delitem(sys.modules, "torch._inductor.cpu_vec_isa", raising=False)
    assert vec_isa.record_if_checked(fresh) is False  # a row that did not compile
    monkeypatch.setitem(sys.modules, "torch._inductor.cpu_vec_isa", fake_inductor(["avx2"], {"avx2"}, asked=False))
    assert vec_isa.record_if_checked(fresh) is False  # imported, but no ISA asked for yet
    monkeypatch.setitem(sys.modules, "torch._inductor.cpu_vec_isa", SimpleNamespace())
    assert vec_isa.record_if_checked(fresh) is False  # Inductor's names moved: a no-op
    assert not vec_isa.record_path(fresh).exists()
    monkeypatch.setattr(vec_isa.sys, "platform", "darwin")
    assert vec_isa.host_key() is None


def test_the_inductor_names_read_are_there_in_this_torch():
    """What record_if_checked reads and the switch worker_env sets, in the installed torch."""
    import inspect

    import torch._inductor.config as config
    import torch._inductor.cpu_vec_isa as isa

    assert hasattr(isa.valid_vec_isa_list, "cache_info") and callable(isa.x86_isa_checker)
    assert isa.supported_vec_isa_list and all(str(v) for v in isa.supported_vec_isa_list)
    assert vec_isa.ENV in inspect.getsource(config)
    assert hasattr(config.cpp, "vec_isa_ok")


@linux_x86
def test_workers_get_the_switch_through_the_cores_environment(fresh, monkeypatch):
    from workbench.engine.plan import worker_env

    assert vec_isa.ENV not in worker_env(fresh)
    vec_isa.record_path(fresh).write_text(json.dumps({"key": vec_isa.host_key(), "all_claimed_valid": True}))
    assert worker_env(fresh)[vec_isa.ENV] == "1"
