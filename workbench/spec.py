"""The base class of every op's spec: a frozen dataclass of named dims plus `dtype`.

An op declares e.g.::

    @dataclass(frozen=True)
    class GeluSpec(Spec):
        M: int = 16384
        N: int = 16384
        dtype: DType = DType.float32

Every field but `dtype` is a size parameter ("shape" in a session file). Fields are validated
on construction: positive integers unless the op's `check()` says otherwise.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Mapping

from workbench.dtypes import DType
from workbench.errors import SpecError, UnknownNameError


MAX_DIM = 2 ** 63 - 1  # a torch size is an int64: no shape field can be larger


def too_large(value: int) -> str | None:
    """Why a size field cannot be `value` (past what a torch size, an int64, holds), or None."""
    return f"must be at most 2^63-1 = {MAX_DIM} (torch sizes are int64), got {value!r}" if value > MAX_DIM else None


@dataclasses.dataclass(frozen=True)
class Spec:
    """Base spec. Subclasses add int shape fields (with defaults) and `dtype: DType`."""

    # Size fields that may be zero (e.g. sleep_ms); all others must be >= 1.
    NON_NEGATIVE: ClassVar[frozenset[str]] = frozenset()

    def __post_init__(self) -> None:
        dtype = getattr(self, "dtype", None)
        if dtype is not None and not isinstance(dtype, DType):
            object.__setattr__(self, "dtype", DType.parse(dtype))
        for name in self.shape_fields():
            value = getattr(self, name)
            low = 0 if name in self.NON_NEGATIVE else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                rule = "a non-negative integer" if low == 0 else "a positive integer"
                raise SpecError(f"{name}: must be {rule}, got {value!r}")
            problem = too_large(value)
            if problem:
                raise SpecError(f"{name}: {problem}")
        self.check()

    def check(self) -> None:
        """Op-specific rules; raise SpecError naming the field, value and rule."""

    @classmethod
    def shape_fields(cls) -> tuple[str, ...]:
        """The size parameters in declaration order (every field but dtype)."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.name != "dtype")

    @property
    def shape(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.shape_fields()}

    @property
    def label(self) -> str:
        """Short label such as `16384x16384 float32`."""
        dims = "x".join(str(v) for v in self.shape.values())
        return f"{dims} {self.dtype.value}" if hasattr(self, "dtype") else dims

    @classmethod
    def from_dict(cls, shape: Mapping[str, Any] | None = None, dtype: object = None) -> "Spec":
        """Build a spec from a session's `shape` mapping and `dtype`, defaults for what is missing.

        Raises UnknownNameError for a field the op does not have, SpecError for a bad value.
        """
        shape = dict(shape or {})
        allowed = cls.shape_fields()
        for key in shape:
            if key not in allowed:
                raise UnknownNameError("shape field", key, allowed)
        if dtype is not None:
            shape["dtype"] = DType.parse(dtype)
        return cls(**shape)

    def replace(self, **changes: Any) -> "Spec":
        return dataclasses.replace(self, **changes)


MAX_TENSOR_BYTES = 2 ** 63 - 1  # torch indexes storage with int64 byte offsets


def addressable_problem(spec: Spec, footprint_bytes: int) -> str | None:
    """Why a spec whose call keeps `footprint_bytes` resident cannot run at all (its tensors
    would not be addressable: torch sizes and byte offsets are int64), or None."""
    if footprint_bytes <= MAX_TENSOR_BYTES:
        return None
    return (f"{spec.label} needs {footprint_bytes:.3g} bytes; at most 2^63-1 bytes "
            f"({MAX_TENSOR_BYTES / 1e18:.1f} EB) can be addressed (torch sizes are int64)")

