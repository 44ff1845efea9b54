"""Session handling over real loopback multicast (issue 5 review, items 1, 2, 3, 6, 7):
the local join interface, the (sender IP, TSI) check of RFC 5775 4.4, the
exceptional timeouts of RFC 3738 3.2.3.8, implausible packets kept from the FEC
decoder, and the close-session flag A (RFC 5651 5.1) at the end of a session."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets
import socket

from m2c.aio.driver import MulticastReceiver, MulticastSender, make_session
from m2c.core.filetx import FileSender
from m2c.wire import codec


def fresh_net() -> tuple[str, int]:
    return f"239.199.{1 + secrets.randbelow(250)}.1", 20000 + 100 * secrets.randbelow(90)


def session(tmp_path, size=200_000, **kw):
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(size))
    group, port = fresh_net()
    args = dict(min_rate=30.0, max_rate=3000.0, tsd=0.5, k=2)
    args.update(kw)
    return str(src), make_session(str(src), group=group, port=port, **args)


def leftovers(tmp_path):
    return sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".part"))


async def forge_sender(sd, src, bind: str, until: asyncio.Future, packet=None) -> int:
    """The session's own packets (same TSI, valid CRC), sent from ``bind``."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((bind, 0))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
    data = open(src, "rb").read()
    fs = FileSender(sd, lambda off, n: data[off:off + n])
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    sent = 0
    try:
        while not until.done() and sent < 20_000:
            for pdu, pkt in fs.next_pdus():
                await asyncio.sleep(max(0.0, pdu.due - (loop.time() - t0)))
                s.sendto(codec.encode(packet(pkt) if packet else pkt), tuple(sd.groups[pdu.g]))
                sent += 1
                if until.done():
                    break
    finally:
        s.close()
    return sent


def test_default_interface_is_not_the_senders_address(tmp_path):
    """Item 1: the SDP's sender address is never the local join interface."""
    _, sd = session(tmp_path, size=1000)
    remote = dataclasses.replace(sd, interface="192.0.2.10", source="192.0.2.10")
    assert MulticastReceiver(remote, str(tmp_path / "o")).interface == "0.0.0.0"
    assert MulticastReceiver(remote, str(tmp_path / "o"), interface="127.0.0.1").interface \
        == "127.0.0.1"
    # a loopback sender is only reachable on lo: join there (INADDR_ANY follows the
    # route of the group, which is not lo on a host with a default route)
    assert MulticastReceiver(sd, str(tmp_path / "o")).interface == "127.0.0.1"


async def test_receiver_joins_on_its_own_interface_not_the_sdp_one(tmp_path):
    """Item 1: an SDP naming a sender interface that is not local (another host)
    used to fail with 'No such device'; the receiver now joins on its own."""
    src, sd = session(tmp_path, size=20_000)
    remote = dataclasses.replace(sd, interface="192.0.2.10", source="")
    stop = asyncio.Event()
    snd = asyncio.create_task(MulticastSender(sd, src).send(duration=20, stop=stop))
    try:
        res = await MulticastReceiver(remote, str(tmp_path / "out"),
                                      interface="127.0.0.1").receive(timeout=15)
    finally:
        stop.set()
        await snd
    assert res.ok
    assert (tmp_path / "out").read_bytes() == open(src, "rb").read()


async def test_datagrams_from_another_source_are_dropped(tmp_path):
    """Item 2 (RFC 5775 4.4): the session's packets sent from 127.0.0.9 instead of
    the sender address of the session description never reach the decoder."""
    src, sd = session(tmp_path, size=20_000, min_rate=50.0, max_rate=400.0)
    assert sd.source == "127.0.0.1"
    rx = MulticastReceiver(sd, str(tmp_path / "out"), idle_timeout=30, slot_timeout=30)
    task = asyncio.create_task(rx.receive(timeout=2.5))
    await asyncio.sleep(0.2)
    sent = await forge_sender(sd, src, "127.0.0.9", task)
    res = await task
    assert sent > 50 and not res.ok and not res.complete
    assert res.foreign_source > 50
    assert res.metrics.raw["packets"] == 0 and rx.cc.loss.received == 0
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


async def test_sdp_without_source_accepts_any_sender_as_before(tmp_path):
    """Item 2: an older SDP without ``source`` keeps working (no source check)."""
    src, sd = session(tmp_path, size=20_000, min_rate=50.0, max_rate=400.0)
    old = dataclasses.replace(sd, source="")
    rx = MulticastReceiver(old, str(tmp_path / "out"))
    task = asyncio.create_task(rx.receive(timeout=15))
    await asyncio.sleep(0.2)
    await forge_sender(sd, src, "127.0.0.9", task)
    res = await task
    assert res.ok and res.foreign_source == 0


async def test_legitimate_sender_wins_over_a_spoofer(tmp_path):
    src, sd = session(tmp_path, size=100_000)
    stop = asyncio.Event()
    snd = asyncio.create_task(MulticastSender(sd, src).send(duration=20, stop=stop))
    rx = MulticastReceiver(sd, str(tmp_path / "out"))
    task = asyncio.create_task(rx.receive(timeout=15))
    await asyncio.sleep(0.1)

    def corrupt(pkt):  # the right blocks with wrong data: fatal if decoded
        if pkt.data_less:
            return pkt
        return dataclasses.replace(pkt, payload=bytes(len(pkt.payload)))

    spoof = asyncio.create_task(forge_sender(sd, src, "127.0.0.9", task, corrupt))
    try:
        res = await task
    finally:
        stop.set()
        await snd
        await spoof
    assert res.ok and res.foreign_source > 0
    assert (tmp_path / "out").read_bytes() == open(src, "rb").read()


async def test_no_packets_leaves_the_session(tmp_path):
    """Item 3 (RFC 3738 3.2.3.8): nothing arrives: leave after the idle threshold,
    long before --timeout; the output is never written."""
    _, sd = session(tmp_path)
    out = tmp_path / "out"
    out.write_bytes(b"older file")
    rx = MulticastReceiver(sd, str(out), idle_timeout=0.8, slot_timeout=5.0)
    res = await asyncio.wait_for(rx.receive(timeout=60), 30)
    assert not res.ok and "no packet" in res.end and "3.2.3.8" in res.end
    assert out.read_bytes() == b"older file" and leftovers(tmp_path) == []
    assert res.leaves == res.joins


def test_default_exceptional_timeouts_are_rfc_3738s(tmp_path):
    _, sd = session(tmp_path, size=1000, tsd=0.5)
    rx = MulticastReceiver(sd, str(tmp_path / "o"))
    assert (rx.idle_timeout, rx.slot_timeout) == (10.0, 20.0)
    _, sd = session(tmp_path, size=1000, tsd=16.0, min_rate=20.0, max_rate=100.0)
    rx = MulticastReceiver(sd, str(tmp_path / "o"))
    assert (rx.idle_timeout, rx.slot_timeout) == (16.0, 32.0)


async def test_time_slot_index_that_does_not_advance_leaves_the_session(tmp_path):
    """Item 3: packets keep coming from the sender's address but their time slot
    index never changes: leave after the slot threshold."""
    _, sd = session(tmp_path)
    rx = MulticastReceiver(sd, str(tmp_path / "out"), idle_timeout=1.0, slot_timeout=1.5)
    task = asyncio.create_task(rx.receive(timeout=60))
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    try:
        for psn in range(400):
            if task.done():
                break
            pkt = codec.AlcPacket(sd.session, sd.toi, sd.codepoint, 7, 0, psn, 0, 0, 0, 0,
                                  data_less=True)
            s.sendto(codec.encode(pkt), tuple(sd.groups[0]))
            await asyncio.sleep(0.03)
    finally:
        s.close()
    res = await asyncio.wait_for(task, 30)
    assert not res.ok and "time slot" in res.end


async def test_implausible_packets_never_reach_the_decoder(tmp_path):
    """Item 6: CRC-valid packets of the session from the sender's address whose PSN
    does not fit the sender clock (the congestion control counts them implausible)
    carry forged symbols; they must not be decoded (one of them used to fail the
    transfer at the SHA-256 check)."""
    src, sd = session(tmp_path, size=1_000_000)
    stop = asyncio.Event()
    snd = asyncio.create_task(MulticastSender(sd, src).send(duration=20, stop=stop))
    rx = MulticastReceiver(sd, str(tmp_path / "out"))
    task = asyncio.create_task(rx.receive(timeout=15))
    for _ in range(100):  # until the receiver has anchored its sender clock
        await asyncio.sleep(0.02)
        if rx.cc.offset is not None or task.done():
            break
    assert rx.cc.offset is not None and not rx.file.done
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    E = sd.fec.symbol_size
    k0 = sd.partition().block_length(0)
    try:
        for esi in range(k0):
            pkt = codec.AlcPacket(sd.session, sd.toi, sd.codepoint, 0, 0, 5_000_000 + esi,
                                  0, 0, 0, esi, b"\xee" * E)
            s.sendto(codec.encode(pkt), tuple(sd.groups[0]))
    finally:
        s.close()
    try:
        res = await task
    finally:
        stop.set()
        await snd
    assert res.ok
    assert res.implausible >= k0 // 2
    assert (tmp_path / "out").read_bytes() == open(src, "rb").read()


async def test_sender_closes_the_session_with_flag_a(tmp_path):
    """Item 7 (RFC 5651 5.1): when the sender stops it sends data-less packets with
    A = 1 on the base group."""
    src, sd = session(tmp_path, size=20_000)
    g, port = sd.groups[0]
    r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    r.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    r.bind((g, port))
    r.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                 socket.inet_aton(g) + socket.inet_aton("127.0.0.1"))
    r.setblocking(False)
    try:
        await MulticastSender(sd, src).send(duration=0.5)
        pkts = []
        while True:
            try:
                pkts.append(codec.decode(r.recv(65536), session=sd.session))
            except BlockingIOError:
                break
    finally:
        r.close()
    closing = [p for p in pkts if p.close_session]
    assert len(closing) >= 2 and all(p.data_less and p.group == 0 for p in closing)
    assert not any(p.close_session for p in pkts[:-len(closing)])
    psns = [p.psn for p in pkts if p.group == 0]
    assert psns == sorted(psns) and len(set(psns)) == len(psns)  # the PSNs go on


async def test_receiver_fails_fast_when_the_sender_closes_the_session(tmp_path):
    """Item 7: a receiver treats A as the end of the session: incomplete, it fails
    at once instead of waiting for --timeout."""
    src, sd = session(tmp_path, size=3_000_000, min_rate=30.0, max_rate=300.0)
    out = tmp_path / "out"
    rx = MulticastReceiver(sd, str(out))
    task = asyncio.create_task(rx.receive(timeout=60))
    await asyncio.sleep(0.1)
    await MulticastSender(sd, src).send(duration=1.5)
    res = await asyncio.wait_for(task, 20)
    assert res.closed and not res.ok and "closed the session" in res.end
    assert not out.exists() and leftovers(tmp_path) == []


async def test_stream_receiver_checks_the_source():
    """Item 2 for the sequencer API (m2c.aio.stream): with ``source`` set, buffers
    sent from another address are never reassembled; the real sender's are."""
    from m2c.aio.stream import StreamReceiver, StreamSender
    from m2c.core.groups import WaveSchedule

    group, port = fresh_net()
    s = WaveSchedule(30.0, 600.0, tsd=0.5, k=2)
    a, b, c, d = (int(x) for x in group.split("."))
    groups = [(f"{a}.{b}.{c}.{d + i}", port + i) for i in range(s.channels + 1)]
    got: list = []
    rx = StreamReceiver(s, groups, 78, got.append, source="127.0.0.1")
    rx.start()
    spoof = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    spoof.bind(("127.0.0.9", 0))
    spoof.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    try:
        for psn in range(30):
            pkt = codec.AlcPacket(78, 1, 129, 0, 0, psn, 1000 + psn, 0, 1000 + psn, 0,
                                  b"x" * 100, 1)
            spoof.sendto(codec.encode(pkt), groups[0])
            await asyncio.sleep(0.01)
        tx = StreamSender(s, groups, 78, pdu_size=100)
        try:
            for i in range(3):
                await tx.send(bytes([i]) * 300, 0.5)
        finally:
            tx.close()
        await asyncio.sleep(0.1)
    finally:
        spoof.close()
        rx.close()
    assert rx.foreign_source >= 30
    assert got and all(r.buffer_id < 1000 for r in got)
