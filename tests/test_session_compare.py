"""A run's `compare: [A, B]`, `<impl>+graph` names and the new settings in session files."""

from __future__ import annotations

import pytest

from workbench.registry import discover
from workbench.session.api import SessionError, dump_session, parse_session, with_resolved_plugins
from workbench.session.model import ABSide

HEAD = "schema_version: 1\nname: ab\nruns:\n  - op: gelu\n    impls: [manual, pytorch, {name: triton, label: t}]\n"


def _parse(tail: str):
    return parse_session(HEAD + tail, registry=discover())


def _problems(tail: str) -> list[str]:
    with pytest.raises(SessionError) as info:
        _parse(tail)
    return [str(p) for p in info.value.problems]


def test_compare_by_label_name_plugin_and_revision_round_trips():
    session = _parse("    compare: [t, {name: pytorch, rev: HEAD~1}]\n")
    assert session.runs[0].compare == (ABSide("t"), ABSide("pytorch", rev="HEAD~1"))
    again = parse_session(dump_session(session), registry=discover())
    assert again == session
    assert _parse("    compare: [manual+graph, cuda]\n").runs[0].compare[0].name == "manual+graph"


@pytest.mark.parametrize("tail, expected", [
    ("    compare: [manual]\n", "runs[0].compare: must be a list of two implementations [A, B]"),
    ("    compare: manual\n", "runs[0].compare: must be a list of two implementations [A, B]"),
    ("    compare: [manual, tritn]\n", 'runs[0].compare[1]: "tritn" is neither a label of this run\'s impls nor an implementation of gelu (did you mean "triton"?)'),
    ("    compare: [manual, {name: t, rev: HEAD, plugin: x.py}]\n", "runs[0].compare[1]: give `plugin` or `rev`, not both"),
    ("    compare: [manual, {name: t, revision: HEAD}]\n", "runs[0].compare[1].revision: unknown key; allowed: name, params, label, plugin, rev"),
    ("    compare: [manual, {rev: HEAD}]\n", "runs[0].compare[1].name: missing (required)"),
    ("    compare: [manual, 3]\n", "runs[0].compare[1]: must be an implementation name or {name, params, label, plugin, rev}"),
])
def test_bad_compare_is_one_clear_error(tail, expected):
    assert any(p.startswith(expected) for p in _problems(tail)), _problems(tail)


def test_graph_suffix_in_impls_and_timing_mode_setting():
    session = parse_session("schema_version: 1\nname: g\nsettings: {timing_mode: graph, keep_samples: true}\n"
                            "runs:\n  - op: mlp\n    impls: [pytorch, pytorch+graph]\n", registry=discover())
    assert session.settings.timing_mode == "graph" and session.settings.keep_samples is True
    (problem,) = _problems_of("schema_version: 1\nname: g\nsettings: {timing_mode: graphs}\nruns:\n  - op: mlp\n")
    assert problem.startswith("settings.timing_mode: must be one of eager, graph")
    (problem,) = _problems_of("schema_version: 1\nname: g\nruns:\n  - op: mlp\n    impls: [pytorch+grph]\n")
    assert "unknown implementation of mlp" in problem


def _problems_of(text: str) -> list[str]:
    with pytest.raises(SessionError) as info:
        parse_session(text, registry=discover())
    return [str(p) for p in info.value.problems]


def test_counters_action_is_accepted():
    assert _parse("    actions: [counters]\n").runs[0].actions == ("counters",)


def test_compare_plugin_paths_resolve_against_the_session_folder(tmp_path):
    session = _parse("    compare: [manual, {name: manual_erf, plugin: plugins/my_ops.py}]\n")
    resolved = with_resolved_plugins(session, tmp_path)
    assert resolved.runs[0].compare[1].plugin == str((tmp_path / "plugins" / "my_ops.py").resolve())
    assert resolved.runs[0].compare[0] == session.runs[0].compare[0]
