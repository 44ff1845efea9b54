"""Our seeder never overruns a receiver socket the size of libswift's, however
long the receiver stops reading (issue 15: our seeder overran the libswift
leecher's socket buffer; docs/swift-perf.md "The stall of a libswift leecher").

Real UDP on loopback: the seeder runs its own event loop in a thread, the
leecher (ours, its socket cut to libswift's SO_RCVBUF of 1 MiB) in the
test's loop, which the test blocks three times mid-transfer (the receiver
descheduled: nothing read for 150 ms while the seeder keeps sending what its
window allows).  Asserted on the kernel's drop counter of the leecher's socket
(/proc/net/udp) and the verified file; the clock only paces the pauses.
Whether a window without the cap would have overrun the socket here depends
on how far slow start got before a pause (it did in 1 of 3 runs at load 30):
the deterministic check of the cap is tests/swift/test_swift_ledbat_cap.py.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import threading
import time

import pytest
from swift_support import udp_drops

from swift.aio.node import downloader, seeder
from swift.core.config import PeerConfig

pytestmark = pytest.mark.timeout(180)

CS = 8192
N = 4096  # 32 MiB


def _serve(src: str, ready: list, stop: threading.Event) -> None:
    async def main() -> None:
        async with seeder(src, PeerConfig.libswift(chunk_size=CS)) as s:
            ready.append(s)
            while not stop.is_set():
                await asyncio.sleep(0.05)

    asyncio.run(main())


async def test_a_receiver_that_stops_reading_loses_nothing_at_its_socket(tmp_path) -> None:
    src = str(tmp_path / "src.bin")
    data = os.urandom(N * CS)
    with open(src, "wb") as f:
        f.write(data)
    ready: list = []
    stop = threading.Event()
    t = threading.Thread(target=_serve, args=(src, ready, stop), daemon=True)
    t.start()
    try:
        for _ in range(600):
            if ready:
                break
            await asyncio.sleep(0.05)
        s = ready[0]
        out = str(tmp_path / "out.bin")
        async with downloader(s.peer.swarm_id, out, PeerConfig.libswift(chunk_size=CS)) as leech:
            assert leech.sock is not None
            leech.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)  # libswift's
            before = udp_drops(leech.port)
            leech.connect(s.addr)
            pauses = [N // 4, N // 2, 3 * N // 4]
            while pauses:
                if leech.progress[0] >= pauses[0]:
                    pauses.pop(0)
                    time.sleep(0.15)  # the receiver does not read: its socket fills
                await asyncio.sleep(0.002)
                assert leech.progress[0] < N or not pauses, "complete before the pauses"
            assert await leech.wait_complete(120)
            drops = udp_drops(leech.port) - before
    finally:
        stop.set()
        t.join(30)
    with open(out, "rb") as f:
        assert hashlib.sha256(f.read()).digest() == hashlib.sha256(data).digest()
    # in flight is at most Ledbat.MAX_CWND: less than the socket holds
    assert drops == 0, drops
