"""A cancel that meets a read which has just completed is not lost (the cause of the flaky
``test_client_that_never_reads_is_cut_off[shared]``).

On Python 3.11 ``asyncio.wait_for`` hands back the inner result and swallows the cancellation
when both land in one loop iteration (CPython gh-86296, fixed in 3.12). A shared session's
pump reads the origin through it; under load a read of the paced origin is nearly always ready,
so the proxy's ``pump_task.cancel()`` for a session whose last reader was cut off could be lost:
the session then read the whole 40 MB body, holding its upstream slot, instead of stopping.
Every read with a deadline in vmc/aio now goes through :func:`deliverykit.deadline.within`.

Real loopback sockets; the bytes that complete the read are fed into the connection's real
StreamReader in the same iteration as the cancel, which is the race made deterministic.
"""

from __future__ import annotations

import asyncio

import pytest

from deliverykit.deadline import within
from vmc.aio import upstream as up


async def test_a_cancel_meeting_a_completed_origin_read_ends_the_reader() -> None:
    async def origin(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1000000\r\n\r\n" + b"a" * 1000)
        await writer.drain()
        await asyncio.sleep(30)  # then silence: only the bytes the test feeds arrive
        writer.close()

    server = await asyncio.start_server(origin, "127.0.0.1", 0)
    host, port = server.sockets[0].getsockname()[:2]
    resp = await up.request(host, port, b"GET", b"/", [(b"host", b"h")], timeout=30)
    first = asyncio.Event()

    async def pump() -> None:
        async for _ in resp.chunks():
            first.set()

    task = asyncio.create_task(pump())
    try:
        await asyncio.wait_for(first.wait(), 10)
        await asyncio.sleep(0.05)  # the pump waits in its next read
        resp._reader.feed_data(b"b" * 100)  # that read completes...
        task.cancel()  # ...in the same iteration as the cancel
        await asyncio.wait({task}, timeout=10)  # safety bound: a lost cancel waits 30 s for data
        assert task.done() and task.cancelled()
    finally:
        task.cancel()
        resp.close()
        server.close()
        await server.wait_closed()


async def test_within_gives_the_result_raises_timeout_and_never_swallows_a_cancel() -> None:
    loop = asyncio.get_running_loop()
    assert await within(asyncio.sleep(0, "x"), 5) == "x"
    with pytest.raises(TimeoutError):
        await within(asyncio.sleep(10), 0.01)

    fut: asyncio.Future[str] = loop.create_future()
    task = asyncio.create_task(within(fut, 30))
    await asyncio.sleep(0)
    fut.set_result("done")
    task.cancel()
    await asyncio.wait({task}, timeout=10)
    assert task.cancelled()
