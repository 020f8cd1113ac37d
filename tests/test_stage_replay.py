"""Stage `replay`'s choice of sessions (benchmarks/stages/replay.py): shipped names or session
files by path; anything else refused naming what is allowed. No replay is run here."""

from __future__ import annotations

import pytest

from benchmarks.stages import replay


def test_only_takes_shipped_names_and_session_files_by_path():
    assert replay._files(("lecture06-matmul", "benchmarks/sessions/softmax-cuda-fp32.yaml")) == \
        ("benchmarks/sessions/softmax-cuda-fp32.yaml",)
    assert replay._session_file("benchmarks/sessions/softmax-cuda-fp32.yaml", False, None) == \
        str(replay.ROOT / "benchmarks/sessions/softmax-cuda-fp32.yaml")


def test_only_refuses_an_unknown_name_or_a_missing_file():
    with pytest.raises(ValueError, match="lecture06-nope: not one of lecture06-gelu"):
        replay._files(("lecture06-nope",))
    with pytest.raises(ValueError, match="no session file benchmarks/sessions/absent.yaml"):
        replay._files(("benchmarks/sessions/absent.yaml",))
