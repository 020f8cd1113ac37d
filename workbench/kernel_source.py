"""Where an implementation's kernel comes from: the plain data a backend answers with.

`Impl.source` is one of these (which one its backend, workbench.backends, says):

- `TritonSource(launch)`: `launch(spec, params[, ctx]) -> TritonLaunch`, the JIT function and
  exactly the signature, constexprs, grid and num_warps of the builder's launch. The builder
  calls `TritonLaunch.run(*tensors)`, so the ahead-of-time PTX is the PTX of the real launch;
- `CudaSource`: the `.cu` beside the op file (only `__global__` kernels and plain launchers, so
  `nvcc -ptx` compiles it alone) and the kernel names it launches;
- `INDUCTOR`: the Triton kernels torch.compile generates when the builder runs (a GPU is needed).

The PTX view (workbench/ptx/extract.py) dispatches on these types, never on a kind's name.
Nothing here imports torch or Triton; `plain()` gives what a torch-free manifest needs.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from workbench.errors import WorkbenchError


@dataclass(frozen=True)
class TritonLaunch:
    """One Triton launch: what the builder runs and what the ahead-of-time compile specialises.

    kernel: the `@triton.jit` function; signature: argument name -> Triton type string
    ("*fp32", "*bf16", "i32", "fp32", "constexpr"), in the kernel's argument order; constexprs:
    meta-parameter values (BLOCK_SIZE, ...); grid: programs per axis; note: where the config came
    from (e.g. "autotune: first config, nothing cached"); scalars: the values of the non-pointer
    arguments (n_elements, strides), passed by `run` and specialised by the ahead-of-time compile as
    the JIT specialises them (a multiple of 16 gets `tt.divisibility`, which lets masked loads
    vectorize; 1 becomes a constant).
    """

    kernel: Any
    signature: Mapping[str, str]
    constexprs: Mapping[str, Any]
    grid: tuple[int, ...]
    num_warps: int = 4
    num_stages: int = 3
    note: str = ""
    scalars: Mapping[str, int] = field(default_factory=dict)

    @property
    def pointers(self) -> tuple[str, ...]:
        """The pointer arguments, in signature order: `run`'s tensors bind to these."""
        return tuple(name for name, kind in self.signature.items() if kind.startswith("*"))

    @functools.cached_property
    def _options(self) -> dict[str, Any]:
        return {**self.scalars, **self.constexprs, "num_warps": int(self.num_warps),
                "num_stages": int(self.num_stages)}

    def run(self, *tensors: Any) -> Any:
        """Launch on `tensors` (one per pointer argument, in signature order; contiguous, of the
        spec this launch was made for): `kernel[grid](...)` with the declared scalars,
        constexprs, num_warps and num_stages. Raises WorkbenchError for a wrong tensor count."""
        names = self.pointers
        if len(tensors) != len(names):
            raise WorkbenchError(f"{getattr(self.kernel, '__name__', self.kernel)}: {len(tensors)} tensors "
                                 f"for {len(names)} pointer arguments ({', '.join(names)})")
        return self.kernel[self.grid](**dict(zip(names, tensors)), **self._options)

    def geometry(self, spec: Any = None, params: Any = None, ctx: Any = None) -> tuple[tuple[int, ...], int]:
        """(grid, threads per block) of this resolved launch (ctx: unused, it is resolved already)."""
        return tuple(self.grid), int(self.num_warps) * 32


@dataclass(frozen=True)
class TritonSource:
    """A Triton implementation's source: launch(spec, params) -> TritonLaunch, optionally taking
    `ctx` (a BuildContext: a matmul's tl.dot precision follows ctx.fp32_precision);
    interpreter_dtypes: the dtypes the CPU interpreter can run (None: all); candidates: for a
    builder that autotunes, (spec, params[, ctx]) -> the launches its tuner may time (every
    config while none is cached, else the cached one), which building ahead compiles so that
    the tuning only loads them (engine/build_ahead.py)."""

    launch: Callable[..., TritonLaunch] | None
    interpreter_dtypes: tuple[Any, ...] | None = None
    candidates: Callable[..., list[TritonLaunch]] | None = None

    def launch_for(self, spec: Any, params: Mapping[str, Any], ctx: Any = None) -> TritonLaunch:
        if self.launch is None:
            raise WorkbenchError("this TritonSource was rebuilt from plain data: it has no launch")
        if ctx is not None and _takes_ctx(self.launch):
            return self.launch(spec, params, ctx=ctx)
        return self.launch(spec, params)

    def candidate_launches(self, spec: Any, params: Mapping[str, Any], ctx: Any = None) -> list[TritonLaunch]:
        """The launches the builder may run: `candidates`' list, else the one launch."""
        if self.candidates is None:
            return [self.launch_for(spec, params, ctx)]
        if ctx is not None and _takes_ctx(self.candidates):
            return list(self.candidates(spec, params, ctx=ctx))
        return list(self.candidates(spec, params))

    def plain(self) -> dict[str, Any]:
        dtypes = self.interpreter_dtypes
        return {"type": "triton", "interpreter_dtypes": None if dtypes is None else [str(d) for d in dtypes],
                "launch": self.launch is not None}  # a source without its launch has no PTX (--list says so)


def _takes_ctx(fn: Callable[..., Any]) -> bool:
    try:
        return "ctx" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


@dataclass(frozen=True)
class CudaSource:
    """A `.cu` file and the `__global__` kernels an implementation launches from it.

    launch: optional (spec, params) -> (grid, block_threads) for the launch geometry.
    launched: optional (spec, params) -> the kernel the run launches at `spec`, where the
    implementation chooses among `kernels` (a tuned choice): its demangled name with template
    arguments (`softmax_l2_kernel<float, 1024, true>`) or its base name alone. The PTX record
    lists it first, so the view opens on it and the launch record's registers are its own.
    build_flags: optional (spec, params) -> nvcc flags of the row's module on top of
    extra_nvcc_flags, where the builder compiles only what the row launches (softmax: a -D naming
    its kernels); the PTX view and the build-ahead worker compile with the same flags
    (`nvcc_flags`), so the view shows what the run built.
    """

    path: Path
    kernels: tuple[str, ...]
    launch: Callable[..., tuple[tuple[int, ...], int]] | None = None
    extra_nvcc_flags: tuple[str, ...] = field(default_factory=tuple)
    launched: Callable[..., str | None] | None = None
    build_flags: Callable[[Any, Mapping[str, Any]], tuple[str, ...]] | None = None

    def nvcc_flags(self, spec: Any, params: Any) -> tuple[str, ...]:
        """extra_nvcc_flags, then the row's build_flags (none declared, or no spec: none)."""
        if self.build_flags is None or spec is None:
            return tuple(self.extra_nvcc_flags)
        return (*self.extra_nvcc_flags, *self.build_flags(spec, params))

    def geometry(self, spec: Any, params: Any, ctx: Any = None) -> tuple[tuple[int, ...], int] | None:
        """`launch`'s (grid, threads per block); ctx (the run's BuildContext) goes to a `launch`
        that takes it: a tuned choice is cached under the run's build directory, so without it
        the geometry would be the untuned default's."""
        if self.launch is None:
            return None
        return self.launch(spec, params, ctx=ctx) if _takes_ctx(self.launch) else self.launch(spec, params)

    def launched_kernel(self, spec: Any, params: Any, ctx: Any = None) -> str | None:
        """What `launched` names at `spec`, or None where it is not declared; ctx as geometry's."""
        if self.launched is None:
            return None
        return self.launched(spec, params, ctx=ctx) if _takes_ctx(self.launched) else self.launched(spec, params)

    def plain(self) -> dict[str, Any]:
        return {"type": "cuda", "path": str(self.path), "kernels": list(self.kernels),
                "extra_nvcc_flags": list(self.extra_nvcc_flags)}


@dataclass(frozen=True)
class InductorKernels:
    """The kernels torch.compile (Inductor) generates when the builder runs: known only then."""

    def geometry(self, spec: Any = None, params: Any = None, ctx: Any = None) -> None:
        return None

    def plain(self) -> dict[str, Any]:
        return {"type": "inductor"}


INDUCTOR = InductorKernels()


def launch_in_worker(*_args: Any, **_kwargs: Any) -> TritonLaunch:
    """The launch of a TritonSource rebuilt from a manifest: it was declared, and it lives in the
    worker that imports the plugin (workbench/plugins/manifest.py)."""
    raise WorkbenchError("this TritonSource was rebuilt from plain data: its launch lives in the worker")


def source_from_plain(data: Mapping[str, Any] | None) -> Any:
    """The source a `plain()` dict describes, without its callables (a manifest's declaration:
    enough for availability, --list and the PTX view's choice; the launch itself lives in the
    worker). Raises WorkbenchError for an unknown type."""
    if data is None:
        return None
    kind = data.get("type")
    if kind == "triton":
        dtypes = data.get("interpreter_dtypes")
        launch = launch_in_worker if data.get("launch", True) else None  # declared, or none to compile
        return TritonSource(launch, None if dtypes is None else tuple(dtypes))
    if kind == "cuda":
        return CudaSource(Path(data["path"]), tuple(data["kernels"]),
                          extra_nvcc_flags=tuple(data.get("extra_nvcc_flags", ())))
    if kind == "inductor":
        return INDUCTOR
    raise WorkbenchError(f"unknown kernel source type {kind!r} (allowed: triton, cuda, inductor)")

TRITON_DTYPE = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5"}


def triton_ptr(dtype: object) -> str:
    """Triton signature string for a pointer to `dtype` (a DType or its name): '*fp32'."""
    return "*" + TRITON_DTYPE[str(dtype)]


def triton_index(numel: int) -> str:
    """The integer type of an element count or offset bound: 'i32' below 2^31, else 'i64'."""
    return "i32" if numel < 2**31 else "i64"
