"""Hand-made results documents for the CLI, replay and --compare tests (every contract key)."""

from __future__ import annotations

CONTRACT_RECORD_KEYS = ("run_index", "op", "impl", "label", "params", "shape", "dtype", "sweep_value",
                        "status", "error", "device", "build_ms", "peak_mem_bytes", "timing", "check",
                        "traffic", "launch", "profile", "ptx")


def record(label="triton", median=1.0, p20=None, p80=None, status="ok", op="gelu", shape=None,
           sweep_value=None, run_index=0, dtype="float32"):
    """A complete result record (every contract key); spread +-2% unless p20/p80 given."""
    timing = None
    if status == "ok":
        timing = {"timer": "cuda_event", "median_ms": median, "p20_ms": p20 if p20 is not None else median * 0.98,
                  "p80_ms": p80 if p80 is not None else median * 1.02, "min_ms": median * 0.97,
                  "mean_ms": median, "n": 50, "flush_l2": True, "launch_bound": False,
                  "device_median_ms": None, "clock_fell": False, "samples_ms": None}
    return {"run_index": run_index, "op": op, "impl": label.split("_")[0], "label": label, "params": {},
            "shape": shape or {"M": 1024, "N": 1024}, "dtype": dtype, "sweep_value": sweep_value,
            "status": status, "error": None if status == "ok" else "boom", "device": "cuda:0",
            "build_ms": 1.0, "peak_mem_bytes": None, "timing": timing,
            "check": {"passed": status == "ok", "max_abs_err": 0.0, "max_rel_err": 0.0, "rel_l2_err": 0.0,
                      "first_bad_index": None, "atol": 1e-5, "rtol": 1.3e-6},
            "traffic": None, "launch": None, "profile": None, "ptx": None}


def document(*records, device="NVIDIA H200"):
    return {"schema_version": 1,
            "provenance": {"workbench": "0.1.0", "git_sha": None, "session": "t", "session_sha256": None,
                           "argv": [], "started": "2026-01-01T00:00:00Z"},
            "environment": {"device": device, "sm_count": 132, "l2_bytes": None, "driver": None, "cuda": None,
                            "torch": None, "triton": None, "python": None, "ceilings": None, "datasheet": None},
            "results": list(records)}
