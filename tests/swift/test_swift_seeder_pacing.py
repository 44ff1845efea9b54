"""Our seeder toward a receiver with a tiny socket buffer, real UDP on
loopback (issue 15 item 2): LEDBAT's window is spread over the RTT instead
of sent in one burst, and DATA a receiver lost is sent again as soon as the
ACKs after it show the gap, so the receiver seldom waits out its request
timeout.  Asserted on counters: the kernel's drop count for the receiver's
socket (/proc/net/udp) and the receiver's request timeouts (each one is a
stall of at least ``request_timeout`` = 0.5 s); no clock in any assertion."""

from __future__ import annotations

import hashlib
import os
import socket

import pytest
from swift_support import udp_drops

from swift.aio.node import downloader, seeder
from swift.core.peer import PeerConfig

pytestmark = pytest.mark.timeout(120)


def _sha(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.mark.parametrize("cs,profile", [(8192, "libswift"), (1024, "libswift")])
async def test_tiny_receive_buffer_no_drop_storm_no_stall(tmp_path, cs: int, profile: str) -> None:
    src = str(tmp_path / "src.bin")
    with open(src, "wb") as f:
        f.write(os.urandom(1200 * cs))
    out = str(tmp_path / "out.bin")
    mk = PeerConfig.libswift if profile == "libswift" else PeerConfig
    async with seeder(src, mk(chunk_size=cs)) as s:
        async with downloader(s.peer.swarm_id, out, mk(chunk_size=cs)) as leech:
            assert leech.sock is not None
            # about 8 datagrams of 8 KiB (the kernel doubles the value)
            leech.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 36 * 1024)
            before = udp_drops(leech.port)
            leech.connect(s.addr)
            assert await leech.wait_complete(90)
            drops = udp_drops(leech.port) - before
            timeouts = leech.peer.stats["timeouts"]
    assert _sha(out) == _sha(src)
    # a burst of the whole window used to drop 598 (8 KiB) and 959 (1 KiB)
    # of the 1,200; paced, what is left is scheduling noise (40-70 on a
    # loaded 2-core machine)
    assert drops <= 1200 // 8, (drops, timeouts)
    # losses are repaired by the seeder before the receiver gives up on
    # them (pacing alone: 23 request timeouts at 8 KiB); a chunk lost twice
    # is left to the receiver's re-request (upload.py), which a loaded
    # machine shows as one or two timeouts now and then
    assert timeouts <= 2, (timeouts, drops)
