"""Runs op cases in a process of their own and writes the results as JSON.

    python tests/op_child.py REQUEST.json RESULTS.json

Used for what must not happen in the pytest process: Triton kernels run by the CPU interpreter
(TRITON_INTERPRET, set by the parent in this process's environment, is read when the kernels are
imported) and test-only plugins (their ops must not leak into the pytest process's registry).
REQUEST: {"plugins": [paths], "cases": [Case fields], "device": "cpu" | "cuda:0",
"interpret": bool}. RESULTS: {case id: run_case's dict plus "launch_problems" (Triton cases
with contiguous inputs: how the launch differs from the declared TritonLaunch) or "error"}.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from op_cases import Case, LaunchRecorder, declared_launch, launch_problems, run_case  # noqa: E402


def main(request_path: str, results_path: str) -> int:
    from workbench.registry import discover

    request = json.loads(Path(request_path).read_text())
    device, interpret = request["device"], request["interpret"]
    registry = discover(request.get("plugins", []))
    results = {}
    with LaunchRecorder() as recorder:
        for fields in request["cases"]:
            case = Case(**fields)
            recorder.launches.clear()
            first_call: list = []
            try:
                result = run_case(registry, case, device, interpret=interpret,
                                  after_first_call=lambda: first_call.extend(recorder.launches))
                expected = declared_launch(registry, case, device) if case.layout is None else None
                if expected is not None:
                    result["launch_problems"] = launch_problems(expected, first_call)
            except Exception as exc:  # reported per case; the parent's test names it
                result = {"id": case.id, "passed": False, "error": f"{type(exc).__name__}: {exc}"}
            results[case.id] = result
    Path(results_path).write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
