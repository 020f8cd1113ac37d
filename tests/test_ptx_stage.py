"""engine/ptx_stage.ptx_row: a kernel that does not compile fails a ptx-only row and flags a
row that measured something (a `.cu` with a syntax error came out `ok`, exit 0); the record and
its compiler message still reach the pane."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from workbench.engine.worker import ptx_stage
from workbench.events import Log, Ptx
from workbench.ptx.tools import failure_lines

FAILED = {"target": "sm_90", "source": "nvcc", "kernels": [], "notes": ["nvcc failed (exit 1): k.cu(1): error: x"],
          "error": "nvcc failed (exit 1): k.cu(1): error: x"}


class Channel:
    def __init__(self):
        self.events = []

    def event(self, event):
        self.events.append(event)


@pytest.mark.parametrize("exec_actions, status, flagged", [((), "failed", False), (("bench",), None, True)])
def test_a_record_with_an_error_fails_or_flags_the_row(monkeypatch, exec_actions, status, flagged):
    monkeypatch.setattr(ptx_stage, "_extractor", lambda: (lambda *a, **k: (dict(FAILED), {}), None))
    record, channel = {"status": None, "error": None, "flags": [], "ptx": None}, Channel()
    row = SimpleNamespace(key=(0, "cuda_bad", None), exec_actions=exec_actions)
    ptx_stage.ptx_row(channel, row, record, None, None, None, {})
    message = "ptx failed: nvcc failed (exit 1): k.cu(1): error: x"
    assert record["status"] == status and (record["error"] == message) == (not flagged)
    assert (record["flags"] == [message]) == flagged
    assert record["ptx"]["notes"] == FAILED["notes"]  # the pane shows the compiler's words
    assert any(isinstance(e, Ptx) for e in channel.events) and any(isinstance(e, Log) and e.level == "error"
                                                                    for e in channel.events)


def test_a_record_without_an_error_leaves_the_row_alone(monkeypatch):
    good = {k: v for k, v in FAILED.items() if k != "error"}
    monkeypatch.setattr(ptx_stage, "_extractor", lambda: (lambda *a, **k: (good, {}), None))
    record = {"status": None, "error": None, "flags": [], "ptx": None}
    ptx_stage.ptx_row(Channel(), SimpleNamespace(key=(0, "x", None), exec_actions=()), record, None, None, None, {})
    assert record["status"] is None and record["flags"] == []


def test_a_failed_tool_keeps_its_first_errors_not_only_its_tail():
    out = "\n".join(["k.cu(3): error: identifier \"concept\" is undefined", *[f"  context {i}" for i in range(10)],
                     "k.cu(9): error: expected a \";\"", "k.cu(12): error: b", "k.cu(14): error: c",
                     "4 errors detected in the compilation of \"k.cu\"."])
    shown = failure_lines(out)
    assert shown.startswith('k.cu(3): error: identifier "concept" is undefined | k.cu(9)')
    assert shown.endswith("... and 1 more error(s)")  # "4 errors detected" is the summary, not one
    assert failure_lines("a\nb\nc") == "a | b | c"  # no error line: the tail


def test_a_half_operator_the_build_refuses_fails_the_ptx_compile_too(tmp_path):
    """torch's load_inline builds with -D__CUDA_NO_HALF_OPERATORS__, so `a * b` on __half does not
    build; the pane compiled it (its flags lacked torch's defines)."""
    from workbench.ptx.tools import ToolError
    from workbench.machine import find_nvcc
    from workbench.ptx.nvcc import compile_cu

    if find_nvcc() is None:
        pytest.skip("nvcc not found")
    cu = tmp_path / "h.cu"
    cu.write_text('#include <cuda_fp16.h>\n__global__ void k(__half* c, const __half* a, const __half* b) '
                  '{ int i = threadIdx.x; c[i] = a[i] * b[i]; }\n')
    with pytest.raises(ToolError, match="error"):
        compile_cu(cu, cache_dir=tmp_path / "cache")
