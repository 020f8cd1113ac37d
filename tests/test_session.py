"""Session files: safe loading, every problem with path and line, registry checks, round trips.

Validation runs against a private registry of toy ops (no kernels, no torch work), so these
tests do not depend on which ops other files register.
"""

from __future__ import annotations

import dataclasses
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from workbench.cost import Cost
from workbench.dtypes import DType
from workbench.errors import SpecError, WorkbenchError
from workbench.registry import Op, Registry
from workbench.session.api import (SessionError, dump_session, load_session, parse_session, save_session,
                               session_from_data, session_to_data, validate_session)
from workbench.session.model import ImplRef, RunSpec, Session, Settings, Sweep
from workbench.session.settings import SETTING_KEYS, SETTING_RULES
from workbench.spec import Spec


@dataclass(frozen=True)
class ToySpec(Spec):
    M: int = 8
    N: int = 8
    K: int = 8
    dtype: DType = DType.float32

    def check(self) -> None:
        if self.K > 4096:
            raise SpecError(f"K: must be at most 4096, got {self.K}")


@dataclass(frozen=True)
class NapSpec(Spec):
    NON_NEGATIVE = frozenset({"nap_ms"})
    nap_ms: int = 1


@pytest.fixture()
def toy_registry() -> Registry:
    reg = Registry()
    toy = Op("toy", ToySpec, registry=reg, dtypes=["float32", "float16"])
    for op in (toy, nap := Op("nap", NapSpec, registry=reg)):  # what every op needs (inputs, reference, cost)
        op.inputs(lambda spec, device, seed: ())
        op.reference()(lambda *inputs: None)
        op.cost_model(lambda spec: Cost(1, 1, 1))
    for name, params in (("manual", {}), ("pytorch", {}),
                         ("triton", {"BLOCK_SIZE": 128, "num_warps": 4, "EVEN": False, "scale": 1.0})):
        toy.impl(name, params=params)(lambda spec, params, ctx: (lambda *a: None))
    nap.impl("manual")(lambda spec, params, ctx: (lambda *a: None))
    return reg


def parse(text: str, toy_registry: Registry | None = None, **kw) -> Session:
    return parse_session(textwrap.dedent(text), registry=toy_registry, check_ops=toy_registry is not None, **kw)


def problems(text: str, toy_registry: Registry | None = None) -> list[str]:
    with pytest.raises(SessionError) as info:
        parse(text, toy_registry)
    return [str(p) for p in info.value.problems]


GOOD = """\
schema_version: 1
name: toy-session
description: a toy
settings:
  rep_ms: 50
  flush_l2: false
runs:
  - op: toy
    impls: [manual, {name: triton, params: {BLOCK_SIZE: 64}, label: triton64}]
    shape: {M: 4, N: 5, K: 8}
    dtype: float16
    actions: [check, bench, profile, ptx]
  - op: toy
    sweep: {params: [M, N, K], values: [1, 2, 3]}
    settings: {min_samples: 3, device: cpu}
  - op: toy
    impls: [triton]
    sweep: {params: BLOCK_SIZE, values: [32, 64]}
  - op: nap
    shape: {nap_ms: 0}
"""


# -- the good path ---------------------------------------------------------------------------
def test_good_session_loads_into_the_model(toy_registry):
    session = parse(GOOD, toy_registry)
    assert session.name == "toy-session" and session.description == "a toy"
    assert session.settings == Settings(rep_ms=50.0, flush_l2=False)
    first, second, third, fourth = session.runs
    assert first.impls == (ImplRef("manual"), ImplRef("triton", {"BLOCK_SIZE": 64}, "triton64"))
    assert first.shape == {"M": 4, "N": 5, "K": 8} and first.dtype == "float16"
    assert first.actions == ("check", "bench", "profile", "ptx")
    assert second.impls is None and second.actions == ("check", "bench")       # defaults: all, check+bench
    assert second.sweep == Sweep(("M", "N", "K"), (1, 2, 3))
    assert second.settings == {"min_samples": 3, "device": "cpu"}
    assert third.sweep.params == ("BLOCK_SIZE",)                             # one name is a list of one
    assert fourth.shape == {"nap_ms": 0}                                      # NON_NEGATIVE field


def test_ms_settings_become_floats(toy_registry):
    session = parse(GOOD, toy_registry)
    assert isinstance(session.settings.rep_ms, float) and isinstance(session.settings.warmup_ms, float)


def test_every_setting_has_a_rule():
    assert set(SETTING_RULES) == set(SETTING_KEYS) == {f.name for f in dataclasses.fields(Settings)}


# -- safety ----------------------------------------------------------------------------------
@pytest.mark.parametrize("payload", [
    "op: !!python/object/apply:os.system ['touch {marker}']",
    "op: !!python/object/new:subprocess.Popen [['touch', '{marker}']]",
    "op: !!python/name:os.system",
    "op: !custom 'x'",
    "? !!python/name:os.system\n    : x",
])
def test_python_tags_are_refused_and_nothing_runs(tmp_path, payload):
    marker = tmp_path / "pwned"
    plugin = tmp_path / "plugin.py"
    plugin.write_text(f"open({str(tmp_path / 'plugin-ran')!r}, 'w').close()\n")
    path = tmp_path / "evil.yaml"
    path.write_text("schema_version: 1\nname: evil\nplugins: [plugin.py]\nruns:\n  - "
                    + payload.format(marker=marker) + "\n")
    with pytest.raises(SessionError) as info:
        load_session(path)
    (problem,) = info.value.problems
    assert problem.path.startswith("runs[0]") and problem.line == 5
    assert "not allowed" in problem.message and "safe loader" in problem.message
    assert not marker.exists(), "the tag ran"
    assert not (tmp_path / "plugin-ran").exists(), "plugins must not load when the file is refused"


def test_anchors_and_merge_keys_are_plain_yaml(toy_registry):
    session = parse("schema_version: 1\nname: x\nruns:\n  - &base\n    op: toy\n    shape: {M: 2, N: 8, K: 8}\n"
                    "  - <<: *base\n    impls: [manual]\n", toy_registry)
    assert session.runs[1].shape == {"M": 2, "N": 8, "K": 8} and session.runs[1].impls[0].name == "manual"


def test_alias_bomb_is_refused():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefg", "bcdefgh"))
    with pytest.raises(SessionError, match=r"values here \(YAML aliases counted as expanded\)"):
        parse(bomb)


# -- not a session at all --------------------------------------------------------------------
@pytest.mark.parametrize("text, expected, line", [
    ("", "the file is empty", None),
    ("just some words\n", "a session must be a mapping", None),
    ("- a\n- b\n", "a session must be a mapping", None),
    ("schema_version: 1\nname: x\nruns:\n  - op: toy\n    shape: {M: 1\n", "not valid YAML", 5),
    ("schema_version: 1\nname: x\nruns: [\n", "not valid YAML", 3),
    ("schema_version: 1\n\tname: x\n", "not valid YAML", 2),
    ("a: 1\n---\nb: 2\n", "not valid YAML", 2),
    ("\x00\x01binary", "not valid YAML", 1),
    # PyYAML notices these a line late; the line to edit is where the key, bracket or quote began
    ("schema_version: 1\nname: x\nruns\n  - op: toy\n", "simple key could not find expected ':' (noticed on line 4)", 3),
    ("schema_version: 1\nruns:\n  - op: toy\n    impls: [a, b\n  - op: add\n", "flow sequence expected ',' or ']', but got ':' (noticed on line 5)", 4),
    ("schema_version: 1\nname: \"abc\nruns: []\n", "quoted scalar found unexpected end of stream", 2),
    ("schema_version: 1\nruns:\n  - op: toy\n   impls: a\n", "block collection (from line 3) expected <block end>", 4),
])
def test_non_session_text_is_one_parse_problem(text, expected, line):
    with pytest.raises(SessionError) as info:
        parse_session(text, check_ops=False)
    (problem,) = info.value.problems
    assert expected in problem.message
    assert problem.line == line


def test_invalid_utf8_and_missing_file(tmp_path):
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"name: \xff\xfe\n")
    with pytest.raises(SessionError, match="invalid UTF-8"):
        load_session(path, check_ops=False)
    with pytest.raises(SessionError, match="cannot read the file"):
        load_session(tmp_path / "absent.yaml", check_ops=False)


# -- schema_version --------------------------------------------------------------------------
def test_newer_schema_version_names_the_one_this_program_reads():
    (message,) = problems("schema_version: 2\nname: x\nruns: []\nfuture_key: 1\n")
    assert "schema_version 2" in message and "reads schema_version 1" in message and "(line 1)" in message


@pytest.mark.parametrize("value", ["0", "one", "true", "1.5"])
def test_bad_schema_version(value):
    (message,) = problems(f"schema_version: {value}\nname: x\nruns: [{{op: toy}}]\n")
    assert message.startswith("schema_version: must be a positive integer")


def test_a_missing_schema_version_is_reported_with_every_other_problem():
    """It was reported alone; fixed, the file's four other problems came next (a new user's try).
    A newer schema_version still stops the check (the rest would be read as another schema)."""
    found = problems("name: x\nsetings: {device: cpu}\nruns:\n  - op: toy\n    impl: [manual]\n    dtypes: float32\n")
    assert found[0].startswith("schema_version: missing") and len(found) == 4
    assert any("setings" in p for p in found) and any("runs[0].impl:" in p for p in found)
    assert any("runs[0].dtypes:" in p for p in found)
    assert len(problems("schema_version: 1.5\nname: x\nsetings: {}\nruns: [{op: toy}]\n")) == 2


def test_missing_required_keys():
    found = problems("schema_version: 1\nruns: [{impls: all}]\n")
    assert "name: missing (required)" in found[0]
    assert any(p.startswith("runs[0].op: missing (required)") for p in found)
    assert "schema_version: missing" in problems("name: x\nruns: [{op: toy}]\n")[0]
    assert problems("schema_version: 1\nname: x\n")[0].startswith("runs: missing (required)")
    assert problems("schema_version: 1\nname: x\nruns: []\n")[0].startswith("runs: must be a non-empty list")
    # there but empty is said as such (a new user's try: `op:` read "missing")
    assert problems("schema_version: 1\nname: x\nruns:\n")[0].startswith("runs: is empty (required)")
    assert any(p.startswith("runs[0].op: is empty; give a value (required)")
               for p in problems("schema_version: 1\nname: x\nruns:\n  - op:\n"))


# -- structure: unknown keys, wrong types, all at once --------------------------------------
def test_the_contract_example_message(toy_registry):
    text = """\
    schema_version: 1
    name: x
    runs:
      - op: toy
      - op: toy
        shape: {M: 1, K: two}
    """
    assert problems(text, toy_registry) == ['runs[1].shape.K: must be a positive integer, got "two" (line 6)']


def test_unknown_keys_at_every_level_with_lines(toy_registry):
    text = """\
    schema_version: 1
    name: x
    colour: blue
    settings: {rep_ms: 10, rep: 10}
    runs:
      - op: toy
        shpe: {M: 1}
        impls: [{name: triton, parmas: {}}]
        sweep: {params: [M], values: [1], step: 2}
    """
    found = problems(text, toy_registry)
    assert found == [
        'colour: unknown key; allowed: schema_version, name, description, plugins, settings, runs (line 3)',
        'settings.rep: unknown key (did you mean "rep_ms"?); allowed: ' + ", ".join(SETTING_KEYS) + " (line 4)",
        'runs[0].shpe: unknown key (did you mean "shape"?); allowed: op, impls, shape, dtype, actions, sweep, settings, compare (line 7)',
        'runs[0].impls[0].parmas: unknown key (did you mean "params"?); allowed: name, params, label (line 8)',
        'runs[0].sweep.step: unknown key; allowed: params, values (line 9)',
    ]


@pytest.mark.parametrize("setting, value, expected", [
    ("device", "gpu", "must be auto, cpu, cuda or cuda:N"),
    ("device", "cuda:x", "must be auto, cpu, cuda or cuda:N"),
    ("warmup_ms", "-1", "must be a number >= 0"),
    ("rep_ms", "0", "must be a number > 0"),
    ("rep_ms", "fast", "must be a number > 0"),
    ("rep_ms", "1e12", 'must be a number > 0, got "1e12" (YAML reads 1e12 as text: write 1.0e+12)'),
    # the same digits (the hint wrote 1.2e+12 for 1.25e12: another value), and no hint to write 0
    ("rep_ms", "1.25e12", 'must be a number > 0, got "1.25e12" (YAML reads 1.25e12 as text: write 1.25e+12)'),
    ("target_rel_error", "1e-400", 'must be a number > 0 and < 1, got "1e-400" (YAML reads 1e-400 as text; as a '
                                   'number it is 0: outside what a float holds)'),
    ("min_samples", "0", "must be a positive integer"),
    ("min_samples", "2.5", "must be a positive integer"),
    ("target_rel_error", "1", "must be a number > 0 and < 1"),
    ("timeout_s", "true", "must be a number > 0"),
    ("flush_l2", "yes please", "must be true or false"),
    ("fp32_precision", "fp16", "must be one of ieee, tf32"),
    ("seed", "-3", "must be an integer >= 0"),
])
def test_settings_types_and_ranges(setting, value, expected):
    text = f"schema_version: 1\nname: x\nsettings:\n  {setting}: {value}\nruns: [{{op: toy}}]\n"
    (message,) = problems(text)
    assert message.startswith(f"settings.{setting}: {expected}") and message.endswith("(line 4)")


def test_per_run_settings_are_checked_too():
    (message,) = problems("schema_version: 1\nname: x\nruns:\n  - op: toy\n    settings: {rep_ms: -5}\n")
    assert message.startswith("runs[0].settings.rep_ms: must be a number > 0")


def test_every_problem_is_reported_at_once(toy_registry):
    text = """\
    schema_version: 1
    name: ""
    settings: {min_samples: 0, fp32_precision: tf16}
    runs:
      - op: toy
        impls: [manuel, {name: triton, params: {BLOCK_SIZE: big, WARPS: 4}}]
        shape: {M: -1, Q: 3}
        dtype: float64
        actions: [check, benchmark, check]
      - op: toyy
      - 7
      - op: toy
        sweep: {params: [M, num_warps], values: [1, 0, 1]}
    """
    found = problems(text, toy_registry)
    assert len(found) == 16, "\n".join(found)  # the sweep: its repeat, num_warps and 0 (the repeat hid two)
    assert all("(line " in p for p in found)
    assert [int(p.rsplit("(line ", 1)[1][:-1]) for p in found] == sorted(
        int(p.rsplit("(line ", 1)[1][:-1]) for p in found), "problems are sorted by line"


# -- toy_registry checks -------------------------------------------------------------------------
@pytest.mark.parametrize("run, expected", [
    ("{op: tyo}", 'runs[0].op: unknown op "tyo" (did you mean "toy"?); allowed: nap, toy'),
    ("{op: toy, impls: [tritn]}", 'runs[0].impls[0]: unknown implementation of toy "tritn" (did you mean "triton"?)'),
    ("{op: toy, impls: [{name: cuda, label: c}]}", "runs[0].impls[0].name: unknown implementation of toy \"cuda\""),
    ("{op: toy, impls: [{name: manual, params: {BLOCK_SIZE: 1}}]}",
     "runs[0].impls[0].params.BLOCK_SIZE: unknown parameter of toy/manual; allowed: (it takes none)"),
    ("{op: toy, impls: [{name: triton, params: {BLOCK: 1}}]}",
     'runs[0].impls[0].params.BLOCK: unknown parameter of toy/triton (did you mean "BLOCK_SIZE"?)'),
    ("{op: toy, impls: [{name: triton, params: {BLOCK_SIZE: 1.5}}]}",
     "runs[0].impls[0].params.BLOCK_SIZE: must be an integer (like its default 128), got 1.5"),
    ("{op: toy, impls: [{name: triton, params: {EVEN: 1}}]}",
     "runs[0].impls[0].params.EVEN: must be true or false (like its default false), got 1"),
    ("{op: toy, impls: [{name: triton, params: {scale: x}}]}",
     'runs[0].impls[0].params.scale: must be a number (like its default 1.0), got "x"'),
    ("{op: toy, dtype: bfloat16}", 'runs[0].dtype: toy does not take dtype "bfloat16"; allowed: float32, float16'),
    ("{op: toy, dtype: float64}", 'runs[0].dtype: dtype "float64" is not supported by workbench\'s ops; allowed: float32'),
    ("{op: toy, dtype: half}", 'runs[0].dtype: unknown dtype "half": write "float16"; allowed: float32'),
    ("{op: toy, dtype: flaot32}", 'runs[0].dtype: unknown dtype "flaot32" (did you mean "float32"?); allowed: float32'),
    ("{op: toy, dtype: [float32, float16]}",
     'runs[0].dtype: must be one dtype name, got ["float32", "float16"]; allowed: float32, float16, bfloat16, float8_e4m3fn, float8_e5m2 (one run per dtype)'),
    ("{op: toy, dtype: 16}", "runs[0].dtype: must be one dtype name, got 16; allowed: float32"),
    ("{op: toy, shape: {Q: 1}}", 'runs[0].shape.Q: unknown shape field of toy; allowed: M, N, K'),
    ("{op: toy, shape: {M: 0}}", "runs[0].shape.M: must be a positive integer, got 0"),
    ("{op: nap, shape: {nap_ms: -1}}", "runs[0].shape.nap_ms: must be a non-negative integer, got -1"),
    ("{op: nap, shape: {nap_ms: 1.5}}", "runs[0].shape.nap_ms: must be a positive integer, got 1.5"),
    ("{op: toy, shape: {M: 8, N: 8, K: 5000}}", "runs[0].shape: K: must be at most 4096, got 5000"),
])
def test_registry_problems(toy_registry, run, expected):
    (message,) = problems(f"schema_version: 1\nname: x\nruns:\n  - {run}\n", toy_registry)
    assert message.startswith(expected)
    assert message.endswith("(line 4)")


@pytest.mark.parametrize("sweep, expected", [
    ("{params: [Q], values: [1]}", 'runs[0].sweep.params[0]: "Q" is neither a shape field of toy (M, N, K) nor a parameter'),
    ("{params: [BLOCK_SIZE], values: [1]}", 'runs[0].sweep.params[0]: "BLOCK_SIZE" is a parameter of triton only'),
    ("{params: [M], values: [1, 0]}", "runs[0].sweep.values[1]: must be a positive integer, got 0"),
    ("{params: [M], values: [1, two]}", 'runs[0].sweep.values[1]: must be a positive integer, got "two"'),
    ("{params: [K], values: [8, 8192]}", "runs[0].sweep.values[1]: K: must be at most 4096, got 8192"),
    ("{params: [M], values: [1, 1]}", "runs[0].sweep.values[1]: value 1 is listed twice"),
    # true is not 1 listed twice (True == 1 in Python): it is what M cannot be
    ("{params: [M], values: [1, true]}", "runs[0].sweep.values[1]: must be a positive integer, got true"),
    ("{params: [M], values: []}", "runs[0].sweep.values: must be a non-empty list"),
    ("{params: [M]}", "runs[0].sweep.values: must be a non-empty list"),
    ("{params: [], values: [1]}", "runs[0].sweep.params: must be a non-empty list"),
    ("{params: [M, M], values: [1]}", "runs[0].sweep.params: lists a parameter twice"),
    ("{params: [M], values: [[1, 2]]}", "runs[0].sweep.values[0]: must be a number or text"),
    ("[M, 1, 2]", "runs[0].sweep: must be a mapping"),
])
def test_bad_sweeps(toy_registry, sweep, expected):
    (message,) = problems(f"schema_version: 1\nname: x\nruns:\n  - op: toy\n    sweep: {sweep}\n", toy_registry)
    assert message.startswith(expected), message


@pytest.mark.parametrize("sweep", ["{params: [N], values: [4, 8, 8]}", "{params: [N], values: []}",
                                   "{params: [N, N], values: [4]}"])
def test_a_bad_sweep_is_the_only_problem_of_a_shape_that_leaves_its_fields_to_it(toy_registry, sweep):
    """A shape may leave out what its sweep sets (CONTRACTS.md); a sweep with a problem of its own
    did not make that shape "incomplete" as well (a new user's try: two problems, one false)."""
    (message,) = problems("schema_version: 1\nname: x\nruns:\n  - op: toy\n    shape: {M: 8, K: 8}\n"
                          f"    sweep: {sweep}\n", toy_registry)
    assert message.startswith("runs[0].sweep"), message


def test_param_sweep_over_impls_that_have_it(toy_registry):
    session = parse("schema_version: 1\nname: x\nruns:\n  - op: toy\n    impls: [triton]\n"
                    "    sweep: {params: [BLOCK_SIZE], values: [64, 256]}\n", toy_registry)
    assert session.runs[0].sweep.values == (64, 256)
    (message,) = problems("schema_version: 1\nname: x\nruns:\n  - op: toy\n    impls: [triton]\n"
                          "    sweep: {params: [num_warps], values: [4, wide]}\n", toy_registry)
    assert message.startswith('runs[0].sweep.values[1]: must be an integer (like its default 4), got "wide"')


@pytest.mark.parametrize("params, expected", [
    ("{BLOCK_SIZE: 0}", "runs[0].impls[0].params.BLOCK_SIZE: must be a power of two (1, 2, 4, ...), got 0"),
    ("{BLOCK_SIZE: 96}", "runs[0].impls[0].params.BLOCK_SIZE: must be a power of two (1, 2, 4, ...), got 96"),
    # Triton's largest block (TRITON_MAX_TENSOR_NUMEL): 16777216 failed only when the row ran
    ("{BLOCK_SIZE: 16777216}", "runs[0].impls[0].params.BLOCK_SIZE: must be at most 1048576 (2^20, the most "
                               "elements a Triton block holds: TRITON_MAX_TENSOR_NUMEL), got 16777216"),
    ("{num_warps: 64}", "runs[0].impls[0].params.num_warps: must be at most 32 (warps in a CTA), got 64"),
])
def test_tile_params_a_kernel_cannot_take_fail_the_check(toy_registry, params, expected):
    """A first user's BLOCK_SIZE: 0 passed --check and failed the replay with ZeroDivisionError."""
    (message,) = problems(f"schema_version: 1\nname: x\nruns:\n  - op: toy\n"
                          f"    impls: [{{name: triton, params: {params}}}]\n", toy_registry)
    assert message.startswith(expected), message


@pytest.mark.parametrize("impls, expected", [
    ("triton", "runs[0].impls: must be `all` or a non-empty list"),
    ("[]", "runs[0].impls: must be `all` or a non-empty list"),
    ("[manual, manual]", 'runs[0].impls[1]: label "manual" repeats impls[0]'),
    ("[triton, {name: manual, label: triton}]", 'runs[0].impls[1]: label "triton" repeats impls[0]'),
    ("[{params: {}}]", "runs[0].impls[0].name: missing (required)"),
    ("[{name: triton, params: [1]}]", "runs[0].impls[0].params: must be a mapping"),
    ("[3]", "runs[0].impls[0]: must be an implementation name"),
])
def test_bad_impl_lists(toy_registry, impls, expected):
    (message,) = problems(f"schema_version: 1\nname: x\nruns:\n  - op: toy\n    impls: {impls}\n", toy_registry)
    assert message.startswith(expected), message


@pytest.mark.parametrize("actions, expected", [
    ("[]", "runs[0].actions: must be a non-empty list of check, bench, profile, counters, ptx"),
    ("bench", "runs[0].actions: must be a non-empty list"),
    ("[bench, bench]", 'runs[0].actions[1]: action "bench" is listed twice'),
    ("[time]", 'runs[0].actions[0]: unknown action "time"'),
])
def test_bad_actions(actions, expected):
    (message,) = problems(f"schema_version: 1\nname: x\nruns:\n  - op: toy\n    actions: {actions}\n")
    assert message.startswith(expected), message


def test_duplicate_keys_are_refused_at_the_repeat_and_values_are_shown_as_written():
    found = problems("schema_version: 1\nname: x\nruns:\n  - op: toy\n    shape: {M: 1, M: 2}\n")
    assert found == ['runs[0].shape.M: duplicate key "M" (line 5)']
    (inf,) = problems("schema_version: 1\nname: x\nruns:\n  - op: toy\n    shape: {M: .inf, N: 5, K: 8}\n")
    assert inf.startswith("runs[0].shape.M: must be a positive integer, got .inf"), inf  # not JSON's Infinity
    # the line is the repeat's (it was the first key's: a new user looked at the wrong line)
    found = problems("schema_version: 1\nname: x\nruns: [{op: toy}]\nruns: [{op: nap}]\n")
    assert found == ['runs: duplicate key "runs" (first at line 3) (line 4)']


# -- plugins ---------------------------------------------------------------------------------
def test_missing_plugin_is_a_problem(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("schema_version: 1\nname: x\nplugins: [nothere.py]\nruns: [{op: gelu}]\n")
    with pytest.raises(SessionError) as info:
        load_session(path, registry=Registry())
    assert info.value.problems[0].path == "plugins[0]"
    assert "no such file or folder" in info.value.problems[0].message
    # where it looked, in full: a relative path that repeated the entry hid that it is relative
    # to the session's folder, not to the working one (the README's my-session.yaml, a new user)
    assert f"(looked for {tmp_path / 'nothere.py'}, relative to the session file)" in info.value.problems[0].message


def test_an_unknown_implementation_says_a_failed_plugin_may_register_it(tmp_path):
    """A missing plugin made its implementations of a shipped op read as plain unknown names."""
    path = tmp_path / "s.yaml"
    path.write_text("schema_version: 1\nname: x\nplugins: [nothere.py]\nruns: [{op: gelu, impls: [manual_x]}]\n")
    with pytest.raises(SessionError) as info:
        load_session(path)
    unknown = next(p.message for p in info.value.problems if p.path.startswith("runs[0].impls"))
    assert unknown.endswith("a plugin of this session did not load (above) and may be what registers it")
    path.write_text("schema_version: 1\nname: x\nruns: [{op: gelu, impls: [manual_x]}]\n")
    with pytest.raises(SessionError) as info:
        load_session(path)
    assert "did not load" not in info.value.problems[0].message


# -- round trips and saving ------------------------------------------------------------------
def test_load_save_load_is_identical(toy_registry, tmp_path):
    session = parse(GOOD, toy_registry)
    path = save_session(session, tmp_path / "saved.yaml")
    again = load_session(path, registry=toy_registry)
    assert again == session
    assert dump_session(again) == path.read_text(), "save -> load -> save gives the same text"


def test_saved_text_is_plain_yaml_as_a_person_writes_it(toy_registry):
    """A hand-written session saved from the TUI came back with every default setting and
    `actions: [check, bench]` spelled out and each `[...]` / `{...}` line expanded into a block
    (a new user's try): now lists and mappings of plain values stay on one line, settings are
    one key a line, and only what differs from the defaults is written."""
    text = dump_session(parse(GOOD, toy_registry))
    assert "!!" not in text
    assert yaml.safe_load(text) == session_to_data(parse(GOOD, toy_registry))
    assert text.index("schema_version") < text.index("name") < text.index("settings") < text.index("runs")
    assert "settings:\n  rep_ms: 50\n  flush_l2: false\nruns:" in text  # only what differs, a key a line, 50 not 50.0
    assert "    shape: {M: 4, N: 5, K: 8}\n" in text and "    actions: [check, bench, profile, ptx]\n" in text
    assert "    sweep:\n      params: [M, N, K]\n      values: [1, 2, 3]\n" in text
    assert text.count("actions:") == 1, "the default actions are not written"
    assert "warmup_ms" not in text and "seed" not in text and "device: auto" not in text
    assert "    settings:\n      device: cpu\n      min_samples: 3\n" in text or \
           "    settings:\n      min_samples: 3\n      device: cpu\n" in text


def test_round_trip_of_a_model_built_in_code(toy_registry):
    session = Session(name="built", runs=(
        RunSpec(op="toy", impls=(ImplRef("triton", {"BLOCK_SIZE": 32}, "t32"),), shape={"M": 2, "N": 8, "K": 8},
                actions=("ptx",), sweep=Sweep(("N",), (1, 2)), settings={"rep_ms": 5.0}),
        RunSpec(op="nap")))
    assert session_from_data(session_to_data(session), registry=toy_registry) == session
    assert parse(dump_session(session), toy_registry) == session


def test_validate_session_in_memory(toy_registry):
    session = parse(GOOD, toy_registry)
    assert validate_session(session, registry=toy_registry) == []
    broken = dataclasses.replace(session, runs=(dataclasses.replace(session.runs[0], op="nope"),))
    (problem,) = validate_session(broken, registry=toy_registry)
    assert problem.path == "runs[0].op"
    odd = dataclasses.replace(session, runs=(dataclasses.replace(session.runs[0], shape={"M": object()}),))
    assert "not plain session data" in validate_session(odd, registry=toy_registry)[0].message


def test_save_is_atomic_when_the_rename_fails(toy_registry, tmp_path, monkeypatch):
    path = tmp_path / "s.yaml"
    path.write_text("original\n")
    import workbench.fileio as fileio

    def broken_replace(src, dst):
        raise OSError("disk on fire")
    monkeypatch.setattr(fileio.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk on fire"):
        save_session(parse(GOOD, toy_registry), path)
    assert path.read_text() == "original\n"
    assert [p.name for p in tmp_path.iterdir()] == ["s.yaml"], "no temporary file is left"


def test_save_is_atomic_when_writing_fails_half_way(toy_registry, tmp_path, monkeypatch):
    path = tmp_path / "s.yaml"
    path.write_text("original\n")
    import workbench.fileio as fileio

    real_fsync = fileio.os.fsync

    def failing_fsync(fd):
        real_fsync(fd)
        raise OSError("device full")
    monkeypatch.setattr(fileio.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="device full"):
        save_session(parse(GOOD, toy_registry), path)
    assert path.read_text() == "original\n"
    assert [p.name for p in tmp_path.iterdir()] == ["s.yaml"]


def test_save_refuses_non_plain_data_before_touching_the_file(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("original\n")
    session = Session(name="x", runs=(RunSpec(op="toy", shape={"M": Path("/")}),))
    with pytest.raises(TypeError, match="not plain session data"):
        save_session(session, path)
    assert path.read_text() == "original\n"


def test_save_keeps_the_file_mode(toy_registry, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("x: 1\n")
    path.chmod(0o640)
    save_session(parse(GOOD, toy_registry), path)
    assert path.stat().st_mode & 0o777 == 0o640


def test_errors_are_workbench_errors():
    with pytest.raises(WorkbenchError):
        parse_session("[]", check_ops=False)


def test_a_missing_plugin_does_not_hide_the_other_runs_problems(tmp_path):
    """--check of a session whose plugin is missing reported the plugin but not M: -4 of a
    shipped op's run (a new user's try); a run of an op the plugin may register waits for it."""
    from workbench.session.api import SessionError, load_session

    path = tmp_path / "multi.yaml"
    path.write_text("schema_version: 1\nname: bad\nplugins: [nothere.py]\nruns:\n"
                    "  - {op: gelu, impls: [pytorch], shape: {M: -4, N: 4}}\n"
                    "  - {op: relu, impls: [triton]}\n")
    with pytest.raises(SessionError) as info:
        load_session(path)
    text = str(info.value)
    assert "plugins[0]: plugin 'nothere.py': no such file or folder" in text
    assert "runs[0].shape.M: must be a positive integer, got -4" in text
    assert "runs[1]" not in text  # relu may be the missing plugin's op: not called unknown


def test_an_ab_sides_plugin_file_must_exist(tmp_path):
    """--check passed `compare: [pytorch, {name: manual, plugin: /nope/x.py}]` and the replay then
    failed the A/B (a new user's try); relative paths are the session folder's, as when run."""
    from workbench.session.api import SessionError, load_session

    path = tmp_path / "cmp.yaml"
    path.write_text("schema_version: 1\nname: c\nruns:\n  - op: gelu\n    impls: [pytorch, manual]\n"
                    "    compare: [pytorch, {name: manual, plugin: other.py}]\n")
    with pytest.raises(SessionError, match=r"runs\[0\]\.compare\[1\]\.plugin: no such file 'other.py'"):
        load_session(path)
    (tmp_path / "other.py").write_text("# a plugin\n")
    assert load_session(path).runs[0].compare[1].plugin == "other.py"


def test_a_problem_that_quotes_another_files_line_names_the_session_files():
    from workbench.session.yaml_io import Problem

    assert str(Problem("plugins[0]", "plug.py:2: SyntaxError: invalid syntax", 3)) == \
        "plugins[0]: plug.py:2: SyntaxError: invalid syntax (session file line 3)"
    assert str(Problem("runs[0].shape.M", "must be a positive integer, got -3", 6)) == \
        "runs[0].shape.M: must be a positive integer, got -3 (line 6)"


# -- shapes and dtypes given in part -----------------------------------------------------------
def test_a_shape_that_names_some_fields_must_name_all_of_them(tmp_path):
    """`shape: {M: 64}` for gelu ran at 64x16384: N came silently from the op's default."""
    head = "schema_version: 1\nname: x\nruns:\n  - op: gelu\n    impls: [pytorch]\n"
    path = tmp_path / "s.yaml"
    path.write_text(head + "    shape: {M: 64}\n")
    with pytest.raises(SessionError) as info:
        load_session(path)
    (problem,) = info.value.problems
    assert problem.path == "runs[0].shape" and problem.line == 6
    assert problem.message == ("gives M but not N; gelu's shape is {M, N}: give every field, or leave "
                               "shape out for the default {M: 16384, N: 16384}")
    path.write_text(head + "    shape: {M: 64}\n    sweep: {params: [N], values: [128, 256]}\n")
    assert load_session(path).runs[0].shape == {"M": 64}  # the sweep gives N
    path.write_text(head)
    assert load_session(path).runs[0].shape == {}  # no shape: the op's default, as CONTRACTS says


@pytest.mark.parametrize("key", ["impls", "shape", "dtype", "actions", "sweep", "settings", "compare"])
def test_a_run_key_left_empty_is_refused_not_taken_as_left_out(tmp_path, key):
    """An empty `dtype:` ran in the op's default dtype, as if the key were not there."""
    path = tmp_path / "s.yaml"
    path.write_text(f"schema_version: 1\nname: x\nruns:\n  - op: gelu\n    {key}:\n")
    with pytest.raises(SessionError) as info:
        load_session(path)
    (problem,) = info.value.problems
    assert problem.path == f"runs[0].{key}" and problem.message.startswith("is empty; give ")
    assert "or leave the key out for " in problem.message
    if key == "dtype":
        assert "give one of float32, float16, bfloat16" in problem.message


def test_a_missing_kernels_path_does_not_hide_the_sessions_own_problems(tmp_path):
    """`--kernels /missing.py` was the only problem reported: the session's missing plugin and
    its runs went unchecked."""
    path = tmp_path / "s.yaml"
    path.write_text("schema_version: 1\nname: x\nplugins: [nothere.py]\n"
                    "runs: [{op: gelu, impls: [pytorch], shape: {M: -4, N: 4}}]\n")
    with pytest.raises(SessionError) as info:
        load_session(path, kernels=[tmp_path / "missing.py"])
    found = {p.path: p.message for p in info.value.problems}
    assert found[""] == f"--kernels {tmp_path / 'missing.py'}: no such file or folder"
    assert "no such file or folder" in found["plugins[0]"]
    assert found["runs[0].shape.M"] == "must be a positive integer, got -4"


def test_a_shape_that_is_not_a_mapping_names_the_ops_own_fields(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("schema_version: 1\nname: x\nruns:\n  - op: matmul\n    shape: [64, 64, 64]\n")
    with pytest.raises(SessionError) as info:
        load_session(path)
    (problem,) = info.value.problems
    assert problem.path == "runs[0].shape" and problem.message.endswith("got [64, 64, 64]; matmul's shape is {M, N, K}")


def test_a_plugin_path_that_is_not_python_or_a_folder_without_op_files_is_named(tmp_path):
    """`--kernels notes.txt` failed with "'NoneType' object has no attribute 'loader'" (a new
    user's try); an empty folder was taken silently."""
    from workbench.errors import WorkbenchError
    from workbench.plugins.sources import plugin_files

    text = tmp_path / "notes.txt"
    text.write_text("x\n")
    with pytest.raises(WorkbenchError, match=r"notes.txt: not a Python file; a plugin is a .py file"):
        plugin_files(text)
    empty = tmp_path / "empty"
    (empty / "_private.py").parent.mkdir()
    (empty / "_private.py").write_text("")
    with pytest.raises(WorkbenchError, match=r"empty: a folder with no op files"):
        plugin_files(empty)
    session = tmp_path / "s.yaml"
    session.write_text("schema_version: 1\nname: x\nruns: [{op: gelu, impls: [pytorch]}]\n")
    with pytest.raises(SessionError) as info:
        load_session(session, kernels=[text])
    assert "not a Python file" in info.value.problems[0].message


def test_a_sweep_written_as_param_to_values_is_one_error_showing_the_form(tmp_path):
    """`sweep: {N: [64, 128]}` gave three problems (an unknown key, then params and values null)."""
    path = tmp_path / "s.yaml"
    path.write_text("schema_version: 1\nname: x\nruns:\n  - op: gelu\n    impls: [pytorch]\n"
                    "    shape: {M: 64, N: 64}\n    sweep: {N: [64, 128]}\n")
    with pytest.raises(SessionError) as info:
        load_session(path)
    (problem,) = info.value.problems
    assert problem.path == "runs[0].sweep" and problem.line == 7
    assert problem.message == "a sweep is {params: [...], values: [...]}: write sweep: {params: [N], values: [64, 128]}"


def test_a_saved_copy_keeps_the_comments_the_file_opened_with(tmp_path):
    """ctrl+s on a shipped session wrote a copy without the shipped file's explanation."""
    from workbench.screens import sessions_io
    from workbench.session.api import leading_comments, shipped_path

    shipped = shipped_path("default")
    session = load_session(shipped)
    header = leading_comments(shipped)
    first, rest = header.split("\n", 1)  # the schema line for editors (docs/schemas/), then the explanation
    assert first.startswith("# yaml-language-server: $schema=") and rest.startswith("# The session `workbench` opens")
    target = sessions_io.save(session, shipped, tmp_path)
    text = target.read_text()
    assert text.startswith(first.split("=")[0])  # its schema named from the copy's folder: test_schemas.py
    saved_header = leading_comments(target)
    assert saved_header.split("\n", 1)[1] == rest and not text[len(saved_header):].lstrip().startswith("#")
    assert load_session(target) == session
    again = sessions_io.save(load_session(target), target, tmp_path)  # saving the copy keeps it too
    assert again == target and target.read_text() == text
    assert leading_comments(tmp_path / "missing.yaml") == "" and leading_comments(None) == ""


def test_a_repeated_sweep_value_does_not_hide_the_others_problems(toy_registry):
    """`values: [8, 8, -1, 2.5]` said only that 8 is listed twice; -1 and 2.5 came up on the next try."""
    found = problems("schema_version: 1\nname: x\nruns:\n  - op: toy\n    shape: {N: 8, K: 8}\n"
                     "    sweep: {params: [M], values: [8, 8, -1, 2.5]}\n", toy_registry)
    assert [m.split(" (line")[0] for m in found] == [
        "runs[0].sweep.values[1]: value 8 is listed twice",
        "runs[0].sweep.values[2]: must be a positive integer, got -1",
        "runs[0].sweep.values[3]: must be a positive integer, got 2.5"]


def test_a_results_document_opened_as_a_session_is_named_so():
    """ctrl+o of a results file listed 8 schema problems (name missing, runs missing, provenance
    unknown...) instead of saying what the file is (a new user's try)."""
    text = '{"schema_version": 1, "provenance": {"session": "smoke-quick"}, "environment": {}, "results": []}'
    with pytest.raises(SessionError) as info:
        parse_session(text, check_ops=False)
    (problem,) = info.value.problems
    assert problem.message.startswith("a results document (what --replay -o PATH or the TUI writes), not a session: "
                                      "it holds results of session 'smoke-quick'")


def test_the_block_limit_is_tritons_own():
    """params.MAX_BLOCK is Triton's TRITON_MAX_TENSOR_NUMEL (the installed Triton's, where there is one)."""
    core = pytest.importorskip("triton.language.core")
    from workbench.params import MAX_BLOCK

    assert MAX_BLOCK == core.TRITON_MAX_TENSOR_NUMEL
