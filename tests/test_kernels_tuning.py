"""The kernels' autotuning (workbench/tuning.py), the one-pass softmax plan (kernels/_onepass.py),
the TMA GEMM's path choice, and 64-bit offsets past 2^31 elements (#14 part 4): CPU-only tests
(nothing is timed; timings here are stand-ins passed to the tuner)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

import workbench.kernels
from workbench import tuning as at
from workbench.kernels import _onepass as op1
from workbench.kernels import _softmax_rows as rows_kernel
from workbench.kernels._gemm import TRITON_PARAMS, use_tma
from workbench.registry import BuildContext, discover

REGISTRY = discover()
KERNELS = Path(workbench.kernels.__file__).parent


# -- autotune ------------------------------------------------------------------------------------
def _key(**kw):
    return at.TuneKey("softmax", "triton", "NVIDIA H200 sm_90", {"M": 64, "N": 1024}, "float32", **kw)


class _Out:
    """A stand-in output: the tuner compares outputs with torch.allclose on .float()."""

    def __init__(self, value):
        import torch
        self.t = torch.full((4,), float(value))

    def float(self):
        return self.t


def test_autotune_picks_the_fastest_agreeing_config_and_caches_it(tmp_path):
    import torch

    outputs = {4: 1.0, 8: 1.0, 16: 2.0, 32: 1.0}  # 16 computes something else
    times = {4: 0.9, 8: 0.5, 16: 0.1, 32: 0.7}
    calls = []

    def run(config):
        calls.append(config["num_warps"])
        if config["num_warps"] == 32:
            raise RuntimeError("out of resources: shared memory")
        return torch.full((4,), outputs[config["num_warps"]])

    def bench(fn):
        return times[calls[-1]] if fn() is not None else None

    candidates = [{"num_warps": w} for w in (4, 8, 16, 32)]
    tuned = at.autotune(_key(), candidates, run, tmp_path, bench=bench)
    assert tuned.config == {"num_warps": 8} and tuned.source == "tuned"
    assert set(tuned.timings_ms) == {"num_warps=4", "num_warps=8"}
    assert "num_warps=16 (output differs" in tuned.note and "num_warps=32 (RuntimeError" in tuned.note
    saved = json.loads(_key().file(tmp_path).read_text())
    assert saved["config"] == {"num_warps": 8} and saved["key"] == _key().text()
    again = at.autotune(_key(), candidates, lambda c: pytest.fail("a cached choice is not re-timed"), tmp_path)
    assert again.source == "cached" and again.config == {"num_warps": 8}
    assert at.cached_config(_key(version="2"), tmp_path) is None  # another version: tuned afresh


def test_a_clock_drifting_during_tuning_does_not_pick_the_config_timed_first(tmp_path):
    """A power-limited GPU's clock falls while the tuner runs: every timing after the first comes
    out slower. Timed one after the other, the slower config (timed first) won; in rounds that
    alternate forward and backward, the linear drift adds the same to each median."""
    import torch

    true_ms = {"keep=0": 1.00, "keep=1": 0.98}  # keep=1 is 2% faster
    current, slots = [None], []

    def run(config):
        current[0] = f"keep={config['keep']}"
        return torch.ones(4)

    def bench(fn):
        fn()
        slots.append(current[0])
        return true_ms[current[0]] + 0.03 * (len(slots) - 1)  # 3% slower each timing: the clock falls

    tuned = at.autotune(_key(), [{"keep": 0}, {"keep": 1}], run, tmp_path, bench=bench)
    assert tuned.config == {"keep": 1}, tuned.timings_ms
    assert slots == ["keep=0", "keep=1", "keep=1", "keep=0"] * (at.ROUNDS // 2)  # forward, backward
    assert tuned.timings_ms["keep=1"] < tuned.timings_ms["keep=0"]
    assert f"median of {at.ROUNDS} alternating rounds" in tuned.note
    # the method the choice was made by is part of its key: a cached older choice is not reused
    assert at.METHOD in _key().text()


def test_a_config_that_fails_in_a_later_round_is_skipped_and_named(tmp_path):
    import torch

    benched = {"num_warps=4": 0, "num_warps=8": 0}
    current = [None]

    def run(config):
        current[0] = f"num_warps={config['num_warps']}"
        return torch.ones(4)

    def bench(fn):
        fn()
        benched[current[0]] += 1
        if current[0] == "num_warps=8" and benched[current[0]] == 2:
            raise RuntimeError("unspecified launch failure")
        return 0.1 if current[0] == "num_warps=8" else 0.5

    tuned = at.autotune(_key(), [{"num_warps": 4}, {"num_warps": 8}], run, tmp_path, bench=bench)
    assert tuned.config == {"num_warps": 4} and set(tuned.timings_ms) == {"num_warps=4"}
    assert "num_warps=8 (RuntimeError: unspecified launch failure)" in tuned.note
    assert benched == {"num_warps=4": at.ROUNDS, "num_warps=8": 2}  # not timed after it failed


def test_autotune_refuses_no_candidates_and_all_failing(tmp_path):
    with pytest.raises(ValueError):
        at.autotune(_key(), [], lambda c: None, tmp_path)

    def run(config):
        if config["num_warps"] != 4:
            raise RuntimeError("boom")
        return _Out(1)
    with pytest.raises(RuntimeError, match="no candidate ran"):
        at.autotune(_key(), [{"num_warps": 4}], run, tmp_path, bench=lambda fn: (_ for _ in ()).throw(RuntimeError("x")))


def test_without_a_gpu_the_first_candidate_is_the_config_and_the_note_says_why():
    spec = REGISTRY.op("softmax").make_spec({"M": 4, "N": 1024}, "float32")
    tuned = at.choose(BuildContext(device="cpu"), "softmax", "triton", spec, [{"num_warps": 4}, {"num_warps": 8}],
                      run=lambda c: pytest.fail("nothing is timed without a GPU"))
    assert tuned.config == {"num_warps": 4} and tuned.source == "default" and "no CUDA device" in tuned.note
    assert at.spec_shape(spec) == {"M": 4, "N": 1024}


def test_a_context_that_must_not_launch_takes_the_cached_choice_and_times_nothing(tmp_path, monkeypatch):
    """BuildContext.tune=False (the build-ahead worker: it compiles while another worker times a
    row on the same GPU): the builder's tuner launches nothing, and takes the cached choice or the
    first candidate; the timing worker's own build then tunes."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(at, "device_tag", lambda: "NVIDIA H200 sm_90")
    monkeypatch.setattr(at, "cache_root", lambda ctx: tmp_path)
    spec = REGISTRY.op("softmax").make_spec({"M": 64, "N": 1024}, "float32")
    ahead = BuildContext(device="cuda:0", tune=False)
    assert at.compiled_on_gpu(ahead) and not at.can_tune(ahead)
    assert at.can_tune(BuildContext(device="cuda:0")) and not at.can_tune(BuildContext(device="cuda:0", interpret=True))
    candidates = [{"num_warps": 4}, {"num_warps": 8}]
    never = lambda c: pytest.fail("the build-ahead context launched a candidate")  # noqa: E731
    tuned = at.choose(ahead, "softmax", "triton", spec, candidates, run=never)
    assert tuned.config == {"num_warps": 4} and tuned.source == "default" and "tuning off" in tuned.note
    key = at.TuneKey("softmax", "triton", "NVIDIA H200 sm_90", at.spec_shape(spec), "float32", "1",
                     at.triton_version(), at.GENERIC)  # a plain list: the generic one
    at._write(key, at.Tuned({"num_warps": 8}, "tuned", "x", {}, 0.1), tmp_path)
    assert at.choose(ahead, "softmax", "triton", spec, candidates, run=never).config == {"num_warps": 8}
    timed = []
    at.choose(BuildContext(device="cuda:0"), "softmax", "triton", spec, candidates, run=timed.append)
    assert timed == []  # the timing worker's build: cached now, so nothing timed either


def test_the_build_ahead_worker_builds_cuda_rows_in_a_context_that_must_not_launch(monkeypatch):
    from workbench.engine.worker import build_ahead
    from workbench.kernel_source import CudaSource
    from workbench.session.model import Settings

    seen = []
    impl = SimpleNamespace(source=CudaSource(Path("k.cu"), ("k",)), resolve_params=lambda p: {},
                           builder=lambda spec, params, ctx: seen.append(ctx))
    op = SimpleNamespace(get_impl=lambda name: impl, make_spec=lambda shape, dtype: (shape, dtype))
    row = SimpleNamespace(op="softmax", impl="cuda", device="cuda:0", shape={"M": 4096, "N": 262144},
                          dtype="bfloat16", params={}, actions=("bench",), settings=Settings())
    assert build_ahead.prebuild(SimpleNamespace(op=lambda name: op), row, False, None) == "cuda build"
    assert len(seen) == 1 and seen[0].tune is False and seen[0].device == "cuda:0"


def test_a_corrupt_cache_file_is_a_miss(tmp_path):
    path = _key().file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert at.cached_config(_key(), tmp_path) is None


def test_the_result_row_carries_the_choice():
    op = REGISTRY.op("softmax")
    spec = op.make_spec({"M": 4, "N": 1024}, "float32")
    fn = op.get_impl("triton").builder(spec, {}, BuildContext(device="cpu", interpret=True))
    assert fn.tuned["config"]["num_warps"] == 4 and fn.tuned["source"] == "default"
    assert rows_kernel.is_lecture(fn.tuned["config"])  # untuned: the lecture's kernel


# -- per-device candidate lists and keys (issue #40) ---------------------------------------------
H100 = "NVIDIA H100 80GB HBM3 sm_90"
H200 = "NVIDIA H200 sm_90"


@pytest.mark.parametrize("key, device, want", [
    ("H100 sm_90", H100, True), ("H100 sm_90", "NVIDIA H100 NVL sm_90", True), ("H100 sm_90", H200, False),
    ("H100 sm_90", "NVIDIA H1000 sm_90", False), ("H100 sm_90", "NVIDIA H100 80GB HBM3 sm_80", False),
    ("h200 sm_90", H200, True), ("A100 80GB sm_80", "NVIDIA A100 80GB PCIe sm_80", True),
    ("A100 80GB sm_80", "NVIDIA A100-SXM4-40GB sm_80", False)])
def test_a_device_key_matches_a_name_word_and_the_compute_capability(key, device, want):
    assert at.device_matches(key, device) is want


@pytest.mark.parametrize("bad", ["H100", "sm_90", "H100 90", "H100 sm_x"])
def test_a_malformed_device_key_is_refused_by_name(bad):
    with pytest.raises(ValueError, match=re.escape(repr(bad))):
        at.CandidateLists({bad: [{"num_warps": 4}]}, [{"num_warps": 4}])


def test_each_device_gets_its_own_list_and_any_other_the_generic_one():
    lists = at.CandidateLists({"H200 sm_90": [{"w": 1}, {"w": 2}], "H100 sm_90": [{"w": 3}]}, [{"w": 9}, {"w": 1}])
    assert lists.select(H200) == ("H200 sm_90", [{"w": 1}, {"w": 2}])
    assert lists.select(H100) == ("H100 sm_90", [{"w": 3}])
    assert lists.select("NVIDIA L40S sm_89") == (at.GENERIC, [{"w": 9}, {"w": 1}])
    assert lists.select(None) == (at.GENERIC, [{"w": 9}, {"w": 1}])
    with pytest.raises(ValueError, match="empty"):
        at.CandidateLists({"H100 sm_90": []}, [{"w": 1}])


def test_the_gemm_lists_differ_per_device_and_the_generic_list_holds_both():
    from workbench.kernels import _tma_gemm as tma

    lists = tma.candidate_lists()
    h100, h200, other = (lists.select(d)[1] for d in (H100, H200, "NVIDIA GH200 480GB sm_90"))
    assert h100 != h200 and h100 == tma.candidate_configs(H100) and h200 == tma.candidate_configs(H200)
    assert all(c in other for c in h100 + h200) and other[0] == h200[0]
    assert tma.candidate_configs() == other
    for configs in (h100, h200):  # every config launches: stream-K only with SUBTILE
        assert all(set(c) == set(tma.CONFIG_KEYS) for c in configs)
        assert all(c["SUBTILE"] for c in configs if c["STREAMK"]) and not configs[0]["STREAMK"]


def test_a_choice_is_keyed_by_device_triton_version_and_list(tmp_path, monkeypatch):
    lists = at.CandidateLists({"H200 sm_90": [{"w": 1}, {"w": 2}]}, [{"w": 1}, {"w": 2}, {"w": 3}])
    times = {1: 0.5, 2: 0.2, 3: 0.1}
    last = []

    def run(config):
        last.append(config["w"])
        return _Out(1.0)

    def bench(fn):
        fn()
        return times[last[-1]]

    shape = {"M": 64, "N": 1024}
    tuned = at.choose_on(H200, "softmax", "triton", shape, "float32", lists, "1", run, tmp_path, bench=bench)
    assert tuned.config == {"w": 2} and tuned.source == "tuned" and "no candidate list" not in tuned.note
    # the same device and Triton: the cached choice, nothing launched
    again = at.choose_on(H200, "softmax", "triton", shape, "float32", lists, "1", None, tmp_path)
    assert again.source == "cached" and again.config == {"w": 2}
    data = json.loads(next((tmp_path / "autotune").glob("*.json")).read_text())
    assert data["device"] == H200 and data["triton"] == at.triton_version() and data["candidates"] == "H200 sm_90"
    # another device never reads the H200's choice: it has no list, so it tunes over the generic one
    other = at.choose_on("NVIDIA L40S sm_89", "softmax", "triton", shape, "float32", lists, "1", run, tmp_path,
                         bench=bench)
    assert other.config == {"w": 3} and other.source == "tuned"
    assert other.note.startswith("autotune: no candidate list for NVIDIA L40S sm_89 (lists for H200 sm_90)")
    # another Triton version: a miss, so the first config of the device's list, untimed
    monkeypatch.setattr(at, "triton_version", lambda: "9.9.9")
    fresh = at.choose_on(H200, "softmax", "triton", shape, "float32", lists, "1", None, tmp_path)
    assert fresh.source == "default" and fresh.config == {"w": 1} and "triton 9.9.9" in fresh.note


def test_without_a_gpu_the_choice_is_the_generic_first(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    lists = at.CandidateLists({"H100 sm_90": [{"w": 5}]}, [{"w": 7}])
    spec = REGISTRY.op("softmax").make_spec({"M": 64, "N": 1024}, "float32")
    tuned = at.choose(None, "softmax", "triton", spec, lists)
    assert tuned.config == {"w": 7} and tuned.source == "default" and "no CUDA device" in tuned.note


# -- the one-pass softmax plan ---------------------------------------------------------------------
@pytest.mark.parametrize("n_cols, itemsize, want", [
    (16384, 4, (512, 8, 1, 4)), (16384, 2, (512, 4, 1, 8)), (1024, 4, (32, 8, 1, 4)),
    (262144, 4, (512, 8, 16, 4)), (262144, 2, (512, 4, 16, 8)), (4097, 4, (512, 16, 1, 1)),
    (1, 4, (32, 16, 1, 1)), (65536, 4, (512, 8, 4, 4))])
def test_onepass_plan(n_cols, itemsize, want):
    plan = op1.onepass_plan(n_cols, itemsize)
    assert (plan.threads, plan.packs, plan.cluster, plan.vec) == want
    assert plan.elements >= n_cols


def test_rows_past_a_16_block_cluster_take_the_two_pass_kernel():
    assert op1.onepass_plan(524288, 4) is None and not op1.fits(4, 524288, 4)
    assert op1.onepass_plan(262145, 4) is None  # odd length: scalar packs, 16 per thread
    assert op1.fits(4096, 262144, 4) and not op1.fits(2**28, 262144, 4)  # rows x 16 blocks over the grid


def _instantiated() -> dict[int, set[tuple[int, int, int, int]]]:
    """(threads, packs, spacks, keep, even) of the ONEPASS_CONFIGS_V* (spacks 0), ONEPASS_STAGED_V*,
    ONEPASS_KEPT_V* (keep 1), ONEPASS_EVEN_V* (keep 1, even 1) and ONEPASS_ROWS_V* macros in
    softmax.cu, by pack width."""
    text = (KERNELS / "softmax.cu").read_text()
    out = {}
    for vec_name, vec in (("V4", 4), ("V8", 8), ("V1", 1)):
        body = re.search(rf"#define ONEPASS_CONFIGS_{vec_name}\(X\)(.*?)\n(?!\s)", text, re.S).group(1)
        out[vec] = {(int(a), int(b), 0, 0, 0) for a, b in re.findall(r"X\((\d+), (\d+)\)", body)}
        for macro, letter, keep, even in (("STAGED", "S", 0, 0), ("KEPT", "K", 1, 0), ("EVEN", "E", 1, 1)):
            found = re.search(rf"#define ONEPASS_{macro}_{vec_name}\({letter}\)(.*?)\n(?!\s)", text, re.S)
            if found:
                out[vec] |= {(*map(int, m), keep, even)
                             for m in re.findall(rf"{letter}\((\d+), (\d+), (\d+)\)", found.group(1))}
        found = re.search(rf"#define ONEPASS_ROWS_{vec_name}\(R\)(.*?)\n(?!\s)", text, re.S)
        if found:  # one-block shapes, launched without a cluster (launch_row)
            out[vec] |= {(*map(int, m), 0) for m in re.findall(r"R\((\d+), (\d+), (\d+), (\d+)\)", found.group(1))}
    return out


@pytest.mark.parametrize("n_cols", [1, 100, 1024, 4096, 16384, 20000, 65536, 131072, 262144])
@pytest.mark.parametrize("itemsize", [4, 2])
def test_every_config_the_python_side_asks_for_is_instantiated(n_cols, itemsize):
    have = _instantiated()
    configs = op1.cluster_candidates(n_cols, itemsize) or [op1.onepass_plan(n_cols, itemsize)]
    configs += op1.row_candidates(n_cols, itemsize)
    for cfg in filter(None, configs):
        assert (cfg.threads, cfg.packs, cfg.spacks, cfg.keep, cfg.even) in have[cfg.vec], cfg
        assert not cfg.even or cfg.elements == n_cols  # EVEN drops the bounds checks: exact rows only
        assert cfg.elements >= n_cols and cfg.cluster <= op1.MAX_CLUSTER
        assert cfg.smem_bytes <= 227 * 1024  # sm_90's dynamic shared memory per block


def test_staged_shapes_are_instantiated_and_only_for_16_byte_packs():
    have = _instantiated()
    for vec, shapes in op1.STAGED_SHAPES.items():
        assert vec != 1 or not shapes  # cp.async copies 16 bytes: no scalar packs
        assert {(*s, 0, 0) for s in shapes} <= have[vec] and {(*s, 1, 0) for s in op1.KEPT_SHAPES[vec]} <= have[vec]
        assert {(*s, 1, 1) for s in op1.EVEN_SHAPES[vec]} == {c for c in have[vec] if c[4]}  # the twins, both sides
        assert set(op1.EVEN_SHAPES[vec]) <= set(op1.KEPT_SHAPES[vec])
    assert not any(s or k for _, _, s, k, _ in have[1])
    fp32 = op1.cluster_candidates(262144, 4)
    staged = [c for c in fp32 if c.spacks]
    assert staged and min(c.cluster for c in staged) < min(c.cluster for c in fp32 if not c.spacks)
    assert op1.config_from(staged[0].params(), 262144, 4) == staged[0]
    assert op1.config_from({"threads": 512, "packs": 8, "cluster": 16}, 262144, 4).spacks == 0  # an old cache


def test_cluster_candidates_start_with_the_measured_winner_and_end_with_the_plan():
    fp32 = op1.cluster_candidates(262144, 4)
    assert fp32[0] == op1.OnepassConfig(1024, 8, 4, 4, 8, 1)  # KEEP: 92.8% of copy on the H200 (round 2)
    assert fp32[-1] == op1.onepass_plan(262144, 4)         # 72.8%, always compared
    assert op1.OnepassConfig(1024, 8, 8, 4) in fp32         # the best register-only shape, 85.4%
    bf16 = op1.cluster_candidates(262144, 2)
    assert bf16[1] == op1.OnepassConfig(1024, 8, 2, 8, 8, 1)  # KEEP: 90.1%
    assert bf16[0] == op1.OnepassConfig(1024, 8, 2, 8, 8, 1, even=1)  # its EVEN twin (the row is 2 slices)
    assert not any(c.even for c in fp32) and not any(c.even for c in op1.cluster_candidates(200000, 2))
    assert op1.config_from(bf16[0].params(), 262144, 2) == bf16[0]
    for rows in (fp32, bf16):  # the KEEP variants of the two fastest staged shapes, first
        rows = [c for c in rows if not c.even]
        kept = [c for c in rows if c.keep]
        staged = [c for c in rows if c.spacks and not c.keep]
        assert rows[:2] == kept
        assert [(c.threads, c.packs, c.spacks) for c in kept] == [(c.threads, c.packs, c.spacks) for c in staged[:2]]
    for rows in (fp32, bf16):
        assert len(rows) == len(set(rows)) <= 8  # the stage and the kernels run tune every one
    assert op1.cluster_candidates(16384, 4) == []     # one block: nothing to tune
    one_block = op1.cluster_candidates(65536, 4)    # 16384 packs: one staged 1024 x 16 block holds it
    assert one_block[0] == op1.OnepassConfig(1024, 8, 1, 4, 8, 1) and all(c.elements < 2 * 65536 for c in one_block)


def test_row_candidates_hold_one_wide_row_in_one_block_and_are_kept():
    fp32 = op1.row_candidates(16384, 4)
    assert fp32 == [op1.OnepassConfig(512, 8, 1, 4, 0, 1)]        # the plan's shape with KEEP (staged: dropped)
    for n_cols, itemsize in ((16384, 4), (16384, 2), (8192, 4), (32768, 4)):
        for cfg in op1.row_candidates(n_cols, itemsize):
            assert cfg.cluster == 1 and n_cols <= cfg.elements < 2 * n_cols
            assert op1.geometry(16384, cfg) == ((16384, 1, 1), cfg.threads)
    assert op1.row_candidates(8192, 4) == []           # 256 x 8 plan: no shape fits it within 2x
    assert op1.row_candidates(262144, 4) == [] and op1.row_candidates(1000, 4) == []  # clustered; scalar packs
    assert op1.row_candidates(1 << 20, 4) == []        # two-pass row


def test_cuda_softmax_geometry_and_traffic_follow_the_plan():
    op = REGISTRY.op("softmax")
    impl = op.get_impl("cuda")
    long_rows = op.make_spec({"M": 4096, "N": 262144}, "float32")
    assert impl.source.launch(long_rows, {}) == ((4096 * 4, 1, 1), 1024)  # untuned: the measured winner
    assert impl.cost(op, long_rows).moved == op.cost(long_rows).bytes  # read once
    too_long = op.make_spec({"M": 2, "N": 524288}, "float32")
    assert impl.source.launch(too_long, {}) == ((2, 1, 1), 1024)
    assert impl.cost(op, too_long).moved > op.cost(too_long).bytes  # two passes


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_a_wide_one_block_row_tunes_the_plan_against_the_l2_kernel(dtype):
    """16384-wide rows (the lecture's softmax) fit one block in the one-pass plan: the tuner also
    times the three-pass L2 kernel in both its forms, the plan first (an untuned run's launch)."""
    from workbench.kernels import softmax as sk

    op = REGISTRY.op("softmax")
    wide = op.make_spec({"M": 16384, "N": 16384}, dtype)
    configs = sk.cuda_candidates(wide)
    assert configs[0] == sk.PLAN and not configs[0].get("twopass")
    rows = [c.params() for c in op1.row_candidates(16384, wide.dtype.itemsize)]
    assert rows and configs[1:1 + len(rows)] == rows and not any(c.get("twopass") for c in rows)
    l2 = configs[1 + len(rows):]  # the three-pass L2 kernel, last
    assert [(c["threads"], c["twopass"]) for c in l2] == [(1024, 2), (1024, 3)] == [(1024, f) for f in sk.L2_PASS_FORMS]
    assert not any(c.get("twopass") == 1 for c in configs)  # the two-pass kernel: dropped for these rows
    assert all(sk.cuda_geometry(wide, c) == ((16384, 1, 1), 1024) for c in l2)
    assert op.get_impl("cuda").source.launch(wide, {}) == sk.cuda_geometry(wide, sk.PLAN)  # untuned: the plan
    assert all(sk.cuda_geometry(wide, c) == ((16384, 1, 1), c["threads"]) for c in rows)  # one block a row
    # short rows (measured at 98.9% of the copy) and clustered rows compare what they did
    assert sk.cuda_candidates(op.make_spec({"M": 65536, "N": 1024}, dtype)) == [sk.PLAN]
    clustered = sk.cuda_candidates(op.make_spec({"M": 4096, "N": 262144}, dtype))
    assert clustered == [c.params() for c in op1.cluster_candidates(262144, wide.dtype.itemsize)]
    assert not any(c.get("twopass") for c in clustered)
    odd = sk.cuda_candidates(op.make_spec({"M": 64, "N": 16385}, dtype))  # scalar packs: no L2 kernel
    assert not any(c.get("twopass") == 2 for c in odd)


def test_the_cuda_softmax_passes_every_config_field_to_the_binding():
    from workbench.kernels import softmax as sk

    calls = []
    module = SimpleNamespace(softmax_rows=lambda x, *args: calls.append(args))
    x = SimpleNamespace(contiguous=lambda: "x")
    sk.cuda_call(module, {**sk.PLAN, "threads": 512, "twopass": 1})(x)
    sk.cuda_call(module, {"threads": 1024, "packs": 8, "cluster": 4})(x)  # an older cache's entry
    import torch

    sk.cuda_call(module, {"threads": 1024, "packs": 8, "spacks": 8, "cluster": 2, "keep": 1, "even": 1})(
        torch.empty(1, 262144, dtype=torch.bfloat16))
    assert calls == [(512, 0, 0, 0, 0, 0, 1), (1024, 8, 0, 4, 0, 0, 0), (1024, 8, 8, 2, 1, 1, 0)]


def test_an_even_config_is_refused_before_the_launch_for_any_other_row_length():
    import torch

    from workbench.errors import LimitError
    from workbench.kernels import softmax as sk

    calls = []
    module = SimpleNamespace(softmax_rows=lambda x, *args: calls.append((tuple(x.shape), args)))
    twin = {"threads": 1024, "packs": 8, "spacks": 8, "cluster": 2, "keep": 1, "even": 1}
    sk.cuda_call(module, twin)(torch.empty(2, 262144, dtype=torch.bfloat16))       # 2 x 1024 x 16 x 8
    with pytest.raises(LimitError, match="exactly 262144 columns, got 262136"):
        sk.cuda_call(module, twin)(torch.empty(2, 262136, dtype=torch.bfloat16))
    with pytest.raises(LimitError, match="exactly 131072 columns"):                # float32: 4 a pack
        sk.cuda_call(module, twin)(torch.empty(2, 262144, dtype=torch.float32))
    sk.cuda_call(module, {**twin, "even": 0})(torch.empty(2, 262136, dtype=torch.bfloat16))
    assert [shape for shape, _ in calls] == [(2, 262144), (2, 262136)]


# -- the TMA GEMM path ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype, shape, params, want", [
    ("bfloat16", (8192, 8192, 8192), {}, True), ("float16", (1, 1000, 64), {}, True),
    ("float32", (4096, 4096, 4096), {}, False), ("bfloat16", (257, 257, 257), {}, False),
    ("bfloat16", (4096, 4096, 4096), {"GROUP_M": 1}, False), ("bfloat16", (4096, 4096, 4096), {"autotune": False}, False)])
def test_which_kernel_a_triton_gemm_takes(dtype, shape, params, want):
    op = REGISTRY.op("matmul")
    spec = op.make_spec(dict(zip("MNK", shape)), dtype)
    assert use_tma(spec, {**TRITON_PARAMS, **params}) is want


def test_the_tma_launch_is_the_tuned_kernel_for_the_ptx_view():
    op = REGISTRY.op("matmul_gelu")
    spec = op.make_spec({"M": 8192, "N": 8192, "K": 8192}, "bfloat16")
    launch = op.get_impl("triton").source.launch_for(spec, op.get_impl("triton").resolve_params({}))
    assert launch.kernel.__name__ == "_tma_matmul_kernel" and launch.grid == (132, 1, 1)
    assert launch.constexprs["ACTIVATION"] == "gelu" and launch.signature["a_desc"] == "tensordesc<bf16[128, 64]>"
    assert "autotune: first config" in launch.note


# -- past 2^31 elements -------------------------------------------------------------------------------
def _first_use_of_ctaid(ptx: str) -> str:
    """The opcode of the first instruction reading the register that holds %ctaid.x."""
    reg = re.search(r"mov\.u32\s+(%r\d+),\s*%ctaid\.x;", ptx).group(1)
    for line in ptx.splitlines():
        line = line.strip()
        if re.search(rf"{re.escape(reg)}\b", line) and "%ctaid" not in line:
            return line.split()[0]
    raise AssertionError("ctaid register unused")


@pytest.mark.parametrize("op_name", ["gelu", "add"])
def test_elementwise_triton_kernels_form_the_block_start_in_64_bits(op_name):
    """The program id goes straight into a 64-bit product (mul.wide / cvt to 64 bits), so
    pid * BLOCK_SIZE cannot wrap past 2^31 elements; the lecture's int32 form multiplies in 32
    bits first (shown by the contrast kernel below)."""
    from workbench.ptx.extract import ptx_record

    op = REGISTRY.op(op_name)
    spec = op.make_spec({"M": 1, "N": 2**31 + 2**20}, "float16")
    record, texts = ptx_record(op, "triton", spec)
    if not texts:
        pytest.skip(f"no ahead-of-time PTX here: {record['notes']}")
    assert re.match(r"(mul\.wide|cvt\.[su]64)", _first_use_of_ctaid(next(iter(texts.values()))["ptx"]))


def test_the_int32_contrast_kernel_multiplies_in_32_bits():
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    @triton.jit
    def int32_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # wraps past 2^31
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    src = ASTSource(fn=int32_copy, signature={"x_ptr": "*fp16", "y_ptr": "*fp16", "n": "i64", "BLOCK": "constexpr"},
                    constexprs={"BLOCK": 1024}, attrs={(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]})
    ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32)).asm["ptx"]
    assert not re.match(r"(mul\.wide|cvt\.[su]64)", _first_use_of_ctaid(ptx))


@pytest.mark.slow  # a Python subprocess under TRITON_INTERPRET
@pytest.mark.parametrize("index_64", [False, True])
def test_matmul_and_cdist_kernels_are_the_same_with_64_bit_offsets(index_64):
    """INDEX_64 (set by the launches for tensors of 2^31 elements or more) forced at a small size
    under the interpreter gives the product and the distances."""
    import subprocess
    import sys

    code = f"""
import torch, workbench.kernels._gemm as mm
a, b = torch.randn(70, 40), torch.randn(40, 50)
c = torch.empty(70, 50)
mm._matmul_kernel[(mm.cdiv(70, 32) * mm.cdiv(50, 32),)](a, b, c, 70, 50, 40, 40, 1, 50, 1, 50, 1, BLOCK_M=32,
    BLOCK_N=32, BLOCK_K=16, GROUP_M=2, INPUT_PRECISION="ieee", ACTIVATION="none", INDEX_64={index_64})
assert torch.allclose(c, a @ b, atol=1e-4, rtol=1e-4), (c - a @ b).abs().max()
import workbench.kernels.cdist as cd
x, y = torch.randn(70, 8), torch.randn(50, 8)
out = torch.empty(70, 50)
cd._cdist_kernel[(3, 2)](x, y, out, 70, 50, 8, 8, 1, 8, 1, 50, 1, BLOCK_M=32, BLOCK_N=32, INDEX_64={index_64})
assert torch.allclose(out, torch.cdist(x, y), atol=1e-4, rtol=1e-4)
"""
    env = {"TRITON_INTERPRET": "1", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_the_engine_reads_a_built_callables_choice_through_tuned_record():
    tuned = at.Tuned({"BLOCK": 128}, "cached", "from the cache", {"BLOCK=128": 0.5}, 1.25)
    carried = at.attach(lambda x: x, tuned)
    assert at.tuned_record(carried) == tuned.record()
    assert at.tuned_record(lambda x: x) is None  # not autotuned

    def plugin_fn(x):  # a plugin's builder that sets `.tuned` itself, as a Tuned or a dict
        return x

    plugin_fn.tuned = tuned
    assert at.tuned_record(plugin_fn) == tuned.record()
    plugin_fn.tuned = {"config": {"BLOCK": 64}, "source": "tuned"}
    assert at.tuned_record(plugin_fn) == {"config": {"BLOCK": 64}, "source": "tuned"}
    plugin_fn.tuned = "BLOCK=64"
    with pytest.raises(TypeError, match=r"`tuned` is 'BLOCK=64' \(str\); allowed: a workbench.tuning.Tuned"):
        at.tuned_record(plugin_fn)
