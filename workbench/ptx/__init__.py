"""Inside the kernel: PTX, SASS, assembler resources, instruction counts and launch geometry.

Public API (the engine and the TUI use these; nothing here imports Textual):

- `extract.ptx_record(op, impl, spec, params, *, target=None, machine=None, ctx=None)`
  -> (record, texts): the CONTRACTS `ptx` record and, per kernel, {"ptx", "sass", "ttir",
  "ttgir", "llir" (Triton), "source" (Inductor)}. Never run where TRITON_INTERPRET=1.
- `extract.launch_record(op, impl, spec, params, sm_count=None, *, ptx=None)` -> the CONTRACTS
  `launch` record plus occupancy (blocks per SM and what limits it), waves and notes.
- `triton_cache.launched_ptx(jit_fn)` -> {compile hash: PTX} of the kernels real launches compiled.
- `counts.count_instructions(ptx)`, `counts.split_kernels(ptx)`, `notes.kernel_notes(...)`.
- `highlight.render(text)` -> rich Text, `highlight.positions(text)` -> {kind: [0-based lines]},
  `highlight.syntax(text)` -> rich Syntax; PTX and SASS alike.

Modules: extractors (one record per kernel-source type), triton_aot (the launch's own compile
through JITFunction.warmup), triton_cache (what the JIT compiled here), nvcc (CUDA
PTX and cubin), inductor (torch.compile's kernels), resources (ptxas -v, cuobjdump -res-usage),
sass (cuobjdump -sass), record (one kernel's entry), launch (occupancy arithmetic), tools;
source maps: lineinfo (PTX .loc, nvdisasm -gp), irlocs (TTIR/TTGIR/LLIR locations), source_map
and attach (`kernels[i].source_map`, `stages`), launch_diff (specialisation, per-line diffs).
"""
