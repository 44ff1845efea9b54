"""Half-open channels (a HANDSHAKE answered, the initiator never heard from again:
spoofed or blind senders) must not lock legitimate peers out.  Before: a channel
in the reply state never timed out (the dead-peer rule needs three datagrams sent
to it, and a half-open channel is sent only the one reply) and counted against
``max_channels``, so 64 spoofed handshakes, even from one address with different
channel IDs, made a seeder refuse every new peer for good."""

from __future__ import annotations

import os

from swift_support import leecher, pump, seeder

from swift.core.peer import PeerConfig
from swift.wire import codec as C

SPOOF = ("10.6.6.6", 6778)


def _flood(s, n: int, now: float) -> None:
    opts = leecher(s.swarm_id, s.config)._our_options(True)
    for i in range(n):
        s.datagram_received(C.encode_datagram(s.ctx, 0, [C.Handshake(1000 + i, opts)]), SPOOF, now)
    s.datagrams_to_send(now)  # the replies go out (to nobody)


def test_a_peer_at_the_channel_limit_evicts_a_half_open_channel_for_a_real_one():
    cfg = PeerConfig(max_channels=8)
    s = seeder(os.urandom(50_000), cfg)
    _flood(s, 8, 0.0)
    assert len(s.channels) == 8
    d = leecher(s.swarm_id, cfg)
    d.connect(("10.0.0.2", 2), 0.01)
    pump({("10.0.0.1", 1): d, ("10.0.0.2", 2): s}, steps=3000, t0=0.01,
         until=lambda: d.content.complete)
    assert d.content.complete
    assert s.stats.get("half_open_evicted", 0) >= 1


def test_half_open_channels_expire():
    cfg = PeerConfig()
    s = seeder(os.urandom(10_000), cfg)
    _flood(s, 20, 0.0)
    assert len(s.channels) == 20
    for t in range(1, 40):
        s.handle_timer(float(t))
    assert len(s.channels) == 0
    assert s.stats.get("half_open_expired", 0) == 20


async def test_closed_channel_reasons_are_bounded(tmp_path):
    """A peer that opens and closes channels all day must not grow the node's
    memory: ``SwiftNode.closed_reasons`` keeps the latest reasons only."""
    import asyncio
    import socket

    from swift.aio.node import SwiftNode, seeder
    src = tmp_path / "v.bin"
    src.write_bytes(os.urandom(5000))
    async with seeder(str(src)) as s:
        opts = leecher(s.peer.swarm_id, s.peer.config)._our_options(True)
        ctx = s.peer.ctx
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as c:
            c.bind(("127.0.0.1", 0))
            c.setblocking(False)
            loop = asyncio.get_running_loop()
            for i in range(1, 601):  # open (three-way), then close, 600 times
                c.sendto(C.encode_datagram(ctx, 0, [C.Handshake(i, opts)]), s.addr)
                data = await asyncio.wait_for(loop.sock_recv(c, 65536), 5)
                theirs = C.decode_raw(data, ctx)[1][0][1]
                c.sendto(C.encode_datagram(ctx, theirs, [C.Handshake(0)]), s.addr)
                while True:
                    try:
                        c.recv(65536)
                    except BlockingIOError:
                        break
            await asyncio.sleep(0.2)
        assert len(s.closed_reasons) <= SwiftNode.KEEP_REASONS
        assert "closed by peer" in s.closed_reasons
