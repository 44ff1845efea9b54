"""PPSPP (RFC 7574) peer: the Libswift protocol, with the VoD download algorithm
of Petrocco, Pouwelse & Epema, "Performance Analysis of the Libswift P2P
Streaming Protocol".  Importing this package stays cheap: the public names
below load their modules on first use.  See docs/swift.md."""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "Peer": "swift.core.peer", "PeerConfig": "swift.core.peer",
    "MerkleTree": "swift.core.merkle", "Binmap": "swift.core.binmap",
    "SwiftNode": "swift.aio.node", "seeder": "swift.aio.node", "downloader": "swift.aio.node",
    "live_source": "swift.aio.node", "live_viewer": "swift.aio.node",
}
__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'swift' has no attribute {name!r}")
    return getattr(importlib.import_module(mod), name)
