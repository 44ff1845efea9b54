"""Markers ``root`` and ``tool(name, ...)``: see deliverykit.testing for the policy.

``live_peer(VAR)``: a test against a real peer built by hand (libswift, Open Overlay Router)
whose binary ``$VAR`` names. Those peers' code never enters this repository, so these tests
are opt-in: without ``$VAR`` they are deselected (not collected as skips: CI skips nothing)."""

import os

import pytest

from deliverykit.testing import require_root, require_tool


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("root") is not None:
        require_root()
    for mark in item.iter_markers("tool"):
        require_tool(*mark.args)


def _live_peer_missing(item: pytest.Item) -> bool:
    for mark in item.iter_markers("live_peer"):
        path = os.environ.get(mark.args[0], "")
        if not (path and os.access(path, os.X_OK)):
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing = [item for item in items if _live_peer_missing(item)]
    if missing:
        config.hook.pytest_deselected(items=missing)
        gone = set(missing)
        items[:] = [item for item in items if item not in gone]
