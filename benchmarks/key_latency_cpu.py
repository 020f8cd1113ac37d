"""Mid-run key latency of the TUI on this machine's CPU: the overhead stage's measurement
(benchmarks/stages/_overhead_tui._key_latency: pane keys 2 and 1 while a long GeLU run streams,
key event posted -> the first frame painted with the new pane), on a `cpu` session (pytorch and
manual at 256^2, 30 s of timing), split into key -> pane active and active -> frame painted.

    .venv/bin/python benchmarks/key_latency_cpu.py [FOLDER]

Prints one JSON line: median_ms and latencies_ms (key -> the first frame with the pane, the
stage's figure), key_to_frame_median_ms (the earlier figure, kept: until a refresh after
the pane was seen active), parts_ms [[key->active, active->frame], ...] (negative: the poll saw
the pane active only after its frame) and per_press (gc, layout and compositor ms).
A/B of two versions of screens/ is done by running this once per version in turn (the results
README of the session that did it shows the loop).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path


async def _measure(folder: Path) -> dict:
    from benchmarks.stages import _overhead_tui as tui
    from benchmarks.stages.overhead import _session_file
    from workbench.engine.options import RunOptions

    path = _session_file(folder, "streaming", ("pytorch", "manual"), 256, False, rep_ms=30000, streaming=True)
    options = RunOptions(cache_dir=folder / "cache" / "workbench")
    median, detail = await tui._key_latency(path, folder, options)
    parts = [[round(a, 1), round(t - a, 1)] for a, t in zip(detail["key_to_pane_active_ms"], detail["latencies_ms"])]
    return {"median_ms": round(median, 1), "latencies_ms": [round(x, 1) for x in detail["latencies_ms"]],
            "key_to_frame_median_ms": round(detail["key_to_frame_median_ms"], 1), "parts_ms": parts,
            "run_still_streaming": detail["run_still_streaming"], "per_press": detail["per_press"]}


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `benchmarks` as a package
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="wb-keys-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(json.dumps(asyncio.run(_measure(folder))))


if __name__ == "__main__":
    main()
