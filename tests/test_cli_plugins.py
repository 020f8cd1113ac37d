"""Plugins at the command line (a stand-in for run_plan, no children): --check catches what the
run would refuse (a missing reference, an op without a cost model), --list says when a Triton
implementation declares no kernel source, and replay records the plugin files it used and
says, before running, when one changed since earlier results (refused with --compare and
--resume unless --force)."""

from __future__ import annotations

import json
import re

import pytest
from cli_fakes import fake_plan, run, user_dirs  # noqa: F401 (fixtures)
from results_docs import document, record

NO_MATH = '''\
import torch
from workbench.registry import REGISTRY

GELU = REGISTRY.op("gelu")


@GELU.impl("manual_nomath")
def build(spec, params, ctx):
    """GeLU without saying which one."""
    return lambda x: torch.nn.functional.gelu(x)
'''
NO_COST = '''\
from dataclasses import dataclass
from workbench.dtypes import DType
from workbench.registry import Op
from workbench.spec import Spec


@dataclass(frozen=True)
class HalfSpec(Spec):
    N: int = 8
    dtype: DType = DType.float32


HALF = Op("half_nocost", HalfSpec)
HALF.inputs(lambda spec, device, seed: ())
HALF.reference()(lambda *inputs: None)
HALF.impl("manual")(lambda spec, params, ctx: (lambda: None))
'''
NO_LAUNCH = '''\
import torch
from workbench.registry import REGISTRY

GELU = REGISTRY.op("gelu")


@GELU.impl("triton_nolaunch", math="tanh", interpreter_dtypes=["float32"])  # the first API, no launch
def build(spec, params, ctx):
    """A Triton GeLU that declares no TritonLaunch."""
    return lambda x: torch.nn.functional.gelu(x, approximate="tanh")


@GELU.impl("cuda_nosource", math="tanh")
def build_cuda(spec, params, ctx):
    """A CUDA GeLU that declares no CudaSource."""
    return lambda x: torch.nn.functional.gelu(x, approximate="tanh")
'''


pytestmark = pytest.mark.slow  # the plugins' manifests are built in a subprocess


@pytest.fixture(autouse=True)
def _user_dirs(user_dirs):
    """platformdirs' folders under tmp_path, no colour."""


@pytest.fixture()
def plugin_session(tmp_path):
    """Write a plugin and a session naming it; forget the plugin afterwards."""

    def make(source: str, op: str = "gelu", impls: str = "[manual_nomath]", name: str = "mine.py"):
        plugin = tmp_path / name
        plugin.write_text(source)
        session = tmp_path / "s.yaml"
        session.write_text(f"schema_version: 1\nname: s\nplugins: [{name}]\nruns:\n  - op: {op}\n"
                           f"    impls: {impls}\n    shape: {{M: 2, N: 8}}\n")
        return plugin, session
    return make


def test_check_catches_an_implementation_without_its_reference(capsys, plugin_session):
    _, session = plugin_session(NO_MATH)
    code, out, err = run(capsys, "--check", str(session), "--trust-plugins")
    assert code == 2 and out == ""
    assert "runs[0].impls[0]: gelu/manual_nomath declares no math= (so 'default')" in err
    assert "references: tanh, erf" in err and "declare math='tanh' or math='erf'" in err and "(line 6)" in err


def test_check_catches_an_op_without_a_cost_model(capsys, plugin_session):
    _, session = plugin_session(NO_COST, op="half_nocost", impls="all")
    code, _, err = run(capsys, "--check", str(session), "--trust-plugins")
    assert code == 2 and "runs[0].op: op 'half_nocost' registers no @HALF_NOCOST.cost_model" in err


def test_list_says_when_no_kernel_source_is_declared(capsys, tmp_path):
    plugin = tmp_path / "nolaunch.py"
    plugin.write_text(NO_LAUNCH)
    code, out, _ = run(capsys, "--list", "--kernels", str(plugin), "--format", "json")
    assert code == 0
    gelu = next(op for op in json.loads(out)["ops"] if op["name"] == "gelu")
    impls = {i["name"]: i["unavailable"]["ptx"] for i in gelu["impls"]}
    assert impls["triton_nolaunch"] == "no source declared (give source=TritonSource(...), docs/PLUGINS.md)"
    assert impls["cuda_nosource"] == "no source declared (give source=CudaSource(...), docs/PLUGINS.md)"
    assert impls["triton"] is None and impls["cuda"] is None   # the shipped ones declare theirs
    code, out, _ = run(capsys, "--list", "--kernels", str(plugin))
    line = next(x for x in out.splitlines() if x.startswith("triton_nolaunch"))
    assert re.search(r"\bno\b", line) and "ptx: no source declared" in " ".join(out.split())


def test_list_and_check_agree_on_an_implementation_without_a_reference(capsys, plugin_session):
    """A new user's try: --list said `yes` for every action of an implementation whose math=
    variant has no reference, which --check refuses; --list now gives --check's own reason."""
    plugin, session = plugin_session(NO_MATH)
    code, out, _ = run(capsys, "--list", "--kernels", str(plugin), "--format", "json")
    gelu = next(op for op in json.loads(out)["ops"] if op["name"] == "gelu")
    reasons = next(i["unavailable"] for i in gelu["impls"] if i["name"] == "manual_nomath")
    assert set(reasons) == {"check", "bench", "profile", "ptx"}
    assert all(r and "has no reference of that variant" in r for r in reasons.values()), reasons
    assert all(r is None for i in gelu["impls"] if i["name"] == "pytorch" for r in i["unavailable"].values())
    code, _, err = run(capsys, "--check", str(session), "--trust-plugins")
    assert code == 2 and "has no reference of that variant" in err


def test_replay_records_plugin_files_and_says_when_one_changed(capsys, plugin_session, fake_plan, tmp_path):
    plugin, session = plugin_session(NO_MATH.replace('impl("manual_nomath")', 'impl("manual_nomath", math="erf")'))
    fake_plan.doc = document(record("manual_nomath", shape={"M": 2, "N": 8}))  # the session's row: it compares
    base = tmp_path / "base.json"
    code, _, err = run(capsys, "--replay", str(session), "-o", str(base))
    assert code == 0, err
    recorded, = json.loads(base.read_text())["provenance"]["plugins"]
    assert recorded["path"] == str(plugin.resolve()) and len(recorded["sha256"]) == 64
    code, _, err = run(capsys, "--replay", str(session), "--compare", str(base))
    assert code == 0 and "other plugin code" not in err        # nothing changed: compared
    plugin.write_text(plugin.read_text() + "# an edit\n")
    calls = len(fake_plan.calls)
    code, out, err = run(capsys, "--replay", str(session), "--compare", str(base))
    assert code == 2 and len(fake_plan.calls) == calls        # refused before anything ran
    assert f"the baseline was made with other plugin code: changed since: {plugin.resolve()} (sha256 " \
           f"{recorded['sha256'][:12]} then," in err and "--force" in err
    code, _, err = run(capsys, "--replay", str(session), "--compare", str(base), "--force")
    assert code == 0 and "warning: --compare" in err and "(--force: going on)" in err
    code, _, err = run(capsys, "--replay", str(session), "-o", str(base))
    assert code == 0 and f"warning: plugin files changed since the results in {base} were made" in err


def test_resume_refuses_rows_made_with_other_plugin_code(capsys, plugin_session, fake_plan, tmp_path):
    plugin, session = plugin_session(NO_MATH.replace('impl("manual_nomath")', 'impl("manual_nomath", math="erf")'))
    out = tmp_path / "out.json"
    assert run(capsys, "--replay", str(session), "-o", str(out))[0] == 0
    plugin.write_text(plugin.read_text() + "# an edit\n")
    code, _, err = run(capsys, "--replay", str(session), "--resume", str(out))
    assert code == 2 and "--resume" in err and "the stopped run was made with other plugin code" in err


def test_an_ab_sides_plugin_file_is_recorded_and_checked_too(capsys, plugin_session, fake_plan, tmp_path):
    """compare: [{name, plugin: other.py}, ...]: that file ran too, so a change to it is caught."""
    source = NO_MATH.replace('impl("manual_nomath")', 'impl("manual_nomath", math="erf")')
    plugin, session = plugin_session(source)
    other = tmp_path / "other.py"
    other.write_text(source)
    session.write_text(session.read_text() + "    compare: [{name: manual_nomath, plugin: other.py}, manual_nomath]\n")
    base = tmp_path / "base.json"
    code, _, err = run(capsys, "--replay", str(session), "-o", str(base))
    assert code == 0, err
    recorded = [r["path"] for r in json.loads(base.read_text())["provenance"]["plugins"]]
    assert recorded == [str(plugin.resolve()), str(other.resolve())]
    other.write_text(source + "# an edit of the A side only\n")
    code, _, err = run(capsys, "--replay", str(session), "--compare", str(base))
    assert code == 2 and f"changed since: {other.resolve()} (sha256 " in err


def test_list_warns_of_a_plugin_that_registers_nothing(capsys, tmp_path):
    """`--kernels` at a file that declares no op and no implementation was taken silently."""
    plugin = tmp_path / "empty.py"
    plugin.write_text("x = 1\n")
    code, out, err = run(capsys, "--list", "--kernels", str(plugin), "--format", "json")
    assert code == 0 and json.loads(out)["empty_sources"] == [str(plugin.resolve())]
    assert f"warning: {plugin.resolve()}: loaded, but it registers no op and no implementation" in err
    code, _out, err = run(capsys, "--list")
    assert code == 0 and "registers no op" not in err  # the shipped kernels register theirs
    session = tmp_path / "s.yaml"
    session.write_text("schema_version: 1\nname: s\nplugins: [empty.py]\nruns: [{op: gelu, impls: [pytorch]}]\n")
    code, _out, err = run(capsys, "--check", str(session), "--trust-plugins")
    assert code == 0 and f"warning: {plugin.resolve()}: loaded, but it registers no op" in err


def test_replay_warns_of_a_plugin_that_registers_nothing(capsys, tmp_path, fake_plan):
    plugin = tmp_path / "empty.py"
    plugin.write_text("x = 1\n")
    session = tmp_path / "s.yaml"
    session.write_text("schema_version: 1\nname: s\nruns: [{op: gelu, impls: [pytorch]}]\n")
    code, _out, err = run(capsys, "--replay", str(session), "--kernels", str(plugin), "--format", "json")
    assert code == 0 and "loaded, but it registers no op and no implementation" in err


def test_the_tuis_catalog_notes_a_plugin_that_registers_nothing(tmp_path):
    from workbench.screens.catalog import load_catalog

    plugin = tmp_path / "empty.py"
    plugin.write_text("x = 1\n")
    catalog = load_catalog([str(plugin)])
    assert catalog.notes == (f"{plugin.resolve()}: loaded, but it registers no op and no implementation",)
    assert load_catalog([]).notes == ()
