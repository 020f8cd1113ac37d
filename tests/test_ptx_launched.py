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
