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
    async with seeder(sys.argv[1], PeerConfig(upload_rate=400_000), "127.0.0.1", int(sys.argv[2])) as n:
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
        while time.monotonic() < deadline and (not out.exists() or out.stat().st_size < 300_000):
            time.sleep(0.1)
        assert out.exists() and out.stat().st_size >= 300_000, "no progress before the restart"
        seed.kill()
        seed.wait()
        time.sleep(1.0)
        seed, root2 = _start_seeder(str(src), port)
        assert root2 == root
        _, err = dl.communicate(timeout=90)
        assert dl.returncode == 0, err
        assert "verified" in err
        assert hashlib.sha256(out.read_bytes()).digest() == hashlib.sha256(src.read_bytes()).digest()
    finally:
        for p in (seed, dl):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
