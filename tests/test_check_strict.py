"""--strict (rule 13, issue 38): the value comparisons judged in a clean process that imports no
plugin code (workbench/check/strict.py). A "plugin" here is a monkeypatch of this process's
comparison, as a plugin's import-time code would make in the worker: without --strict it reaches
the verdict (the wrong output passes: that is what --strict is for), with it the clean child
judges and the row fails. The child's sys.modules is read back: no plugin module, no shipped op."""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

import workbench.check.compare as compare_module
from workbench.check.row import RowCheck
from workbench.check.strict import Judge, foreign_modules
from workbench.registry import BuildContext, discover, plugin_module_name

CTX = BuildContext(device="cpu", fp32_precision="ieee")
REGISTRY = discover()


def _wrong_gelu():
    """gelu's shipped pytorch impl, its check, and an output 10% off (a wrong kernel's)."""
    op = REGISTRY.op("gelu")
    impl = op.get_impl("pytorch")
    spec = op.make_spec({"M": 16, "N": 64}, "float32")
    inputs = op.make_inputs(spec, "cpu", 0)
    fn = impl.builder(spec, {}, CTX)
    return op, impl, spec, inputs, fn(*inputs) * 1.1


def _always_pass(totals, tol):  # a plugin's replacement for workbench.check.compare.verdict
    return None, tol.atol(totals.ref_rms), None


def _zero_sub_(self, other, *args, **kwargs):  # a plugin's torch.Tensor.sub_: every error is 0
    return self.zero_()


@pytest.fixture
def judge():
    j = Judge()
    yield j
    j.close()


def _first(judge=None):
    op, impl, spec, inputs, wrong = _wrong_gelu()
    return RowCheck(op, impl, spec, CTX, inputs, 0, judge=judge).first(wrong)


@pytest.mark.slow  # starts the clean child
def test_a_right_and_a_wrong_output_judged_in_the_clean_process(judge):
    op, impl, spec, inputs, wrong = _wrong_gelu()
    right = impl.builder(spec, {}, CTX)(*inputs)
    local = RowCheck(op, impl, spec, CTX, inputs, 0).first(right)
    remote = RowCheck(op, impl, spec, CTX, inputs, 0, judge=judge).first(right)
    assert local.passed and remote.passed and remote.max_abs_err == local.max_abs_err
    failed = RowCheck(op, impl, spec, CTX, inputs, 0, judge=judge).first(wrong)
    assert not failed.passed and failed.gate in ("elementwise", "elementwise+norm-wise"), failed
    assert failed.detail.startswith(f"{failed.gate} gate (first inputs)") and failed.first_bad_index is not None
    assert judge.cases == 2  # the two judged here; the local one never reached the child


@pytest.mark.slow
@pytest.mark.parametrize("patch", ["verdict", "torch_sub_"])
def test_a_patched_comparison_passes_a_wrong_output_only_without_strict(patch, monkeypatch, judge):
    assert not _first().passed  # unpatched: the wrong output fails here too
    if patch == "verdict":
        monkeypatch.setattr(compare_module, "verdict", _always_pass)
    else:
        monkeypatch.setattr(torch.Tensor, "sub_", _zero_sub_)
    assert _first().passed  # the patch reaches the in-process comparison (why --strict exists)
    report = _first(judge)
    assert not report.passed and report.gate != "strict", report  # judged, and judged wrong


@pytest.mark.slow
def test_the_clean_process_holds_no_plugin_module(tmp_path, monkeypatch, judge):
    plugin = tmp_path / "patching_plugin.py"
    plugin.write_text("import workbench.check.compare as c\nPATCHED = True\n")
    name = plugin_module_name(plugin)
    spec = importlib.util.spec_from_file_location(name, plugin)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    import workbench.kernels  # noqa: F401  (the shipped ops: loaded here by discover())
    assert name in sys.modules and foreign_modules(sys.modules)  # this process holds both
    _first(judge)  # the child has judged a case
    modules = judge.modules()
    assert "torch" in modules and "workbench.check.compare" in modules
    assert name not in modules and not any(m.startswith("workbench.kernels") for m in modules)
    assert foreign_modules(modules) == []


def test_foreign_modules_names_plugins_shipped_ops_and_the_engine():
    names = ["torch", "workbench", "workbench.check", "workbench.check.compare", "workbench_plugin_x_0123456789",
             "workbench.kernels.gelu", "kernels", "workbench.registry", "workbench.checker"]
    assert foreign_modules(names) == ["kernels", "workbench.checker", "workbench.kernels.gelu", "workbench.registry",
                                      "workbench_plugin_x_0123456789"]


@pytest.mark.slow
def test_a_child_that_cannot_judge_fails_at_the_strict_gate(judge, monkeypatch):
    monkeypatch.setattr("workbench.check.strict.MODULE", "workbench.check.no_such_module")
    report = _first(judge)
    assert not report.passed and report.gate == "strict" and "did not judge" in report.detail


@pytest.mark.slow  # run_plan starts engine workers (one per row under --strict) and clean children
def test_a_plugin_that_patches_the_comparison_is_caught_only_with_strict():
    import threading
    from pathlib import Path

    from workbench.engine.plan import RunOptions, run_plan
    from workbench.session.model import ImplRef, RunSpec, Session, Settings

    plugin = str(Path(__file__).parent / "plugins" / "patches_compare.py")
    run = RunSpec(op="gelu", impls=(ImplRef("pytorch"), ImplRef("manual_patched")), shape={"M": 8, "N": 64},
                  actions=("check", "bench"))
    settings = Settings(device="cpu", warmup_ms=1.0, rep_ms=5.0, min_samples=5, timeout_s=120.0)
    found = {}
    for strict in (False, True):
        doc = run_plan(Session(name="t", runs=(run,), settings=settings, plugins=(plugin,)),
                       on_event=lambda _e: None, stop=threading.Event(),
                       options=RunOptions(warm_spare=False, strict=strict))
        found[strict] = {r["impl"]: r for r in doc["results"]}
    loose, strict = found[False], found[True]
    assert loose["manual_patched"]["status"] == "ok", loose["manual_patched"]  # the patch reached the check
    assert not any(f.startswith("strict:") for f in loose["pytorch"]["flags"])
    patched = strict["manual_patched"]
    assert patched["status"] == "failed" and patched["timing"] is None, patched
    assert patched["error"].startswith("check failed: elementwise"), patched["error"]
    shipped = strict["pytorch"]
    assert shipped["status"] == "ok" and shipped["timing"] is not None, shipped
    judged = [f for f in shipped["flags"] if f.startswith("strict: ")]
    assert len(judged) == 1 and "clean process" in judged[0], shipped["flags"]


@pytest.mark.slow  # starts the clean child
def test_the_row_hand_over_folder_is_in_the_private_temp_folder_and_swept(tmp_path, monkeypatch):
    """A worker's Judge copies outputs and float64 references (hundreds of MB) into a folder inside
    the worker's private temp folder: a killed worker's copies go with the next start's sweep."""
    import os
    import tempfile
    from types import SimpleNamespace

    from workbench.engine import private_tmp as tmps
    from workbench.engine.worker.execute import RowRunner

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(tmps, "_PRIVATE_TMP", {})
    runner = RowRunner.__new__(RowRunner)
    runner.job = SimpleNamespace(strict=True)
    j = runner._judge()
    try:
        assert not _first(j).passed
        assert j.folder is not None and j.folder.parent == tmps.private_tmp()
    finally:
        j.close()
    dead = tmp_path / f"{tmps.PRIVATE_TMP_PREFIX}{2 ** 22 + 7}-x"  # a pid above pid_max: gone
    (dead / "workbench-strict-left").mkdir(parents=True)
    monkeypatch.setattr(tmps, "_PRIVATE_TMP", {})
    tmps.private_tmp()
    assert not dead.exists() and os.path.isdir(tmps.private_tmp())
