"""The ptx action of a row, through `workbench.ptx.extract.ptx_record` when it exists.

ptx_record(op, impl, spec, params, *, target=None, cache_dir=None, ctx=None) -> (record, texts) is written by the PTX
module; it is imported lazily so the engine works without it (ptx null, a Log warning).
This runs in the execution child where Triton is compiled (GPU), and in a separate child
without TRITON_INTERPRET where Triton is interpreted (CONTRACTS.md, "Isolation and events").
An implementation with no PTX (UnavailableError) leaves ptx null with a Log line; other
errors, and a record whose `error` says the kernel did not compile (its notes keep the
compiler's words for the pane), fail a ptx-only row and are a flag on a row that also measured
something: a `.cu` with a syntax error is never an `ok` row with exit 0.
"""

from __future__ import annotations

from typing import Any

from workbench.errors import UnavailableError
from workbench.events import Log, Ptx
from workbench.results.record import Flag


def _extractor():
    try:
        from workbench.ptx.extract import ptx_record
    except ImportError as exc:
        return None, f"PTX extraction is not available here ({exc})"
    return ptx_record, None


def ptx_row(channel: Any, row: Any, record: dict, op: Any, impl: Any, spec: Any, params: dict,
            cache_dir: Any = None, ctx: Any = None) -> None:
    """Fill record["ptx"] and stream a Ptx event (with the texts), or say why not. ctx: the
    run's BuildContext (device, fp32_precision, ...), passed on so e.g. matmul's tf32 choice
    reaches the launch the PTX is taken from."""
    ptx_only = not row.exec_actions
    extract, missing = _extractor()
    if extract is None:
        channel.event(Log(row.key, missing, "warning"))
        if ptx_only:
            record.update(status="unavailable", error=missing)
        return
    try:
        ptx, texts = extract(op, impl, spec, params, target=None, cache_dir=cache_dir, ctx=ctx)
    except UnavailableError as exc:
        channel.event(Log(row.key, f"no PTX for {impl.name}: {exc}", "warning"))
        if ptx_only:
            record.update(status="unavailable", error=str(exc))
        return
    except Exception as exc:  # the extractor's failure is this row's ptx failure, not a crash
        _failed(channel, row, record, ptx_only,
                Flag.PTX_FAILED.format(detail=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"))
        return
    record["ptx"] = ptx
    channel.event(Ptx(row.key, ptx, dict(texts or {})))
    if ptx.get("error"):  # the kernel did not compile: the pane shows the compiler's words, the row says so
        _failed(channel, row, record, ptx_only, Flag.PTX_FAILED.format(detail=ptx["error"]))


def _failed(channel: Any, row: Any, record: dict, ptx_only: bool, message: str) -> None:
    """A ptx failure: a Log error; the row's status and error when ptx was all it asked, else a flag."""
    channel.event(Log(row.key, message, "error"))
    if ptx_only:
        record.update(status="failed", error=message)
    else:
        record["flags"].append(message)
