"""How an op's float64 reference may be computed in pieces (issue 14: a check that fits in memory).

An op declares `check_chunks=` (workbench.registry.Op):
- `CheckChunks.flat(0, 1)`: elementwise; the output and the listed inputs (same shape) are
  flattened, and the reference of output elements [a, b) is the reference of those inputs'
  elements [a, b) (add, gelu: a single row of 2^31 elements still chunks);
- `CheckChunks.rows(0)`: the reference of output rows [r0, r1) is the reference of the listed
  inputs' rows [r0, r1) with every other input whole (softmax: x; matmul: rows of A with all of B;
  cdist: rows of x with all of y);
- None (the default): the reference is computed whole (the MLP: every output depends on all of it).

`check_workspace_bytes` is what the check holds on the device at its peak, for the size estimate
(engine/estimate.py); torch-free, like this whole module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

KINDS = ("flat", "rows")
# Output elements per reference chunk: 2^24 float64 values are 128 MiB, so a chunk's workspace
# stays near 1 GiB (workbench.check.row uses it).
CHUNK_ELEMENTS = 2 ** 24
# float64 tensors of one output chunk's size alive at once while it is compared (the reference
# chunk, the output upcast and turned into |out - ref|, |ref|, one scratch), plus four bool masks.
COMPARE_BYTES_PER_ELEMENT = 4 * 8 + 4
# float64 temporaries of an output chunk's size a reference holds at its peak (GeLU's tanh form:
# 0.5x, the x^3 chain, tanh, 1 + ...), unless the op declares its own (`reference_bytes`).
REFERENCE_TEMPS = 4
# Input fingerprints (workbench.check.inputs) work through blocks of this many elements: an int64 copy,
# its weighted product and the weights.
FINGERPRINT_BLOCK = 2 ** 22
FINGERPRINT_BYTES_PER_ELEMENT = 3 * 8


@dataclass(frozen=True)
class CheckChunks:
    """kind: "flat" | "rows"; inputs: indices of the inputs sliced with the output;
    reference_bytes: (spec, output elements of one chunk) -> bytes the reference's own
    temporaries take for one chunk (default REFERENCE_TEMPS float64 values per element)."""

    kind: str
    inputs: tuple[int, ...]
    reference_bytes: Callable[[Any, int], int] | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"check chunk kind {self.kind!r}: allowed {', '.join(KINDS)}")
        if not self.inputs:
            raise ValueError("CheckChunks needs at least one input index to slice")

    @classmethod
    def flat(cls, *inputs: int, reference_bytes=None) -> "CheckChunks":
        return cls("flat", tuple(inputs), reference_bytes)

    @classmethod
    def rows(cls, *inputs: int, reference_bytes=None) -> "CheckChunks":
        return cls("rows", tuple(inputs), reference_bytes)

    def chunk_items(self, length: int, item_elements: int, chunk_elements: int = CHUNK_ELEMENTS) -> int:
        """Items (elements for flat, rows for rows) per chunk of an output with `length` items of
        `item_elements` output elements each."""
        per_item = 1 if self.kind == "flat" else max(1, item_elements)
        return max(1, min(length, chunk_elements // per_item))


def check_workspace_bytes(chunks: CheckChunks | None, spec: Any, input_shapes: Sequence[Sequence[int]],
                          out_elements: int, whole_reference_bytes: int) -> int:
    """Device bytes the check holds at its peak besides the inputs and the output: float64
    copies of the unsliced inputs, one chunk of the sliced ones, the reference's temporaries and
    the comparison's for one chunk, and the fingerprint blocks. chunks None: the reference is
    whole (`whole_reference_bytes`, e.g. the MLP's float64 forward and backward) plus a
    comparison of the whole output. Shapes are the op's inputs'; out_elements the output's."""
    numels = [_numel(s) for s in input_shapes]
    fingerprint = FINGERPRINT_BYTES_PER_ELEMENT * min(FINGERPRINT_BLOCK, max(numels, default=0))
    if chunks is None:
        return whole_reference_bytes + COMPARE_BYTES_PER_ELEMENT * out_elements + fingerprint
    sliced = [i for i in chunks.inputs if i < len(numels)]
    length = numels[sliced[0]] if chunks.kind == "flat" else (input_shapes[sliced[0]] or [1])[0]
    item_out = 1 if chunks.kind == "flat" else max(1, out_elements // max(1, length))
    items = chunks.chunk_items(length, item_out)
    chunk_out = items * item_out
    fraction = items / max(1, length)
    sliced_f64 = sum(int(8 * numels[i] * fraction) for i in sliced)
    whole_f64 = sum(8 * n for i, n in enumerate(numels) if i not in sliced)
    reference = (chunks.reference_bytes(spec, chunk_out) if chunks.reference_bytes
                 else REFERENCE_TEMPS * 8 * chunk_out)
    return whole_f64 + sliced_f64 + reference + COMPARE_BYTES_PER_ELEMENT * chunk_out + fingerprint


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for size in shape:
        n *= int(size)
    return n
