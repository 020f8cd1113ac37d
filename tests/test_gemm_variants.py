"""benchmarks/gemm_variants.py (issue #40, item 2): the launch- and loop-level variants of the TMA
GEMM timed on the H100 (results/history/h100/2026-12-06-variants/), and what Triton makes of them
for sm_90 without a GPU. The notes in kernels/_tma_gemm.py and docs/kernels-per-device.md say
that Triton splits a 2-CTA cluster's tile without TMA multicast and does not warp-specialise on
sm_90; the compile test below keeps that true for the Triton installed (if it fails, that Triton
multicasts or specialises: re-time the variants, they may now win)."""

from __future__ import annotations

import pytest

from benchmarks import gemm_variants as V
from workbench.kernels import _tma_gemm as tma


def test_the_baselines_are_the_shipped_h100_candidates_and_every_variant_has_a_launch():
    shipped = [cfg for cfg, opts in V.VARIANTS.values() if opts.get("SHIPPED")]
    assert shipped and all(cfg + (0,) in tma.H100_CANDIDATES for cfg in shipped)
    for name, (cfg, opts) in V.VARIANTS.items():
        kw = V.options(cfg, opts)
        assert kw["BLOCK_N"] % kw["PARTS"] == 0 and kw["num_ctas"] in (1, 2), name
    assert V.options(*V.VARIANTS["cta2 256x256 s3"])["num_ctas"] == 2


def test_a_2_cta_cluster_splits_the_tile_without_multicast_and_warp_specialize_is_one_loop(monkeypatch):
    """Triton's own sm_90 PTX (no GPU): the cluster variant asks for 2-CTA clusters and each CTA
    multiplies a 128 x 256 half of the 256 x 256 program tile, its loads `shared::cluster` TMA
    copies into its own shared memory (no `.multicast::cluster`); warp_specialize=True gives no
    register reallocation between producer and consumer warps (no setmaxnreg)."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    report = V.aot_report(["cta2 256x256 s3", "s3 sub G8 ws"])
    cluster, ws = report["cta2 256x256 s3"], report["s3 sub G8 ws"]
    assert "error" not in cluster and "error" not in ws, report
    assert cluster[".reqnctapercluster"] == 1 and cluster["wgmma"] == ["m64n256k16"], cluster
    assert cluster["multicast::cluster"] == 0, "this Triton multicasts TMA loads in a cluster: re-time the cta2 variants"
    assert cluster["shared"] < 227 * 1024  # one CTA's 128 x 256 half, 3 stages, fits sm_90
    assert ws["setmaxnreg"] == 0 and ws[".reqnctapercluster"] == 0, "this Triton warp-specialises on sm_90: re-time"


def test_aot_report_names_a_variant_it_does_not_know():
    with pytest.raises(ValueError, match=r"unknown variant\(s\) 'no such variant': one of 'shipped s3 sub G16'"):
        V.aot_report(["no such variant"])
