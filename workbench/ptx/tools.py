"""The CUDA binary tools PTX extraction uses, found without reading environment variables.

nvcc (workbench.machine.find_nvcc), cuobjdump and nvdisasm (on PATH, beside nvcc, or the copies
Triton's NVIDIA backend ships in `triton/backends/nvidia/bin/`), and a C++ demangler (cu++filt
from the CUDA toolkit, else binutils' c++filt: workbench/demangle.py's fallback). Results of slow tool runs are cached on disk under
the user cache directory (platformdirs), keyed by a hash of their inputs.
"""

from __future__ import annotations

import functools
import hashlib
import re
import shutil
import subprocess
from pathlib import Path
from typing import Sequence

from workbench.fileio import atomic_write_text
from workbench.machine import find_nvcc

TOOL_TIMEOUT_S = 120.0  # nvcc on one .cu takes ~1 s; a hung tool must not hang the child


class ToolError(RuntimeError):
    """A tool ran and failed; the message carries its command and the tail of its output."""


def _candidate_dirs() -> list[Path]:
    dirs: list[Path] = []
    nvcc = find_nvcc()
    if nvcc:
        dirs.append(Path(nvcc).parent)
        dirs.append(Path(nvcc).resolve().parent)
    dirs += [Path("/usr/local/cuda/bin")]
    triton_bin = _triton_bin_dir()
    if triton_bin:
        dirs.append(triton_bin)
    return dirs


def _triton_bin_dir() -> Path | None:
    try:
        import triton.backends.nvidia as nv
    except Exception:  # Triton absent or without its NVIDIA backend
        return None
    path = Path(nv.__file__).parent / "bin"
    return path if path.is_dir() else None


@functools.lru_cache(maxsize=None)
def find_tool(name: str) -> str | None:
    """Path of a CUDA tool (`cuobjdump`, `nvdisasm`, `ptxas`, `cu++filt`), or None."""
    found = shutil.which(name)
    if found:
        return found
    for d in _candidate_dirs():
        if (d / name).is_file():
            return str(d / name)
    return None


def find_demangler() -> str | None:
    """cu++filt where the toolkit has it, else c++filt (both demangle CUDA's Itanium names)."""
    return find_tool("cu++filt") or find_tool("c++filt")


def failure_lines(output: str, first_errors: int = 3, tail: int = 8) -> str:
    """What a failed tool said, joined by " | ": its first `first_errors` error lines (a
    compiler's first error is the one to fix; the tail of five began mid-message) and how many
    more, else its last `tail` lines."""
    lines = [line.rstrip() for line in output.strip().splitlines()]
    errors = [line for line in lines if re.search(r"\berror\b", line, re.IGNORECASE)]
    if not errors:
        return " | ".join(lines[-tail:])
    more = f" | ... and {len(errors) - first_errors} more error(s)" if len(errors) > first_errors else ""
    return " | ".join(errors[:first_errors]) + more


def run_tool(cmd: Sequence[str], *, input_text: str | None = None, timeout_s: float = TOOL_TIMEOUT_S,
             cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run a tool, capturing text output; raise ToolError naming the command on failure."""
    try:
        proc = subprocess.run(list(cmd), input=input_text, capture_output=True, text=True,
                              timeout=timeout_s, cwd=cwd)
    except subprocess.TimeoutExpired as exc:
        raise ToolError(f"{Path(cmd[0]).name} timed out after {timeout_s:.0f} s") from exc
    except OSError as exc:
        raise ToolError(f"{Path(cmd[0]).name} could not start: {exc}") from exc
    if proc.returncode != 0:
        raise ToolError(f"{Path(cmd[0]).name} failed (exit {proc.returncode}): " + failure_lines(proc.stderr or proc.stdout))
    return proc


def cached_output(cmd: Sequence[str], cache_file: Path | None) -> str:
    """stdout of `cmd`, read from `cache_file` when present, else run and saved there atomically."""
    if cache_file is not None and cache_file.is_file():
        return cache_file.read_text()
    out = run_tool(cmd).stdout
    if cache_file is not None:
        atomic_write_text(cache_file, out)  # workbench.fileio: the one atomic writer
    return out


def default_cache_dir() -> Path:
    """The user cache directory for PTX artefacts (platformdirs), or a temp dir without it."""
    try:
        import platformdirs
        return Path(platformdirs.user_cache_dir("workbench")) / "ptx"
    except ImportError:  # pragma: no cover - platformdirs is a dependency
        import tempfile
        return Path(tempfile.gettempdir()) / "workbench-ptx"


def cache_key(*parts: str | bytes) -> str:
    """sha256 (24 hex digits) over the parts, each length-prefixed."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()[:24]


def tool_identity(path: str | None) -> str:
    """A cheap identity of a tool binary for cache keys: path, size and mtime."""
    if not path:
        return "none"
    p = Path(path).resolve()
    try:
        st = p.stat()
    except OSError:
        return str(p)
    return f"{p}:{st.st_size}:{int(st.st_mtime)}"
