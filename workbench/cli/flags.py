"""The command line's options, declared once (`OPTIONS`): the argparse parser (main.build_parser),
the check of which option goes with which mode (`mode_problem`, from main.parse_args) and the
option list in docs/options.md (`options_markdown`; tests/test_cli_flags.py fails when the file
is not what this table makes; the file's first lines say how to rewrite it).

A mode is what one command line does: the TUI (FILE or nothing), or one of the mutually exclusive
mode options (--replay, --check, --list, ...). Every other option names the modes it goes with;
given in another mode it is refused (exit 2) with its `refusal`, never silently ignored. Checks
between options (--threshold needs --compare, --daemon and --no-daemon contradict each other) and
of values stay in main.parse_args. Adding an option: one row here, then read it in the mode that
uses it (args.<dest>); the docs follow from the row.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from typing import Any, Callable

# mode -> how a usage message names it (the order is the docs' order)
MODES: dict[str, str] = {
    "tui": "FILE (the TUI)", "replay": "--replay FILE", "check": "--check FILE", "list": "--list",
    "doctor": "--doctor", "schema": "--schema", "plot": "--plot", "daemon-list": "--daemon-list",
    "daemon-stop": "--daemon-stop",
}
ANY = tuple(MODES)
DEFAULT_THRESHOLD = 0.05  # --compare: a median change this large (and outside the spreads) is a verdict
FORMATS = ("table", "json", "csv", "jsonl")


def threshold(text: str) -> float:
    """--threshold's value: a finite relative change >= 0 (nan compared "same" for every row);
    the error names the text as typed (1e999 was echoed as inf). -0 reads 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0 (a relative change, 0.05 = 5%), got {text}")
    return value + 0.0


@dataclass(frozen=True)
class Option:
    """One option of `workbench`, declared once."""

    names: tuple[str, ...]  # as typed: ("-o", "--output"); a positional: ("file",)
    help: str  # argparse's help line, and the docs' description
    modes: tuple[str, ...] = ANY  # the modes it goes with (MODES' keys); refused in the others
    mode: bool = False  # it picks the mode itself (one of the mutually exclusive group)
    session_key: str = ""  # the session file's key this option overrides, if any
    action: str | None = None  # argparse's: store_true, append, version
    type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    default: Any = None
    metavar: str | None = None
    nargs: str | None = None
    # the usage error when given in another mode; str.format fields: flag, value, modes (those it goes
    # with, as MODES names them), mode (the one given: "--check"), why (`why`'s text for that mode,
    # else "not with --check") and args (the parsed namespace)
    refusal: str = "{flag} goes with {modes}, not with {mode}"
    why: dict[str, str] = field(default_factory=dict)

    @property
    def dest(self) -> str:
        long = next((n for n in self.names if n.startswith("--")), self.names[0])
        return long.lstrip("-").replace("-", "_")

    @property
    def flag(self) -> str:
        """The name a message uses: the long one."""
        return next((n for n in self.names if n.startswith("--")), self.names[0])

    def given(self, args: argparse.Namespace) -> bool:
        value = getattr(args, self.dest)
        return bool(value) if self.action in ("store_true", "append") else value is not None

    def add_to(self, parser: argparse.ArgumentParser | Any, version: str = "") -> None:
        kwargs: dict[str, Any] = {"help": self.help}
        for name in ("action", "type", "choices", "metavar", "nargs"):
            if getattr(self, name) is not None:
                kwargs[name] = getattr(self, name)
        if self.action in (None, "append"):
            kwargs["default"] = [] if self.action == "append" else self.default
        if self.action == "version":
            kwargs["version"] = version
        parser.add_argument(*self.names, **kwargs)


_DAEMON = "{flag} goes with --replay FILE ({why})"
_DAEMON_WHY = {"tui": "the TUI keeps a warm worker for its life"}

OPTIONS: tuple[Option, ...] = (
    Option(("file",), "session to open in the TUI (a path or a shipped session name)", modes=("tui",),
           nargs="?", metavar="FILE", refusal="FILE {value!r} opens the TUI; it cannot be combined with {mode}"),
    # the modes
    Option(("--replay",), "run a session headless", mode=True, metavar="FILE"),
    Option(("--check",), "validate a session only", mode=True, metavar="FILE"),
    Option(("--list",), "ops and implementations, with availability", mode=True, action="store_true"),
    Option(("--doctor",), "GPU, versions, tools, ceilings cache, bars, tuning cache, colours, paths, bytecode",
           mode=True, action="store_true"),
    Option(("--schema",), "print the JSON Schema of a session file or a results document (docs/schemas/)",
           mode=True, choices=("session", "results")),
    Option(("--plot",), "draw a results document's figures into -o FIG.svg|png (pip install "
           "'kernel-workbench[plot]')", mode=True, metavar="RESULTS.json"),
    Option(("--daemon-list",), "this user's warm daemons: pid, started, idle s, runs served, warm workers, "
           "fingerprint", mode=True, action="store_true"),
    Option(("--daemon-stop",), "stop this user's warm daemons (their workers and zygotes with them)", mode=True,
           action="store_true"),
    # the options
    Option(("--format",), "output format (default: from the -o extension .json/.csv/.jsonl, else table); "
           "jsonl streams replay rows as they finish", choices=FORMATS,
           modes=tuple(m for m in ANY if m != "plot"),
           refusal="{flag} {value} is for data; --plot takes the figure's format from the extension of -o FIG"),
    Option(("-o", "--output"), "write the data here instead of stdout (a file atomically, with a journal of "
           "finished rows beside it during a replay; a device node or FIFO written through)", metavar="PATH"),
    Option(("--resume",), "with --replay: keep the finished rows of the stopped run written to PATH (or "
           "its journal) and run only the missing ones; writes PATH unless -o is given", metavar="PATH",
           modes=("replay",), refusal="{flag} goes with {modes}"),
    Option(("--device",), "auto | cpu | cuda | cuda:N (overrides the session)", session_key="settings.device"),
    Option(("--devices",), "one warm worker per device, the sweep's points spread over them, one merged "
           "document (overrides settings.devices)", metavar="all|cpu|cuda:N,...", session_key="settings.devices",
           modes=("replay", "tui"), refusal="{flag} goes with --replay FILE or the TUI"),
    Option(("--cluster",), "run the rows as Ray actors (pip install 'kernel-workbench[ray]'): joins RAY_ADDRESS, "
           "else starts a local cluster", choices=("ray",), modes=("replay", "tui"),
           refusal="{flag} goes with --replay FILE or the TUI"),
    Option(("--trace-dir",), "keep each profiled row's Kineto trace in DIR as "
           "<session>-run<i>-<label>.pt.trace.json (open in ui.perfetto.dev); its path is the record's "
           "profile.trace_path", metavar="DIR", modes=("replay", "tui"),
           refusal="{flag} {value} goes with --replay FILE or the TUI (it keeps the traces of profiled rows)"),
    Option(("--kernels",), "a file or folder of user ops (repeatable)", action="append", metavar="PATH"),
    Option(("--compare",), "compare a replay with a baseline results file", metavar="BASELINE.json",
           modes=("replay",), refusal="{flag} goes with {modes}"),
    Option(("--threshold",), "with --compare: relative median change that counts as slower/faster (default "
           f"{DEFAULT_THRESHOLD})", type=threshold, modes=("replay",),
           refusal="{flag} {value} sets what --compare counts as slower or faster: it goes with "
                   "--replay FILE --compare BASELINE.json"),
    Option(("--force",), "run rows estimated too large; compare with (or resume) results made with other "
           "plugin files", action="store_true", modes=("replay",),
           refusal="{flag} goes with {modes}"),
    Option(("--strict",), "one fresh worker process per row, its value checks judged in a clean process that "
           "imports no plugin code (for untrusted plugin code; each row pays two process starts)",
           action="store_true", modes=("replay", "tui"), refusal="{flag} goes with --replay FILE or the TUI"),
    Option(("--daemon",), "with --replay FILE: run in this user's warm background daemon (the default; "
           "with --strict too when given); busy or unsafe: runs here instead", action="store_true",
           modes=("replay",), refusal=_DAEMON, why=_DAEMON_WHY),
    Option(("--trust-plugins",), "with --check FILE or FILE (the TUI): import the session's plugins: (their "
           "code runs as you) without asking; sessions of the shipped folder are trusted without it",
           action="store_true", modes=("check", "tui"),
           refusal="{flag} goes with {modes}; --replay runs the session's plugins anyway"),
    Option(("--no-daemon",), "with --replay FILE: run in this process, no warm daemon; with FILE (the TUI): start "
           "the TUI in this process, not from the warm TUI process (also WORKBENCH_DAEMON=0)",
           action="store_true", modes=("replay", "tui"), refusal="{flag} goes with {modes}"),
    Option(("--daemon-idle",), "a daemon started now exits after this long without a run (default 600; "
           "also WORKBENCH_DAEMON_IDLE_S)", type=float, metavar="SECONDS", modes=("replay",), refusal=_DAEMON,
           why=_DAEMON_WHY),
    Option(("--watch",), "with FILE (the TUI) or --replay FILE: on each save of the session or a plugin file, "
           "re-run the rows it changed and show them against their last result", action="store_true",
           modes=("tui", "replay")),
    Option(("-v", "--verbose"), "also print the children's info log lines", action="store_true"),
    Option(("--version",), "show program's version number and exit", action="version"),
)


def check_table(options: tuple[Option, ...]) -> None:
    """Raise ValueError naming the first row that cannot be an option: a name or dest used twice,
    a mode that is not one of MODES, a mode option that names modes."""
    names: dict[str, str] = {}
    dests: dict[str, str] = {}
    for option in options:
        for name in option.names:
            if name in names:
                raise ValueError(f"option {name!r} is in the table twice (each name must be its own)")
            names[name] = option.flag
        if option.dest in dests:
            raise ValueError(f"option {option.flag!r}: dest {option.dest!r} is {dests[option.dest]!r}'s too")
        dests[option.dest] = option.flag
        unknown = [m for m in option.modes if m not in MODES]
        if unknown:
            raise ValueError(f"option {option.flag!r}: mode {unknown[0]!r} is not one of {', '.join(MODES)}")


check_table(OPTIONS)
MODE_OPTIONS = tuple(option for option in OPTIONS if option.mode)


def mode_of(args: argparse.Namespace) -> str:
    """The command line's mode: the mode option given (at most one: argparse's group), else the TUI."""
    return next((option.flag.lstrip("-") for option in MODE_OPTIONS if option.given(args)), "tui")


def modes_text(modes: tuple[str, ...]) -> str:
    return " or ".join(MODES[m] for m in modes)


def mode_problem(args: argparse.Namespace) -> str | None:
    """The refusal of the first option (in table order) given in a mode it does not go with."""
    mode = mode_of(args)
    for option in OPTIONS:
        if option.mode or mode in option.modes or not option.given(args):
            continue
        value = getattr(args, option.dest)
        given = MODES[mode] if mode == "tui" else f"--{mode}"
        return option.refusal.format(
            flag=option.flag, value=f"{value:g}" if isinstance(value, float) else value,
            modes=modes_text(option.modes), mode=given, args=args, why=option.why.get(mode, f"not with {given}"))
    return None


GENERATED = ("Generated from workbench/cli/flags.py (OPTIONS): python -c \"from workbench.cli.flags import "
             "options_markdown as m; print(m(), end='')\" > docs/options.md (tests/test_cli_flags.py fails when "
             "this file is not current)")


def options_markdown(options: tuple[Option, ...] = OPTIONS) -> str:
    """docs/options.md: every option, the modes it goes with, the session key it overrides."""
    def spelled(option: Option) -> str:
        value = "|".join(option.choices) if option.choices else option.metavar or ""
        if not value and option.action is None:  # a value without a metavar: argparse's DEST
            value = option.dest.upper()
        if option.names == ("file",):
            return "`FILE`"
        return ", ".join(f"`{name} {value}`" if value else f"`{name}`" for name in option.names)

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["# Command-line options", "",
             f"<!-- {GENERATED} -->", "",
             "One mode at a time (the TUI when none is given):", "",
             "| mode | what |", "|---|---|",
             f"| {cell(spelled(OPTIONS[0]))} | {cell(OPTIONS[0].help)} |"]
    lines += [f"| {cell(spelled(o))} | {cell(o.help)} |" for o in options if o.mode]
    lines += ["", "Options (given in a mode they do not go with: exit 2, naming them):", "",
              "| option | goes with | session key | what |", "|---|---|---|---|"]
    for o in options:
        if o.mode or o.names == ("file",):
            continue
        goes = "any mode" if o.modes == ANY else ", ".join(f"`{MODES[m]}`" for m in o.modes)
        key = f"`{o.session_key}`" if o.session_key else ""
        lines.append(f"| {cell(spelled(o))} | {cell(goes)} | {cell(key)} | {cell(o.help)} |")
    return "\n".join(lines) + "\n"
