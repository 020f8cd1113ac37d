"""The record's readers take a Record (workbench/results/record.py): the TUI's run model reads a
record dict in once (a Result event's, a loaded document's), the diagnosis reads dicts in once and
finds the same with Records as with dicts, watch's change lines and --plot read fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench import events as ev
from workbench import plot
from workbench.diagnosis import diagnose_document, diagnose_record
from workbench.results.record import Record, RecordError, Timing
from workbench.screens.model import Row, RunModel
from workbench.watch.diff import change_line

SMOKE = Path(__file__).parent / "fixtures" / "cpu_smoke_replay.json"
GELU = Path(__file__).resolve().parents[1] / "results" / "history" / "h200" / "2026-12-01" / "replay" / "lecture06-gelu.json"


def _doc(path: Path) -> dict:
    data = json.loads(path.read_text())
    return data.get("doc", data)


def test_the_run_model_holds_a_record_read_once_from_the_event_and_from_a_document():
    record = {"op": "gelu", "impl": "triton", "label": "triton", "status": "ok", "sweep_value": None,
              "timing": {"median_ms": 0.5, "timer": "cuda_event", "samples_ms": [0.5, 0.6]},
              "traffic": {"gbps": 4190.0}, "flags": [], "device": "cuda:0"}
    model = RunModel()
    model.apply(ev.Result((0, "triton", None), record))
    row = model.rows[("triton", None)]
    assert isinstance(row.record, Record) and row.timing.median_ms == 0.5 and row.traffic.gbps == 4190.0
    assert row.timer == "cuda_event" and row.samples_ms == [0.5, 0.6] and row.device == "cuda:0"
    assert row.record.to_dict() == record  # the JSON unchanged
    typed = row.record
    model.apply(ev.Result((0, "triton", None), typed))  # a Record passes through, not read again
    assert model.rows[("triton", None)].record is typed
    doc = _doc(SMOKE)
    loaded = RunModel.from_doc(doc, 0)
    assert loaded.rows and all(isinstance(r.record, Record) for r in loaded.rows.values())


def test_a_row_reads_a_record_dict_given_to_it_and_refuses_a_wrong_type_naming_it():
    row = Row(label="a", impl="a", record={"timing": {"median_ms": 1.0}})
    assert isinstance(row.record, Record) and row.get("timing", "median_ms") == 1.0
    assert Row(label="b", impl="b").timing == Timing() and Row(label="b", impl="b").flags == []
    with pytest.raises(RecordError, match=r"timing\.median_ms: 'fast' is a string; allowed: a number"):
        row.record = {"timing": {"median_ms": "fast"}}


def test_the_diagnosis_finds_the_same_from_dicts_and_from_records():
    doc = _doc(GELU)
    from_dicts = [diagnose_record(r, doc["environment"], doc["results"]) for r in doc["results"]]
    records = [Record.from_dict(r) for r in doc["results"]]
    from_records = [diagnose_record(r, doc["environment"], records) for r in records]
    assert from_dicts == from_records and any(from_dicts)  # the record is not its own peer either way
    assert [r["diagnosis"] for r in diagnose_document(json.loads(json.dumps(doc)))["results"]] == from_dicts


def test_watch_lines_and_the_plot_read_fields_of_either_form():
    old = {"status": "ok", "timing": {"median_ms": 0.2}, "traffic": {"gbps": 100.0}}
    new = {"status": "ok", "timing": {"median_ms": 0.1}, "traffic": {"gbps": 200.0}}
    assert change_line(old, new) == change_line(Record.from_dict(old), Record.from_dict(new))
    assert "-50.0%" in change_line(old, new)[0]
    rows = plot.plotted_rows(_doc(SMOKE))
    assert rows and all(isinstance(r, Record) and r.status == "ok" for r in rows)
