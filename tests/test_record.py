"""The typed result record (workbench/results/record.py): the JSON round-trips unchanged, wrong
types are refused with one error naming key, value and what is allowed, flags have kinds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.results import document
from workbench.results.record import (Check, DiagnosisEntry, Flag, Launch, Measured, Record, RecordError,
                                      Timing, Traffic, first_flag, flag_kinds, has_flag, read_record)

ROOT = Path(__file__).resolve().parent.parent


def _documents() -> list[Path]:
    """Every committed results document (schema_version 1 with a results list) under results/ and tests/."""
    found = []
    for path in sorted([*ROOT.glob("results/**/*.json"), *ROOT.glob("tests/**/*.json")]):
        try:
            doc = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(doc, dict) and doc.get("schema_version") == 1 and isinstance(doc.get("results"), list):
            found.append(path)
    return found


DOCUMENTS = _documents()


def test_there_are_documents_to_round_trip():
    assert len(DOCUMENTS) > 10
    assert any(p.is_relative_to(ROOT / "tests") for p in DOCUMENTS)


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_committed_document_round_trips_to_identical_json(path):
    doc = json.loads(path.read_text())
    again = {**doc, "results": [Record.from_dict(r, f"results[{i}]").to_dict() for i, r in enumerate(doc["results"])]}
    assert json.dumps(again) == json.dumps(doc)  # same keys, same order, same values


def test_a_fresh_record_is_the_documents_skeleton():
    assert Record().to_dict() == document.new_record()
    assert list(Record().to_dict()) == list(document.RECORD_KEYS)


@pytest.mark.parametrize("part, keys", [(Record, document.RECORD_KEYS), (Timing, document.TIMING_KEYS),
                                        (Check, document.CHECK_KEYS), (Traffic, document.TRAFFIC_KEYS)])
def test_the_fields_are_the_contracts_keys(part, keys):
    assert part.keys() == keys


def test_launch_and_measured_fields_are_the_writers_keys():
    from workbench.counters import MEASURED_KEYS

    assert Launch.keys()[:4] == document.LAUNCH_KEYS
    assert Measured.keys() == MEASURED_KEYS
    from workbench.diagnosis.core import Finding

    assert DiagnosisEntry.keys() == tuple(Finding("r", "e", "s").as_dict())


def test_unknown_keys_of_a_newer_document_are_kept_in_order():
    data = {**document.new_record(status="ok"), "future": {"x": 1},
            "timing": {**dict.fromkeys(document.TIMING_KEYS), "median_ms": 1.5, "newer": [1, 2]}}
    record = Record.from_dict(data)
    assert record.extra == {"future": {"x": 1}}
    assert record.timing is not None and record.timing.median_ms == 1.5 and record.timing.extra == {"newer": [1, 2]}
    assert json.dumps(record.to_dict()) == json.dumps(data)


def test_a_key_an_older_document_lacks_stays_out_until_it_is_set():
    data = {k: v for k, v in document.new_record(status="ok").items() if k not in ("measured", "tuned")}
    record = Record.from_dict(data)
    assert "measured" not in record.to_dict() and "tuned" not in record.to_dict()
    record.tuned = {"config": {"BLOCK": 128}, "source": "cached"}
    assert record.to_dict()["tuned"] == {"config": {"BLOCK": 128}, "source": "cached"}


@pytest.mark.parametrize("data, message", [
    ({"timing": {"median_ms": "fast"}}, "record.timing.median_ms: 'fast' is a string; allowed: a number or null"),
    ({"run_index": True}, "record.run_index: True is true/false; allowed: an integer or null"),
    ({"flags": ["ok", 3]}, "record.flags[1]: 3 is an integer; allowed: a string"),
    ({"flags": None}, "record.flags: None is null; allowed: a list of strings"),
    ({"check": [1]}, "record.check: [1] is a list; allowed: an object (Check) or null"),
    ({"diagnosis": [{"rule": 5}]}, "record.diagnosis[0].rule: 5 is an integer; allowed: a string or null"),
])
def test_a_wrong_type_is_one_error_naming_key_value_and_what_is_allowed(data, message):
    with pytest.raises(RecordError) as err:
        Record.from_dict(data)
    assert str(err.value) == message


def test_fields_read_as_types_and_write_back_by_key():
    record = read_record(document.new_record(status="ok", timing={"median_ms": 2.0, "n": 3}))
    assert isinstance(record.timing, Timing) and record.timing.median_ms == 2.0
    assert read_record(record) is record
    record["traffic"] = {"gbps": 10.0}  # code that still writes a part by key gets the dataclass
    assert isinstance(record.traffic, Traffic) and record["traffic"].gbps == 10.0
    record.traffic.clear_speed()
    assert record.to_dict()["traffic"]["gbps"] is None


# -- flags ---------------------------------------------------------------------------------------
def test_each_flag_kind_reads_back_from_its_own_text():
    for kind in Flag:
        text = kind.format(**{name: "x" for name in _fields(kind.template)})
        assert Flag.of(text) is kind, (kind, text)


def _fields(template: str) -> list[str]:
    import string

    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


def test_the_emitters_texts_have_their_kinds():
    from workbench.engine.measure.bench import contention_flag, convergence_flag
    from workbench.engine.measure.graph_mode import FLAG_FLUSHED, FLAG_WARM
    from workbench.engine.measure.launch_floor import below_floor_flag
    from workbench.engine.worker.execute import CACHED_FLAG
    from workbench.results.document import INTERPRETER_FLAG
    from workbench.watch.diff import FAILED_FLAG, STALE_FLAG

    assert Flag.of(contention_flag(0.0, 2.0, 1.0)) is Flag.CPU_CONTENDED
    assert Flag.of(convergence_flag([1.0, 2.0, 4.0], 0.005, 100.0)) is Flag.NOT_CONVERGED
    assert Flag.of(below_floor_flag({"median_ms": 0.001}, 0.005)) is Flag.BELOW_LAUNCH_FLOOR
    assert {Flag.of(FLAG_FLUSHED), Flag.of(FLAG_WARM)} == {Flag.GRAPH_REPLAY}
    assert Flag.of(CACHED_FLAG) is Flag.BUILD_CACHED
    assert Flag.of(INTERPRETER_FLAG) is Flag.INTERPRETER
    assert Flag.of(STALE_FLAG.format(error="boom")) is Flag.WATCH_STALE
    assert Flag.of(FAILED_FLAG.format(then="mine.py sha256 0123456789ab")) is Flag.WATCH_FAILED
    assert Flag.of("a line of a newer version") is None and Flag.of(3) is None


def test_flags_written_from_the_enum_read_as_they_always_did():
    from workbench.engine.measure.ceilings import Ceilings
    from workbench.engine.measure.cpu_bound import cpu_bound_failure
    from workbench.engine.measure.launch_floor import below_floor_flag
    from workbench.engine.measure.timing import unjoined_failure
    from workbench.engine.measure.traffic import above_peak

    assert below_floor_flag({"median_ms": 0.001}, 0.005) == (
        "median 0.001 ms is below the launch floor 0.005 ms: within launch noise, not a kernel speed")
    assert cpu_bound_failure(0.001, 4096, 1.0, 0.1) == (
        "CPU bound: a median of 0.001 ms for 4096 bytes is below 1/3 of a warm copy of as many bytes on this "
        "CPU (1 ms, 0.1 ms of it the copy's overhead): no work of that size fits in that time")
    streams = unjoined_failure([5.0] * 5, 1.0)
    assert streams.startswith("streams gate: work left on another stream: after the timed stream's end event a "
                              "device-wide synchronize still waited 5 ms (median of 5) against a 1 ms median")
    assert Flag.of(streams) is Flag.STREAMS_GATE
    breach = above_peak({"gbps": 9000.0, "l2_resident": False}, Ceilings(datasheet_gbps=4800.0))
    assert breach is not None and breach.startswith("9000 GB/s is above the physical bound +5% (4800 GB/s: ")
    assert Flag.of(breach) is Flag.ABOVE_PEAK


def test_records_are_asked_for_flag_kinds_not_prefixes():
    contended = Flag.CPU_CONTENDED.format(detail="while timing ...")
    record = {"flags": [contended, "something else"]}
    assert has_flag(record, Flag.CPU_CONTENDED) and not has_flag(record, Flag.NOT_CONVERGED)
    assert first_flag(record, Flag.CPU_CONTENDED) == contended
    assert has_flag(Record.from_dict(record), Flag.CPU_CONTENDED) and not has_flag(None, Flag.CPU_CONTENDED)
    assert flag_kinds(None) == set()
    typed = Record()
    assert typed.add_flag(Flag.TRUST, detail="graded against ...") == "trust: graded against ..."
    assert typed.flag_kinds() == {Flag.TRUST}


def test_a_document_with_a_value_of_the_wrong_type_is_refused_naming_file_key_and_value(tmp_path):
    doc = document.new_document({}, {})
    doc["results"] = [document.new_record(status="ok"), document.new_record(status="ok", build_ms="12 ms")]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError) as err:
        document.load(path)
    assert str(err.value) == f"{path}: results[1].build_ms: '12 ms' is a string; allowed: a number or null"
    doc["results"][1]["build_ms"] = 12.0
    path.write_text(json.dumps(doc))
    assert document.load(path)["results"][1]["build_ms"] == 12.0


def test_compare_reads_the_typed_fields_of_both_documents():
    from workbench.results.baseline import compare_documents

    def rec(median, flags=()):
        return document.new_record(op="gelu", label="triton", shape={"N": 8}, dtype="float32", status="ok",
                                   timing={"median_ms": median, "p20_ms": median * 0.99, "p80_ms": median * 1.01,
                                           "timer": "cuda_event"}, flags=list(flags))
    now = {"results": [rec(2.0, [Flag.CPU_CONTENDED.format(detail="waited")])], "environment": {}}
    then = {"results": [rec(1.0)], "environment": {}}
    (row,) = compare_documents(now, then).rows
    assert (row.verdict, row.ratio, row.median_ms, row.baseline_median_ms, row.contended) == ("slower", 2.0, 2.0, 1.0, True)


def test_the_worker_sends_a_record_that_reads_back_or_fails_the_row_naming_the_value():
    from types import SimpleNamespace

    from workbench.engine.worker.execute import result_payload

    row = SimpleNamespace(record=lambda: document.new_record(op="gelu", label="triton"))
    good = Record(op="gelu", label="triton", status="ok", flags=["a note"], timing=Timing(median_ms=1.0))
    assert result_payload(row, good) == good.to_dict()
    bad = Record(op="gelu", label="triton", status="ok", flags=["a note"], recompiles="3")  # type: ignore[arg-type]
    sent = result_payload(row, bad)
    assert sent["status"] == "failed" and sent["flags"] == ["a note"] and sent["timing"] is None
    assert sent["error"] == "result record: record.recompiles: '3' is a string; allowed: an integer or null"
