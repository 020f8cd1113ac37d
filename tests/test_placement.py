"""Several devices without processes (issue #20): the --devices request, the placement rules,
merging and ordering, per-device references, plugin files shipped by content, and the spread
driver with fake places (engine/spread.py: events relayed from the calling thread)."""

from __future__ import annotations

import threading

import pytest

from cli_fakes import fake_plan, session_file, user_dirs  # noqa: F401 (fixtures)
from cli_fakes import run as cli_run
from workbench.cli.main import parse_args
from workbench.device_list import parse_devices, resolve_devices
from workbench.engine.multi.merge import device_name_of, merge_documents
from workbench.engine.options import RunOptions
from workbench.engine.multi.placement import place_rows, rows_by_place
from workbench.engine.rows import Row
from workbench.engine.multi.ship import mapped_back, pack, unpack
from workbench.engine.multi.spread import Part, local_parts, requested_devices, run_parts
from workbench.errors import WorkbenchError
from workbench.events import Result, Started
from workbench.session.api import dump_session, parse_session
from workbench.session.model import RunSpec, Session, Settings


def _row(run_index, label, sweep, device="cuda:0"):
    return Row(run_index=run_index, op="gelu", impl=label, label=label, params={}, shape={"M": 4}, dtype="float32",
               sweep_value=sweep, actions=("check", "bench"), settings=Settings(), device=device)


def _sweep(impls, values, run_index=0, device="cuda:0"):
    """Rows in expand()'s order: implementation, then sweep point."""
    return [_row(run_index, impl, v, device) for impl in impls for v in values]


# -- the request ------------------------------------------------------------------------------
def test_devices_request_is_parsed_and_resolved_against_the_host():
    assert parse_devices("all") == ("all",)
    assert parse_devices("cuda:0, cuda:2") == ("cuda:0", "cuda:2")
    assert resolve_devices(("all",), 4) == ["cuda:0", "cuda:1", "cuda:2", "cuda:3"]
    assert resolve_devices(("all",), 0) == ["cpu"]  # a host without a GPU: today's CPU run
    assert resolve_devices(("cuda:0", "cuda:2"), 4) == ["cuda:0", "cuda:2"]


@pytest.mark.parametrize("value, words", [("gpu0", "'gpu0'"), ("cuda:0,cuda:0", "twice"), ("cuda:0,,cuda:1", "''"),
                                          ("cpu,cuda:0", "'cpu'"), ("cuda", "'cuda'")])
def test_a_bad_request_names_the_value_and_what_is_allowed(value, words):
    with pytest.raises(WorkbenchError) as info:
        parse_devices(value)
    assert words in str(info.value) and "--devices" in str(info.value)


def test_cuda_visible_devices_limits_what_all_means():
    from workbench.device_list import visible_gpu_count

    assert visible_gpu_count(None) is None
    assert [visible_gpu_count(v) for v in ("0,2", "", "3", "1,-1,2", "GPU-8a1b,GPU-77cd")] == [2, 0, 1, 1, 2]


def test_a_device_the_host_lacks_is_refused():
    with pytest.raises(WorkbenchError, match=r"cuda:2 is not on this host \(it has cuda:0..cuda:1\)"):
        resolve_devices(("cuda:0", "cuda:2"), 2)


def test_the_cli_refuses_an_unknown_device_with_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        parse_args(["--replay", "smoke-quick", "--devices", "gpu:1"])
    assert info.value.code == 2
    assert "'gpu:1'" in capsys.readouterr().err
    assert parse_args(["--replay", "smoke-quick", "--devices", "cuda:1,cuda:0"]).devices == ("cuda:1", "cuda:0")


def test_the_session_setting_is_checked_and_kept_at_session_level_only():
    text = "schema_version: 1\nname: s\nsettings: {devices: all}\nruns: [{op: gelu}]\n"
    session = parse_session(text)
    assert session.settings.devices == "all"
    assert requested_devices(session, RunOptions()) == ("all",)
    assert requested_devices(session, RunOptions(devices=("cuda:1",))) == ("cuda:1",)  # the flag wins
    assert "devices: all" in dump_session(session)
    assert "devices" not in dump_session(parse_session(text.replace("settings: {devices: all}\n", "")))
    with pytest.raises(WorkbenchError, match=r"settings.devices.*'gpu'"):
        parse_session(text.replace("devices: all", "devices: gpu"))
    with pytest.raises(WorkbenchError, match=r"runs\[0\].settings.devices: is a session setting"):
        parse_session("schema_version: 1\nname: s\nruns: [{op: gelu, settings: {devices: all}}]\n")


# -- placement --------------------------------------------------------------------------------
def test_a_points_implementations_stay_together_and_points_spread():
    rows = _sweep(["manual", "pytorch", "triton"], [128, 256, 512, 1024])
    placement = place_rows(rows, 2)
    for value in (128, 256, 512, 1024):
        assert len({placement[(0, impl, value)] for impl in ("manual", "pytorch", "triton")}) == 1
    assert sorted(placement[(0, "manual", v)] for v in (128, 256, 512, 1024)) == [0, 0, 1, 1]
    assert place_rows(rows, 2) == placement  # the same every time


def test_runs_spread_and_load_balances_by_rows():
    rows = _sweep(["a", "b", "c"], [None], run_index=0) + _sweep(["a"], [None], run_index=1) + \
        _sweep(["a"], [None], run_index=2)
    placement = place_rows(rows, 2)
    assert placement[(0, "a", None)] == 0  # the 3-row point fills place 0 ...
    assert placement[(1, "a", None)] == 1 and placement[(2, "a", None)] == 1  # ... the next points go to 1


def test_cpu_rows_stay_on_the_first_place_and_one_place_takes_everything():
    rows = _sweep(["a"], [1, 2], device="cpu") + _sweep(["b"], [1, 2], run_index=1)
    placement = place_rows(rows, 3)
    assert placement[(0, "a", 1)] == placement[(0, "a", 2)] == 0
    assert {placement[(1, "b", 1)], placement[(1, "b", 2)]} == {0, 1}  # CPU rows do not load place 0
    assert set(place_rows(rows, 1).values()) == {0}
    shares = rows_by_place(rows, placement, 3)
    assert [len(s) for s in shares] == [3, 1, 0] and shares[0][0].key == (0, "a", 1)
    with pytest.raises(ValueError):
        place_rows(rows, 0)


# -- merging ----------------------------------------------------------------------------------
def _doc(device_name, records, ceilings, cancelled=False):
    return {"schema_version": 1, "provenance": {"session": "s"}, "ab": [], "cancelled": cancelled,
            "cancel_signal": "SIGINT" if cancelled else None,
            "environment": {"device": device_name, "driver": "580", "ceilings": ceilings, "datasheet": None},
            "results": records}


def _record(row, device, median_ms):
    record = row.record()
    record.update(device=device, status="ok", timing={"median_ms": median_ms})
    return record


def test_merged_document_is_in_session_order_with_each_devices_references():
    rows = _sweep(["manual", "pytorch"], [1, 2, 3])
    placement = place_rows(rows, 2)
    devices = ["cuda:0", "cuda:1"]
    shares = rows_by_place(rows, placement, 2)
    parts = [(devices[i], _doc(["NVIDIA H200", "NVIDIA A100"][i], [_record(r, devices[i], 1.0) for r in shares[i]],
                               {"copy_gbps": [4200.0, 1800.0][i]}, cancelled=i == 1)) for i in range(2)]
    doc = merge_documents(parts, [r.key for r in rows])
    assert [(r["label"], r["sweep_value"]) for r in doc["results"]] == [(r.label, r.sweep_value) for r in rows]
    assert doc["environment"]["device"] == "NVIDIA H200"  # the first device's fields as before
    assert doc["environment"]["devices"]["cuda:1"]["ceilings"] == {"copy_gbps": 1800.0}
    assert doc["cancelled"] is True and doc["cancel_signal"] == "SIGINT"
    by_device = {r["device"]: device_name_of(r, doc) for r in doc["results"]}
    assert by_device == {"cuda:0": "NVIDIA H200", "cuda:1": "NVIDIA A100"}
    with pytest.raises(KeyError, match="no place answered"):
        merge_documents(parts[:1], [r.key for r in rows])


def test_one_device_document_keeps_its_shape():
    rows = _sweep(["manual"], [None])
    doc = merge_documents([("cuda:0", _doc("NVIDIA H200", [_record(rows[0], "cuda:0", 1.0)], {}))], [rows[0].key])
    assert set(doc) == {"schema_version", "provenance", "ab", "cancelled", "cancel_signal", "environment", "results"}
    assert device_name_of(doc["results"][0], doc) == "NVIDIA H200"
    plain = _doc("NVIDIA H200", [], {})
    assert device_name_of({"device": "cuda:0"}, plain) == "NVIDIA H200"
    assert device_name_of({"device": "cpu"}, plain) == "cpu"


# -- shipping plugin files --------------------------------------------------------------------
def test_plugin_files_travel_by_content(tmp_path):
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "my_op.py").write_text("X = 1\n")
    (tmp_path / "ops" / "kernel.cu").write_text("// cuda\n")
    (tmp_path / "ops" / "__pycache__").mkdir()
    (tmp_path / "ops" / "__pycache__" / "my_op.pyc").write_bytes(b"stale")
    (tmp_path / "single.py").write_text("Y = 2\n")
    paths = [str(tmp_path / "ops"), str(tmp_path / "single.py")]
    bundle = pack(paths)
    mapping = unpack(bundle, tmp_path / "there")
    assert (tmp_path / "there" / "0" / "ops" / "my_op.py").read_text() == "X = 1\n"
    assert not (tmp_path / "there" / "0" / "ops" / "__pycache__").exists()
    assert open(mapping[paths[1]]).read() == "Y = 2\n" and mapping[paths[1]].endswith("single.py")
    assert mapped_back([mapping[paths[0]], "other"], mapping) == [paths[0], "other"]
    (tmp_path / "single.py").write_text("Y = 3\n")
    assert pack(paths).sha256 != bundle.sha256
    with pytest.raises(FileNotFoundError, match="missing.py"):
        pack([str(tmp_path / "missing.py")])


# -- the spread driver, with fake places -------------------------------------------------------
def test_local_parts_give_each_device_its_rows_and_the_ab_rows_to_the_first():
    rows = _sweep(["a", "b"], [1, 2, 3]) + _sweep(["c"], [None], run_index=1, device="cpu")
    calls = []

    def run_part(session, *, on_event, stop, options, workers):
        calls.append((options.rows_here, options.ab, workers, options.devices))
        return {}

    session = Session(name="s", runs=(RunSpec(op="gelu"),))
    parts = local_parts(session, rows, ["cuda:0", "cuda:3"], RunOptions(devices=("all",)), run_part, "POOL")
    assert [p.device for p in parts] == ["cuda:0", "cuda:3"]
    for part in parts:
        part.run(None, threading.Event())
    here0, here1 = calls[0][0], calls[1][0]
    assert set(here1.values()) == {"cuda:3"} and here0[(1, "c", None)] == "cpu"
    assert set(here0) | set(here1) == {r.key for r in rows} and not set(here0) & set(here1)
    assert [c[1:] for c in calls] == [(True, "POOL", None), (False, None, None)]


def test_run_parts_relays_events_from_the_calling_thread_and_merges():
    rows = _sweep(["a"], [1, 2, 3, 4])
    shares = rows_by_place(rows, place_rows(rows, 2), 2)
    seen = []

    def fake(device, share, barrier):
        def run(on_event, stop):
            barrier.wait(timeout=5)  # both places run at once
            for row in share:
                on_event(Started(row.key, "gelu", "a", "4", device))
                on_event(Result(row.key, _record(row, device, 1.0)))
            return _doc("NVIDIA H200", [_record(r, device, 1.0) for r in share], {})
        return run

    barrier = threading.Barrier(2)
    parts = [Part(d, s, fake(d, s, barrier)) for d, s in zip(["cuda:0", "cuda:1"], shares)]
    doc = run_parts(parts, [r.key for r in rows], lambda e: seen.append((threading.current_thread(), e)),
                    threading.Event())
    assert {t for t, _ in seen} == {threading.current_thread()}
    assert sorted(e.row for _, e in seen if isinstance(e, Result)) == sorted(r.key for r in rows)
    assert [r["device"] for r in doc["results"]] == ["cuda:0", "cuda:1", "cuda:0", "cuda:1"]


def test_run_parts_raises_a_places_error_and_stops_the_others():
    stop = threading.Event()

    def bad(on_event, stop_flag):
        raise WorkbenchError("plugin failed to load")

    def waits(on_event, stop_flag):
        assert stop_flag.wait(5)
        return _doc("cpu", [], {})

    with pytest.raises(WorkbenchError, match="plugin failed"):
        run_parts([Part("cuda:0", [], waits), Part("cuda:1", [], bad)], [], lambda e: None, stop)
    assert stop.is_set()


def test_compare_matches_rows_only_on_a_device_of_the_same_name():
    from workbench.results.baseline import compare_documents

    rows = _sweep(["pytorch"], [1, 2])
    timing = {"median_ms": 1.0, "p20_ms": 0.99, "p80_ms": 1.01}
    baseline = _doc("NVIDIA H200", [dict(_record(r, "cuda:0", 1.0), timing=timing) for r in rows], {})
    slow = {"median_ms": 2.0, "p20_ms": 1.99, "p80_ms": 2.01}
    parts = [("cuda:0", _doc("NVIDIA H200", [dict(_record(rows[0], "cuda:0", 2.0), timing=slow)], {})),
             ("cuda:1", _doc("NVIDIA A100", [dict(_record(rows[1], "cuda:1", 2.0), timing=slow)], {}))]
    current = merge_documents(parts, [r.key for r in rows])
    verdicts = [r.verdict for r in compare_documents(current, baseline).rows]
    assert verdicts == ["slower", "n/a"]  # the A100's row is not held against the H200's


def test_ceilings_written_by_two_processes_at_once_keep_both(tmp_path):
    """Two devices' workers calibrating at once write the one ceilings cache (engine/ceilings.py
    locks its read-modify-write); threads here stand in for the processes: the same lock."""
    from workbench.engine.measure.ceilings import CeilingCache

    def write(name):
        for i in range(30):
            CeilingCache(tmp_path).put("GPU | driver 1", f"{name}{i}", float(i))

    threads = [threading.Thread(target=write, args=(n,)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    entry = CeilingCache(tmp_path).load()["GPU | driver 1"]
    assert {f"a{i}" for i in range(30)} | {f"b{i}" for i in range(30)} <= set(entry)


def test_the_cli_hands_devices_and_cluster_to_the_engine(capsys, user_dirs, session_file, fake_plan):
    code, _out, err = cli_run(capsys, "--replay", str(session_file), "--devices", "cuda:1,cuda:0", "--cluster", "ray")
    assert code == 0, err
    options = fake_plan.calls[0][1]
    assert options.devices == ("cuda:1", "cuda:0") and options.cluster == "ray"
    code, _out, err = cli_run(capsys, "--list", "--devices", "all")
    assert code == 2 and "--devices goes with --replay FILE or the TUI" in err


def test_a_ray_result_is_relabelled_into_a_new_record():
    """--cluster ray names each row's place (node/device); the event's own record dict, which the
    actor's caller may still hold, is left as it came."""
    from workbench.engine.multi.ray_cluster import _relabel_event
    from workbench.events import Result

    record = {"device": "cpu", "status": "ok"}
    event = Result((0, "pytorch", None), record)
    relabelled = _relabel_event(event, "10.0.0.7/cuda:1")
    assert relabelled.record == {"device": "10.0.0.7/cpu", "status": "ok"} and record["device"] == "cpu"
    assert _relabel_event(Result((0, "x", None), {"device": "cuda:0"}), "10.0.0.7/cuda:1").record["device"] \
        == "10.0.0.7/cuda:1"
