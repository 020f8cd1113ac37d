"""Where an exception came from in the user's code: `path:line`, for the Log pane and replay.

    describe_error(exc)  ->  "/home/me/rmsnorm.py:57: NameError: name 'tl_sum' is not defined"

The place is the innermost traceback frame outside Python's own library, site-packages and the
workbench core (a plugin file, a shipped op file under kernels/), so an error raised deep inside
torch or Triton names the line of the plugin that called it. Two kinds of error carry their own
place instead: a SyntaxError (`filename`, `lineno`), and a Triton `CompilationError`, whose
`node.lineno` counts from the `def` line of the `@triton.jit` function (its `src`); that function
is found in the files of the traceback and `files` (the session's plugin files). Torch-free.
"""

from __future__ import annotations

import functools
import sys
import sysconfig
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

_CORE = Path(__file__).resolve().parent
_KERNELS = _CORE / "kernels"


@dataclass(frozen=True)
class Location:
    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


def one_line(exc: BaseException) -> str:
    """`Type: first line of the message` (CUDA errors, OOM, a CompilationError's last line)."""
    if isinstance(exc, SyntaxError) and exc.msg:  # its str() repeats the file and line
        return f"{type(exc).__name__}: {exc.msg}"
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    # A Triton CompilationError reads "at 3:4:\n<source lines>\n<message>": the message is last.
    first = lines[-1] if _compile_node(exc) is not None and len(lines) > 1 else lines[0]
    return f"{type(exc).__name__}: {first.strip()}"


def describe_error(exc: BaseException, files: Iterable[str | Path] = ()) -> str:
    """`path:line: Type: message` where the user's code raised `exc`, else `Type: message`."""
    where = locate(exc, files)
    return f"{where}: {one_line(exc)}" if where else one_line(exc)


def locate(exc: BaseException | None, files: Iterable[str | Path] = ()) -> Location | None:
    """The user-code place of `exc`, or None. The exceptions it was raised from are looked at
    first, deepest first: a wrapper (Triton's InterpreterError around the NameError in a kernel,
    our own "plugin failed to load") names the line where the cause was raised."""
    chain: list[BaseException] = []
    while exc is not None and all(exc is not seen for seen in chain):
        chain.append(exc)
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    files = list(files)
    for link in reversed(chain):
        found = _own_place(link, files) or _innermost_user_frame(link)
        if found:
            return found
    return None


def _own_place(exc: BaseException, files: Iterable[str | Path]) -> Location | None:
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        return Location(exc.filename, int(exc.lineno))
    node = _compile_node(exc)
    if node is None:
        return None
    def_line = str(getattr(exc, "src", "") or "").split("\n", 1)[0].strip()
    candidates = [*files, *(frame.filename for frame in traceback.extract_tb(exc.__traceback__))]
    for path in dict.fromkeys(str(c) for c in candidates):
        start = _line_of(path, def_line)
        if start is not None:
            return Location(path, start + int(node.lineno) - 1)
    return None


def _compile_node(exc: BaseException):
    """The AST node of a Triton CompilationError (duck-typed: `src` and `node.lineno`)."""
    node = getattr(exc, "node", None)
    return node if hasattr(exc, "src") and isinstance(getattr(node, "lineno", None), int) else None


def _line_of(path: str, text: str) -> int | None:
    if not text:
        return None
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return next((number for number, line in enumerate(lines, start=1) if line.strip() == text), None)


def _innermost_user_frame(exc: BaseException) -> Location | None:
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        if is_user_file(frame.filename):
            return Location(frame.filename, frame.lineno or 0)
    return None


def is_user_file(filename: str) -> bool:
    """A file of the user's (or a shipped op file): not Python's library, site-packages or the
    workbench core; not a frozen or generated module (`<string>`)."""
    if not filename or filename.startswith("<"):
        return False
    path = Path(filename).resolve()
    if path.is_relative_to(_KERNELS):
        return True
    return not any(path.is_relative_to(root) for root in _library_roots())


@functools.lru_cache(maxsize=1)
def _library_roots() -> tuple[Path, ...]:
    paths = sysconfig.get_paths()
    roots = {Path(paths[k]).resolve() for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots |= {Path(p).resolve() for p in sys.path if "site-packages" in p or "dist-packages" in p}
    return tuple(sorted(roots | {_CORE}, key=str))
