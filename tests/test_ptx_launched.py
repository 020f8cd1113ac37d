"""workbench.ptx.extractors.launched_first: the PTX record of a CUDA implementation lists the
kernel the run launches first (CudaSource.launched), so the view opens on it and the launch
record's registers are its own."""

from __future__ import annotations

from workbench.ptx.extractors import launched_first

RECORD = {"kernels": [{"name": "ns::k<float, 32>", "registers": 20}, {"name": "ns::other<float>", "registers": 90},
                      {"name": "ns::k<float, 1024>", "registers": 40}, {"name": "ns::k<__half, 1024>"}],
          "notes": ["nvcc ..."]}


def test_the_exact_instantiation_comes_first_spaces_and_namespaces_ignored():
    out = launched_first(RECORD, "k<float,1024>")
    assert [k["name"] for k in out["kernels"]] == ["ns::k<float, 1024>", "ns::k<float, 32>", "ns::k<__half, 1024>",
                                                   "ns::other<float>"]
    assert out["notes"] == ["nvcc ...", "the run launches k<float,1024>: listed first"]
    assert [k["name"] for k in RECORD["kernels"]][0] == "ns::k<float, 32>"  # the cached record is not changed


def test_a_base_name_brings_its_instantiations_first_in_their_order():
    out = launched_first(RECORD, "other")
    assert [k["name"] for k in out["kernels"]][:2] == ["ns::other<float>", "ns::k<float, 32>"]


def test_a_name_not_in_the_ptx_leaves_the_order_and_says_so():
    out = launched_first(RECORD, "missing_kernel<float>")
    assert out["kernels"] == RECORD["kernels"]
    assert out["notes"][-1] == "the run launches missing_kernel<float>, which is not among the kernels matched in the PTX"


def test_without_a_launched_kernel_the_record_is_unchanged():
    assert launched_first(RECORD, None) is RECORD


def test_the_demanglers_casts_are_read_as_values_and_the_record_names_the_kernel():
    # cu++filt on the H200 box prints `(int)4` and `(bool)0` where c++filt here prints 4 and false
    record = {"kernels": [{"name": "onepass::softmax_onepass_kernel<float, (int)4, (int)32, (int)8, (bool)0>"},
                          {"name": "onepass::softmax_onepass_kernel<float, (int)4, (int)512, (int)8, (bool)0>"},
                          {"name": "onepass::softmax_l2_kernel<float, (int)1024, (bool)1>"}], "notes": []}
    out = launched_first(record, "softmax_l2_kernel<float, 1024, true>")
    assert out["launched"] == "onepass::softmax_l2_kernel<float, (int)1024, (bool)1>" == out["kernels"][0]["name"]
    out = launched_first(record, "softmax_onepass_kernel<float, 4, 512, 8, false>")
    assert out["kernels"][0]["name"].startswith("onepass::softmax_onepass_kernel<float, (int)4, (int)512")
    # only the base name found: no `launched`, and the note does not claim the kernel is first
    out = launched_first(record, "softmax_onepass_kernel<float, 4, 1024, 8, false>")
    assert "launched" not in out and "not among the kernels matched" in out["notes"][-1]
    assert "launched" not in launched_first(RECORD, "other")


def test_the_diagnosis_reads_only_the_launched_kernel_where_the_record_names_it():
    from workbench.diagnosis.rules_ptx import spills
    from workbench.results.record import Record

    ptx = {"kernels": [{"name": "k<float, 1024, true>", "spills": 0, "registers": 27},
                       {"name": "k<float, 64, false>", "spills": 4, "registers": 48}]}
    assert spills(Record(ptx={**ptx, "launched": "k<float, 1024, true>"}), None) is None  # the run's kernel spills nothing
    found = spills(Record(ptx=ptx), None)                                                   # unknown: every kernel counts
    assert found is not None and found.data["spills"] == 4


def test_the_cuda_softmax_names_and_sizes_the_choice_tuned_in_the_runs_build_dir(tmp_path, monkeypatch):
    """The tuner caches its choice under the run's build directory (BuildContext.build_dir): the
    PTX record's launched kernel and the launch geometry must look there, not in the user cache
    (on the H200 the replayed softmax's record named the untuned plan and took its registers)."""
    import torch

    import workbench.tuning as autotune
    from workbench.registry import BuildContext, discover
    from workbench.kernels.softmax import _cuda_config

    for name in ("compiled_on_gpu", "_gpu_here"):
        monkeypatch.setattr(autotune, name, lambda *a: True)
    monkeypatch.setattr(autotune, "device_tag", lambda: "NVIDIA H200 sm_90")
    monkeypatch.setattr(autotune, "cache_root", lambda ctx: tmp_path / "user-cache" if ctx is None else ctx.build_dir)
    last = {}

    def run(config):
        last["config"] = config
        return torch.zeros(4)

    def bench(fn):  # the three-pass L2 kernel in Triton's form is the fastest, as on the H200
        fn()
        return 0.5 if last["config"].get("twopass") == 3 else 0.52
    monkeypatch.setattr(autotune, "_do_bench", bench)
    op = discover().op("softmax")
    impl = op.get_impl("cuda")
    spec = op.make_spec({"M": 16384, "N": 16384}, "float32")
    ctx = BuildContext(device="cuda", fp32_precision="ieee", interpret=False, build_dir=tmp_path / "build")
    assert _cuda_config(spec, ctx, run).config.get("twopass") == 3          # tuned and cached in build_dir
    params = impl.resolve_params({})
    assert impl.source.launched_kernel(spec, params, ctx) == "softmax_l2_kernel<float, 1024, true>"
    assert impl.source.geometry(spec, params, ctx) == ((16384, 1, 1), 1024)
    assert impl.source.launched_kernel(spec, params).startswith("softmax_onepass_kernel")  # no ctx: the default
