"""Large bodies on the disk store leave by sendfile (issue 17: zero-copy for large bodies): a
10 MiB object kept whole on disk is served to the next client by ``loop.sendfile`` from the
spill file, byte-exact, counted in the store's ``sendfile_bytes``; a small one goes by reads;
a client that stops reading during a sendfile is still cut off after ``client_write_timeout``.

Real sockets, a real origin and real curl on loopback."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from test_vmc_proxy_sharing import curl, finish
from vmc_support import connections, requests_seen

from vmc.aio.origin import expected

MiB = 1 << 20


def _until(cond, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


@pytest.mark.tool("curl")
def test_a_large_body_on_disk_is_sent_by_sendfile_whole(make_stack, tmp_path: Path) -> None:
    st = make_stack(window=1 * MiB)
    size = 10 * MiB
    path = f"/big.bin?size={size}"
    assert finish(curl(st, path, tmp_path / "a")) == (0, 200, size)  # the origin's copy
    assert finish(curl(st, path, tmp_path / "b")) == (0, 200, size)  # from disk
    assert (tmp_path / "b").read_bytes() == expected("/big.bin", size)
    disk = st.status()["disk"]
    assert disk["hits"] == 1
    assert disk["sendfile_bytes"] >= size - 2 * MiB  # all but what the window and head took
    assert st.origin.stats.body_bytes == size


@pytest.mark.tool("curl")
def test_a_small_body_on_disk_is_sent_by_reads(make_stack, tmp_path: Path) -> None:
    st = make_stack(window=64 << 10)
    size = 200_000
    path = f"/small.bin?size={size}"
    assert finish(curl(st, path, tmp_path / "a")) == (0, 200, size)
    assert finish(curl(st, path, tmp_path / "b")) == (0, 200, size)
    assert (tmp_path / "b").read_bytes() == expected("/small.bin", size)
    disk = st.status()["disk"]
    assert disk["sendfile_bytes"] == 0 and disk["read_bytes"] > 0


@pytest.mark.tool("curl")
def test_a_client_that_stops_reading_in_a_sendfile_is_cut_off(make_stack, tmp_path: Path) -> None:
    st = make_stack(window=1 * MiB, client_write_timeout=1.0, write_high_water=16384)
    size = 40 * MiB
    path = f"/big2.bin?size={size}"
    assert finish(curl(st, path, tmp_path / "a")) == (0, 200, size)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(st.proxy.address)
    try:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: h\r\n\r\n".encode())
        assert _until(lambda: requests_seen(st.proxy) == 2)  # its request is in
        assert _until(lambda: connections(st.proxy) == 0, 20), connections(st.proxy)
        recs = [r for r in st.status()["recent"] if "/big2.bin" in r["uri"]]
        assert len(recs) == 2 and "stalled" in recs[1]["error"]
    finally:
        s.close()


def test_on_uvloop_a_large_body_on_disk_goes_without_loop_sendfile_and_arrives_whole() -> None:
    """uvloop (the CLI's default loop) has no loop.sendfile: the proxy must not try it there;
    the pump sends from the store itself (``os.sendfile``, what the socket does not take by
    reads), so the body is counted as direct or read bytes, never as loop.sendfile's."""
    uvloop = pytest.importorskip("uvloop")
    from vmc_support import new_proxy

    from vmc.aio.config import ProxyConfig
    from vmc.aio.origin import Origin
    from vmc.client import fetch

    async def run() -> tuple[bytes, bytes, dict]:
        origin = await Origin().start()
        proxy = await new_proxy(ProxyConfig(upstreams=[origin.authority], window=1 * MiB)).start()
        try:
            url = f"http://{origin.authority}/uv.bin?size={10 * MiB}"
            addr = "{}:{}".format(*proxy.address)
            a = await fetch(url, proxy=addr, timeout=60)
            b = await fetch(url, proxy=addr, timeout=60)
            return a.body, b.body, proxy.snapshot()["disk"]
        finally:
            await proxy.close()
            await origin.close()

    a, b, disk = uvloop.run(run())
    assert a == b == expected("/uv.bin", 10 * MiB)
    assert disk["hits"] == 1 and disk["sendfile_bytes"] == 0
    assert disk["direct_bytes"] + disk["read_bytes"] >= 9 * MiB
