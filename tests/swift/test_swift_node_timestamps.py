"""SO_TIMESTAMPNS only when a swarm asks for kernel arrival times (RFC 7574 8.7
ACK delay; ``PeerConfig.delay_from_kernel``, off by default)."""

import os
import socket

from swift._fast import SO_TIMESTAMPNS
from swift.aio.node import SwiftNode
from swift.core.content import Content, MemoryStorage
from swift.core.merkle import MerkleTree
from swift.core.peer import Peer, PeerConfig


def _peer(cfg: PeerConfig) -> Peer:
    data = os.urandom(4096)
    t = MerkleTree.build([data[i:i + 1024] for i in range(0, 4096, 1024)], cfg.hash_func, 1024)
    return Peer(Content.seeded(t, MemoryStorage(data)), cfg)


def _ts(node: SwiftNode) -> int:
    assert node.sock is not None
    return node.sock.getsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS)


async def test_kernel_timestamps_only_when_asked() -> None:
    async with SwiftNode(_peer(PeerConfig())) as n:
        assert _ts(n) == 0  # default: our loop's receive time, no per-datagram cmsg
        n.add_swarm(_peer(PeerConfig(delay_from_kernel=True)))
        assert _ts(n) == 1  # a second swarm on the socket asks for it
    async with SwiftNode(_peer(PeerConfig(delay_from_kernel=True))) as n:
        assert _ts(n) == 1
