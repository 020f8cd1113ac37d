"""The command line's options are declared once (workbench/cli/flags.py, OPTIONS): the parser, the
check of which option goes with which mode, and docs/options.md all come from the table."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from workbench.cli.flags import ANY, MODES, OPTIONS, check_table, options_markdown
from workbench.cli.main import build_parser, parse_args

DOCS = Path(__file__).resolve().parents[1] / "docs" / "options.md"
MODE_ARGV = {"tui": ["x.yaml"], "replay": ["--replay", "x.yaml"], "check": ["--check", "x.yaml"],
             "list": ["--list"], "doctor": ["--doctor"], "schema": ["--schema", "session"],
             "plot": ["--plot", "r.json", "-o", "f.svg"], "daemon-list": ["--daemon-list"],
             "daemon-stop": ["--daemon-stop"]}


def test_docs_option_list_is_the_tables():
    assert DOCS.read_text() == options_markdown(), (
        "docs/options.md differs from workbench/cli/flags.py's OPTIONS: rewrite it with the command on its "
        "first lines")


def test_the_parser_has_exactly_the_tables_options():
    table = {name for option in OPTIONS for name in option.names if name.startswith("-")}
    parser = {name for action in build_parser()._actions for name in action.option_strings}
    assert parser - {"-h", "--help"} == table
    assert set(MODE_ARGV) == set(MODES)  # a new mode needs its command line here


def _example(option) -> list[str]:
    if option.action in ("store_true", "version"):
        return [option.names[-1]]
    value = option.choices[0] if option.choices else "1" if option.type is not None else "cpu" \
        if option.dest == "devices" else "some/path"
    return [option.names[-1], value]


@pytest.mark.parametrize("option", [o for o in OPTIONS if not o.mode and o.modes != ANY], ids=lambda o: o.flag)
def test_an_option_given_in_a_mode_it_does_not_go_with_is_refused_naming_it(capsys, option):
    refused = [mode for mode in MODES if mode not in option.modes]
    assert refused
    for mode in refused:
        argv = MODE_ARGV[mode] + _example(option) if option.dest != "file" else ["x.yaml", *MODE_ARGV[mode]]
        with pytest.raises(SystemExit) as exc:
            parse_args(argv)
        err = " ".join(capsys.readouterr().err.split())
        assert exc.value.code == 2, argv
        named = "FILE" if option.dest == "file" else option.flag
        assert named in err and "(workbench --help lists the options)" in err, (argv, err)


@pytest.mark.parametrize("option", [o for o in OPTIONS if not o.mode and o.action != "version"],
                         ids=lambda o: o.flag)
def test_an_option_in_a_mode_it_goes_with_passes_the_mode_check(option):
    from workbench.cli.flags import mode_problem

    for mode in option.modes:
        argv = MODE_ARGV[mode] + (_example(option) if option.dest != "file" else [])
        args = build_parser().parse_args(argv)
        assert mode_problem(args) is None, argv


def test_a_duplicate_option_in_the_table_is_refused_naming_it():
    force = next(o for o in OPTIONS if o.flag == "--force")
    with pytest.raises(ValueError, match=r"option '--force' is in the table twice"):
        check_table((force, dataclasses.replace(force, help="again")))
    with pytest.raises(ValueError, match=r"option '--forced': mode 'replays' is not one of tui, replay"):
        check_table((dataclasses.replace(force, names=("--forced",), modes=("replays",)),))
    check_table(OPTIONS)


@pytest.mark.parametrize("argv, named", [
    (["--replay", ""], "--replay"), (["--check", ""], "--check"), ([""], "FILE"),
    (["--replay", "x.yaml", "--compare", ""], "--compare"), (["--plot", "", "-o", "f.svg"], "--plot"),
    (["--replay", "x.yaml", "--kernels", ""], "--kernels"), (["--replay", "x.yaml", "--trace-dir", ""], "--trace-dir"),
])
def test_an_empty_path_is_refused_naming_the_option(capsys, argv, named):
    # '' read as "not given": --replay '' opened the TUI on the default session, exit 0
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    err = " ".join(capsys.readouterr().err.split())
    assert exc.value.code == 2 and f"{named} '': an empty path" in err, err


def test_a_kernels_path_that_is_not_a_plugin_is_a_command_line_error(capsys, tmp_path):
    # it was reported as "x.yaml: 1 problem in the session" after the session was read
    for path, why in ((tmp_path / "none.py", "no such file or folder"), (tmp_path / "s.yaml", "not a Python file")):
        if path.suffix == ".yaml":
            path.write_text("name: s\n")
        with pytest.raises(SystemExit) as exc:
            parse_args(["--replay", "x.yaml", "--kernels", str(path)])
        err = " ".join(capsys.readouterr().err.split())
        assert exc.value.code == 2 and f"--kernels {path}: {why}" in err and "in the session" not in err, err


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf"])
def test_a_daemon_idle_timeout_must_be_finite_and_positive(capsys, value):
    # inf started a daemon that never left ("it leaves after inf s idle")
    with pytest.raises(SystemExit) as exc:
        parse_args(["--replay", "x.yaml", "--daemon-idle", value])
    assert exc.value.code == 2 and "finite number of seconds > 0" in capsys.readouterr().err


def test_the_idle_timeout_from_the_environment_must_be_finite_too():
    import argparse

    from workbench.cli.daemon import daemon_choice
    from workbench.errors import WorkbenchError

    for value in ("inf", "0"):
        with pytest.raises(WorkbenchError, match="finite number of seconds > 0"):
            daemon_choice(argparse.Namespace(), {"WORKBENCH_DAEMON_IDLE_S": value})
