"""BatchedUDPEndpoint with UDP GSO, over real loopback sockets: every datagram
arrives as its own, in order per destination; a kernel refusal falls back to
sendmmsg with nothing lost or sent twice; a bad destination costs only its own
datagrams, counted."""

from __future__ import annotations

import asyncio
import socket

import pytest

from deliverykit import aio, fastpath
from deliverykit.aio import open_udp

SO_NO_CHECK = 11  # UDP without checksums: the kernel then refuses GSO (EINVAL)
IMPLS = [pytest.param(fastpath.py_send_gso, id="twin")]
if fastpath.speedups is not None:
    IMPLS.append(pytest.param(fastpath.speedups.send_gso, id="c"))


async def _collect(eps, want: int, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while sum(len(g) for g in eps) < want and loop.time() < deadline:
        await asyncio.sleep(0.005)


def _traffic(addrs, n: int) -> list[tuple[bytes, tuple]]:
    """Interleaved destinations, mostly one size per destination, some odd sizes."""
    out = []
    for i in range(n):
        k = i % len(addrs)
        size = 1200 if i % 7 else 300 + k
        out.append((i.to_bytes(4, "big") * (size // 4), addrs[k]))
    return out


@pytest.mark.parametrize("send_gso", IMPLS)
async def test_gso_endpoint_delivers_each_datagram_in_order_per_destination(
        send_gso, monkeypatch):
    monkeypatch.setattr(aio, "send_gso", send_gso)
    got: list[list[bytes]] = [[], [], []]

    def sink(k):
        return lambda batch, now: got[k].extend(d for d, _ in batch)

    async with open_udp(("127.0.0.1", 0), sink(0)) as r0, \
            open_udp(("127.0.0.1", 0), sink(1)) as r1, \
            open_udp(("127.0.0.1", 0), sink(2)) as r2, \
            open_udp(("127.0.0.1", 0), lambda b, n: None) as tx:
        assert tx.enable_gso(64) is True
        addrs = [r.local_addr for r in (r0, r1, r2)]
        items = _traffic(addrs, 600)
        for i in range(0, len(items), 200):
            tx.send_many(items[i:i + 200])
        await tx.drain()
        await _collect(got, len(items))
        assert tx.stats["tx_packets"] == len(items)
        assert tx.stats["tx_dropped"] == tx.stats["gso_fallbacks"] == 0
    for k in range(3):
        assert got[k] == [d for d, a in items if a == addrs[k]]


async def test_a_refused_gso_falls_back_to_sendmmsg_without_loss_or_duplicates():
    got: list[bytes] = []
    async with open_udp(("127.0.0.1", 0), lambda b, n: got.extend(d for d, _ in b)) as rx, \
            open_udp(("127.0.0.1", 0), lambda b, n: None) as tx:
        assert tx.enable_gso() is True
        tx.sock.setsockopt(socket.SOL_SOCKET, SO_NO_CHECK, 1)
        items = _traffic([rx.local_addr], 300)
        tx.send_many(items)
        await tx.drain()
        await _collect([got], len(items))
        assert tx.stats["gso_fallbacks"] == 1 and tx.gso_segments == 0
        assert tx.stats["tx_packets"] == len(items) and tx.stats["tx_dropped"] == 0
    assert got == [d for d, _ in items]


async def test_a_destination_the_kernel_refuses_costs_only_its_own_datagrams():
    """255.255.255.255 without SO_BROADCAST: EACCES for each of its datagrams, counted
    as dropped; the datagrams to the good destination all arrive."""
    got: list[bytes] = []
    async with open_udp(("127.0.0.1", 0), lambda b, n: got.extend(d for d, _ in b)) as rx, \
            open_udp(("127.0.0.1", 0), lambda b, n: None) as tx:
        tx.enable_gso()
        bad = ("255.255.255.255", 9)
        items = [(bytes([i]) * 100, rx.local_addr if i % 3 else bad) for i in range(60)]
        tx.send_many(items)
        await tx.drain()
        good = [d for d, a in items if a != bad]
        await _collect([got], len(good))
        assert tx.stats["tx_dropped"] == len(items) - len(good)
        assert tx.stats["tx_packets"] == len(good)
        assert tx.stats["gso_fallbacks"] == 0
    assert got == good


async def test_enable_gso_rejects_a_bad_segment_count():
    async with open_udp(("127.0.0.1", 0), lambda b, n: None) as ep:
        with pytest.raises(ValueError, match="max_segments"):
            ep.enable_gso(0)
        with pytest.raises(ValueError, match="max_segments"):
            ep.enable_gso(129)
        assert ep.gso_segments == 0
