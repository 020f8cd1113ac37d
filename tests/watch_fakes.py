"""Watch-mode tests' fakes: a plugin adding `manual_mine` to the shipped gelu, a session using
it, and a stand-in for run_plan that makes a record per row it is asked to run."""

from __future__ import annotations

import re

from workbench import events as ev

PLUGIN = '''\
import torch
from workbench.registry import REGISTRY

GELU = REGISTRY.op("gelu")
MEDIAN_MS = 2.0


@GELU.impl("manual_mine", math="tanh")
def build(spec, params, ctx):
    """mine"""
    _ = (MEDIAN_MS, FAIL)  # the stand-in engine reports MEDIAN_MS as the median, fails with FAIL
    return lambda x: torch.nn.functional.gelu(x, approximate="tanh")


FAIL = None
'''
SESSION = '''\
schema_version: 1
name: watched
plugins: [mine.py]
runs:
  - op: gelu
    impls: [manual_mine, pytorch]
    shape: {M: 4, N: 8}
'''



def rows_engine():
    """run_plan stand-in: one ok record per row not in options.done; the plugin's rows take
    MEDIAN_MS from its file (FAIL = "..." in it fails them with that error). Its builder refers
    to both, so an edit of either changes what it computes (workbench/plugins/code_digest.py).
    Its document's provenance.plugins holds the plugin file's sha256 when it ran."""
    calls: list[list] = []

    def engine(session, *, on_event, stop=None, options=None, workers=None):
        from workbench.engine.rows import expand
        from workbench.plugins.manifest import declare

        plugin_text = open(session.plugins[0]).read()
        median = float(re.search(r"MEDIAN_MS = ([\d.]+)", plugin_text).group(1))
        fail = re.search(r'FAIL = "(.*)"', plugin_text)
        ran, results = [], []
        for row in expand(session, declare(session.plugins, cache_dir=options.cache_dir), has_cuda=False):
            if row.key in options.done:
                results.append(options.done[row.key])
                continue
            record = row.record()
            mine = row.impl == "manual_mine"
            record.update(status="ok", timing={"median_ms": median if mine else 1.0},
                          ptx={"kernels": [{"name": "k", "counts": {"ld_global_v4": 4 if median < 2 else 0},
                                            "registers": 32, "spills": 0}]})
            if mine and fail:
                checked = {"passed": False, "gate": "elementwise"} if fail.group(1).startswith("check failed") else None
                record.update(status="failed", error=fail.group(1), timing=None, check=checked)
            on_event(ev.Result(row.key, record))
            ran.append(row.key[1])
            results.append(record)
        calls.append(ran)
        from workbench.plugins.sources import plugin_records

        provenance = {"plugins": plugin_records(session.plugins), "session_sha256": None}  # as run_plan records them
        return {"provenance": provenance, "environment": {}, "results": results, "cancelled": False}
    engine.calls = calls
    return engine
