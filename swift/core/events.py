"""Events a sans-IO :class:`swift.core.peer.Peer` reports (frozen, slotted)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias, cast

from deliverykit.protocol import Address


@dataclass(frozen=True, slots=True)
class ChannelOpened:
    """Three-way handshake complete (RFC 7574 section 3.1.1)."""

    #: remote transport address
    addr: Address
    #: our channel ID
    channel: int


@dataclass(frozen=True, slots=True)
class ChannelClosed:
    """A channel ended."""

    #: remote transport address
    addr: Address
    #: our channel ID
    channel: int
    #: "closed by peer", "dead", "corrupt data", "refused", "local"
    reason: str


@dataclass(frozen=True, slots=True, init=False)
class ChunkVerified:
    """A chunk passed the Merkle check (section 5.2) and was stored.

    Frozen like the others, but one is made per verified chunk: its
    ``__init__`` sets the slots through their descriptors (what frozen's
    generated ``__init__`` does through ``object.__setattr__``, at about
    half the cost; docs/swift-perf.md, session 18)."""

    #: chunk index
    index: int
    #: address of the peer that sent it
    addr: Address

    def __init__(self, index: int, addr: Address) -> None:
        _cv_index(self, index)
        _cv_addr(self, addr)


# the slot descriptors' setters (a frozen class's own __setattr__ raises)
_cv_index: Callable[[ChunkVerified, int], None] = cast(Any, ChunkVerified).index.__set__
_cv_addr: Callable[[ChunkVerified, Address], None] = cast(Any, ChunkVerified).addr.__set__


@dataclass(frozen=True, slots=True)
class ChunkRejected:
    """A chunk failed verification and was dropped."""

    #: chunk index
    index: int
    #: address of the peer that sent it
    addr: Address


@dataclass(frozen=True, slots=True)
class SizeKnown:
    """Peak hashes checked against the root: the chunk count is known (5.6)."""

    #: number of chunks
    chunks: int


@dataclass(frozen=True, slots=True)
class DownloadComplete:
    """Every chunk is verified and stored."""

    #: content size in bytes
    size: int


@dataclass(frozen=True, slots=True)
class PeerDiscovered:
    """A PEX_RES address (section 3.10)."""

    #: (host, port)
    addr: tuple[str, int]


@dataclass(frozen=True, slots=True)
class HandshakeRefused:
    """A peer's HANDSHAKE (its initiation, or its reply to ours) was refused;
    ``reason`` says what, e.g. "unknown option 9" or "integrity method 2,
    this swarm uses 1" (the download's hint repeats it)."""

    #: remote transport address
    addr: Address
    #: one line: what was refused and why
    reason: str


#: every event a :class:`swift.core.peer.Peer` reports (``Peer.next_event``)
SwiftEvent: TypeAlias = (
    ChannelOpened | ChannelClosed | ChunkVerified | ChunkRejected | SizeKnown
    | DownloadComplete | PeerDiscovered | HandshakeRefused
)
