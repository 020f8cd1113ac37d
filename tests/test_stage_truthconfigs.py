"""Stage truthconfigs (benchmarks/stages/truthconfigs.py): without CUDA it times nothing and says
so; its configs are ones the TMA kernel accepts (a typo would only surface on the GPU)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def test_without_cuda_it_skips_and_says_why(tmp_path, monkeypatch):
    from benchmarks.stages import truthconfigs

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rows = truthconfigs.run(True, tmp_path)
    assert rows == [{"item": "truthconfigs", "status": "skipped", "note": "no CUDA GPU"}]
    assert not (tmp_path / "truthconfigs.json").exists()


def test_its_configs_build_tma_launches():
    from benchmarks.stages import truthconfigs
    from workbench.kernels._tma_gemm import CONFIG_KEYS, tma_launch

    for config in truthconfigs.CONFIGS:
        launch = tma_launch(8192, 8192, 8192, "bfloat16", dict(zip(CONFIG_KEYS, config)))
        assert launch.constexprs["BLOCK_N"] == config[1] and launch.num_stages == config[4]
        assert launch.kernel.__name__ == ("_tma_streamk_kernel" if config[7] else "_tma_matmul_kernel")
