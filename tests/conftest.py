"""Markers ``root`` and ``tool(name, ...)``: see deliverykit.testing for the policy."""

import pytest

from deliverykit.testing import require_root, require_tool


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("root") is not None:
        require_root()
    for mark in item.iter_markers("tool"):
        require_tool(*mark.args)
