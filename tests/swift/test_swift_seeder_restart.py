"""A seeder process killed and restarted on the same port mid-download: the
downloader's datagrams on the old channel are discarded by the new process
(RFC 7574 3.1.1 step 7), so the downloader must handshake anew after a few
seconds of silence and finish the download (user test item 3)."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import time

import pytest

SEEDER = """
import asyncio, sys
from swift.aio.node import seeder
from swift.core.peer import PeerConfig
async def main():
    cfg = PeerConfig(upload_rate=400_000)
    async with seeder(sys.argv[1], cfg, "127.0.0.1", int(sys.argv[2])) as n:
        print(n.peer.swarm_id.hex(), flush=True)
        await asyncio.sleep(120)
asyncio.run(main())
"""


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_seeder(path: str, port: int) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([sys.executable, "-c", SEEDER, path, str(port)], stdout=subprocess.PIPE,
                         text=True)
    root = p.stdout.readline().strip()
    assert len(root) == 64, root
    return p, root


@pytest.mark.slow
def test_download_survives_a_seeder_restart(tmp_path):
    src = tmp_path / "v.bin"
    src.write_bytes(os.urandom(2_000_000))
    out = tmp_path / "r.bin"
    port = _free_udp_port()
    seed, root = _start_seeder(str(src), port)
    dl = None
    try:
        dl = subprocess.Popen([sys.executable, "-m", "swift", "download", root, "--peer",
                               f"127.0.0.1:{port}", "-o", str(out), "-q", "--timeout", "60"],
                              stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        part = tmp_path / "r.bin.part"  # the data until every chunk is verified
        while time.monotonic() < deadline and (not part.exists() or part.stat().st_size < 300_000):
            time.sleep(0.1)
        assert part.exists() and part.stat().st_size >= 300_000, "no progress before the restart"
        seed.kill()
        seed.wait()
        time.sleep(1.0)
        seed, root2 = _start_seeder(str(src), port)
        assert root2 == root
        _, err = dl.communicate(timeout=90)
        assert dl.returncode == 0, err
        assert "verified" in err
        assert (
            hashlib.sha256(out.read_bytes()).digest() == hashlib.sha256(src.read_bytes()).digest()
        )
    finally:
        for p in (seed, dl):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


def test_a_silent_but_live_seeder_closes_the_old_channel():
    """Sans-IO: the seeder's datagrams are lost for 6 s (fake clock).  The leecher
    re-handshakes and sends a closing HANDSHAKE on the old channel (3.1.1 step 4),
    so the seeder stops serving a channel nobody reads; the download completes."""
    from swift_support import leecher, seeder

    from swift.core.peer import PeerConfig
    cfg = PeerConfig(upload_rate=200_000)
    s = seeder(os.urandom(400_000), cfg)
    d = leecher(s.swarm_id, cfg)
    S, L = ("10.0.0.1", 1), ("10.0.0.2", 2)
    d.connect(S, 0.0)
    now, first = 0.0, None
    for step in range(20000):
        now += 0.002
        mute = 1.0 <= now < 7.0  # the seeder's datagrams vanish
        for data, _dst in s.datagrams_to_send(now):
            if not mute:
                d.datagram_received(data, S, now)
        for data, _dst in d.datagrams_to_send(now):
            s.datagram_received(data, L, now)
        if step % 10 == 0:
            s.handle_timer(now)
            d.handle_timer(now)
        if first is None and now >= 1.0:
            first = set(s.channels)
        if d.content.complete:
            break
    assert d.content.complete
    assert d.stats.get("rehandshakes", 0) >= 1
    assert first and not (first & set(s.channels))  # the old channel was closed
