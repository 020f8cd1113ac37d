"""--strict: every value comparison of a row judged in a clean process (rule 13, issue 38).

A plugin's code runs in the worker that checks it, so it can replace the comparison there
(`workbench.check.compare.verdict`, a torch function the comparison uses) and pass anything. In
strict mode (`ChildJob.strict`) the worker does not compare values itself: for each comparison
(every input set: first, special, each kept timed output, timed) it hands over COPIES of the
output and of its float64 reference, chunk by chunk, as host tensors saved with torch.save into
a private folder (mode 0700, deleted after each comparison), with the row's tolerance (already
scaled by the implementation's factor: the `trust` flags name a large one), and a clean child
judges them: `python -P -m workbench.check.strict`, started once per row on the first comparison,
which imports only torch and workbench.check (compare, tolerance, this module) and never a plugin
or a shipped op module (it refuses to answer if one is loaded: `foreign_modules`). The row's
check report is the clean process's (workbench.check.compare.judge_chunks, the same code the
worker runs without --strict); a child that cannot judge fails the row at the "strict" gate.

What it guards: the comparison's code and its arithmetic. What it does not: the handover runs in
the worker, so a plugin that rewrites the worker's own handover (this module's `Judge`, the
reference it is given, `RowCheck` itself) is not stopped; the form gates (shape, dtype, device,
ownership, inputs) still run in the worker. Cost: one Python + torch start per row (~1-3 s), and
the output plus an 8-byte-per-element reference copied to the host and written to a temporary
folder once per comparison (docs/MEASUREMENT.md, rule 13).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, Callable

from workbench.check.compare import CheckReport, gate_failure, judge_chunks
from workbench.check.tolerance import Tolerance

MODULE = "workbench.check.strict"
ALLOWED_WORKBENCH = "workbench.check"  # the only part of workbench the clean process may hold


def foreign_modules(names: Any) -> list[str]:
    """The loaded modules a clean process must not hold: plugin modules (workbench_plugin_*),
    the shipped ops (workbench.kernels, kernels) and any workbench module outside workbench.check."""
    return sorted(m for m in names if m.startswith("workbench_plugin_") or m == "kernels"
                  or m.startswith("kernels.")
                  or (m.startswith("workbench.") and not (m == ALLOWED_WORKBENCH
                                                          or m.startswith(ALLOWED_WORKBENCH + "."))))


class Judge:
    """The worker's side: `compare(...)` hands one comparison over and returns the clean process's
    report; `close()` ends the process and removes the folder (the row's end)."""

    def __init__(self, root: Path | None = None) -> None:
        """root: where the row's 0700 folder is made (the worker passes its private temp folder,
        which is swept when a killed worker leaves it; the outputs and float64 references copied
        there can be hundreds of MB); None: the system's temp folder."""
        self.root = root
        self.folder: Path | None = None
        self.proc: subprocess.Popen | None = None
        self.cases = 0

    def compare(self, flat_out: Any, piece: Callable[[int], Any], count: int, shape: tuple[int, ...],
                tol: Tolerance, input_set: str) -> CheckReport:
        """The value gates of `flat_out` against `count` reference chunks (`piece(k)`), judged in
        the clean process; a failed "strict" report when it cannot judge."""
        import torch

        case = self._folder() / f"case{self.cases}"
        self.cases += 1
        case.mkdir(mode=0o700)
        try:
            torch.save(flat_out.detach().to("cpu", copy=True), case / "out.pt")  # a copy, not the kernel's tensor
            sizes = []
            for k in range(count):
                chunk = piece(k).detach().to("cpu", copy=True).reshape(-1)
                torch.save(chunk, case / f"ref{k}.pt")
                sizes.append(chunk.numel())
                del chunk
            (case / "case.json").write_text(json.dumps({"tol": asdict(tol), "shape": list(shape),
                                                        "input_set": input_set, "sizes": sizes}))
            answer = self._ask({"case": str(case)})
        finally:
            shutil.rmtree(case, ignore_errors=True)
        if "report" not in answer:
            return gate_failure("strict", f"the clean process did not judge: {answer.get('error')}", tol, input_set)
        return CheckReport(**answer["report"])

    def modules(self) -> list[str]:
        """The clean process's sys.modules (for tests and --strict's own audit)."""
        return self._ask({"modules": True})["modules"]

    def close(self) -> None:
        if self.proc is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    # -- internals ----------------------------------------------------------------------------
    def _folder(self) -> Path:
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="workbench-strict-", dir=self.root))  # mode 0700
        return self.folder

    def _start(self) -> subprocess.Popen:
        from workbench.helper_python import die_with_parent, isolated_python

        env = {**os.environ, "PYTHONSAFEPATH": "1"}
        env.pop("PYTHONSTARTUP", None)
        return subprocess.Popen(isolated_python("-m", MODULE), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                cwd=self._folder(), env=env, text=True, close_fds=True, preexec_fn=die_with_parent)

    def _ask(self, request: dict) -> dict:
        if self.proc is None:
            self.proc = self._start()
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except OSError as exc:
            line, why = "", f"{type(exc).__name__}: {exc}"
        else:
            why = f"the clean process exited (code {self.proc.poll()}); its stderr is in the worker's log"
        if not line:
            return {"error": why}
        return json.loads(line)


# -- the clean process ------------------------------------------------------------------------
def judge_case(case: Path) -> dict:
    """One handed-over comparison: its report as a dict (`detail` included)."""
    import torch

    meta = json.loads((case / "case.json").read_text())
    tol = Tolerance(**meta["tol"])
    out = torch.load(case / "out.pt", weights_only=True)
    shape = tuple(meta["shape"])
    size = 1
    for n in shape:
        size *= n
    sizes = meta["sizes"]

    def piece(k: int) -> Any:
        chunk = torch.load(case / f"ref{k}.pt", weights_only=True)
        if type(chunk) is not torch.Tensor or chunk.numel() != sizes[k]:
            raise ValueError(f"reference chunk {k} is not the {sizes[k]}-element tensor announced")
        return chunk
    if type(out) is not torch.Tensor or out.numel() != size or sum(sizes) != size:
        report = gate_failure("shape", f"handed-over output of {out.numel()} elements, reference chunks of "
                                       f"{sum(sizes)}, for shape {shape}", tol, meta["input_set"])
    else:
        report = judge_chunks(out, piece, len(sizes), shape, tol, meta["input_set"])
    return {"report": {f.name: getattr(report, f.name) for f in fields(report)}}


def serve(stdin: Any, stdout: Any) -> None:
    """Answer requests (one JSON line each) until stdin closes: {"case": folder} -> {"report": ...}
    or {"error": ...}; {"modules": true} -> {"modules": sorted sys.modules}."""
    for line in stdin:
        request = json.loads(line)
        foreign = foreign_modules(sys.modules)
        if "modules" in request:
            answer: dict = {"modules": sorted(sys.modules)}
        elif foreign:
            answer = {"error": f"the clean process holds modules it must not: {', '.join(foreign[:5])}"}
        else:
            try:
                answer = judge_case(Path(request["case"]))
            except Exception as exc:  # a broken handover: the row fails at the "strict" gate
                answer = {"error": f"{type(exc).__name__}: {exc}"}
        stdout.write(json.dumps(answer) + "\n")
        stdout.flush()


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
