"""The one demangler (workbench/demangle.py): in-process with `cxxfilt`, the tool as fallback,
the names as given without either; the TUI's kernel names and PTX extraction call the same one."""

from __future__ import annotations

import shutil

import pytest

from workbench import demangle

MANGLED = "_Z17gelu_naive_kernelIfEvPKT_PS0_i"
PLAIN = "void gelu_naive_kernel<float>(float const*, float*, int)"


@pytest.fixture(autouse=True)
def _fresh():
    demangle._demangled.cache_clear()
    yield
    demangle._demangled.cache_clear()


def test_in_process_demangles_without_any_tool(monkeypatch):
    pytest.importorskip("cxxfilt", reason="the cxxfilt package is not installed here")
    monkeypatch.setattr(demangle, "with_tool", lambda names: pytest.fail("the tool ran where cxxfilt reads the name"))
    assert demangle.demangle(MANGLED) == PLAIN
    assert demangle.which() == "cxxfilt (in-process)"


def test_the_tool_is_the_fallback(monkeypatch):
    if not shutil.which("c++filt"):
        pytest.skip("no c++filt here")
    monkeypatch.setattr(demangle, "in_process", lambda names: {})
    assert demangle.demangle(MANGLED) == PLAIN


def test_without_a_demangler_names_stay_as_given(monkeypatch):
    import workbench.ptx.tools as tools

    monkeypatch.setattr(demangle, "in_process", lambda names: {})
    monkeypatch.setattr(tools, "find_demangler", lambda: None)
    assert demangle.demangle_all([MANGLED, "triton_poi_0"]) == {MANGLED: MANGLED, "triton_poi_0": "triton_poi_0"}


def test_names_that_are_not_mangled_never_reach_a_demangler(monkeypatch):
    monkeypatch.setattr(demangle, "in_process", lambda names: pytest.fail(f"asked for {names}"))
    names = ["ampere_sgemm_128x64_nn", "void k<float>(int)"]
    assert demangle.demangle_all(names) == {n: n for n in names}


def test_the_tui_and_ptx_use_the_one_demangler(monkeypatch):
    from workbench.ptx import nvcc
    from workbench.screens.panes import kernel_names

    monkeypatch.setattr(demangle, "in_process", lambda names: {n: "void one_kernel<float>(int)" for n in names})
    assert nvcc.demangle_all is demangle.demangle_all  # the PTX record's names (ptx/tools.py finds the tool only)
    assert demangle.demangle_all([MANGLED]) == {MANGLED: "void one_kernel<float>(int)"}
    assert kernel_names.demangle_all([MANGLED]) == ["void one_kernel<float>(int)"]
    assert kernel_names.short(MANGLED) == "one_kernel"
