"""`--compare` logic on hand-made result documents (CONTRACTS.md): slower / faster / same."""

from __future__ import annotations

import pytest
from results_docs import CONTRACT_RECORD_KEYS, document, record

from workbench.results.baseline import compare_documents, comparison_table, verdict


def test_factory_records_have_every_contract_key():
    assert set(CONTRACT_RECORD_KEYS) <= set(record())


@pytest.mark.parametrize("now, base, expected", [
    # p20 above baseline p80 and median +10%: slower
    (dict(median=1.10, p20=1.08, p80=1.12), dict(median=1.0, p20=0.99, p80=1.01), "slower"),
    # median +10% but the spreads overlap: same
    (dict(median=1.10, p20=0.95, p80=1.20), dict(median=1.0, p20=0.98, p80=1.02), "same"),
    # spreads apart but the median only +3% (< 5% threshold): same
    (dict(median=1.03, p20=1.025, p80=1.035), dict(median=1.0, p20=0.995, p80=1.005), "same"),
    # symmetric: faster
    (dict(median=0.90, p20=0.89, p80=0.91), dict(median=1.0, p20=0.99, p80=1.01), "faster"),
    (dict(median=0.97, p20=0.965, p80=0.975), dict(median=1.0, p20=0.995, p80=1.005), "same"),
    (dict(median=1.0), dict(median=1.0), "same"),
])
def test_verdicts(now, base, expected):
    word, ratio = verdict(record(**now), record(**base), 0.05)
    assert word == expected
    assert ratio == pytest.approx(now["median"] / base["median"])


def test_threshold_is_respected():
    now, base = record(median=1.03, p20=1.025, p80=1.035), record(median=1.0, p20=0.99, p80=1.01)
    assert verdict(now, base, 0.05)[0] == "same"
    assert verdict(now, base, 0.01)[0] == "slower"


@pytest.mark.parametrize("now_status, base_status", [("failed", "ok"), ("ok", "unavailable"), ("skipped", "skipped")])
def test_rows_without_timing_are_not_compared(now_status, base_status):
    word, ratio = verdict(record(status=now_status), record(status=base_status), 0.05)
    assert (word, ratio) == ("n/a", None)


def test_rows_timed_under_the_triton_interpreter_are_not_compared():
    """Host time of numpy's emulation is not kernel speed: 1.6x apart is n/a, not slower."""
    now, base = record(median=1.6, p20=1.58, p80=1.62), record(median=1.0)
    assert verdict(now, base, 0.05)[0] == "slower"
    for side in (now, base):
        side["timing"]["timer"] = "interpreter"
        assert verdict(now, base, 0.05) == ("n/a", None)
        side["timing"]["timer"] = "cuda_event"


def test_rows_match_by_op_label_shape_dtype_and_sweep_value():
    base = document(record("triton", 1.0, sweep_value=128, shape={"M": 128}),
                    record("triton", 2.0, sweep_value=256, shape={"M": 256}),
                    record("pytorch", 1.0), record("gone", 1.0))
    now = document(record("triton", 2.0, sweep_value=256, shape={"M": 256}, run_index=3),  # other run index: still matched
                   record("triton", 1.5, sweep_value=128, shape={"M": 128}),
                   record("pytorch", 1.0, dtype="float16"),                                 # other dtype: new
                   record("fresh", 1.0))
    comparison = compare_documents(now, base, 0.05)
    got = {(r.label, r.sweep_value, r.dtype): r.verdict for r in comparison.rows}
    assert got == {("triton", 256, "float32"): "same", ("triton", 128, "float32"): "slower",
                   ("pytorch", None, "float16"): "new", ("fresh", None, "float32"): "new",
                   ("pytorch", None, "float32"): "missing", ("gone", None, "float32"): "missing"}
    assert comparison.regressions == 1 and not comparison.different_gpu


def test_repeated_rows_match_in_order():
    base = document(record("t", 1.0), record("t", 2.0))
    now = document(record("t", 1.0), record("t", 2.0))
    assert [r.verdict for r in compare_documents(now, base).rows] == ["same", "same"]


def test_different_gpus_are_flagged():
    comparison = compare_documents(document(record(), device="NVIDIA H200"),
                                   document(record(), device="NVIDIA A100-SXM4-80GB"))
    assert comparison.different_gpu
    assert not compare_documents(document(record()), document(record(), device=None)).different_gpu


def test_comparison_as_dict_and_table():
    comparison = compare_documents(document(record(median=2.0, p20=1.9, p80=2.1)), document(record()))
    data = comparison.as_dict("base.json")
    assert data["baseline"] == "base.json" and data["rows"][0]["verdict"] == "slower"
    assert data["rows"][0]["ratio"] == pytest.approx(2.0)
    assert "1 slower" in comparison.summary()
    assert comparison_table(comparison).row_count == 1


def test_many_missing_rows_are_counted_under_the_table_not_listed():
    """A baseline of a larger session listed each of its rows as `missing`; past MISSING_SHOWN
    they are one line under the table, and the document still has every one."""
    from workbench.results.baseline import MISSING_SHOWN

    base = document(record("t"), *[record(f"impl{i}") for i in range(MISSING_SHOWN + 7)])
    comparison = compare_documents(document(record("t")), base)
    table = comparison_table(comparison)
    assert table.row_count == 1 + MISSING_SHOWN
    assert table.caption == "... and 7 more baseline row(s) not in this run (missing)"
    assert len(comparison.as_dict()["rows"]) == MISSING_SHOWN + 8
    assert comparison_table(compare_documents(document(record("t")), document(record("t")))).caption is None


def test_a_verdict_on_rows_timed_with_the_cpu_contended_says_so():
    """A new user's `140.005x slower`, exit 1, on a row flagged `CPU contended`: the comparison
    did not mention the flag. It still counts (a gate must not pass a regression for a busy
    machine), but the row and the table say it."""
    busy = record("manual", 140.0, p20=139.0, p80=141.0)
    busy["flags"] = ["CPU contended: while timing, the worker's threads waited 0.90 s for a core per second"]
    comparison = compare_documents(document(busy, record("triton", 1.0)),
                                   document(record("manual", 1.0), record("triton", 1.0)))
    rows = {r.label: r for r in comparison.rows}
    assert rows["manual"].verdict == "slower" and rows["manual"].contended and not rows["triton"].contended
    assert comparison.regressions == 1 and comparison.as_dict()["rows"][0]["contended"] is True
    table = comparison_table(comparison)
    assert "timed with the CPU contended" in table.caption
    assert [str(c) for c in table.columns[-1]._cells] == ["slower*", "same"]
    # the flag on the baseline's side counts too
    assert compare_documents(document(record("manual")), document(busy)).rows[0].contended


def test_a_same_verdict_past_the_threshold_is_explained_under_the_table():
    """A new user saw `1368.000x same` (the spreads overlapped) with nothing saying why: the
    caption says the spreads decided it, and only where a `same` row's ratio is past the threshold."""
    wide = record("manual", 10.0, p20=0.5, p80=20.0)
    comparison = compare_documents(document(wide, record("triton", 1.0)),
                                   document(record("manual", 1.0), record("triton", 1.0)))
    assert [r.verdict for r in comparison.rows] == ["same", "same"]
    caption = comparison_table(comparison).caption
    assert "medians differ by more than 5%" in caption and "spreads overlap" in caption
    # and the row it is about is marked (a table of many rows said it of none in particular)
    verdicts = [str(c) for c in comparison_table(comparison).columns[-1]._cells]
    assert verdicts == ["same?", "same"] and caption.startswith("? same with a ratio past")
    close = record("manual", 1.03, p20=1.025, p80=1.035)  # same because under the threshold: no note
    assert comparison_table(compare_documents(document(close), document(record("manual", 1.0)))).caption is None


def test_an_ab_line_says_whose_verdict_it_is():
    """'manual / triton128 = 0.03092x (...): faster' named neither side (a new user's try)."""
    from workbench.results.report_diagnosis import ab_line

    entry = {"status": "ok", "a": "triton", "b": "pytorch", "ratio": 0.8, "ci_low": 0.79, "ci_high": 0.81,
             "n": 200, "verdict": "faster"}
    assert ab_line(entry) == "triton / pytorch = 0.8x (95% CI 0.79-0.81, 200 pairs): triton faster, 1.25x"
    assert ab_line({**entry, "ratio": 2.0, "ci_low": 1.9, "ci_high": 2.1, "verdict": "slower"}).endswith(
        "triton slower, 2x")
    assert ab_line({**entry, "ratio": 1.0, "ci_low": 0.99, "ci_high": 1.01, "verdict": "no difference"}).endswith(": no difference")
    assert ab_line({**entry, "timer": "interpreter"}).endswith(
        "triton faster, 1.25x (a side ran under the Triton interpreter: host time, not GPU speed)")


def test_an_n_a_verdict_is_explained_under_the_table():
    """Interpreter rows showed both times and `n/a`, with nothing saying why (a new user's try)."""
    emulated = record("triton", 4.9)
    emulated["timing"]["timer"] = "interpreter"
    comparison = compare_documents(document(emulated), document(record("triton", 5.0)))
    assert [r.verdict for r in comparison.rows] == ["n/a"]
    assert "n/a: not compared" in comparison_table(comparison).caption
    assert comparison_table(compare_documents(document(record("triton")), document(record("triton")))).caption is None
