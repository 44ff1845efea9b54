"""Disk spans by sendfile on uvloop too (issue 17, VMCFAST step 3: the CLI's default loop has no
``loop.sendfile``, so every body from the disk store was read into Python and written back):
the pump sends a span straight from the spill file to the client's socket when nothing waits in
the transport, and whatever the socket does not take goes by a read into the transport. A
100 KiB and a 3 MiB object served from disk arrive byte-exact, with bytes counted as sent by
``os.sendfile`` (``direct_bytes``; ``loop.sendfile``'s ``sendfile_bytes`` stay 0 there); a
client that stops reading is still cut off after ``client_write_timeout``.

Real sockets on loopback, a real origin (vmc.aio.origin), the proxy on a uvloop loop."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from vmc_support import new_proxy

from vmc.aio.origin import Origin, expected
from vmc.aio.proxy import ProxyConfig

uvloop = pytest.importorskip("uvloop")

KiB, MiB = 1 << 10, 1 << 20


class UvStack:
    """Origin and proxy on one uvloop loop in a thread."""

    def __init__(self, **cfg: object) -> None:
        self.loop = uvloop.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.origin = self.call(Origin().start())
        cfg.setdefault("upstreams", [self.origin.authority])
        cfg.setdefault("default_upstream", self.origin.authority)
        self.proxy = self.call(new_proxy(ProxyConfig(**cfg)).start())  # type: ignore[arg-type]  # cfg is a dict of mixed option types

    def call(self, coro, timeout: float = 30.0):  # type: ignore[no-untyped-def]  # a test helper over any coroutine
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def get(self, path: str, rcvbuf: int = 0) -> tuple[bytes, bytes]:
        """One GET on a fresh connection: (head, body), read to the announced length."""
        with socket.socket() as s:
            if rcvbuf:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            s.settimeout(30)
            s.connect(self.proxy.address)
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: h\r\n\r\n".encode())
            data = b""
            while b"\r\n\r\n" not in data:
                data += s.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            while len(body) < length:
                chunk = s.recv(1 << 20)
                assert chunk, "closed early"
                body += chunk
            return head, body

    def snapshot(self, recent: int = 100) -> dict:
        """The proxy's status, read on its loop (after the callback that sent the bytes)."""
        async def read() -> dict:
            return self.proxy.snapshot(recent)  # type: ignore[no-any-return]  # the snapshot is JSON-shaped
        return self.call(read())  # type: ignore[no-any-return]  # the snapshot is JSON-shaped

    def disk(self) -> dict:
        return self.snapshot()["disk"]  # type: ignore[no-any-return]  # the snapshot is JSON-shaped

    def close(self) -> None:
        try:
            self.call(self.proxy.close())
            self.call(self.origin.close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)
            self.loop.close()


@pytest.fixture
def uv_stack() -> Iterator:
    stacks: list[UvStack] = []

    def make(**cfg: object) -> UvStack:
        s = UvStack(**cfg)
        stacks.append(s)
        return s

    yield make
    for s in stacks:
        s.close()


@pytest.mark.parametrize("size", [100 * KiB, 3 * MiB + 17])
def test_a_body_on_disk_leaves_by_sendfile_on_uvloop(uv_stack, size: int) -> None:
    st = uv_stack(window=64 * KiB)
    path = f"/o.bin?size={size}"
    head, body = st.get(path)  # the origin's copy, now on disk
    assert head.startswith(b"HTTP/1.1 200 ") and body == expected("/o.bin", size)
    before = st.disk()["direct_bytes"]
    head, body = st.get(path)
    assert head.startswith(b"HTTP/1.1 200 ") and body == expected("/o.bin", size)
    assert st.disk()["hits"] >= 1
    assert st.disk()["direct_bytes"] - before > 0
    assert st.disk()["sendfile_bytes"] == 0  # loop.sendfile is asyncio's: never tried here


def test_a_client_that_stops_reading_is_cut_off_on_uvloop(uv_stack) -> None:
    st = uv_stack(window=64 * KiB, client_write_timeout=1.0, write_high_water=16384)
    size = 20 * MiB
    path = f"/big.bin?size={size}"
    assert st.get(path)[1] == expected("/big.bin", size)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(st.proxy.address)
    try:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: h\r\n\r\n".encode())
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            recs = [r for r in st.snapshot(2000)["recent"] if "/big.bin" in r["uri"]]
            if len(recs) == 2 and "stalled" in (recs[1].get("error") or ""):
                break
            time.sleep(0.05)
        assert len(recs) == 2 and "stalled" in recs[1]["error"]
    finally:
        s.close()
