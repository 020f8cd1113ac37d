"""Build CUDA C++ through torch.utils.cpp_extension.load_inline, safely (MEASUREMENT.md P11).

- nvcc and ninja are checked up front and named when missing;
- the module name carries a hash of the sources (the local headers they include too) and flags,
  so an edited kernel or header really runs; the `.cu`'s folder is on the include path, so a
  quoted include (`#include "common.cuh"`) resolves as it does for `nvcc -ptx` of the file;
- builds of one module are serialised by an advisory `fcntl.flock` on `build_dir/wb.flock`,
  which the kernel releases when its holder dies: whoever holds it is the only workbench
  process building that module, so a torch FileBaton `lock` file found then was left by a build
  killed half-way (a build-ahead worker stopped at a run's end or cancel) and is removed. Without
  this, torch's FileBaton.wait() polls such a file forever and the row times out. Where flock is
  missing, a lock older than STALE_LOCK_S is removed instead;
- nothing is added to the `.cu` (load_inline's implicit `#include <torch/types.h>` there cost
  21.7 of gelu.cu's 23.1 s nvcc compile on the 2-core CPU, 20.6 of softmax.cu's 36.1 s), and
  `binding="library"` registers the functions as torch operators (`TORCH_LIBRARY`) instead of
  through pybind11, so the C++ binding compiles against ATen's core headers, not
  `torch/extension.h` (gelu's binding: 5.6 s against 20.8 s there).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import time
import types
from pathlib import Path
from typing import Iterable, Iterator

from workbench.errors import UnavailableError
from workbench.fileio import exclusive
from workbench.machine import find_nvcc

STALE_LOCK_S = 300.0  # a load_inline build of one small .cu takes well under a minute
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def source_bundle(cu_path: Path) -> str:
    """The source plus every local header it includes (recursively): what a cache key must cover."""
    seen: dict[Path, str] = {}
    todo = [Path(cu_path).resolve()]
    while todo:
        path = todo.pop()
        if path in seen or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        seen[path] = text
        todo += [(path.parent / inc).resolve() for inc in _INCLUDE.findall(text)]
    return "\0".join(f"{p.name}\0{t}" for p, t in sorted(seen.items()))


def module_name(prefix: str, *sources: str, flags: Iterable[str] = ()) -> str:
    """`prefix_<sha256[:12]>` of the sources and flags."""
    digest = hashlib.sha256("\0".join([*sources, *flags]).encode()).hexdigest()[:12]
    return f"{prefix}_{digest}"


def clear_stale_lock(build_dir: Path, max_age_s: float = STALE_LOCK_S) -> bool:
    """Remove `build_dir/lock` if older than max_age_s; return whether one was removed."""
    lock = build_dir / "lock"
    try:
        if time.time() - lock.stat().st_mtime > max_age_s:  # wall clock: file mtimes are wall clock
            lock.unlink()
            return True
    except FileNotFoundError:
        pass
    return False


@contextlib.contextmanager
def build_lock(build_dir: Path) -> Iterator[None]:
    """Hold the module's advisory lock (`build_dir/wb.flock`, blocking) and clear a FileBaton
    `lock` that no live workbench build holds; released on exit, or by the kernel at death."""
    with exclusive(build_dir / "wb.flock") as locked:
        if locked:
            (build_dir / "lock").unlink(missing_ok=True)  # ours now: any FileBaton here is orphaned
        else:  # not POSIX: only the age rule
            clear_stale_lock(build_dir)
        yield


BINDINGS = ("pybind", "library")
# What a `binding="library"` binding of the shipped kernels includes: Tensor, at::empty/empty_like,
# the device guard and current stream, and the CUDA runtime's types (no torch/extension.h).
# WB_CHECK(cond, printf format, args...): TORCH_CHECK with its message formatted by snprintf and
# handed over as ONE C string, which TORCH_CHECK passes on without a std::ostream (c10's
# torchCheckMsgImpl overload for a single const char*). With more arguments TORCH_CHECK formats
# them through this .so's ostream, and on an H200 box (seen under cuda-gdb) inserting a number
# there crashed the process (SIGSEGV in std::basic_ostream::_M_insert<long> under c10::str) where
# the check should have raised. wb_sizes(t).c: a tensor's sizes as "[64, 262136]" for a message.
CHECK_HELPERS = """#include <cstdio>
#define WB_CHECK(cond, ...)                                                     \\
    do {                                                                        \\
        if (!(cond)) {                                                          \\
            char wb_check_msg_[512];                                            \\
            std::snprintf(wb_check_msg_, sizeof(wb_check_msg_), __VA_ARGS__);   \\
            TORCH_CHECK(false, static_cast<const char*>(wb_check_msg_));        \\
        }                                                                       \\
    } while (0)
struct WbSizes { char c[128]; };
static inline WbSizes wb_sizes(const at::Tensor& t) {
    WbSizes out;
    int n = std::snprintf(out.c, sizeof(out.c), "[");
    for (int64_t i = 0; i < t.dim() && n < (int)sizeof(out.c) - 32; ++i)
        n += std::snprintf(out.c + n, sizeof(out.c) - n, i ? ", %lld" : "%lld", (long long)t.size(i));
    std::snprintf(out.c + n, sizeof(out.c) - n, "]");
    return out;
}
"""
BINDING_HEADERS = """#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
""" + CHECK_HELPERS


def library_registration(namespace: str, functions: Iterable[str]) -> str:
    """The C++ that registers `functions` as torch operators `torch.ops.<namespace>.<f>`: schemas
    inferred from the C++ signatures (Tensor, int64_t, double, bool arguments: torch/library.h)."""
    defs = "".join(f'    m.def("{f}", &{f});\n' for f in functions)
    return f"#include <torch/library.h>\nTORCH_LIBRARY({namespace}, m) {{\n{defs}}}\n"


def load_cuda(prefix: str, cu_path: Path, cpp_binding: str, functions: list[str],
              build_root: Path | None = None, extra_cuda_cflags: Iterable[str] = (),
              binding: str = "pybind") -> object:
    """Compile `cu_path` plus the C++ binding with load_inline and return the module.

    The `.cu` holds only `__global__` kernels and plain launchers (no torch headers; nothing is
    added to it); `cpp_binding` declares those launchers and the torch-facing functions named in
    `functions`. binding: "pybind" (load_inline's pybind11 module; `#include <torch/extension.h>`
    is put before the binding) or "library" (the binding includes the headers it uses, e.g.
    <ATen/core/Tensor.h>, and its functions, whose arguments must be Tensor, int64_t, double or
    bool, are registered with TORCH_LIBRARY; the object returned has one attribute per function,
    the operator's default overload). Raises UnavailableError naming a missing nvcc or ninja, or
    a torch that cannot build CUDA (a CPU build), ValueError for another binding.
    """
    import importlib.util

    if binding not in BINDINGS:
        raise ValueError(f"load_cuda: binding must be one of {', '.join(BINDINGS)}, got {binding!r}")
    if find_nvcc() is None:
        raise UnavailableError("nvcc not found: load_inline needs the CUDA compiler")
    if importlib.util.find_spec("ninja") is None:
        raise UnavailableError("ninja not found: load_inline needs it (pip install ninja)")
    cuda_src = cu_path.read_text()
    flags = ["-O3", f"-I{Path(cu_path).resolve().parent}", *extra_cuda_cflags]
    name = module_name(prefix, source_bundle(cu_path), cpp_binding, binding, flags=flags)
    return build_inline(name, cpp_binding, functions, binding, build_root, cuda_src, flags)


def build_inline(name: str, cpp_binding: str, functions: list[str], binding: str,
                 build_root: Path | None = None, cuda_src: str | None = None,
                 extra_cuda_cflags: Iterable[str] = ()) -> object:
    """load_inline of `name` (its build folder under build_root, under the module's flock) with
    load_cuda's binding rules; cuda_src None builds a C++-only module (what CPU tests can
    load). Returns the pybind module, or for "library" a namespace of the operators."""
    from torch.utils import cpp_extension

    if cuda_src is not None and cpp_extension.CUDA_HOME is None:  # load_inline's own OSError
        import torch
        why = "this torch is a CPU build" if torch.version.cuda is None else "CUDA_HOME is not set and nvcc was not found"
        raise UnavailableError(f"load_inline cannot build CUDA sources: {why} (torch.utils.cpp_extension.CUDA_HOME is None)")
    if binding == "pybind":
        cpp, fns = "#include <torch/extension.h>\n" + cpp_binding, functions
    else:
        cpp, fns = cpp_binding + "\n" + library_registration(name, functions), None
    build = lambda directory: cpp_extension.load_inline(  # noqa: E731
        name=name, cpp_sources=[cpp], cuda_sources=[cuda_src] if cuda_src is not None else None,
        functions=fns, extra_cuda_cflags=list(extra_cuda_cflags), verbose=False, build_directory=directory,
        is_python_module=binding == "pybind", no_implicit_headers=True)
    if build_root is None:
        module = build(None)
    else:
        build_dir = build_root / name
        build_dir.mkdir(parents=True, exist_ok=True)
        with build_lock(build_dir):
            module = build(str(build_dir))
    if binding == "pybind":
        return module
    import torch

    ops = getattr(torch.ops, name)
    return types.SimpleNamespace(__file__=module, **{f: getattr(ops, f).default for f in functions})
