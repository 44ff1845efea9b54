"""A malformed DATA for a requested chunk must not stall the download (review 2, finding 1).

A DATA whose chunk spec is not exactly one chunk (two chunks, start > end)
for a requested chunk i takes i out of the channel's requests.  If i also
stayed marked in flight, nothing would ask for it again when there is only
one seeder (the end game needs a second peer), and the download would never
complete.  Tested sans-IO and over real UDP on loopback, with a relay that
rewrites one DATA datagram from the seeder.
"""

import asyncio
import os
import socket
import struct

import pytest
from swift_support import leecher, pump, seeder as mem_seeder

from swift.aio.node import downloader, seeder
from swift.core.peer import PeerConfig
from swift.wire import codec as C

pytestmark = pytest.mark.timeout(60)

SEED, LEECH = ("10.0.0.1", 6778), ("10.0.0.2", 6778)


@pytest.mark.parametrize("span", [1, -1, 5])
def test_bad_spec_data_does_not_stall_one_seeder(span: int) -> None:
    s = mem_seeder(os.urandom(200 * 1024), PeerConfig(seed=1))
    leech = leecher(s.swarm_id, PeerConfig(seed=2))
    leech.connect(SEED, 0.0)
    nodes = {SEED: s, LEECH: leech}
    now = pump(nodes, until=lambda: bool(leech.content.n_chunks)
               and any(ch.down.requests for ch in leech.channels.values()))
    lch = next(iter(leech.channels.values()))
    i = max(lch.down.requests)
    # chunk32 spec (i, i + span): not one chunk; the payload is garbage
    bad = C.encode_datagram(leech.ctx, lch.local_id, [C.Data(i, i + span, 0, bytes(1024))])
    leech.datagram_received(bad, SEED, now)
    assert leech.stats["unsolicited"] >= 1
    if i not in lch.down.requests:
        assert not leech.inflight.has(i)  # free to be asked again
    pump(nodes, steps=30000, t0=now, until=lambda: leech.content.complete)
    missing = [c for c in range(leech.content.n_chunks) if not leech.content.have.has(c)]
    assert leech.content.complete, missing


async def test_bad_spec_data_over_udp_relay(tmp_path) -> None:
    """Seeder <- UDP relay -> downloader; the relay rewrites the first DATA for
    chunk 40 so its chunk32 spec reads (40, 41)."""
    cs, n = 1024, 400
    src = str(tmp_path / "src.bin")
    data = os.urandom(n * cs)
    with open(src, "wb") as f:
        f.write(data)
    out = str(tmp_path / "out.bin")
    async with seeder(src, PeerConfig(), "127.0.0.1", 0) as s:
        loop = asyncio.get_running_loop()
        relay = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        relay.bind(("127.0.0.1", 0))
        relay.setblocking(False)
        state: dict = {"client": None, "rewrote": False}

        def on_read() -> None:
            for _ in range(256):  # bounded per wake-up
                try:
                    dg, addr = relay.recvfrom(65536)
                except BlockingIOError:
                    return
                if addr[1] == s.port:  # seeder -> downloader
                    # DATA: type 1, chunk32 spec (8 B), timestamp (8 B), payload
                    k = len(dg) - cs - 17
                    if not state["rewrote"] and k >= 4 and dg[k] == 1:
                        start, _end = struct.unpack_from(">II", dg, k + 1)
                        if start == 40:
                            dg = dg[:k + 5] + struct.pack(">I", 41) + dg[k + 9:]
                            state["rewrote"] = True
                    if state["client"] is not None:
                        relay.sendto(dg, state["client"])
                else:  # downloader -> seeder
                    state["client"] = addr
                    relay.sendto(dg, ("127.0.0.1", s.port))

        loop.add_reader(relay.fileno(), on_read)
        try:
            async with downloader(s.peer.swarm_id, out, PeerConfig(), "127.0.0.1", 0) as dl:
                dl.connect(("127.0.0.1", relay.getsockname()[1]))
                ok = await dl.wait_complete(30)
                assert state["rewrote"], "the relay never saw DATA for chunk 40"
                assert ok, (dl.progress, dl.peer.inflight.has(40))
        finally:
            loop.remove_reader(relay.fileno())
            relay.close()
    with open(out, "rb") as f:
        assert f.read() == data
