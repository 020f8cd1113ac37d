"""The workbench.ops entry points are taken once per name: a checkout installed under the old
distribution name (`workbench`) and the new one (`kernel-workbench`) lists `lecture` twice."""

import importlib.metadata

from workbench import registry


def test_an_entry_point_listed_by_two_distributions_is_taken_once(monkeypatch):
    ep = importlib.metadata.EntryPoint("lecture", "workbench.kernels", registry.ENTRY_POINT_GROUP)
    other = importlib.metadata.EntryPoint("mine", "my_ops", registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [ep, ep, other])
    assert [e.name for e in registry.op_entry_points()] == ["lecture", "mine"]
