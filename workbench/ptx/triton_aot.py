"""Triton PTX without a launch (MEASUREMENT.md P10): compile ahead of time as the launch would.

`aot_compile(launch, target)` feeds `triton.compile` an `ASTSource` built from the
implementation's `TritonLaunch`, specialised the way the JIT specialises a real launch:

- pointer arguments get `tt.divisibility = 16` (torch allocations are 256-byte aligned; the JIT
  marks a pointer whose address is a multiple of 16 the same way). Without it no load is
  vectorized: `ld.global.b32` where the launch runs `ld.global.v4.b32`;
- integer arguments whose value is given in `TritonLaunch.scalars` are specialised by Triton's own
  rule (`native_specialize_impl`: a multiple of 16 gets `tt.divisibility`, 1 becomes a constant,
  i32/i64 by range); a masked load `offsets < n` vectorizes only when n is a multiple of 16;
- `do_not_specialize` / `do_not_specialize_on_alignment` parameters are left alone, as the JIT does;
- compile options as the JIT passes them (num_warps, num_stages, debug, instrumentation_mode),
  so that on a GPU the ahead-of-time compile has the same cache key as the launch.

The API moved between Triton versions: 3.3+ takes `ASTSource(fn, signature, constexprs, attrs)`
with attrs `{(arg_index,): [["tt.divisibility", 16]]}` for a divisible argument and `[]` for one
the JIT specialised but found not divisible (the key is part of the cache hash, so it is kept); 3.0-3.2 took `constants` and an
`AttrsDescriptor` (handled best effort, untested here). Nothing here reads environment variables;
whether Triton runs interpreted is read from `triton.knobs` and from the kernel object itself.
"""

from __future__ import annotations

import hashlib
import inspect
from dataclasses import dataclass, field
from typing import Any

from workbench.errors import UnavailableError, WorkbenchError
from workbench.kernel_source import TritonLaunch
from workbench.ptx.triton_cache import launched_kernels, unwrap_jit

DEFAULT_CAPABILITY = 90  # H200 (sm_90) when no GPU is present
POINTER_DIVISIBILITY = 16


class AotError(WorkbenchError):
    """Ahead-of-time compilation could not be set up or failed; the message says why."""


# -- interpreter guard -------------------------------------------------------------------------
def interpreter_active(kernel: Any = None) -> bool:
    """Whether Triton runs interpreted in this process (knob), or `kernel` is an interpreted one."""
    try:
        from triton import knobs
        if bool(knobs.runtime.interpret):
            return True
    except Exception:  # older Triton without knobs: only the kernel object tells
        pass
    return kernel is not None and type(kernel).__name__ == "InterpretedFunction"


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
        if has_cuda:
            import torch
            major, minor = torch.cuda.get_device_capability()
            return GPUTarget("cuda", major * 10 + minor, 32)
        return GPUTarget("cuda", DEFAULT_CAPABILITY, 32)
    return GPUTarget("cuda", capability_of(target), 32)


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


# -- specialisation ----------------------------------------------------------------------------
@dataclass
class Specialisation:
    """signature (name -> type or "constexpr"), constexprs (name -> value), attrs (arg index ->
    the JIT's specialisation string: "D" for divisible by 16, "" for specialised but not
    divisible; arguments the JIT does not specialise are absent), notes (what was assumed)."""

    signature: dict[str, str] = field(default_factory=dict)
    constexprs: dict[str, Any] = field(default_factory=dict)
    attrs: dict[int, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def divisible(self) -> list[int]:
        """Argument indices that get tt.divisibility = 16."""
        return [i for i, attr in self.attrs.items() if attr == "D"]


def specialise(jit_fn: Any, launch: TritonLaunch, backend: Any = None) -> Specialisation:
    """Mirror the JIT's specialisation of a launch (see the module docstring). Raises AotError."""
    spec = Specialisation()
    unknown_ints = []
    for index, param in enumerate(jit_fn.params):
        name = param.name
        if param.is_constexpr:
            spec.signature[name] = "constexpr"
            spec.constexprs[name] = _constexpr_value(launch, param)
            continue
        declared = launch.signature.get(name)
        if declared is None:
            raise AotError(f"{jit_fn.__name__}: argument {name!r} is missing from TritonLaunch.signature")
        if declared == "constexpr":
            spec.signature[name] = "constexpr"
            spec.constexprs[name] = launch.constexprs.get(name, launch.scalars.get(name))
            continue
        spec.signature[name] = declared
        if param.do_not_specialize:  # the JIT leaves it alone: no attribute at all
            continue
        align = not param.do_not_specialize_on_alignment
        if declared.startswith("*"):
            spec.attrs[index] = "D" if align else ""  # torch allocations are 16-byte aligned
        elif declared[0] in "iu" and name in launch.scalars:
            ty, divisible = _int_specialisation(backend, launch.scalars[name], declared, align)
            if ty == "constexpr":
                spec.signature[name] = "constexpr"
                spec.constexprs[name] = launch.scalars[name]
                spec.notes.append(f"{name}={launch.scalars[name]} specialised to a constant, as the launch does")
                continue
            spec.signature[name] = ty
            spec.attrs[index] = "D" if divisible else ""
        elif declared[0] in "iu":
            unknown_ints.append(name)
            spec.attrs[index] = ""
    if unknown_ints:
        spec.notes.append(
            f"integer argument(s) {', '.join(unknown_ints)} without a value in TritonLaunch.scalars: "
            "compiled without divisibility (a launch with a multiple of 16 may vectorize further)")
    return spec


def _constexpr_value(launch: TritonLaunch, param: Any) -> Any:
    if param.name in launch.constexprs:
        return launch.constexprs[param.name]
    if param.has_default:
        return param.default
    raise AotError(f"constexpr {param.name!r} has no value in TritonLaunch.constexprs and no default")


def _int_specialisation(backend: Any, value: int, declared: str, align: bool) -> tuple[str, bool]:
    """(type, divisible by 16) for an integer argument, by Triton's own rule where it is exposed."""
    try:
        from triton._C.libtriton import native_specialize_impl
        ty, attr = native_specialize_impl(type(backend) if backend is not None else _base_backend(),
                                          value, False, True, align)
        return ty, bool(attr) and "D" in str(attr)
    except Exception:  # older Triton: the same rule written out
        if value == 1:
            return "constexpr", False
        ty = "i32" if -2**31 <= value < 2**31 else ("u64" if value >= 2**63 else "i64")
        return (ty if declared.startswith("i") else declared), align and value % 16 == 0


def _base_backend() -> Any:
    from triton.backends.compiler import BaseBackend
    return BaseBackend


# -- compile -------------------------------------------------------------------------------------
@dataclass
class AotBuild:
    """The ASTSource, options and target of one launch, ready for `triton.compile`."""

    source: Any
    options: dict[str, Any]
    target: Any
    spec: Specialisation
    jit_fn: Any

    @property
    def config(self) -> dict[str, Any]:
        return {"num_warps": self.options.get("num_warps"), "num_stages": self.options.get("num_stages"),
                **{k: v for k, v in self.spec.constexprs.items() if isinstance(v, (int, float, bool, str))}}


def build_source(launch: TritonLaunch, target: Any) -> AotBuild:
    """An ASTSource for `launch` in this Triton's API (3.3+ or, best effort, 3.0-3.2)."""
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend

    jit_fn = unwrap_jit(launch.kernel)
    refuse_interpreter(jit_fn)
    backend = make_backend(target)
    spec = specialise(jit_fn, launch, backend)
    params = inspect.signature(ASTSource.__init__).parameters
    if "constexprs" in params:  # Triton >= 3.3
        attrs = {(i,): _parse_attr(backend, attr) for i, attr in spec.attrs.items()}
        source = ASTSource(fn=jit_fn, signature=spec.signature, constexprs=spec.constexprs, attrs=attrs)
    elif "constants" in params:
        source = _legacy_source(ASTSource, jit_fn, spec)
    else:
        raise AotError(f"unknown ASTSource API: parameters {list(params)}")
    return AotBuild(source, _jit_options(jit_fn, launch), target, spec, jit_fn)


def _parse_attr(backend: Any, attr: str) -> list:
    """The backend's attribute list for a specialisation string ("D" -> tt.divisibility 16)."""
    try:
        return backend.parse_attr(attr)
    except Exception:
        return [["tt.divisibility", POINTER_DIVISIBILITY]] if "D" in attr else []


def _legacy_source(ast_source: Any, jit_fn: Any, spec: Specialisation) -> Any:
    """Triton 3.0-3.2: constants and an AttrsDescriptor (best effort; not tested here)."""
    try:
        from triton.backends.compiler import AttrsDescriptor  # 3.2
        attrs = AttrsDescriptor.from_hints({i: POINTER_DIVISIBILITY for i in spec.divisible})
        return ast_source(fn=jit_fn, signature=spec.signature, constants=spec.constexprs, attrs=attrs)
    except ImportError:
        from triton.compiler.compiler import AttrsDescriptor  # 3.0, 3.1: keys are argument indices
        names = jit_fn.arg_names
        signature = {names.index(k): v for k, v in spec.signature.items() if v != "constexpr"}
        constants = {names.index(k): v for k, v in spec.constexprs.items()}
        attrs = AttrsDescriptor(divisible_by_16=tuple(spec.divisible), equal_to_1=())
        return ast_source(fn=jit_fn, signature=signature, constants=constants, attrs=attrs)


def _jit_options(jit_fn: Any, launch: TritonLaunch) -> dict[str, Any]:
    """Compile options exactly as JITFunction.run passes them (same cache key as the launch)."""
    options: dict[str, Any] = {"num_warps": int(launch.num_warps), "num_stages": int(launch.num_stages)}
    try:
        from triton import knobs
        options["debug"] = bool(getattr(jit_fn, "debug", None) or knobs.runtime.debug)
        options["instrumentation_mode"] = knobs.compilation.instrumentation_mode
    except Exception:  # older Triton: its defaults
        pass
    return options


def aot_compile(build: AotBuild) -> Any:
    """triton.compile the build (Triton's on-disk cache makes a repeat fast); raises AotError."""
    import triton

    try:
        return triton.compile(build.source, target=build.target, options=build.options)
    except Exception as exc:
        raise AotError(f"triton.compile failed for {build.jit_fn.__name__}: {type(exc).__name__}: "
                       f"{str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}") from exc


def expected_hash(build: AotBuild) -> str | None:
    """The cache hash `triton.compile` gives this build (CompiledKernel.hash), without compiling."""
    try:
        from triton._C.libtriton import get_cache_invalidating_env_vars
        from triton.compiler.compiler import make_backend
        from triton.runtime.cache import get_cache_key
        backend = make_backend(build.target)
        options = backend.parse_options(dict(build.options, **build.source.parse_options()))
        key = get_cache_key(build.source, backend, options, get_cache_invalidating_env_vars())
        return hashlib.sha256(key.encode("utf-8")).hexdigest()
    except Exception:  # API moved: the caller falls back to matching constants
        return None


def find_launched(build: AotBuild) -> tuple[Any, str] | None:
    """(CompiledKernel, how it matched) of a real launch with exactly this build's compile hash
    (same source, specialisation, options and target), or None.

    Only an exact match counts: in a sweep the JIT cache holds kernels of other shapes with the
    same constexprs (e.g. n = 4096 and n = 4097), and one of those is not the kernel of this row.
    """
    want = expected_hash(build)
    if want is None:
        return None
    for lk in launched_kernels(build.jit_fn):
        if getattr(lk.compiled, "hash", None) == want:
            return lk.compiled, "same compile hash as the ahead-of-time build"
    return None
