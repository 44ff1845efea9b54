"""The skip policy shared by our tests and the conformance plugin.

A test that needs root or a Debian tool skips with a reason naming what is
missing; under ``CI=true`` the same absence is a failure, because CI must run
everything (``.ci/run`` installs the tools and runs as root).
"""

from __future__ import annotations

import os
import shutil

import pytest

#: Debian package that provides each tool we look for.
TOOL_PACKAGES = {
    "tshark": "tshark",
    "tcpdump": "tcpdump",
    "ip": "iproute2",
    "tc": "iproute2",
    "nginx": "nginx-light",
    "curl": "curl",
    "nft": "nftables",
    "iptables": "iptables",
    "varnishd": "varnish",
    "squid": "squid",
}


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _missing(reason: str) -> None:
    if in_ci():
        pytest.fail(f"{reason} (CI=true: a missing requirement is a failure, not a skip)")
    pytest.skip(reason)


def require_root() -> None:
    """Skip (or fail under CI) unless running as root."""
    if os.geteuid() != 0:
        _missing("needs root: network namespaces and raw sockets (run `sudo make test`)")


def require_tool(*names: str) -> None:
    """Skip (or fail under CI) unless every named tool is on PATH."""
    for name in names:
        if shutil.which(name) is None:
            pkg = TOOL_PACKAGES.get(name, name)
            _missing(f"needs `{name}` (Debian package {pkg}; `make test` as root installs it)")


def require_data(present: bool, what: str) -> None:
    """Skip (or fail under CI) when shared test data is absent, e.g. ``../shared/captures``,
    which CI lays beside the clone."""
    if not present:
        _missing(f"needs {what}")
