"""Fixtures for VMC tests: a paced origin and a proxy on loopback, run in a background event loop.

Tests stay synchronous and talk to them with real sockets, curl subprocesses
or :func:`vmc.client.fetch` (in its own loop), as any client would.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import urllib.request
from collections.abc import Iterator

import pytest
from vmc_support import new_proxy

from vmc.aio.origin import Origin
from vmc.aio.proxy import Proxy, ProxyConfig


class Stack:
    """Origin + proxy in a thread-owned event loop."""

    def __init__(self, rate: float = 0.0, **cfg) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.origin: Origin = self.call(Origin(rate=rate).start())
        cfg.setdefault("upstreams", [self.origin.authority])
        cfg.setdefault("default_upstream", self.origin.authority)
        self.cfg = ProxyConfig(**cfg)
        self.proxy: Proxy = self.call(new_proxy(self.cfg).start())

    def call(self, coro, timeout: float = 30.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    @property
    def proxy_addr(self) -> str:
        h, p = self.proxy.address
        return f"{h}:{p}"

    def url(self, path: str) -> str:
        """URL of an origin object (absolute-form through the proxy, or direct)."""
        return f"http://{self.origin.authority}{path}"

    def reverse_url(self, path: str) -> str:
        """The same object addressed to the proxy as a reverse proxy (origin-form)."""
        return f"http://{self.proxy_addr}{path}"

    def status(self) -> dict:
        url = f"http://{self.proxy_addr}/_vmc/status?recent=2000"
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read())

    def raw(self, data: bytes, timeout: float = 5.0) -> bytes:
        """Send raw bytes to the proxy, read until it closes (or timeout)."""
        with socket.create_connection(self.proxy.address, timeout=timeout) as s:
            s.sendall(data)
            try:
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            out = b""
            try:
                while chunk := s.recv(65536):
                    out += chunk
            except (TimeoutError, ConnectionResetError):
                pass
            return out

    def close(self) -> None:
        try:
            self.call(self.proxy.close())
            self.call(self.origin.close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)
            self.loop.close()


@pytest.fixture
def make_stack() -> Iterator:
    stacks: list[Stack] = []

    def make(rate: float = 0.0, **cfg) -> Stack:
        s = Stack(rate, **cfg)
        stacks.append(s)
        return s

    yield make
    for s in stacks:
        s.close()
