"""The op registry and its one discovery door.

Ops are declared in op files (`kernels/gelu.py` is the model) and reach the registry only
through `discover()`: the `workbench.ops` entry-point group (the shipped kernels register
there too) and paths given with `--kernels`. The core never imports `kernels/` by name.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import sys
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping

from workbench.backends import Action, Backend, Need, backend  # noqa: F401  (Action, Need: re-exported)
from workbench.check.chunks import CheckChunks
from workbench.cost import Cost
from workbench.dtypes import STANDARD_DTYPES, DType
from workbench.errors import LimitError, UnknownNameError, WorkbenchError
from workbench.params import param_problem
from workbench.plugins.sources import plugin_files
from workbench.plugins.registrations import Registered, registered_since, snapshot
from workbench.impl_fields import LEGACY_SOURCE_FIELDS, impl_fields, parse_impl_name  # noqa: F401 (re-exported)
from workbench.spec import Spec

ENTRY_POINT_GROUP = "workbench.ops"


@dataclasses.dataclass(frozen=True)
class BuildContext:
    """What a builder may know about where it runs.

    device: torch device string ("cpu", "cuda:0"); fp32_precision: "ieee" | "tf32", applied
    to torch matmul and tl.dot alike; interpret: Triton runs under TRITON_INTERPRET (CPU);
    build_dir: a directory for build artefacts (load_inline), or None for the default; tune:
    whether a builder may launch its kernels to autotune (False in the build-ahead worker, which
    compiles the next rows while another worker times the current one: a tuner there timed its
    candidates on the GPU beside that row, and its choice was cached for the row's own build).
    """

    device: str = "cpu"
    fp32_precision: str = "ieee"
    interpret: bool = False
    build_dir: Path | None = None
    tune: bool = True

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")


# builder(spec, params, ctx) -> the callable that is timed: fn(*inputs) -> output tensor(s)
Builder = Callable[[Spec, Mapping[str, Any], BuildContext], Callable[..., Any]]


@dataclasses.dataclass(frozen=True)
class Impl:
    """One registered implementation of an op.

    name: `kind[_variant]`; math: which mathematical variant it computes (checked against the
    op's reference of that variant); params: implementation parameters with their defaults
    (BLOCK_SIZE, GROUP_M, num_warps); needs: what it needs to run (its backend's needs plus any
    it declares); dtypes: the dtypes it supports (None: all of the op's); moved_bytes: what its
    kernels really move (unfused forms); source: where its kernel comes from, of the type its
    backend declares (kernel_source.TritonSource, CudaSource; None for library kinds);
    tolerance_scale: extra tolerance factor (>= 1) for a declared approximation, one number or
    per dtype name ({"bfloat16": 4.0}: the unfused forms round once per operator in half
    precision); the reason belongs in the builder's docstring (workbench.check.tolerance).
    """

    op: str
    name: str
    builder: Builder
    math: str = "default"
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    needs: frozenset[Need] = frozenset()
    dtypes: tuple[DType, ...] | None = None
    moved_bytes: Callable[[Spec], int] | None = None
    source: Any = None
    tolerance_scale: float | Mapping[str, float] = 1.0
    description: str = ""

    def tolerance_factor(self, dtype: DType | str) -> float:
        """The declared tolerance factor for `dtype` (1.0 where none is declared)."""
        if isinstance(self.tolerance_scale, Mapping):
            return float(self.tolerance_scale.get(str(dtype), 1.0))
        return float(self.tolerance_scale)

    @property
    def kind(self) -> str:
        return parse_impl_name(self.name)

    @property
    def backend(self) -> Backend:
        """The registered backend of this implementation's kind (workbench.backends)."""
        return backend(self.kind)

    def describe(self) -> dict[str, Any]:
        """Plain data (no callables, no torch): enough for a manifest and for availability."""
        return {"name": self.name, "kind": self.kind, "math": self.math, "params": dict(self.params),
                "dtypes": None if self.dtypes is None else [d.value for d in self.dtypes],
                "needs": sorted(self.needs), "description": self.description,
                "source": self.source.plain() if self.source is not None else None}

    def resolve_params(self, overrides: Mapping[str, Any] | None) -> dict[str, Any]:
        """Defaults updated with `overrides`; an unknown parameter raises UnknownNameError, a
        value it cannot take (workbench.params) LimitError."""
        merged = dict(self.params)
        for key, value in (overrides or {}).items():
            if key not in self.params:
                raise UnknownNameError(f"parameter of {self.op}/{self.name}", key, list(self.params))
            problem = param_problem(key, value, self.params[key])
            if problem:
                raise LimitError(f"{self.op}/{self.name}: parameter {key} {problem}")
            merged[key] = value
        return merged

    def supports(self, dtype: DType) -> bool:
        return self.dtypes is None or dtype in self.dtypes

    def cost(self, op: "Op", spec: Spec) -> Cost:
        """The op's ideal cost with this implementation's real traffic as bytes_moved_est."""
        ideal = op.cost(spec)
        if self.moved_bytes is None:
            return ideal
        return dataclasses.replace(ideal, bytes_moved_est=int(self.moved_bytes(spec)))


class Op:
    """An op: spec type, inputs, references per math variant, cost model, implementations.

    name: the op's name in sessions; spec: its frozen Spec dataclass; dtypes: supported;
    test_specs: small awkward specs for the generated tests (shape dicts, dtype from the test);
    reduction_length: spec -> K for matmul-like ops (the check's float32 accumulation term);
    sum_length: spec -> N of a sum of positive terms that scales every output (softmax's
    denominator; a relative term of the check);
    matmul_like: whether fp32_precision applies to it; check_chunks: how the float64 reference
    may be computed in pieces (workbench.check.chunks; None: whole); out_dtype: spec -> the dtype the
    output must have (default the spec's dtype).

    output_aliases_input (class attribute, set on an op whose reference returns its input, as
    sleep's sentinel): the check's ownership gate then lets an output share an input's memory.
    output must have (default the spec's dtype); rounding_dtype: spec -> the dtype whose rounding
    sets the check's output term (default the spec's dtype, the precision the op computes in,
    as for the MLP's float32 loss of a bfloat16 network; a scaled matmul of fp8 inputs declares
    bfloat16, its output);
    check_view: (spec, output) -> the one tensor the check compares, for an op whose
    implementations return several tensors (quantize: the fp8 tensor and its scales); it raises
    OutputForm naming the gate for an output of the wrong form; outputs_from_reference: (spec,
    float64 reference) -> the implementation-shaped outputs (the known-wrong tests build theirs
    from it).
    """

    output_aliases_input: bool = False

    def __init__(self, name: str, spec: type[Spec], *, description: str = "",
                 dtypes: Iterable[DType] = STANDARD_DTYPES, test_specs: Iterable[Mapping[str, int]] = (),
                 reduction_length: Callable[[Spec], int] | None = None,
                 sum_length: Callable[[Spec], int] | None = None, matmul_like: bool = False,
                 check_chunks: CheckChunks | None = None, out_dtype: Callable[[Spec], DType] | None = None,
                 rounding_dtype: Callable[[Spec], DType] | None = None,
                 check_view: Callable[[Spec, Any], Any] | None = None,
                 outputs_from_reference: Callable[[Spec, Any], Any] | None = None,
                 registry: "Registry | None" = None):
        self.name = name
        self.spec = spec
        self.description = description
        self.dtypes = tuple(DType.parse(d) for d in dtypes)
        self.test_specs = tuple(dict(s) for s in test_specs)
        self.reduction_length = reduction_length
        self.sum_length = sum_length
        self.matmul_like = matmul_like
        self.check_chunks = check_chunks
        self._out_dtype = out_dtype
        self._rounding_dtype = rounding_dtype
        self.check_view = check_view
        self.outputs_from_reference = outputs_from_reference
        self._special: Callable[..., Any] | None = None
        self._impls: dict[str, Impl] = {}
        self._references: dict[str, Callable[..., Any]] = {}
        self._inputs: Callable[..., tuple] | None = None
        self._cost: Callable[[Spec], Cost] | None = None
        self._footprint: Callable[[Spec], int] | None = None
        (registry or REGISTRY).add(self)

    # -- declaration decorators -------------------------------------------------------------
    def inputs(self, fn: Callable[..., tuple]) -> Callable[..., tuple]:
        """Register the seeded input factory: fn(spec, device: str, seed: int) -> tuple of tensors.
        It may take a keyword `out` (a tuple of its own earlier tensors) and fill those in place
        (workbench.check.inputs.seeded_normal): the check's second input set then keeps the pointers
        without a second copy in memory."""
        self._inputs = fn
        return fn

    def special_inputs(self, fn: Callable[..., tuple]) -> Callable[..., tuple]:
        """Register an extra input set of special values used only by the check:
        fn(spec, inputs, seed) fills the tensors of `inputs` (the factory's) in place and returns
        them (large magnitudes, -0, denormals, inf/NaN where meaningful)."""
        self._special = fn
        return fn

    def reference(self, math: str = "default") -> Callable:
        """Register the float64 reference of one math variant: fn(*inputs_as_float64) -> tensor."""
        def wrap(fn):
            self._references[math] = fn
            return fn
        return wrap

    def cost_model(self, fn: Callable[[Spec], Cost]) -> Callable[[Spec], Cost]:
        """Register the cost model: fn(spec) -> Cost (ideal bytes and FLOPs)."""
        self._cost = fn
        return fn

    def footprint(self, fn: Callable[[Spec], int]) -> Callable[[Spec], int]:
        """Register the resident memory of one call: fn(spec) -> bytes (inputs, outputs, saved
        activations). Only for ops whose traffic is not their memory (the MLP re-reads its
        weights every step); by default the footprint is the cost model's ideal bytes."""
        self._footprint = fn
        return fn

    def impl(self, name: str, **options: Any) -> Callable[[Builder], Builder]:
        """Register a builder as implementation `name`; options are Impl fields (math, params, ...)."""
        parse_impl_name(name)

        def wrap(builder: Builder) -> Builder:
            if name in self._impls:
                raise WorkbenchError(f"{self.name}: implementation {name!r} is registered twice")
            fields = impl_fields(f"{self.name}/{name}", options)
            fields.setdefault("description", (builder.__doc__ or "").strip().split("\n")[0])
            self._impls[name] = Impl(op=self.name, name=name, builder=builder, **fields)
            return builder
        return wrap

    # -- queries ------------------------------------------------------------------------------
    @property
    def impls(self) -> Mapping[str, Impl]:
        return MappingProxyType(self._impls)

    @property
    def references(self) -> tuple[str, ...]:
        """The math variants this op has a float64 reference of (a declared op: as its manifest
        says; workbench/plugins/manifest.py)."""
        return tuple(getattr(self, "declared_references", None) or self._references)

    @property
    def has_inputs(self) -> bool:
        return self._inputs is not None or bool(getattr(self, "declared_inputs", False))

    @property
    def has_cost(self) -> bool:
        return self._cost is not None or bool(getattr(self, "declared_cost", False))

    def get_impl(self, name: str) -> Impl:
        try:
            return self._impls[name]
        except KeyError:
            raise UnknownNameError(f"implementation of {self.name}", name, list(self._impls)) from None

    def make_spec(self, shape: Mapping[str, Any] | None = None, dtype: object = None) -> Spec:
        """A validated spec; raises UnknownNameError / SpecError naming the bad value."""
        spec = self.spec.from_dict(shape, dtype)
        if getattr(spec, "dtype", None) is not None and spec.dtype not in self.dtypes:
            raise UnknownNameError(f"dtype for {self.name}", spec.dtype.value, [d.value for d in self.dtypes])
        return spec

    def make_inputs(self, spec: Spec, device: str = "cpu", seed: int = 0, out: tuple | None = None) -> tuple:
        """The seeded inputs; with `out`, the same tensors refilled in place where the factory
        takes `out`, else new tensors copied into them (a second set in memory meanwhile)."""
        if self._inputs is None:
            raise WorkbenchError(f"{self.name}: no input factory registered")
        if out is None:
            return tuple(self._inputs(spec, device, seed))
        if "out" in inspect.signature(self._inputs).parameters:
            return tuple(self._inputs(spec, device, seed, out=tuple(out)))
        for old, new in zip(out, self._inputs(spec, device, seed)):
            old.copy_(new)
        return tuple(out)

    def fill_special(self, spec: Spec, inputs: tuple, seed: int = 0) -> tuple | None:
        """Fill `inputs` in place with the op's special-values set; None when it declares none."""
        return None if self._special is None else tuple(self._special(spec, tuple(inputs), seed))

    def out_dtype(self, spec: Spec) -> DType:
        """The dtype the output must have (the check's dtype gate)."""
        return DType.parse(self._out_dtype(spec)) if self._out_dtype is not None else spec.dtype

    def rounding_dtype(self, spec: Spec) -> DType:
        """The dtype whose rounding the check's output term is of (workbench.tolerance)."""
        return DType.parse(self._rounding_dtype(spec)) if self._rounding_dtype is not None else spec.dtype

    def reference_fn(self, math: str = "default") -> Callable[..., Any]:
        try:
            return self._references[math]
        except KeyError:
            raise UnknownNameError(f"reference of {self.name}", math, list(self._references)) from None

    def cost(self, spec: Spec) -> Cost:
        if self._cost is None:
            raise WorkbenchError(f"{self.name}: no cost model registered")
        return self._cost(spec)

    def footprint_bytes(self, spec: Spec) -> int:
        """Bytes resident on the device during one call, for the size estimate (see `footprint`)."""
        return int(self._footprint(spec)) if self._footprint is not None else self.cost(spec).bytes

    def __repr__(self) -> str:
        return f"Op({self.name!r}, impls={list(self._impls)})"


class OutputForm(Exception):
    """Raised by an op's check_view for an output of the wrong form: gate ("shape" | "dtype") and
    the one-line reason the check reports."""

    def __init__(self, gate: str, reason: str):
        super().__init__(reason)
        self.gate, self.reason = gate, reason


class Registry:
    """Ops by name, filled by discovery."""

    def __init__(self) -> None:
        self._ops: dict[str, Op] = {}
        self.loaded_sources: list[str] = []
        # source key -> what it declared: (op, None) for a new op, (op, impl) for an impl added
        # (filled by workbench.plugins.manifest.declare; workbench.plugins.sources finds declared .cu files)
        self.added: dict[str, list[tuple[str, str | None]]] = {}
        # source key -> what loading it registered (workbench/plugins/registrations.py): what an in-place
        # reload of that source drops (engine/reload_worker.py)
        self.registered: dict[str, Registered] = {}

    def add(self, op: Op) -> None:
        if op.name in self._ops and self._ops[op.name] is not op:
            raise WorkbenchError(f"op {op.name!r} is registered twice")
        self._ops[op.name] = op

    def op(self, name: str) -> Op:
        try:
            return self._ops[name]
        except KeyError:
            raise UnknownNameError("op", name, sorted(self._ops)) from None

    @property
    def ops(self) -> Mapping[str, Op]:
        return MappingProxyType(self._ops)

    def __contains__(self, name: object) -> bool:
        return name in self._ops


REGISTRY = Registry()


def op_entry_points() -> list[importlib.metadata.EntryPoint]:
    """The `workbench.ops` entry points, one per name (the first found): a checkout installed
    under two distribution names (the old `workbench` and `kernel-workbench`) lists each twice."""
    seen: dict[str, importlib.metadata.EntryPoint] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        seen.setdefault(ep.name, ep)
    return list(seen.values())


def discover(paths: Iterable[str | Path] = (), *, entry_points: bool = True,
             registry: Registry | None = None) -> Registry:
    """Load ops through the one door: the `workbench.ops` entry points, then `paths`.

    paths: op files (`my_ops.py`) or folders (every `*.py` not starting with `_`, or a
    package with `__init__.py`). Importing a module registers its ops. Loading the same
    source twice is a no-op. Raises WorkbenchError naming a path that does not exist or a
    plugin that fails to import (with the error).
    """
    registry = registry or REGISTRY
    if entry_points:
        for ep in op_entry_points():
            _load_once(registry, f"entry point {ep.name}", ep.load)
    for path in paths:
        for file in plugin_files(Path(path)):
            _load_once(registry, str(file), lambda f=file: _import_file(f))
    return registry


def _load_once(registry: Registry, key: str, load: Callable[[], Any]) -> None:
    if key in registry.loaded_sources:
        return
    before = snapshot(registry)
    try:
        load()
    except Exception as exc:  # a plugin's own bug (or a WorkbenchError it met): name it, where, the message
        from workbench.error_location import describe_error

        raise WorkbenchError(f"plugin {key} failed to load: {describe_error(exc)}") from exc
    registry.registered[key] = registered_since(registry, before)
    registry.loaded_sources.append(key)


def plugin_module_name(file: Path) -> str:
    """The module name an op file is imported under (unique per path; a package's submodules
    are `NAME.sub`)."""
    digest = hashlib.sha256(str(file).encode()).hexdigest()[:10]
    is_pkg = file.name == "__init__.py"
    return f"workbench_plugin_{(file.parent.name if is_pkg else file.stem)}_{digest}"


def _import_file(file: Path) -> None:
    is_pkg = file.name == "__init__.py"
    mod_name = plugin_module_name(file)
    if mod_name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(
        mod_name, file, submodule_search_locations=[str(file.parent)] if is_pkg else None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[mod_name]
        raise
