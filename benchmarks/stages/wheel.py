"""Stage `wheel`: the built wheel, not the checkout, replays the lecture's GeLU session on this box.

    python benchmarks/gpu_evidence.py --stage wheel [--quick] [--out DIR]

Takes `.whl/kernel_workbench-*.whl` (built by `make wheel-check` or `python -m build --wheel`,
carried to the box), installs it with --no-deps into a folder of its own (pip --target; the box's
own torch, Triton and TUI packages stay as they are) put first on PYTHONPATH, and from a folder
outside the checkout runs the installed package (`python -m workbench`): `--version`, `--check
lecture06-gelu`, then `--replay lecture06-gelu` (the session's own settings; the results document
to OUT/wheel-gelu.json). Rows: where `workbench` was imported from (must be the wheel's folder,
not the checkout), the box's torch and Triton, and each GeLU row's status
and median. Without a wheel the stage says so in one row; without a GPU it replays smoke-quick
(CPU sizes) instead, so the stage can be tried anywhere.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TITLE = "wheel: the installed kernel-workbench wheel replays lecture06-gelu outside the checkout"
ROOT = Path(__file__).resolve().parents[2]
BUDGET_S = 240


def _wheel() -> Path | None:
    found = sorted((ROOT / ".whl").glob("kernel_workbench-*.whl"))
    return found[-1] if found else None


def run(quick: bool, out: Path) -> list[dict]:
    wheel = _wheel()
    if wheel is None:
        return [{"step": "wheel", "status": f"skipped: no .whl/kernel_workbench-*.whl under {ROOT}"}]
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="wheel-stage-"))
    target, elsewhere = work / "site", work / "elsewhere"
    elsewhere.mkdir()
    rows: list[dict] = []
    # the wheel's folder first, then what was on PYTHONPATH (run_on_gpu.sh's TUI wheels), then this
    # interpreter's packages (torch, Triton); .pth files are not run from PYTHONPATH, so the
    # checkout's editable install stays out (the import step checks where workbench came from)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(target), env.get("PYTHONPATH"), *site.getsitepackages()) if p)

    def step(name: str, cmd: list[str], timeout: float, cwd: Path = elsewhere) -> subprocess.CompletedProcess:
        start = time.monotonic()
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
        (out / f"wheel-{name}.log").write_text(proc.stdout + proc.stderr)
        last = (proc.stdout.strip() or proc.stderr.strip()).splitlines()[-1:] or [""]
        rows.append({"step": name, "rc": proc.returncode, "s": round(time.monotonic() - start, 2),
                     "status": "ok" if proc.returncode == 0 else "FAILED", "last line": last[0][:100]})
        return proc

    # --target, not a venv: no ensurepip needed on the box, and the box's torch is used as it is
    step("install", [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                     "--target", str(target), str(wheel)], 120)
    py = sys.executable
    wb = [py, "-m", "workbench"]
    probe = step("import", [py, "-c", "import json, workbench, torch\n"
                            "try:\n import triton; tv = triton.__version__\nexcept ImportError: tv = None\n"
                            "print(json.dumps({'file': workbench.__file__, 'version': workbench.__version__, "
                            "'torch': torch.__version__, 'triton': tv, 'cuda': torch.cuda.is_available()}))"], 120)
    if probe.returncode == 0:
        info = json.loads(probe.stdout.strip().splitlines()[-1])
        from_wheel = info["file"].startswith(str(target))
        rows[-1].update(status="ok" if from_wheel else "FAILED: imported from the checkout, not the wheel",
                        **{"last line": f"{info['file']} v{info['version']} torch {info['torch']} "
                                        f"triton {info['triton']} cuda {info['cuda']}"})
        gpu = bool(info["cuda"])
    else:
        gpu = False
    # without a GPU the lecture's sizes would take minutes on the CPU: the CPU smoke session instead
    session = "lecture06-gelu" if gpu else "smoke-quick"
    step("version", [*wb, "--version"], 60)
    step("check", [*wb, "--check", session], 60)
    doc = out / "wheel-gelu.json"
    replay = step("replay", [*wb, "--replay", session, "-o", str(doc)], BUDGET_S if quick else 3 * BUDGET_S)
    if replay.returncode in (0, 1) and doc.is_file():
        for r in json.loads(doc.read_text()).get("results", []):
            timing = r.get("timing") or {}
            rows.append({"step": f"{session} {r.get('op')} {r.get('impl')}", "status": r.get("status"),
                         "median_ms": timing.get("median_ms"), "last line": (r.get("error") or "")[:100]})
    return rows
