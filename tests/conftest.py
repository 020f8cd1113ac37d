"""Shared fixtures; keep this small. Op-test helpers live in op_cases.py."""

from __future__ import annotations

import pytest

from workbench.machine import Machine, probe
from workbench.registry import Registry, discover


@pytest.fixture(scope="session")
def registry() -> Registry:
    """The registry with the shipped kernels (entry point `workbench.ops`)."""
    return discover()


@pytest.fixture(scope="session")
def machine() -> Machine:
    return probe()
