"""Op test cases generated from the registry, and how one is run and checked.

A case is (op, implementation, shape, dtype) plus an optional input layout ("transposed",
"sliced": the same values in a non-contiguous tensor) and fp32 precision. `run_case` builds the
implementation, runs it once on seeded inputs and checks it against the float64 reference of its
math variant (MEASUREMENT.md rule 6, `workbench.check.row.check_output`). Triton cases run in a child
process (tests/op_child.py) where TRITON_INTERPRET is set before the kernels are imported; this
module imports no kernels itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

import torch

from workbench.engine.worker.precision import effective_fp32_precision, fp32_precision
from workbench.kernel_source import TritonLaunch
from workbench.registry import BuildContext, Impl, Op, Registry
from workbench.check.row import RowCheck

SEED = 0
LAYOUTS = ("transposed", "sliced")
SHIPPED_MODULE = "workbench.kernels."
CHILD = Path(__file__).with_name("op_child.py")
PLUGINS = Path(__file__).with_name("plugins")


@dataclass(frozen=True)
class Case:
    """One generated check. shape: the op's size fields; params: impl param overrides."""

    op: str
    impl: str
    shape: dict[str, int]
    dtype: str
    layout: str | None = None
    fp32_precision: str = "ieee"
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        dims = "x".join(str(v) for v in self.shape.values())
        extra = [self.layout] if self.layout else []
        extra += [self.fp32_precision] if self.fp32_precision != "ieee" else []
        extra += [f"{k}={v}" for k, v in self.params.items()]
        return "-".join([self.op, self.impl, dims, self.dtype, *extra])

    def to_json(self) -> dict:
        return asdict(self)


def shipped_impls(op: Op) -> list[Impl]:
    """The op's implementations from the shipped kernels (not ones a plugin added)."""
    return [impl for impl in op.impls.values() if impl.builder.__module__.startswith(SHIPPED_MODULE)]


def shipped_ops(registry: Registry) -> list[Op]:
    return [op for op in registry.ops.values() if shipped_impls(op)]


def correctness_cases(registry: Registry, kinds: Iterable[str], *, first_spec_only: bool = False) -> list[Case]:
    """Every (op, impl of `kinds`, test spec, supported dtype) of the shipped kernels."""
    cases = []
    for op in shipped_ops(registry):
        specs = op.test_specs[:1] if first_spec_only else op.test_specs
        for impl in shipped_impls(op):
            if impl.kind not in kinds:
                continue
            for shape in specs:
                for dtype in op.dtypes:
                    if impl.supports(dtype):
                        cases.append(Case(op.name, impl.name, dict(shape), dtype.value))
    return cases


def layout_spec(op: Op) -> dict[str, int]:
    """The op's smallest test spec whose dims are all > 1 (so views are really strided)."""
    return dict(min(op.test_specs, key=lambda s: (min(s.values()) <= 1, _product(s.values()))))


def layout_cases(registry: Registry, kinds: Iterable[str], layouts: Iterable[str] = LAYOUTS) -> list[Case]:
    """Every shipped (op, impl of `kinds`) on non-contiguous inputs, at the op's first dtype."""
    cases = []
    for op in shipped_ops(registry):
        for impl in shipped_impls(op):
            dtype = next(d for d in op.dtypes if impl.supports(d))
            if impl.kind in kinds:
                cases += [Case(op.name, impl.name, layout_spec(op), dtype.value, layout) for layout in layouts]
    return cases


def _product(values: Iterable[int]) -> int:
    result = 1
    for v in values:
        result *= v
    return result


def relayout(t: Any, layout: str | None) -> Any:
    """The same values as `t` in a non-contiguous tensor: "transposed" (column-major strides of
    the last two dims) or "sliced" (every other element of a buffer twice as wide)."""
    if layout is None or not torch.is_tensor(t):
        return t
    if layout == "transposed":
        return t.mT.contiguous().mT if t.dim() >= 2 else t
    if layout == "sliced":
        wide = torch.empty(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype, device=t.device)
        view = wide[..., ::2]
        view.copy_(t)
        return view
    raise ValueError(f"unknown layout {layout!r}; allowed: {', '.join(LAYOUTS)}")


def run_case(registry: Registry, case: Case, device: str, *, interpret: bool = False,
             after_first_call=lambda: None) -> dict:
    """Build, run and check as the engine does (workbench.check.row.RowCheck: the first call, the
    op's special-values set, then a second seeded set in the same tensors after two more calls);
    returns {"check": CheckReport dict, "detail", "passed", "id"}. after_first_call() runs right
    after the first call (the launch recorder reads that call's launches then).

    Raises whatever the build or the call raises.
    """
    op = registry.op(case.op)
    impl = op.get_impl(case.impl)
    spec = op.make_spec(case.shape, case.dtype)
    precision = effective_fp32_precision(op, case.fp32_precision)
    ctx = BuildContext(device=device, fp32_precision=precision, interpret=interpret)
    with fp32_precision(precision):  # as the engine sets it for a row (engine/precision.py)
        fn = impl.builder(spec, impl.resolve_params(case.params), ctx)
        inputs = op.make_inputs(spec, device, SEED)
        sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
        check = RowCheck(op, impl, spec, ctx, inputs, SEED, sync=sync)

        def call(*tensors):
            return fn(*(relayout(t, case.layout) for t in tensors))
        out = call(*inputs)
        after_first_call()
        report = check.run_all(call, out)
    return {"id": case.id, "passed": report.passed, "check": report.as_dict(), "detail": report.detail}


def describe(result: dict) -> str:
    """One line for an assertion message."""
    return json.dumps({k: result.get(k) for k in ("id", "check", "detail", "launch_problems", "error")})


# -- Triton launches against the implementation's declared TritonLaunch ------------------------
class LaunchRecorder:
    """Records every Triton launch (kernel, grid, args bound to names, options) while active.

    Wraps `run` of Triton's JIT and interpreted functions, the method `kernel[grid](...)` calls.
    """

    def __init__(self) -> None:
        self.launches: list[dict] = []
        self._saved: list[tuple[type, Any]] = []

    def __enter__(self) -> "LaunchRecorder":
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction

        for cls in (JITFunction, InterpretedFunction):
            original = cls.run
            self._saved.append((cls, original))

            def run(kernel, *args, grid, warmup, _original=original, **kwargs):
                if not warmup:
                    bound = dict(zip(kernel.arg_names, args))
                    bound.update({k: v for k, v in kwargs.items() if k in kernel.arg_names})
                    options = {k: v for k, v in kwargs.items() if k not in kernel.arg_names}
                    self.launches.append({"kernel": kernel, "grid": grid, "args": bound, "options": options})
                return _original(kernel, *args, grid=grid, warmup=warmup, **kwargs)
            cls.run = run
        return self

    def __exit__(self, *exc) -> None:
        for cls, original in self._saved:
            cls.run = original
        self._saved.clear()


def launch_problems(expected, launches: list[dict]) -> list[str]:
    """How the recorded launches differ from `expected` (a TritonLaunch); [] when they match.

    The implementation must launch exactly once, with the declared kernel, grid, constexprs,
    num_warps, num_stages, pointer dtypes and integer argument values (`scalars`).
    """
    if len(launches) != 1:
        return [f"expected one launch, saw {len(launches)}"]
    seen = launches[0]
    problems = []
    if seen["kernel"] is not expected.kernel:
        problems.append("launched another kernel than its TritonLaunch declares")
    grid = tuple(seen["grid"]) + (1,) * (3 - len(tuple(seen["grid"])))
    if grid != tuple(expected.grid) + (1,) * (3 - len(expected.grid)):
        problems.append(f"grid {grid} != declared {tuple(expected.grid)}")
    args = seen["args"]
    if set(expected.signature) != set(args):
        problems.append(f"signature names {sorted(expected.signature)} != launched {sorted(args)}")
    for name, kind in expected.signature.items():
        value = args.get(name)
        if kind == "constexpr":
            if expected.constexprs.get(name) != value:
                problems.append(f"constexpr {name}={value!r} != declared {expected.constexprs.get(name)!r}")
        elif kind.startswith("*"):
            from workbench.kernel_source import triton_ptr
            if not torch.is_tensor(value) or triton_ptr(str(value.dtype).removeprefix("torch.")) != kind:
                problems.append(f"pointer {name}: declared {kind}, launched {getattr(value, 'dtype', value)}")
        elif isinstance(value, int) and expected.scalars.get(name) != value:
            problems.append(f"integer {name}={value} != declared scalars {expected.scalars.get(name)!r}")
    options = seen["options"]
    if options.get("num_warps", 4) != expected.num_warps:
        problems.append(f"num_warps {options.get('num_warps', 4)} != declared {expected.num_warps}")
    if options.get("num_stages", 3) != expected.num_stages:
        problems.append(f"num_stages {options.get('num_stages', 3)} != declared {expected.num_stages}")
    return problems


def declared_launch(registry: Registry, case: Case, device: str):
    """The implementation's TritonLaunch for this case (None where it declares none)."""
    op = registry.op(case.op)
    impl = op.get_impl(case.impl)
    spec = op.make_spec(case.shape, case.dtype)
    ctx = BuildContext(device=device, fp32_precision=effective_fp32_precision(op, case.fp32_precision))
    launch = impl.backend.kernel_source(impl, spec, impl.resolve_params(case.params), ctx)
    return launch if isinstance(launch, TritonLaunch) else None


# -- running cases in a child process ------------------------------------------------------------
def run_child(cases: Iterable[Case], workdir: Path, *, has_cuda: bool, plugins: Iterable[Path] = (),
              timeout_s: float = 600) -> dict[str, dict]:
    """Run `cases` in one op_child.py process; Triton interpreted unless there is a GPU.

    Returns {case id: result}. Raises AssertionError with the child's stderr if it fails.
    """
    request, results = workdir / "request.json", workdir / "results.json"
    request.write_text(json.dumps({"cases": [c.to_json() for c in cases], "plugins": [str(p) for p in plugins],
                                   "device": "cuda:0" if has_cuda else "cpu", "interpret": not has_cuda}))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if not has_cuda:
        env["TRITON_INTERPRET"] = "1"  # read when the child imports the kernels
    proc = subprocess.run([sys.executable, str(CHILD), str(request), str(results)], env=env,
                          capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0 or not results.exists():
        raise AssertionError(f"op child failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(results.read_text())
