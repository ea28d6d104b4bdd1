"""The fault tier runs only when asked for (``make test-faults``, i.e. ``-m faults``): it
starts a whole deployment of its own and takes minutes, so ``make test`` skips it."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "faults" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="the fault tier: run it with make test-faults")
    for item in items:
        if item.get_closest_marker("faults") is not None:
            item.add_marker(skip)
