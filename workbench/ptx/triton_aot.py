"""Triton PTX without running the kernel (MEASUREMENT.md P10): the launch's own compile.

`compile_launch(build)` hands the implementation's `TritonLaunch` to Triton's public
`JITFunction.warmup`: pointer arguments as their torch dtypes (warmup's MockTensor, address 0,
so aligned as torch allocations are), the integer arguments by value (`TritonLaunch.scalars`),
constexprs, num_warps and num_stages as keywords. Triton itself then binds, specialises (a
multiple of 16 gets `tt.divisibility`, 1 becomes a constant), chooses the compile options and
compiles: the kernel has the launch's cache key by construction, in every Triton version, with no
copy of `JITFunction.run`'s private option list or specialisation rules.

On a GPU whose arch is the target, warmup runs on the real driver, so a kernel the run already
compiled is found in the JIT cache (`launched`). Elsewhere (no GPU, or another arch) it runs
against a stand-in driver that only answers "which device, stream and target" for the target:
warmup never launches, so nothing else is asked of it. Nothing here reads environment variables;
whether Triton runs interpreted is read from `triton.knobs` and from the kernel object itself.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Iterator

from workbench.errors import UnavailableError, WorkbenchError
from workbench.kernel_source import TRITON_DTYPE, TritonLaunch
from workbench.ptx.triton_cache import AOT_DEVICE_PREFIX, launched_kernels, unwrap_jit

DEFAULT_CAPABILITY = 90  # H200 (sm_90) when no GPU is present
# An integer argument without a value in TritonLaunch.scalars is compiled with this one: not 1 and
# not a multiple of 16, so the JIT specialises it to nothing (as a launch with an odd value would).
UNSPECIALISED_INT = 17


class AotError(WorkbenchError):
    """Ahead-of-time compilation could not be set up or failed; the message says why."""


# -- interpreter guard -------------------------------------------------------------------------
def interpreter_active(kernel: Any = None) -> bool:
    """Whether Triton runs interpreted in this process (knob), or `kernel` is an interpreted one."""
    from triton import knobs

    return bool(knobs.runtime.interpret) or (kernel is not None and type(kernel).__name__ == "InterpretedFunction")


def refuse_interpreter(kernel: Any = None) -> None:
    """Raise if this process runs Triton interpreted (PTX extraction needs compiled Triton)."""
    if interpreter_active(kernel):
        raise UnavailableError(
            "PTX extraction cannot run where TRITON_INTERPRET=1 (kernels are interpreted "
            "functions there): run it in a process started without TRITON_INTERPRET")


# -- target --------------------------------------------------------------------------------
def resolve_target(target: Any = None, has_cuda: bool = False) -> Any:
    """A `GPUTarget`: as given ("sm_90", "sm_90a", 90, (9, 0), GPUTarget), else this GPU's, else sm_90."""
    from triton.backends.compiler import GPUTarget

    if isinstance(target, GPUTarget):
        return target
    if target is None:
        return GPUTarget("cuda", this_gpu_capability() if has_cuda else DEFAULT_CAPABILITY, 32)
    return GPUTarget("cuda", capability_of(target), 32)


def this_gpu_capability() -> int | None:
    """90 for an sm_90 GPU; None without one."""
    import torch

    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor


def capability_of(target: Any) -> int:
    """90 from "sm_90", "sm_90a", "90", 90, (9, 0) or a GPUTarget."""
    if hasattr(target, "arch"):
        return int(target.arch)
    if isinstance(target, tuple):
        return int(target[0]) * 10 + int(target[1])
    text = str(target).lower().removeprefix("sm_").removeprefix("sm").rstrip("a")
    if not text.isdigit():
        raise AotError(f"target {target!r}: expected sm_XY (e.g. sm_90)")
    return int(text)


def target_name(target: Any) -> str:
    """`sm_90` for a GPUTarget/capability (the record's `target`)."""
    return f"sm_{capability_of(target)}"


# -- the warmup call of a launch ----------------------------------------------------------------
@dataclass
class AotBuild:
    """What `compile_launch` passes to `JITFunction.warmup`: args (torch dtypes for pointers,
    values for the rest, in the kernel's order), kwargs (constexprs, num_warps, num_stages),
    the target, and notes on what was assumed."""

    jit_fn: Any
    launch: TritonLaunch
    target: Any
    args: list[Any]
    kwargs: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    @property
    def config(self) -> dict[str, Any]:
        plain = {k: v for k, v in self.launch.constexprs.items() if isinstance(v, (int, float, bool, str))}
        return {"num_warps": self.launch.num_warps, "num_stages": self.launch.num_stages, **plain}


def build_source(launch: TritonLaunch, target: Any) -> AotBuild:
    """The warmup call of `launch` for `target`. Raises AotError naming a pointer argument with
    no dtype in the signature or a constexpr with no value."""
    import torch

    jit_fn = unwrap_jit(launch.kernel)
    refuse_interpreter(jit_fn)
    args, kwargs, missing = [], {}, []
    for param in jit_fn.params:
        name, declared = param.name, launch.signature.get(param.name)
        if param.is_constexpr or declared == "constexpr":
            if name in launch.constexprs or name in launch.scalars:
                kwargs[name] = launch.constexprs.get(name, launch.scalars.get(name))
            elif not param.has_default:
                raise AotError(f"constexpr {name!r} has no value in TritonLaunch.constexprs and no default")
            continue
        if declared is None:
            raise AotError(f"{jit_fn.__name__}: argument {name!r} is missing from TritonLaunch.signature")
        if declared.startswith("*"):
            args.append(_torch_dtype(torch, declared, name))
        elif name in launch.scalars:
            args.append(launch.scalars[name])
        else:
            args.append(UNSPECIALISED_INT if declared[0] in "iu" else 1.5)
            missing.append(name)
    kwargs.update(num_warps=int(launch.num_warps), num_stages=int(launch.num_stages))
    notes = [f"{n}={v} specialised to a constant, as the launch does"
             for n, v in launch.scalars.items() if v == 1 and n in jit_fn.arg_names]
    if missing:
        notes.append(f"argument(s) {', '.join(missing)} without a value in TritonLaunch.scalars: compiled "
                     "without divisibility (a launch with a multiple of 16 may vectorize further)")
    return AotBuild(jit_fn, launch, target, args, kwargs, notes)


def _torch_dtype(torch: Any, declared: str, name: str) -> Any:
    by_name = {short: getattr(torch, long) for long, short in TRITON_DTYPE.items()}
    by_name.update(i32=torch.int32, i64=torch.int64)  # flags and counters (the stream-K GEMM's)
    try:
        return by_name[declared[1:]]
    except KeyError:
        raise AotError(f"pointer {name!r}: {declared!r} is not one of "
                       f"{', '.join('*' + s for s in by_name)}") from None


def compile_launch(build: AotBuild, stand_in: bool | None = None) -> tuple[Any, bool]:
    """(CompiledKernel, whether a real launch had compiled it already) for the build; Triton's
    on-disk cache makes a repeat fast. stand_in: use the stand-in driver (None: unless this GPU's
    arch is the target). Raises AotError with Triton's message when it fails."""
    on_this_gpu = not stand_in if stand_in is not None else this_gpu_capability() == capability_of(build.target)
    before = {id(k.compiled) for k in launched_kernels(build.jit_fn)} if on_this_gpu else set()
    try:
        with contextlib.nullcontext() if on_this_gpu else stand_in_driver(build.target):
            compiled = build.jit_fn.warmup(*build.args, grid=tuple(build.launch.grid), **build.kwargs)
    except Exception as exc:
        text = str(exc).strip()
        raise AotError(f"triton compile failed for {build.jit_fn.__name__}: {type(exc).__name__}: "
                       f"{text.splitlines()[-1] if text else ''}") from exc
    if hasattr(compiled, "result"):  # an asynchronous compile: a future
        compiled = compiled.result()
    return compiled, id(compiled) in before


def aot_compile(build: AotBuild) -> Any:
    """The CompiledKernel of the build (see compile_launch)."""
    return compile_launch(build)[0]


def specialisation(compiled: Any, jit_fn: Any) -> dict[str, Any]:
    """What the JIT specialised, read from the kernel's source: {"signature": name -> type or
    "constexpr", "constexprs": name -> value, "divisible": argument indices with tt.divisibility}."""
    src = compiled.src
    names = list(jit_fn.arg_names)
    constexprs = {names[path[0]]: value for path, value in dict(src.constants).items() if len(path) == 1}
    divisible = sorted(path[0] for path, attrs in dict(src.attrs).items()
                       if any(a[0] == "tt.divisibility" for a in attrs))
    return {"signature": dict(src.signature), "constexprs": constexprs, "divisible": divisible}


# -- the stand-in driver --------------------------------------------------------------------------
class _StandInDriver:
    """Answers the three questions `JITFunction.run(warmup=True)` asks of a driver, for `target`:
    the device (a key of the JIT's per-device cache, one per target), the stream, the target."""

    def __init__(self, target: Any):
        self.target = target

    def get_current_device(self) -> str:
        return AOT_DEVICE_PREFIX + target_name(self.target)

    def get_current_stream(self, device: Any = None) -> int:
        return 0

    def get_current_target(self) -> Any:
        return self.target


@contextlib.contextmanager
def stand_in_driver(target: Any) -> Iterator[None]:
    """Make the stand-in the active Triton driver for the block, then put the previous one back
    (`DriverConfig.set_active`; the previous active driver is read where Triton keeps it, and is
    usually none at all in a process without a GPU)."""
    from triton.runtime.driver import driver

    previous = getattr(driver, "_active", None)
    driver.set_active(_StandInDriver(target))
    try:
        yield
    finally:
        if previous is not None:
            driver.set_active(previous)
        elif hasattr(driver, "_active"):
            driver._active = None  # as it was: resolved again on first use
