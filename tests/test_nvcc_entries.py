"""workbench/ptx/nvcc.py: the PTX view assembles only a row's kernels (ptxas --entry) and gets the
same machine code for each of them as the whole-module compile, with the ptxas command nvcc runs."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from workbench.machine import find_nvcc
from workbench.ptx.counts import split_kernels
from workbench.ptx.nvcc import compile_cu, ptxas_command
from workbench.ptx.resources import parse_ptxas_log

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found")
GELU_CU = Path(__file__).resolve().parents[1] / "kernels" / "gelu.cu"


def elf_sections(path: Path) -> dict[str, bytes]:
    """Section name -> bytes of a 64-bit little-endian ELF (a cubin)."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx][4]

    def name(offset: int) -> str:
        return data[names + offset:data.index(b"\0", names + offset)].decode()
    return {name(h[0]): data[h[4]:h[4] + h[5]] for h in headers}


@needs_nvcc
def test_a_rows_kernels_alone_have_the_whole_modules_machine_code(tmp_path):
    whole = compile_cu(GELU_CU, "sm_90", cache_dir=tmp_path)
    mine = compile_cu(GELU_CU, "sm_90", cache_dir=tmp_path, kernels=("gelu_vec_kernel",), dtype="bfloat16")
    assert whole.entries is None and mine.entries and mine.ptx == whole.ptx
    every = {e.name for e in split_kernels(whole.ptx)}
    assert set(mine.entries) < every
    assert all("gelu_vec_kernel" in name and "nv_bfloat16" in name for name in mine.entries)
    sections_whole, sections_mine = elf_sections(whole.cubin), elf_sections(mine.cubin)
    texts = {name for name in sections_mine if name.startswith(".text.")}
    assert texts == {f".text.{name}" for name in mine.entries}
    for name in texts:  # byte for byte the code the whole-module compile made
        assert sections_mine[name] == sections_whole[name], name
    resources_whole, resources_mine = parse_ptxas_log(whole.ptxas_log), parse_ptxas_log(mine.ptxas_log)
    assert set(resources_mine) == set(mine.entries)
    for name in mine.entries:
        assert resources_mine[name] == resources_whole[name]


@needs_nvcc
def test_the_choice_is_cached_and_a_name_matching_nothing_assembles_every_entry(tmp_path):
    first = compile_cu(GELU_CU, "sm_90", cache_dir=tmp_path, kernels=("gelu_vec_kernel",), dtype="float32")
    again = compile_cu(GELU_CU, "sm_90", cache_dir=tmp_path, kernels=("gelu_vec_kernel",), dtype="float32")
    assert not first.cached and again.cached and again.entries == first.entries and again.cubin == first.cubin
    other = compile_cu(GELU_CU, "sm_90", cache_dir=tmp_path, kernels=("no_such_kernel",), dtype="float32")
    assert other.entries is None and other.cached is False
    assert set(parse_ptxas_log(other.ptxas_log)) == {e.name for e in split_kernels(other.ptx)}


@needs_nvcc
def test_the_ptxas_command_is_the_one_nvcc_runs_with_the_users_flags():
    nvcc = find_nvcc()
    command = ptxas_command(nvcc, ("-O3", "-lineinfo", "-arch=sm_90", "-maxrregcount=40", "-Xptxas", "-O2"), GELU_CU)
    assert command is not None and Path(command[0]).name == "ptxas"
    assert "-arch=sm_90" in command and "--generate-line-info" in command and "-v" in command
    assert "-maxrregcount=40" in command and "-O2" in command
    assert command.count("{ptx}") == 1 and command[command.index("-o") + 1] == "{cubin}"
