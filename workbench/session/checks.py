"""A session against the registry: op, implementation, parameter, shape, dtype and sweep names.

`check_runs(session, registry, problems)` records every problem with its path, never raising;
structure (keys, types, ranges) was checked before by `workbench.session.schema`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping

from workbench.dtypes import DType
from workbench.errors import WorkbenchError
from workbench.params import param_problem
from workbench.registry import Impl, Op, Registry
from workbench.session.compare import check_compare
from workbench.session.model import RunSpec
from workbench.session.settings import suggest
from workbench.session.yaml_io import Problems, child_path, show
from workbench.variants import base_name


def check_runs(runs: Iterable[tuple[int, RunSpec, frozenset[str]]], registry: Registry,
               problems: Problems, plugin_failed: bool = False) -> None:
    """Check (index in the file, run, keys that already had problems) triples; problems are
    recorded under `runs[index]`. Checks that depend on a key with problems are skipped.
    plugin_failed: a session plugin did not load, so an unknown implementation may be its."""
    for index, run, bad in runs:
        check_run(run, f"runs[{index}]", registry, problems, bad, plugin_failed)


def check_run(run: RunSpec, path: str, registry: Registry, problems: Problems,
              bad: frozenset[str] = frozenset(), plugin_failed: bool = False) -> None:
    if run.op not in registry:
        ops = sorted(registry.ops)
        problems.add(child_path(path, "op"), f"unknown op {show(run.op)}{suggest(run.op, ops)}; "
                                             f"allowed: {', '.join(ops) or '(none registered)'}")
        return
    op = registry.op(run.op)
    if not _check_op_complete(op, child_path(path, "op"), problems):
        return
    impls = _check_impls(run, op, path, problems, plugin_failed)
    impls = None if "impls" in bad else impls
    dtype_ok = _check_dtype(run, op, path, problems) and "dtype" not in bad
    if "shape" in bad:  # the file's shape was not a mapping: say which fields this op has
        _name_shape_fields(op, child_path(path, "shape"), problems)
    shape_ok = _check_shape(run.shape, op, child_path(path, "shape"), problems) and "shape" not in bad
    if "sweep" in bad:  # its own problem is said; which fields it would set is not known: no guess
        shape_ok = shape_ok and all(f in run.shape for f in op.spec.shape_fields())
    else:
        shape_ok = shape_ok and _check_shape_complete(run, op, child_path(path, "shape"), problems)
    if shape_ok and dtype_ok:
        _check_spec(op, run.shape, run.dtype, child_path(path, "shape"), problems)
    if run.sweep is not None and impls is not None:
        _check_sweep(run, op, impls, path, problems, dtype_ok and shape_ok)
    if "impls" not in bad:
        check_compare(run, op, path, problems)


def _check_op_complete(op: Op, path: str, problems: Problems) -> bool:
    """An op the run could not use: no input factory or no cost model registered (a plugin's)."""
    declared = {"inputs": op.has_inputs, "cost_model": op.has_cost}  # what making inputs / the roofline need
    missing = [f"@{op.name.upper()}.{name}" for name, present in declared.items() if not present]
    if missing:
        problems.add(path, f"op {op.name!r} registers no {' and no '.join(missing)}; every op needs its "
                           "input factory and cost model (docs/PLUGINS.md)")
    return not missing


def _check_math(op: Op, impl: Impl, where: str, problems: Problems) -> None:
    """The reference an implementation is checked against (its `math=` variant) must exist:
    the run would refuse the row ("unknown reference of gelu 'default'")."""
    problem = math_problem(op, impl)
    if problem:
        problems.add(where, problem)


def math_problem(op: Op, impl: Impl) -> str | None:
    """Why `impl` cannot be checked: `op` has no reference of its `math=` variant; None when it has
    (also `--list`'s reason for check and bench: cli/doctor.inventory)."""
    if impl.math in op.references:
        return None
    given = f"math={impl.math!r}" if impl.math != "default" else "no math= (so 'default')"
    choices = " or ".join(f"math={m!r}" for m in op.references) or "a @" + op.name.upper() + ".reference()"
    return (f"{op.name}/{impl.name} declares {given}, but {op.name} has no reference of that "
            f"variant (references: {', '.join(op.references) or 'none'}); declare {choices} in its @impl")


def _check_impls(run: RunSpec, op: Op, path: str, problems: Problems, plugin_failed: bool = False) -> list[Impl] | None:
    """The selected implementations, or None when a name is unknown."""
    if run.impls is None:
        for impl in op.impls.values():
            _check_math(op, impl, child_path(path, "impls"), problems)
        return list(op.impls.values())
    found: list[Impl] = []
    allowed = list(op.impls)
    for index, ref in enumerate(run.impls):
        where = child_path(child_path(path, "impls"), index)
        if base_name(ref.name) not in op.impls:
            name_path = child_path(where, "name") if (ref.params or ref.label) else where
            maybe = "; a plugin of this session did not load (above) and may be what registers it" \
                if plugin_failed else ""
            problems.add(name_path, f"unknown implementation of {op.name} {show(ref.name)}"
                                    f"{suggest(ref.name, allowed)}; allowed: {', '.join(allowed) or '(none)'}{maybe}")
            continue
        impl = op.impls[base_name(ref.name)]
        found.append(impl)
        _check_math(op, impl, where, problems)
        for key, value in ref.params.items():
            where_param = child_path(child_path(where, "params"), key)
            if key not in impl.params:
                known = list(impl.params)
                problems.add(where_param, f"unknown parameter of {op.name}/{impl.name}{suggest(key, known)}; "
                                          f"allowed: {', '.join(known) or '(it takes none)'}")
            else:
                error = param_problem(key, value, impl.params[key])
                if error:
                    problems.add(where_param, error)
    return found if len(found) == len(run.impls) else None


def _check_dtype(run: RunSpec, op: Op, path: str, problems: Problems) -> bool:
    if run.dtype is None:
        return True
    allowed = [d.value for d in op.dtypes]
    if DType.parse(run.dtype) not in op.dtypes:
        problems.add(child_path(path, "dtype"), f"{op.name} does not take dtype {show(run.dtype)}; "
                                                f"allowed: {', '.join(allowed)}")
        return False
    return True


def _check_shape(shape: Mapping[str, Any], op: Op, path: str, problems: Problems) -> bool:
    fields = op.spec.shape_fields()
    ok = True
    for key, value in shape.items():
        if key not in fields:
            problems.add(child_path(path, key), f"unknown shape field of {op.name}{suggest(key, fields)}; "
                                                f"allowed: {', '.join(fields)}")
            ok = False
        else:
            error = size_problem(op, key, value)
            if error:
                problems.add(child_path(path, key), error)
                ok = False
    return ok


def _name_shape_fields(op: Op, path: str, problems: Problems) -> None:
    """`runs[0].shape: must be a mapping of size parameters (e.g. {M: 1024, N: 1024}), got [64, 64]`
    gets this op's own fields: `; gelu's are {M, N}`."""
    fields = op.spec.shape_fields()
    for index, problem in enumerate(problems.items):
        if problem.path == path and problem.message.startswith("must be a mapping"):
            problems.items[index] = dataclasses.replace(
                problem, message=f"{problem.message}; {op.name}'s shape is {{{', '.join(fields)}}}")


def _check_shape_complete(run: RunSpec, op: Op, path: str, problems: Problems) -> bool:
    """A shape that names some of the op's fields names all of them (those the sweep sets
    aside): `{M: 64}` for gelu ran at 64x16384, N taken silently from the op's default."""
    swept = set(run.sweep.params) if run.sweep is not None else set()
    fields = op.spec.shape_fields()
    missing = [f for f in fields if f not in run.shape and f not in swept]
    if not run.shape or not missing:
        return True
    default = op.make_spec({}, None).shape
    problems.add(path, f"gives {', '.join(k for k in fields if k in run.shape)} but not {', '.join(missing)}; "
                       f"{op.name}'s shape is {{{', '.join(fields)}}}: give every field, or leave shape out "
                       f"for the default {{{', '.join(f'{k}: {v}' for k, v in default.items())}}}")
    return False


def size_problem(op: Op, field: str, value: Any) -> str | None:
    """Why `value` cannot be the size field `field` of `op`, or None."""
    from workbench.spec import too_large

    low = 0 if field in op.spec.NON_NEGATIVE else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        rule = "a non-negative integer" if low == 0 else "a positive integer"
        return f"must be {rule}, got {show(value)}"
    return too_large(value)  # here too, so that the path names the field (`runs[0].shape.M`)


def _check_spec(op: Op, shape: Mapping[str, Any], dtype: str | None, path: str, problems: Problems) -> bool:
    """The op's own rules (Spec.check): the message names the field and the rule."""
    try:
        op.make_spec(shape, dtype)
    except WorkbenchError as exc:
        problems.add(path, str(exc))
        return False
    return True


def _check_sweep(run: RunSpec, op: Op, impls: list[Impl], path: str, problems: Problems,
                 spec_ok: bool) -> None:
    sweep_path = child_path(path, "sweep")
    fields = op.spec.shape_fields()
    shape_params = [p for p in run.sweep.params if p in fields]
    impl_params = [p for p in run.sweep.params if p not in fields]
    for index, param in enumerate(run.sweep.params):
        if param in fields:
            continue
        having = [impl.name for impl in impls if param in impl.params]
        where = f"{sweep_path}.params[{index}]"
        if not having:
            known = sorted({k for impl in impls for k in impl.params})
            problems.add(where, f"{show(param)} is neither a shape field of {op.name} ({', '.join(fields)}) "
                                f"nor a parameter of its implementations{suggest(param, [*fields, *known])}")
        elif len(having) < len(impls):
            problems.add(where, f"{show(param)} is a parameter of {', '.join(having)} only; "
                                "list only implementations that have it in `impls` to sweep it")
    for index, value in enumerate(run.sweep.values):
        where = f"{sweep_path}.values[{index}]"
        errors = [size_problem(op, p, value) for p in shape_params]
        errors += [param_problem(p, value, impls[0].params[p]) for p in impl_params
                   if impls and p in impls[0].params]
        errors = [e for e in errors if e]
        if errors:
            problems.add(where, errors[0])
        elif shape_params and spec_ok:
            shape = {**run.shape, **{p: value for p in shape_params}}
            _check_spec(op, shape, run.dtype, where, problems)
