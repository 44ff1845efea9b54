"""A cap on upstream connections (issue 6, "limits on ... connections"): queue, then 503 + Retry-After.

The cap is checked from outside the proxy too: a sampler counts established TCP
connections to the origin's port in /proc/net/tcp while curl clients run.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst
from test_vmc_proxy_sharing import curl, finish, wait_live  # noqa: E402  (same directory)

from vmc.aio import upstream as up
from vmc.aio.origin import expected
from vmc.client import BusyError, fetch


class _ConnSampler:
    """Peak number of ESTABLISHED TCP connections to 127.0.0.1:port (IPv4), sampled every 5 ms."""

    def __init__(self, port: int) -> None:
        self.port = f"{port:04X}"
        self.peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def count(self) -> int:
        n = 0
        with open("/proc/net/tcp") as fh:
            next(fh)
            for line in fh:
                f = line.split()
                if f[3] == "01" and f[2].endswith(":" + self.port):  # remote = origin, state ESTABLISHED
                    n += 1
        return n

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self.count())

    def __enter__(self) -> _ConnSampler:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join(2)


@pytest.mark.tool("curl")
def test_requests_past_the_cap_queue_and_complete(make_stack, tmp_path: Path) -> None:
    st = make_stack(rate=600_000, max_upstream=2, upstream_queue_wait=30)
    # 2 s per transfer at the origin's rate: the two first still hold their slots when the
    # last curl starts, even on a loaded machine (at 0.7 s one run saw a slot free first).
    size = 1_200_000
    with _ConnSampler(st.origin.address[1]) as conns:
        procs = [curl(st, f"/cap{i}.bin?size={size}", tmp_path / f"c{i}") for i in range(4)]
        results = [finish(p) for p in procs]
    assert results == [(0, 200, size)] * 4
    for i in range(4):
        assert (tmp_path / f"c{i}").read_bytes() == expected(f"/cap{i}.bin", size)
    lim = st.status()["upstream_limit"]
    assert lim["max"] == 2 and lim["peak"] == 2 and lim["queued"] >= 2 and lim["refused"] == 0
    assert 1 <= conns.peak <= 2  # seen from the kernel, not from the proxy's own counter


@pytest.mark.tool("curl")
def test_full_cap_gives_503_with_retry_after_but_joiners_still_share(make_stack, tmp_path: Path) -> None:
    st = make_stack(rate=500_000, max_upstream=1, upstream_queue_wait=0.3, retry_after=7)
    size = 1_000_000
    first = curl(st, f"/big.bin?size={size}", tmp_path / "a")
    wait_live(st, "/big.bin", 100_000)
    other = curl(st, "/other.bin?size=1000", tmp_path / "o", headers=tmp_path / "o.h")
    joiner = curl(st, f"/big.bin?size={size}", tmp_path / "j")  # shares the live stream: no slot needed
    assert finish(other)[:2] == (0, 503)
    head = (tmp_path / "o.h").read_text().lower()
    assert "retry-after: 7" in head
    assert finish(first) == (0, 200, size) and finish(joiner) == (0, 200, size)
    assert (tmp_path / "j").read_bytes() == expected("/big.bin", size)
    snap = st.status()
    assert snap["refused"].get("upstream-busy") == 1 and snap["joins"] == 1
    assert snap["upstream_limit"]["peak"] == 1
    # Once the stream is done the slot is free again (the idle connection is reused or evicted).
    again = curl(st, "/other.bin?size=1000", tmp_path / "o2")
    assert finish(again) == (0, 200, 1000)


async def test_limiter_fifo_handoff_and_cancellation() -> None:
    lim = up.Limiter(1, wait=5)
    a = await lim.acquire()
    order: list[str] = []

    async def want(name: str) -> up.Slot:
        s = await lim.acquire()
        order.append(name)
        return s

    tb = asyncio.create_task(want("b"))
    tc = asyncio.create_task(want("c"))
    td = asyncio.create_task(want("d"))
    await asyncio.sleep(0.01)
    assert lim.waiting == 3
    tc.cancel()  # a waiter that gives up never takes a slot
    await asyncio.sleep(0.01)
    a.release()
    b = await tb
    a.release()  # releasing twice is harmless
    assert lim.open == 1
    b.release()
    d = await td
    assert order == ["b", "d"] and lim.open == 1 and lim.peak == 1
    d.release()
    assert lim.open == 0 and lim.queued == 3


async def test_limiter_times_out_with_upstream_busy() -> None:
    lim = up.Limiter(1, wait=0.05)
    s = await lim.acquire()
    with pytest.raises(up.UpstreamBusy):
        await lim.acquire()
    assert lim.refused == 1 and lim.open == 1
    s.release()
    (await lim.acquire()).release()
    assert lim.open == 0


async def test_limiter_queue_is_bounded_and_forgets_leavers() -> None:
    """Review finding: waiters that time out or are cancelled leave the queue at once (no growth
    without releases), and past ``max_waiting`` queued requests one more is refused at once."""
    lim = up.Limiter(1, wait=0.01, max_waiting=2)
    s = await lim.acquire()
    for _ in range(20):
        with pytest.raises(up.UpstreamBusy):
            await lim.acquire()
    assert lim.waiting == 0 and len(lim._waiters) == 0 and lim.refused == 20
    lim.wait = 30
    t1 = asyncio.create_task(lim.acquire())
    t2 = asyncio.create_task(lim.acquire())
    await asyncio.sleep(0.01)
    assert lim.waiting == 2
    with pytest.raises(up.UpstreamBusy, match="queued"):
        await lim.acquire()  # refused without waiting
    t2.cancel()
    await asyncio.sleep(0.01)
    assert lim.waiting == 1
    s.release()
    (await t1).release()
    assert lim.open == 0 and lim.waiting == 0


@settings(max_examples=60, deadline=None)
@given(hst.integers(1, 4), hst.lists(hst.sampled_from(["acquire", "release", "cancel", "tick"]), max_size=40))
def test_limiter_never_over_the_cap_and_never_leaks(limit: int, ops: list[str]) -> None:
    """Any interleaving of acquires, releases and cancelled waiters: open <= limit, open equals
    the slots actually held, and everything returns to zero."""

    async def main() -> None:
        lim = up.Limiter(limit, wait=30)
        held: list[up.Slot] = []
        waiting: list[asyncio.Task] = []

        def check() -> None:
            for t in [t for t in waiting if t.done()]:
                waiting.remove(t)
                if not t.cancelled():
                    held.append(t.result())
            assert lim.open <= limit and lim.open == len(held)

        for op in ops:
            if op == "acquire":
                waiting.append(asyncio.create_task(lim.acquire()))
            elif op == "release" and held:
                held.pop(0).release()
            elif op == "cancel" and waiting:
                waiting[-1].cancel()
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            check()
        while waiting or held:
            for s in held:
                s.release()
            held.clear()
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            check()
        assert lim.open == 0 and lim.waiting == 0

    asyncio.run(main())


@pytest.mark.tool("curl")
def test_client_waits_out_retry_after(make_stack, tmp_path: Path) -> None:
    """``vmc get`` without retries reports the 503; with retries the client waits and completes.

    The only upstream slot is held by a long transfer until the test itself ends it (no race
    with the clock: RFC 9110 sec. 10.2.3, Retry-After is honoured whenever the slot frees up).
    """
    st = make_stack(rate=1_000_000, max_upstream=1, upstream_queue_wait=0.1, retry_after=1)
    size = 200_000_000  # would hold the slot for 200 s: the test stops it
    first = curl(st, f"/hold.bin?size={size}", tmp_path / "a")
    try:
        wait_live(st, "/hold.bin", 50_000)
        cmd = [sys.executable, "-m", "vmc", "get", st.url("/later.bin?size=5000"), "--proxy", st.proxy_addr,
               "-o", str(tmp_path / "l"), "--busy-retries", "0"]
        busy = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert busy.returncode == 1 and "503" in busy.stderr
        assert st.status()["refused"]["upstream-busy"] == 1
        with pytest.raises(BusyError):
            asyncio.run(fetch(st.url("/later.bin?size=5000"), proxy=st.proxy_addr, timeout=30))
        result: list = []
        t = threading.Thread(target=lambda: result.append(asyncio.run(fetch(
            st.url("/later.bin?size=5000"), proxy=st.proxy_addr, timeout=30, busy_retries=10))))
        t.start()
        deadline = time.monotonic() + 20
        while st.status()["refused"]["upstream-busy"] < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert st.status()["refused"]["upstream-busy"] >= 3  # the retrying client was refused first
        first.kill()  # the only reader leaves: the proxy drops the fetch and frees the slot
        t.join(30)
        assert result and result[0].body == expected("/later.bin", 5000)
    finally:
        first.kill()
        first.communicate(timeout=10)
