"""Building ahead: compile the next rows' kernels into the shared on-disk caches while the
current row is timed, so their builds in the timing worker only load what is already built.

A separate worker (WorkerKey role "build", same cache folders) gets the run's exec rows as a
Mode.build job and, per row, compiles without launching anything on the GPU:
- Triton (`triton_launch` declared): `JITFunction.warmup(...)`, Triton's public compile-only
  call, with the launch's exact signature, constexprs, scalars and num_warps (pointer arguments
  as dtypes, so no device memory is touched) -> TRITON_CACHE_DIR;
- CUDA (load_inline): the builder itself, which runs nvcc and ninja and loads the module, and
  launches nothing -> the build folder the timing worker's load_inline finds up to date.
torch.compile is not built ahead: Inductor traces with real inputs at the first call, which
runs on the device. Nothing runs on the GPU, but compilers take host cores: a row whose kernel
is estimated launch-bound (LAUNCH_BOUND_S) is timed with nothing compiling beside it, so no
build-ahead starts for a run that has one, and none on a CPU device (timing shares the cores).
"""

from __future__ import annotations

from typing import Any

from workbench.registry import BuildContext, ImplKind

LAUNCH_BOUND_S = 100e-6          # below this estimated call time a row counts as launch-bound
DEVICE_BYTES_PER_S = 3.0e12      # optimistic (fast) H200-class figures: more rows count as small
DEVICE_FLOPS_PER_S = 400e12
TRITON_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp64": "float64",
                 "i32": "int32", "i64": "int64", "i8": "int8", "u8": "uint8", "i1": "bool"}


def likely_launch_bound(cost: Any) -> bool:
    """Whether one call is estimated below LAUNCH_BOUND_S on a fast GPU (cost: a Cost)."""
    return max(cost.moved / DEVICE_BYTES_PER_S, cost.flops / DEVICE_FLOPS_PER_S) < LAUNCH_BOUND_S


def worth_building_ahead(rows: list[Any], registry: Any) -> bool:
    """A run's exec rows may be built ahead: on CUDA, none launch-bound, some Triton or CUDA."""
    if not rows or not all(r.device.startswith("cuda") for r in rows):
        return False
    kinds = set()
    for row in rows:
        op = registry.op(row.op)
        impl = op.get_impl(row.impl)
        kinds.add(impl.kind)
        try:
            if likely_launch_bound(impl.cost(op, op.make_spec(row.shape, row.dtype))):
                return False
        except Exception:  # no cost known: not built ahead (timing is what must not suffer)
            return False
    return bool(kinds & {ImplKind.triton, ImplKind.cuda})


def prebuild(registry: Any, row: Any, interpret: bool, build_dir: str | None) -> str:
    """Compile `row`'s kernel into the on-disk caches without launching; returns what was done
    ("triton warmup", "cuda build", "nothing"). Raises what the compiler raises."""
    from pathlib import Path

    op = registry.op(row.op)
    impl = op.get_impl(row.impl)
    spec = op.make_spec(row.shape, row.dtype)
    params = impl.resolve_params(row.params)
    if interpret:
        return "nothing"
    if impl.kind is ImplKind.cuda:
        ctx = BuildContext(device=row.device, fp32_precision=row.settings.fp32_precision, interpret=False,
                           build_dir=Path(build_dir) if build_dir else None)
        impl.builder(spec, params, ctx)
        return "cuda build"
    if impl.kind is ImplKind.triton and impl.triton_launch is not None:
        _warmup(impl.triton_launch(spec, params))
        return "triton warmup"
    return "nothing"


def _warmup(launch: Any) -> None:
    import torch

    args, kwargs = [], dict(launch.constexprs)
    for name, kind in launch.signature.items():
        if kind == "constexpr":
            continue
        if kind.startswith("*"):
            args.append(getattr(torch, TRITON_DTYPES[kind[1:]]))  # a dtype: Triton's MockTensor
        elif kind.startswith("fp"):
            args.append(1.0)
        else:  # unknown integers compile unspecialised (17: neither 1 nor a multiple of 16)
            args.append(launch.scalars.get(name, 17))
    launch.kernel.warmup(*args, grid=tuple(launch.grid), num_warps=launch.num_warps,
                         num_stages=launch.num_stages, **kwargs)
