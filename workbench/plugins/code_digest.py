"""What a piece of plugin code computes, as a hash: watch mode re-runs a row only when it moved.

    code_digest([impl.builder, op.spec, reference])   # -> sha256 hex

The digest covers each function's bytecode, constants and names, then follows what it refers
to, transitively: module globals that are functions, classes or Triton kernels defined in the
user's files (a plugin, a shipped op file; workbench.error_location.is_user_file), the
functions and values its closure captured, and plain constants (numbers, strings, tuples and
dicts of them) such as `EPS` or `MAX_BLOCK_SIZE`. So an edit of a Triton kernel changes the
digest of the implementation that launches it and of nothing else in the file, and a comment
or a blank line changes nothing (line numbers are left out). Triton's own JIT cache keys its
kernels by a similar walk of their source and globals.

Objects it cannot see into (a torch module, a registry) are left out: a plugin that keeps state
in them is re-run only when a file it is in changes (watching.fingerprints also hashes the
kernel source files an implementation declares). Torch-free.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import sys
import types
from typing import Any, Iterable

from workbench.error_location import is_user_file

SIMPLE = (int, float, complex, str, bytes, bool, type(None))


def code_digest(objects: Iterable[Any]) -> str:
    """sha256 hex over what `objects` compute (see the module docstring)."""
    h = hashlib.sha256()
    seen: set[int] = set()
    for obj in objects:
        _walk(obj, h, seen)
    return h.hexdigest()


def _unwrap(obj: Any) -> Any:
    """A Triton JITFunction / Autotuner / Heuristics to the Python function under it; a bound
    method to its function; functools.wraps chains to the wrapped function."""
    for _ in range(8):
        if isinstance(obj, types.MethodType):
            obj = obj.__func__
        elif not isinstance(obj, (types.FunctionType, type)) and hasattr(obj, "fn"):
            obj = obj.fn
        elif getattr(obj, "__wrapped__", None) is not None:
            obj = obj.__wrapped__
        else:
            break
    return obj


def _walk(obj: Any, h: Any, seen: set[int]) -> None:
    h.update(_tuning(obj))
    if isinstance(obj, functools.partial):
        _walk(obj.func, h, seen)
        h.update(_text(obj.args) + _text(obj.keywords))
        return
    obj = _unwrap(obj)
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, types.FunctionType):
        _function(obj, h, seen)
    elif isinstance(obj, type):
        _class(obj, h, seen)
    else:
        h.update(_text(obj))


def _tuning(obj: Any) -> bytes:
    """An autotuner's configs and keys (they decide what compiles), as text."""
    configs, key = getattr(obj, "configs", None), getattr(obj, "keys", None) or getattr(obj, "key", None)
    return f"{configs}|{key}".encode() if configs is not None else b""


def _function(fn: types.FunctionType, h: Any, seen: set[int]) -> None:
    h.update(fn.__qualname__.encode())
    _code(fn.__code__, h)
    h.update(_text(fn.__defaults__) + _text(fn.__kwdefaults__))
    for name in sorted(_names(fn.__code__)):
        if name in fn.__globals__:
            _reference(name, fn.__globals__[name], h, seen)
    for cell in fn.__closure__ or ():
        try:
            _reference("<cell>", cell.cell_contents, h, seen)
        except ValueError:  # an empty cell
            continue


def _class(cls: type, h: Any, seen: set[int]) -> None:
    h.update(cls.__qualname__.encode())
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            h.update(f"{f.name}:{f.type}=".encode() + _text(f.default))
    for name, value in sorted(vars(cls).items()):
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, (types.FunctionType, property)):
            for fn in (value.fget, value.fset) if isinstance(value, property) else (value,):
                if fn is not None:
                    _walk(fn, h, seen)
        elif isinstance(value, SIMPLE + (tuple, frozenset)):
            h.update(f"{name}=".encode() + _text(value))


def _code(code: types.CodeType, h: Any) -> None:
    """Bytecode, names and constants; not line numbers (a comment moves nothing)."""
    h.update(code.co_code + repr((code.co_names, code.co_varnames, code.co_freevars)).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _code(const, h)
        else:
            h.update(_text(const))


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _reference(name: str, value: Any, h: Any, seen: set[int]) -> None:
    if isinstance(value, types.ModuleType):
        return
    try:
        h.update(f"{name}={_plain(value)!r}".encode())
    except _Opaque:
        if _is_user_code(value):
            _walk(value, h, seen)


def _is_user_code(value: Any) -> bool:
    target = _unwrap(value.func if isinstance(value, functools.partial) else value)
    if not isinstance(target, (types.FunctionType, type)):
        return False
    module = sys.modules.get(getattr(target, "__module__", "") or "")
    return is_user_file(getattr(module, "__file__", None) or "")


class _Opaque(Exception):
    """A value whose repr may hold an address (an object, a tensor): not part of a digest."""


def _plain(value: Any, depth: int = 0) -> Any:
    """A stable, comparable form of a plain value (numbers, strings, enums, containers of them);
    raises _Opaque for anything else."""
    if isinstance(value, SIMPLE):
        return value
    if isinstance(value, enum.Enum):
        return ("enum", type(value).__qualname__, repr(value.value))
    if depth > 4:
        raise _Opaque
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_plain(v, depth + 1) for v in value))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted(repr(_plain(v, depth + 1)) for v in value)))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((repr(_plain(k, depth + 1)), repr(_plain(v, depth + 1)))
                                     for k, v in value.items())))
    raise _Opaque


def _text(value: Any) -> bytes:
    """repr of the plain form, or a marker for an opaque value."""
    try:
        return repr(_plain(value)).encode()
    except _Opaque:
        return f"<{type(value).__qualname__}>".encode()


# -- what an implementation's result depends on ----------------------------------------------
CALLABLE_FIELDS = ("builder", "moved_bytes", "source")  # digested, not repr'd


def impl_digest(op: Any, impl: Any) -> str:
    """The code digest of one implementation of `op` (what `code_objects` lists)."""
    return code_digest(code_objects(op, impl))


def code_objects(op: Any, impl: Any) -> list[Any]:
    """What an implementation's result depends on: its builder (and what it calls), its traffic
    model, its kernel source declaration (a TritonSource's launch, a CudaSource's launch and
    kernel names; the `.cu` file's bytes are hashed beside), its other declared fields (math,
    params, dtypes, tolerance), and its op's spec class, input factories, reference of its math
    variant, cost model, footprint and check terms."""
    declared = sorted(f"{f.name}={getattr(impl, f.name)!r}" for f in dataclasses.fields(impl)
                      if f.name not in CALLABLE_FIELDS)
    references = getattr(op, "_references", {})
    op_parts = [getattr(op, name, None) for name in ("_inputs", "_special", "_cost", "_footprint", "_out_dtype",
                                                     "reduction_length", "sum_length", "check_chunks")]
    objects = [impl.builder, getattr(impl, "moved_bytes", None), *_source_parts(getattr(impl, "source", None)),
               declared, op.spec, references.get(impl.math), *op_parts]
    return [obj for obj in objects if obj is not None]


def _source_parts(source: Any) -> list[Any]:
    """A source declaration's callables (digested) and plain fields (as text); not its path
    (the file's bytes are hashed instead: the path of a copy moves, its code does not)."""
    if source is None or not dataclasses.is_dataclass(source):
        return [] if source is None else [repr(type(source))]
    parts: list[Any] = [type(source).__qualname__]
    for f in dataclasses.fields(source):
        value = getattr(source, f.name)
        if callable(value):
            parts.append(value)
        elif f.name != "path":
            parts.append(f"{f.name}={value!r}")
    return parts
