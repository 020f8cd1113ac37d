"""How `@op.impl(...)` options become Impl fields: the `kind[_variant]` name rule, the legacy
source fields of the first plugin API, and each backend's check of its `source`
(workbench/backends). Split from workbench/registry.py, which re-exports these names."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any, Mapping

from workbench.backends import backend, kinds
from workbench.backends.base import needs_of
from workbench.dtypes import DType
from workbench.errors import WorkbenchError
from workbench.kernel_source import TritonSource


def parse_impl_name(name: str) -> str:
    """Validate a `kind[_variant]` name and return its kind (a registered backend's, see
    workbench.backends). Raises WorkbenchError naming the value and the allowed kinds."""
    kind, _, variant = str(name).partition("_")
    ok_variant = not _ or (variant and all(c.isalnum() or c == "_" for c in variant))
    if kind not in kinds() or not ok_variant or name != name.lower():
        raise WorkbenchError(
            f"implementation name {name!r} must be kind or kind_variant (lower case), "
            f"kind one of: {', '.join(kinds())}")
    return kind


# Impl fields of the first API, still accepted from plugins: each maps onto `source=`.
LEGACY_SOURCE_FIELDS = ("triton_launch", "interpreter_dtypes", "cuda_source")


def impl_fields(where: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Op.impl's options as validated Impl fields: needs (the backend's plus the declared ones),
    dtypes, params, and `source` checked against the backend (built from the legacy
    triton_launch / interpreter_dtypes / cuda_source fields where a plugin still uses them).
    Raises WorkbenchError or UnknownNameError naming the bad value."""
    fields = {k: v for k, v in options.items() if k not in LEGACY_SOURCE_FIELDS}
    owner = backend(parse_impl_name(where.rpartition("/")[2]))
    legacy = {k: options[k] for k in LEGACY_SOURCE_FIELDS if options.get(k) is not None}
    if legacy:
        if fields.get("source") is not None:
            raise WorkbenchError(f"{where}: give source= only (not also {', '.join(legacy)})")
        fields["source"] = legacy.get("cuda_source") or TritonSource(
            legacy.get("triton_launch"), legacy.get("interpreter_dtypes"))
    source = fields.get("source")
    if isinstance(source, TritonSource) and source.interpreter_dtypes is not None:
        source = dataclasses.replace(source, interpreter_dtypes=tuple(DType.parse(d) for d in source.interpreter_dtypes))
        fields["source"] = source
    owner.check_source(where, source)
    fields["needs"] = owner.needs | needs_of(fields.get("needs", ()))
    if fields.get("dtypes") is not None:
        fields["dtypes"] = tuple(DType.parse(d) for d in fields["dtypes"])
    fields["params"] = MappingProxyType(dict(fields.get("params", {})))
    return fields
