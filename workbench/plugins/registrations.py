"""What loading one plugin source put into a registry, and taking it out again.

    before = snapshot(registry)
    ...import the source...
    registry.registered[key] = registered_since(registry, before)
    removed = withdraw(registry, registry.registered[key])   # the ops, implementations, references
    restore(registry, removed)                                # put back exactly what was withdrawn

A source registers new ops (with their implementations and references) and may add
implementations and references to ops an earlier source declared (`gelu.impl("triton_mine")`).
That is what an in-place reload of the source drops before importing its new text
(engine/reload_worker.py). Anything else a plugin's import changes (another module's globals,
a backend it registers, environment variables) is not tracked: such a plugin wants `--strict`.
Works on workbench.registry's Registry and Op (duck-typed: no import, no circle).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Registered:
    """ops: names of the ops the source created; impls: (op, implementation) pairs it added,
    its own ops' included; references: (op, math variant) pairs it added to earlier ops."""

    ops: tuple[str, ...] = ()
    impls: tuple[tuple[str, str], ...] = ()
    references: tuple[tuple[str, str], ...] = ()


Snapshot = dict[str, tuple[Any, frozenset, frozenset]]  # op name -> (the Op, impl names, reference names)


def snapshot(registry: Any) -> Snapshot:
    """What the registry holds now, by op."""
    return {name: (op, frozenset(op._impls), frozenset(op._references)) for name, op in registry._ops.items()}


def registered_since(registry: Any, before: Snapshot) -> Registered:
    """What was registered after `before` was taken."""
    ops, impls, references = [], [], []
    for name, op in registry._ops.items():
        old = before.get(name)
        new_op = old is None or old[0] is not op
        if new_op:
            ops.append(name)
        impls += [(name, impl) for impl in op._impls if new_op or impl not in old[1]]
        references += [] if new_op else [(name, math) for math in op._references if math not in old[2]]
    return Registered(tuple(ops), tuple(impls), tuple(references))


@dataclass(frozen=True)
class Withdrawn:
    """What `withdraw` took out: the Op objects, and the Impl objects and reference functions
    taken from earlier ops, to be put back by `restore`."""

    ops: tuple[tuple[str, Any], ...]
    impls: tuple[tuple[str, str, Any], ...]
    references: tuple[tuple[str, str, Any], ...]


def withdraw(registry: Any, registered: Registered) -> Withdrawn:
    """Take out what `registered` says a source added; returns it (for `restore`)."""
    own = set(registered.ops)
    impls = [(op, name, registry._ops[op]._impls.pop(name)) for op, name in registered.impls
             if op not in own and op in registry._ops and name in registry._ops[op]._impls]
    references = [(op, math, registry._ops[op]._references.pop(math)) for op, math in registered.references
                  if op in registry._ops and math in registry._ops[op]._references]
    ops = [(name, registry._ops.pop(name)) for name in registered.ops if name in registry._ops]
    return Withdrawn(tuple(ops), tuple(impls), tuple(references))


def restore(registry: Any, withdrawn: Withdrawn) -> None:
    """Put back what `withdraw` took out (a reload whose new text failed to import)."""
    for name, op in withdrawn.ops:
        registry._ops[name] = op
    for op, name, impl in withdrawn.impls:
        registry._ops[op]._impls[name] = impl
    for op, math, fn in withdrawn.references:
        registry._ops[op]._references[math] = fn
