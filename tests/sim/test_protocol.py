"""The one core protocol (deliverykit.protocol): the swift Peer is a DatagramCore as it stands."""

from __future__ import annotations

import inspect

from deliverykit.protocol import DatagramCore, is_datagram_core
from swift.core.content import Content, MemoryStorage
from swift.core.merkle import MerkleTree
from swift.core.peer import Peer, PeerConfig


def _peer() -> Peer:
    cfg = PeerConfig(seed=1)
    data = bytes(range(256)) * 8
    tree = MerkleTree.build([data[i:i + 1024] for i in range(0, len(data), 1024)],
                            cfg.hash_func, 1024)
    return Peer(Content.seeded(tree, MemoryStorage(data)), cfg)


def test_swift_peer_is_a_datagram_core() -> None:
    p = _peer()
    assert isinstance(p, DatagramCore) and is_datagram_core(p)
    # the signatures accept the protocol's positional calls (extra parameters are optional)
    for name in ("datagram_received", "datagrams_to_send", "get_timer", "handle_timer",
                 "next_event"):
        want = [q for q in inspect.signature(getattr(DatagramCore, name)).parameters
                if q != "self"]
        have = inspect.signature(getattr(p, name)).parameters
        assert list(have)[:len(want)] == want, name
        extra = list(have.values())[len(want):]
        assert all(v.default is not inspect.Parameter.empty for v in extra)


def test_driving_a_peer_through_the_protocol_only() -> None:
    core: DatagramCore = _peer()
    deadline = core.get_timer(0.0)
    assert deadline is not None and deadline <= 0.0
    core.handle_timer(0.0)
    assert list(core.datagrams_to_send(0.0)) == []  # a seeder with no channels says nothing
    assert core.next_event() is None
    core.datagram_received(b"\x00", ("10.0.0.9", 7000), 0.1)  # malformed: counted, dropped
    assert core.stats["malformed"] == 1  # type: ignore[attr-defined]  # this core has stats


def test_an_object_missing_a_method_is_not_a_core() -> None:
    class Half:
        def datagram_received(self, data, addr, now): ...
        def datagrams_to_send(self, now): return []

    assert not is_datagram_core(Half())
