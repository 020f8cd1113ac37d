"""The Backend protocol: one registered object per implementation kind (CONTRACTS.md, "Implementations").

A backend answers three questions for its implementations, so that nobody else tests a kind:

- `unavailable(impl, action, machine, dtype, device)`: why `impl` cannot do `action` here (None: it can);
- `kernel_source(impl, spec, params, ctx)`: where its kernel comes from, as plain data of
  `workbench.kernel_source` (a `TritonLaunch`, a `CudaSource`, `INDUCTOR`) or None (library kernels);
  the PTX view dispatches on that type;
- `watch()`: an object that watches a row for what this backend can do behind the timer's back
  (torch.compile's recompiles), or None.

A backend is one module: `Backend(kind, ...)` registers it, and decorated functions fill in what
differs from the defaults::

    CUPY = Backend("cupy", "CuPy RawKernel", source_type=CudaSource,
                   needs={"cuda_device"}, ptx_needs={"nvcc"})

    @CUPY.reason
    def _cupy_missing(impl, action, machine, dtype, device): ...

Nothing here imports torch or Triton: availability is decided from plain data (the Impl's dtypes,
needs and its source's plain fields), so a front end can answer it from a manifest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import AbstractSet, Any, Callable, Iterable

from workbench.errors import UnknownNameError, WorkbenchError


class Action(StrEnum):
    check = "check"
    bench = "bench"
    profile = "profile"
    ptx = "ptx"


class Need(StrEnum):
    """What running needs from the machine (a backend declares its own; an Impl may add more)."""

    cuda_device = "cuda_device"
    nvcc = "nvcc"
    ninja = "ninja"
    triton = "triton"
    fp8 = "fp8"  # fp8 tensor cores where the row runs on a GPU (sm_89+: Ada, Hopper, Blackwell)


# fp8 tensor cores (mma/wgmma e4m3 and e5m2) arrived with sm_89 (Ada) and sm_90 (Hopper).
FP8_MIN_CAPABILITY = 89


def _wants_cpu(machine: Any, device: str) -> bool:
    return device == "cpu" or not machine.has_cuda


def _need_reason(need: str, action: Action, machine: Any, device: str) -> str | None:
    """Why `need` is not met here for `action` (the wording of CONTRACTS' `unavailable` reasons)."""
    ptx = action is Action.ptx
    if need == Need.triton and not machine.triton:
        return "Triton is not installed"
    if need == Need.cuda_device and _wants_cpu(machine, device):
        return "needs a CUDA GPU (none here)" if not machine.has_cuda else "needs a CUDA device; device is cpu"
    if need == Need.nvcc and machine.nvcc is None:
        return "nvcc not found (needed for CUDA PTX)" if ptx else "nvcc not found (load_inline needs it)"
    if need == Need.fp8 and not _wants_cpu(machine, device):
        capability = getattr(machine, "capability", None)
        if capability is not None and capability < FP8_MIN_CAPABILITY:
            return (f"needs fp8 tensor cores (sm_{FP8_MIN_CAPABILITY}+: Ada, Hopper); this GPU is sm_{capability} "
                    f"(on a CPU the check runs through torch's fp8 code instead)")
    if need == Need.ninja and not machine.ninja:
        return "ninja not found (load_inline needs it: pip install ninja)"
    return None


# Checked in this order, so a machine missing several things names the most basic first.
NEED_ORDER = (Need.triton, Need.cuda_device, Need.fp8, Need.nvcc, Need.ninja)

Reason = Callable[[Any, Action, Any, Any, str], "str | None"]
SourceOf = Callable[[Any, Any, Any, Any], Any]


@dataclass(eq=False)
class Backend:
    """One implementation kind. kind: the name's first part (`triton` in `triton_looped`);
    description: one line for --list; source_type: the class `Impl.source` must be (None: the
    kind declares none); needs: what check/bench/profile need; ptx_needs: what the ptx action
    needs; interpreter: the CPU interpreter its kernels run under where there is no GPU
    ("Triton interpreter"; None: none). Creating one registers it (WorkbenchError if the kind
    is taken)."""

    kind: str
    description: str
    source_type: type | None = None
    needs: AbstractSet[str] = frozenset()
    ptx_needs: AbstractSet[str] = frozenset()
    interpreter: str | None = None
    _reason: Reason | None = field(default=None, repr=False)
    _source_of: SourceOf | None = field(default=None, repr=False)
    _watcher: Callable[[], Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.kind.isidentifier() or "_" in self.kind or self.kind != self.kind.lower():
            raise WorkbenchError(f"backend kind {self.kind!r} must be one lower-case word (no '_')")
        self.needs = frozenset(Need(n) for n in self.needs)
        self.ptx_needs = frozenset(Need(n) for n in self.ptx_needs)
        register(self)

    # -- declaration decorators -------------------------------------------------------------
    def reason(self, fn: Reason) -> Reason:
        """Register a check run after the needs: fn(impl, action, machine, dtype, device) -> reason or None."""
        self._reason = fn
        return fn

    def source(self, fn: SourceOf) -> SourceOf:
        """Register fn(impl, spec, params, ctx) -> kernel source (default: `impl.source` itself)."""
        self._source_of = fn
        return fn

    def watcher(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        """Register the factory of a row watcher: start(), after_build(), finish(row, record, channel)."""
        self._watcher = fn
        return fn

    # -- the protocol -----------------------------------------------------------------------
    def unavailable(self, impl: Any, action: Action | str, machine: Any, dtype: Any = None,
                    device: str = "auto") -> str | None:
        """Why `impl` cannot do `action` on `machine` (a workbench.machine.Machine) for `dtype`
        with the session's `device` setting ("auto", "cpu", "cuda", "cuda:N"); None when it can."""
        action = Action(action)
        if dtype is not None and not impl.supports(dtype):
            allowed = ", ".join(d.value for d in impl.dtypes or ())
            return f"{impl.name} supports {allowed} only, not {dtype.value}"
        wanted = (self.ptx_needs if action is Action.ptx else self.needs | set(impl.needs))
        for need in NEED_ORDER:
            problem = _need_reason(need, action, machine, device) if need in wanted else None
            if problem:
                return problem
        if action is Action.ptx and self._source_of is None and self.source_type is not None \
                and getattr(impl, "source", None) is None:
            return self.no_source()
        return self._reason(impl, action, machine, dtype, device) if self._reason else None

    def no_source(self) -> str:
        """The ptx action's reason for an implementation of this kind that declares no source
        (its run is fine; its PTX would be missing without a word)."""
        name = self.source_type.__name__ if self.source_type is not None else "a source"
        return f"no source declared (give source={name}(...), docs/PLUGINS.md)"

    def kernel_source(self, impl: Any, spec: Any, params: Any, ctx: Any = None) -> Any:
        """The kernel source of `impl` at `spec` with resolved `params` (see the module docstring)."""
        if self._source_of is not None:
            return self._source_of(impl, spec, params, ctx)
        return impl.source

    def watch(self) -> Any:
        """A fresh watcher for one row, or None."""
        return self._watcher() if self._watcher is not None else None

    def interpreted(self, device: str) -> bool:
        """Whether this backend's kernels run under its CPU interpreter on `device` (a torch device)."""
        return self.interpreter is not None and not str(device).startswith("cuda")

    def check_source(self, impl_name: str, source: Any) -> None:
        """Raise WorkbenchError when `source` is not what this kind declares."""
        if source is None:
            return
        if self.source_type is None:
            raise WorkbenchError(f"{impl_name}: kind {self.kind!r} takes no source=, got {type(source).__name__}")
        if not isinstance(source, self.source_type):
            raise WorkbenchError(f"{impl_name}: source= must be a {self.source_type.__name__} for kind "
                                 f"{self.kind!r}, got {type(source).__name__}")


_BACKENDS: dict[str, Backend] = {}


def register(backend: Backend) -> None:
    """Add a backend (its module calls this through `Backend(...)`); a kind registers once."""
    if backend.kind in _BACKENDS:
        raise WorkbenchError(f"backend kind {backend.kind!r} is registered twice")
    _BACKENDS[backend.kind] = backend


def backend(kind: str) -> Backend:
    """The backend of `kind`; raises UnknownNameError naming the registered kinds."""
    try:
        return _BACKENDS[kind]
    except KeyError:
        raise UnknownNameError("implementation kind", kind, kinds()) from None


def kinds() -> list[str]:
    """Registered kinds, in registration order (the built-in ones first)."""
    return list(_BACKENDS)


def describe_all() -> list[dict[str, Any]]:
    """Every backend as plain data (for --list and a torch-free manifest)."""
    return [{"kind": b.kind, "description": b.description, "needs": sorted(b.needs),
             "ptx_needs": sorted(b.ptx_needs), "interpreter": b.interpreter,
             "source": b.source_type.__name__ if b.source_type else None} for b in _BACKENDS.values()]


def needs_of(names: Iterable[str]) -> frozenset[Need]:
    """Validated needs; raises UnknownNameError naming an unknown one."""
    out = set()
    for name in names:
        if name not in Need.__members__:
            raise UnknownNameError("need", name, list(Need))
        out.add(Need(name))
    return frozenset(out)
