"""`--doctor`'s tuning section (workbench/tuning_view.py): the cached choices of this device, the
others counted per device, and files from before the device-keyed format (issue #40)."""

from __future__ import annotations

import json

from workbench.cli import doctor
from workbench.tuning_view import autotune_dir, tuning_summary


def _write(folder, name, **data):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(data))


def test_the_summary_lists_this_devices_choices_and_counts_the_others(tmp_path):
    folder = autotune_dir(tmp_path)
    assert tuning_summary(tmp_path, "NVIDIA H100 80GB HBM3")["entries"] == 0  # no folder yet
    _write(folder, "a.json", op="matmul", impl="triton", device="NVIDIA H100 80GB HBM3 sm_90", triton="3.6.0",
           candidates="H100 sm_90", shape={"M": 4096, "N": 4096, "K": 4096}, dtype="bfloat16",
           config={"BLOCK_M": 128, "GROUP_M": 16})
    _write(folder, "b.json", op="softmax", impl="cuda", device="NVIDIA H200 sm_90", triton="3.6.0",
           candidates="H200 sm_90", shape={"M": 4096}, dtype="float32", config={"threads": 512})
    _write(folder, "c.json", key="softmax/triton NVIDIA H200 sm_90 M64xN1024 float32 v1 rounds4", config={})
    (folder / "d.json").write_text("{broken")
    got = tuning_summary(tmp_path, "NVIDIA H100 80GB HBM3")
    assert got["entries"] == 4 and got["older_format"] == 2 and got["other_devices"] == {"NVIDIA H200 sm_90": 1}
    assert got["this_device"] == ["matmul/triton M4096xN4096xK4096 bfloat16: BLOCK_M=128 GROUP_M=16 "
                                  "(list H100 sm_90, triton 3.6.0)"]
    none = tuning_summary(tmp_path, None)  # no GPU: nothing is this device's
    assert none["this_device"] == [] and none["device"] == "-" and sum(none["other_devices"].values()) == 2


def test_the_doctor_table_shows_one_choice_a_line():
    data = {s: {} for s in ("workbench", "python", "versions", "gpu", "tools", "ceilings", "bars", "colour", "paths")}
    data["tuning"] = {"path": "/c/build/autotune", "this_device": ["matmul/triton x: A=1", "softmax/cuda y: B=2"]}
    tables = doctor._doctor_tables(data)
    tuning = next(t for t in tables if t.title == "tuning")
    cells = tuning.columns[1]._cells
    assert "matmul/triton x: A=1\nsoftmax/cuda y: B=2" in cells
