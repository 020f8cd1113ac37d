"""The timed call of a row: input sets rotated, one unpredictable output per batch kept (rule 13).

A kernel may be right when checked and idle, cached or partial when timed (issue 38). So the
call the timers time is a `Rotation`: sample i runs on input set i mod len(sets) (separate
buffers: a result cached by pointer or by a sample of the bytes is stale on the next sample), and
of each batch one sample's output PER INPUT SET is kept, chosen by the operating system's random source
(`random.SystemRandom`: no state in this process for the kernel to read). The kept outputs are
checked after the run (workbench.check.row.RowCheck.timed_calls), after a later call, so an output
that shares a buffer with a later one is seen overwritten.

Nudges: before each sample, one element of one input of the sample's set is overwritten with a
copy of another element of the same tensor (the set's previous nudge undone first; a copy keeps
the values in their distribution); a kept output records the nudge it was computed under, and the
check re-applies it for that output's reference. A cache keyed by pointer and version, or by a
sample of the bytes that misses the nudged element, returns a stale result there, even a fresh
copy of it. `restore()` undoes the nudges after the run (the inputs gate compares fingerprints).
A nudge must change the element by more than the check's tolerance, or the stale result passes:
copying a random element did not (a byte-sample cache of quantize to float8_e4m3fn, rtol one
fp8 step, passed 1 run in 6). So the nudges are drawn before timing, NUDGE_POOL per input set
(one device read per input), each copying, of NUDGE_SOURCES random elements, the one whose value
differs most from the element it replaces; each sample's nudge is one of them at random.

The timers call the hooks OUTSIDE the timed window (engine/timing.py): `start_batch(n)` before a
batch, `before_sample()` before the flush/spin/start event (it selects the input set and nudges it:
two one-element device copies, queued before the flush),
`after_sample(out)` after the end event. Inside the window only `fn(*current)` runs.

Memory: the kept outputs are bounded by KEEP_MAX outputs and KEEP_MAX_BYTES (at least
KEEP_MIN outputs whatever their size); once full, a new batch's pick replaces a kept one at
random with probability KEEP_MAX / batches (reservoir sampling: every batch is equally likely
to be among those checked). Typical runs have fewer batches than KEEP_MAX (batches double), so
each batch is checked.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, Sequence

KEEP_MAX = 8                 # outputs held for the check after timing
KEEP_MAX_BYTES = 1 << 30     # and at most this many bytes of them ...
KEEP_MIN = 2                 # ... but never fewer than two (aliasing between kept outputs)


@dataclass
class Kept:
    """One kept output: the batch (1-based) and sample within it, the input set index, the output."""

    batch: int
    sample: int
    set_index: int
    out: Any
    nudge: tuple[int, int, int] | None = None  # (input, flat position, source position) at the call


def _flat(t: Any) -> Any:
    """The flat view of a nudgeable input (a contiguous floating tensor with elements), else None."""
    try:
        if t.is_floating_point() and t.numel() > 1 and t.is_contiguous():
            return t.view(-1)
    except AttributeError:
        pass
    return None


def apply_nudge(inputs: tuple, nudge: tuple[int, int, int]) -> Any:
    """Copy element `source` of input `index` over element `pos` (flat); returns the original
    element (a 0-d tensor) for `undo_nudge`."""
    index, pos, source = nudge
    flat = inputs[index].view(-1)
    original = flat[pos].clone()
    flat[pos].copy_(flat[source])
    return original


def undo_nudge(inputs: tuple, nudge: tuple[int, int, int], original: Any) -> None:
    inputs[nudge[0]].view(-1)[nudge[1]].copy_(original)


NUDGE_POOL = 32     # nudges drawn per input set before timing
NUDGE_SOURCES = 8   # candidate elements per nudge: the one whose value differs most is copied


def nudge_pool(inputs: tuple, rng: Any, size: int = NUDGE_POOL, sources: int = NUDGE_SOURCES) -> list[tuple[int, int, int]]:
    """`size` nudges (input, flat position, source position) for the set `inputs`: position and
    candidate sources drawn with `rng`, the source kept the candidate whose value is farthest
    from the position's (NaN: last). One read of the drawn elements per input (their bytes:
    every dtype, float8 included). [] when no input can be nudged (`_flat`)."""
    import torch

    candidates = [i for i, t in enumerate(inputs) if _flat(t) is not None]
    if not candidates:
        return []
    draws: dict[int, list[tuple[int, list[int]]]] = {}
    for _ in range(size):
        which = rng.choice(candidates)
        n = inputs[which].numel()
        draws.setdefault(which, []).append((rng.randrange(n), [rng.randrange(n) for _ in range(sources)]))
    pool = []
    for which, drawn in draws.items():
        flat = _flat(inputs[which])
        width = flat.element_size()
        elements = torch.tensor([e for pos, srcs in drawn for e in (pos, *srcs)], dtype=torch.int64)
        index = (elements[:, None] * width + torch.arange(width)).reshape(-1).to(flat.device)
        values = flat.view(torch.uint8).index_select(0, index).cpu().view(flat.dtype).double().tolist()
        for j, (pos, srcs) in enumerate(drawn):
            own, *others = values[j * (1 + sources):(j + 1) * (1 + sources)]
            gaps = [abs(own - v) if abs(own - v) == abs(own - v) else -1.0 for v in others]
            pool.append((which, pos, srcs[gaps.index(max(gaps))]))
    return pool


def _nbytes(out: Any) -> int:
    try:
        return int(out.numel()) * int(out.element_size())
    except Exception:  # not a tensor: the check's form gate fails it
        return 0


class Rotation:
    """The timed callable over `sets` (tuples of inputs); see the module docstring."""

    def __init__(self, fn: Callable[..., Any], sets: Sequence[tuple], rng: Any = None,
                 keep_max: int = KEEP_MAX, keep_bytes: int = KEEP_MAX_BYTES, nudges: bool = True):
        if not sets:
            raise ValueError("Rotation: at least one input set is needed, got none")
        self.fn, self.sets = fn, list(sets)
        self.rng = rng if rng is not None else random.SystemRandom()
        self.keep_max, self.keep_bytes = keep_max, keep_bytes
        self.current = self.sets[0]
        self.kept: list[Kept] = []
        self.samples = 0       # samples timed so far
        self.batches = 0       # batches started
        self._picks: set[int] = set()  # the kept samples of this batch (one per input set)
        self._in_batch = 0
        self._set = 0
        self.nudges = nudges
        self.replayed = False  # a CUDA graph's replay (row_rotation): kept outputs share its one output
        self._nudged: dict[int, tuple[tuple[int, int, int], Any]] = {}  # set -> (nudge, original)
        self._pools = [nudge_pool(inputs, self.rng) if nudges else [] for inputs in self.sets]

    def __call__(self) -> Any:
        return self.fn(*self.current)

    # -- hooks (outside the timed window) ---------------------------------------------------------
    def start_batch(self, n: int) -> None:
        """A batch of n samples: of the samples on each input set, one chosen to be kept."""
        self.batches += 1
        by_set: dict[int, list[int]] = {}
        for i in range(max(1, n)):
            by_set.setdefault((self.samples + i) % len(self.sets), []).append(i)
        self._picks = {self.rng.choice(samples) for samples in by_set.values()}
        self._in_batch = 0

    def before_sample(self) -> None:
        self._set = self.samples % len(self.sets)
        self.current = self.sets[self._set]
        if self.nudges:
            self._nudge(self._set)

    def after_sample(self, out: Any) -> None:
        if self._in_batch in self._picks:
            nudge = self._nudged.get(self._set)
            self._keep(Kept(self.batches, self._in_batch, self._set, out, nudge[0] if nudge else None))
        self._in_batch += 1
        self.samples += 1
        self.current = self.sets[0]  # untimed calls (graph replay, profile) stay on set "first"

    def _keep(self, kept: Kept) -> None:
        held = sum(_nbytes(k.out) for k in self.kept)
        room = len(self.kept) < KEEP_MIN or (len(self.kept) < self.keep_max
                                             and held + _nbytes(kept.out) <= self.keep_bytes)
        if room:
            self.kept.append(kept)
        elif self.rng.random() < len(self.kept) / self.batches:
            self.kept[self.rng.randrange(len(self.kept))] = kept

    def _nudge(self, index: int) -> None:
        """One element of one input of set `index` replaced by a copy of another of its elements
        (the previous nudge of that set undone first): a result cached by pointer and version,
        or by a sample of the bytes that misses the element, is then stale."""
        inputs = self.sets[index]
        if index in self._nudged:
            undo_nudge(inputs, *self._nudged.pop(index))
        if not self._pools[index]:
            return
        nudge = self.rng.choice(self._pools[index])
        self._nudged[index] = (nudge, apply_nudge(inputs, nudge))

    def restore(self) -> None:
        """Every set's inputs back to their seeded values (after the run, before the check)."""
        for index, (nudge, original) in list(self._nudged.items()):
            undo_nudge(self.sets[index], nudge, original)
        self._nudged = {}

    def release(self) -> None:
        """Drop the kept outputs and the extra input sets (after their check)."""
        self.kept = []
        self.sets = self.sets[:1]
        self.current = self.sets[0]


def row_rotation(fn: Callable[..., Any], check: Any) -> Rotation:
    """The timed call of a row whose check is `check` (workbench.check.row.RowCheck): its rotation
    sets (set "first" and a second seeded set). A CUDA graph replays the tensors it captured into
    its one output (engine/measure/graph_mode.py): one set, one shared output, no nudges (a kept
    output holds the last replay's values, not its own call's). The engine's rows and both sides
    of an A/B row (engine/worker/ab.py) are timed through it."""
    from workbench.engine.measure.graph_mode import GraphCall

    replayed = isinstance(fn, GraphCall)
    rotation = Rotation(fn, [check.inputs] if replayed else check.rotation_sets(), nudges=not replayed)
    rotation.replayed = replayed
    return rotation


def check_rotation(check: Any, fn: Callable[..., Any], rotation: Rotation) -> Any:
    """After timing (and profiling): the nudges undone, the kept outputs checked
    (RowCheck.timed_calls: the "timed outputs" gate), the extra input sets released. The report,
    or None when nothing was kept."""
    rotation.restore()  # the nudged elements back before the inputs are fingerprinted
    kept, sets = rotation.kept, rotation.sets
    rotation.release()
    return check.timed_calls(fn, kept, sets, rotation.replayed)
