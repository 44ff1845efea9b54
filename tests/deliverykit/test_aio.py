"""BatchedUDPEndpoint over real loopback sockets."""

from __future__ import annotations

import asyncio

import pytest

from deliverykit.aio import open_udp


async def _wait_for(pred, timeout=5.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not pred():
        if loop.time() > deadline:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(0.005)


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
async def test_echo_many_datagrams_in_batches(host):
    got: list[bytes] = []

    def echo(batch, now):
        server.send_many([(b"re:" + d, a) for d, a in batch])

    def collect(batch, now):
        got.extend(d for d, _ in batch)

    async with open_udp((host, 0), echo) as server, open_udp((host, 0), collect) as client:
        n = 2000
        client.send_many((i.to_bytes(4, "big"), server.local_addr[:2]) for i in range(n))
        def accounted() -> int:
            return len(got) + client.stats["tx_dropped"] + server.stats["tx_dropped"]

        await _wait_for(lambda: accounted() >= n)
    # Loopback UDP with 4 MiB buffers loses nothing at this volume; every
    # datagram is accounted for either way (received or counted as dropped).
    assert len(got) + client.stats["tx_dropped"] + server.stats["tx_dropped"] == n
    assert len(set(got)) == len(got)  # no duplicates
    assert set(got) <= {b"re:" + i.to_bytes(4, "big") for i in range(n)}
    assert server.stats["rx_batches"] < server.stats["rx_packets"]  # really batched


async def test_handler_exception_is_counted_not_fatal():
    seen: list[bytes] = []

    def fragile(batch, now):
        for d, _ in batch:
            if d == b"bad":
                raise ValueError("malformed")
            seen.append(d)

    async with open_udp(("127.0.0.1", 0), fragile) as rx, \
            open_udp(("127.0.0.1", 0), lambda b, t: None) as tx:
        tx.sendto(b"bad", rx.local_addr)
        await _wait_for(lambda: rx.stats["handler_errors"] == 1)
        tx.sendto(b"good", rx.local_addr)
        await _wait_for(lambda: seen == [b"good"])
    assert rx.stats["handler_errors"] == 1


async def test_send_after_close_raises_and_close_is_idempotent():
    ep = open_udp(("127.0.0.1", 0), lambda b, t: None)
    ep.close()
    ep.close()
    with pytest.raises(ConnectionError):
        ep.sendto(b"x", ("127.0.0.1", 9))


async def test_kernel_timestamps_arrive_on_the_loops_clock():
    from swift._fast import (
        recv_batch_ts,  # the extension's recvmmsg with SO_TIMESTAMPNS (or its twin)
    )

    got: list[tuple] = []
    nows: list[float] = []

    def keep(batch, now):
        got.extend(batch)
        nows.append(now)

    loop = asyncio.get_running_loop()
    async with open_udp(("127.0.0.1", 0), keep) as rx, \
            open_udp(("127.0.0.1", 0), lambda b, t: None) as tx:
        assert not rx.timestamps
        rx.enable_timestamps(recv_batch_ts)
        assert rx.timestamps
        sent_at = loop.time()
        tx.sendto(b"stamped", rx.local_addr)
        await _wait_for(lambda: got)
        sender = tx.local_addr[:2]
    (data, addr, arrived), = got
    assert data == b"stamped" and addr[:2] == sender
    # the kernel's wall-clock stamp, moved onto the loop's monotonic clock: between
    # the send and the handler's now (1 ms for reading the two clocks apart)
    assert arrived is not None
    assert sent_at - 0.001 <= arrived <= nows[0] + 0.001


async def test_paused_reading_leaves_datagrams_in_the_socket_until_resumed():
    got: list[bytes] = []
    async with open_udp(("127.0.0.1", 0), lambda b, t: got.extend(d for d, _ in b)) as rx, \
            open_udp(("127.0.0.1", 0), lambda b, t: None) as tx:
        rx.pause_reading()
        rx.pause_reading()  # idempotent
        tx.sendto(b"waits", rx.local_addr)
        tx.sendto(b"also", rx.local_addr)
        await asyncio.sleep(0.05)
        assert got == [] and rx.stats["rx_packets"] == 0
        rx.resume_reading()
        await _wait_for(lambda: len(got) == 2)
    assert got == [b"waits", b"also"]
