"""The source's per-chunk work (issue 18, session 11) changes no datagram.

* The inner header packets of a chunk are built from one template
  (``Source._header_packets``): the same bytes as building each in full.
* In source-as-ITR mode the chunk goes to the ITR's inside interface as one batch
  (``Itr.handle_batch``, the socket drivers' path): the same datagrams and counters as
  a separate ITR fed the source's packets one by one (``Itr.handle_inner``).
* With an infinite heartbeat timeout (the simulator's) no subscriber is visited per
  chunk for expiry; with a finite one the timer is the exact earliest expiry.
"""

from __future__ import annotations

import ipaddress
import random

import pytest

from corecast.core.itr import Itr
from corecast.core.mapcache import MapCache
from corecast.core.maptrie import parse_prefix
from corecast.core.source import Source, Subscriber
from corecast.wire.codec import encode_cc_header
from corecast.wire.constants import HashId

CC4 = [parse_prefix("10.255.0.0/16")]
CC6 = [parse_prefix("fd00:cc::/32")]


def _source(v6: bool, transport: str, hash_id: int, itr: Itr | None = None) -> Source:
    eid, chan = ("fd00:1::1", "fd00:cc::7") if v6 else ("10.0.0.1", "10.255.0.7")
    src = Source(eid, None if itr is not None else ("10.0.0.2", 1), transport, hash_id,
                 itr=itr, mtu=1500)
    src.add_channel(chan, chunk_size=1000)
    return src


@pytest.mark.parametrize("v6", [False, True])
@pytest.mark.parametrize("transport", ["udp", "raw"])
@pytest.mark.parametrize("hash_id", [HashId.SHA1, HashId.SHA256])
def test_header_packets_are_the_full_build(v6, transport, hash_id):
    src = _source(v6, transport, hash_id)
    (ch,) = src.channels.values()
    rnd = random.Random(5)
    for i in range(40):
        host = f"fd00:2::{i + 1:x}" if v6 else f"10.1.{i // 200}.{i % 200 + 1}"
        src.join(ch.eid, host, rnd.randrange(1, 65536), True, 0.0)
    subs = list(ch.dst.values())
    for seq in (0, 1, 65535, 65536, 2**32 - 1):
        ch.seq = seq
        h = bytes(rnd.randrange(256) for _ in range(20 if hash_id == HashId.SHA1 else 32))
        want = [src._inner(ch, encode_cc_header(seq, h, s.eid, s.port, hash_id)) for s in subs]
        assert src._header_packets(ch, h, subs) == want


def _itr(v6: bool, fast: bool | None = None) -> Itr:
    """Two or three ASes' prefixes (the third AS's clients are not mapped in IPv6)."""
    mc = MapCache()
    if v6:
        mc.load_static("fd00:2::/120 192.0.2.10\nfd00:2::100/120 192.0.2.11")
        return Itr("192.0.2.1", CC6, mc, data_port=4341, fast=fast)
    mc.load_static("10.1.0.0/24 192.0.2.10\n10.1.1.0/24 192.0.2.11")
    return Itr("192.0.2.1", CC4, mc, data_port=4341, extra_payload_every=3, fast=fast)


@pytest.mark.parametrize("v6", [False, True])
@pytest.mark.parametrize("fast", [None, False])
def test_source_as_itr_sends_what_a_separate_itr_sends(v6, fast):
    """Clients in three ASes, one with no mapping (a miss: left to the Python core), a
    subscriber without a CoreCast ETR (plain unicast), the extra-payload option and a
    leave between chunks: the same datagrams, in order, and the same counters."""
    itr_in = _itr(v6, fast)
    joined = _source(v6, "udp", HashId.SHA1, itr=_itr(v6, fast))
    sep = _source(v6, "udp", HashId.SHA1)
    hosts = ([f"fd00:2::{i:x}" for i in (1, 2, 3, 0x101, 0x102)] + ["fd00:3::1"] if v6 else
              [f"10.1.{a}.{i}" for a in range(3) for i in (1, 2, 3, 4)] + ["10.9.0.1"])
    for s in (joined, sep):
        (ch,) = s.channels.values()
        for k, host in enumerate(hosts):
            s.join(ch.eid, host, 5000 + k, k != 2, 0.0)
    for chunk in range(4):
        if chunk == 2:
            for s in (joined, sep):
                s.leave(next(iter(s.channels)), hosts[1], 5001)
        now = chunk * 0.025
        got = joined.emit_chunk(next(iter(joined.channels.values())), now)
        want = []
        for data, dst in sep.emit_chunk(next(iter(sep.channels.values())), now):
            if dst == ("10.0.0.2", 1):
                want += itr_in.handle_inner(data, now)
            else:
                want.append((data, dst))
        assert got == want
    assert joined.counters == sep.counters
    assert joined.itr is not None
    assert joined.itr.counters == itr_in.counters
    assert joined.itr.mapcache.counters["misses"] == itr_in.mapcache.counters["misses"] > 0


def test_source_as_itr_takes_the_batch_path():
    """The chunk's headers reach Algorithm 1 through the batch path (C where built):
    the map-cache rows count them as fast-path hits, which ``handle_inner`` does not."""
    itr = _itr(False)
    src = _source(False, "udp", HashId.SHA1, itr=itr)
    (ch,) = src.channels.values()
    for i in range(1, 9):
        src.join(ch.eid, f"10.1.0.{i}", 6000, True, 0.0)
    src.emit_chunk(ch, 0.0)
    src.emit_chunk(ch, 0.025)
    hits = {row[0]: row[6] for row in itr.path.table.entries()}
    assert hits[ipaddress.ip_address("10.1.0.0").packed] == 16
    assert itr.counters["header_copies"] == 16


class _Watched(Subscriber):
    """A subscriber that counts how often its ``last_seen`` is read."""

    reads = 0

    @property  # type: ignore[override]  # a read-counting property over the field
    def last_seen(self) -> float:
        _Watched.reads += 1
        return self._seen

    @last_seen.setter
    def last_seen(self, value: float) -> None:
        self._seen = value


def test_an_infinite_timeout_visits_no_subscriber_per_chunk():
    src = Source("10.0.0.1", ("10.0.0.2", 1), heartbeat_timeout=float("inf"))
    ch = src.add_channel("10.255.0.7")
    for i in range(1, 51):
        src.join(ch.eid, f"10.1.0.{i}", 7000, True, 0.0)
        ch.dst[(ipaddress.ip_address(f"10.1.0.{i}").packed, 7000)] = _Watched(
            ipaddress.ip_address(f"10.1.0.{i}").packed, 7000, True, 0.0)
    _Watched.reads = 0
    now = 0.0
    for _ in range(10):
        t = src.get_timer(now)
        assert t is not None
        now = t
        src.handle_timer(now)
        assert len(src.datagrams_to_send(now)) == 51
    assert _Watched.reads == 0
    assert len(ch.dst) == 50


def test_the_expiry_timer_is_the_earliest_last_seen_plus_the_timeout():
    """Joins, heartbeats, leaves and expiries in random order: the timer is always just
    after the earliest ``last_seen`` plus the timeout (brute force beside it), and a
    subscriber expires exactly when its heartbeats stopped for longer."""
    rnd = random.Random(11)
    src = Source("10.0.0.1", ("10.0.0.2", 1), heartbeat_timeout=5.0)
    src.streaming = False
    ch = src.add_channel("10.255.0.7")
    hosts = [f"10.1.0.{i}" for i in range(1, 30)]
    now = 0.0
    for _ in range(600):
        now += rnd.random() * 0.5
        op = rnd.random()
        host = rnd.choice(hosts)
        if op < 0.3:
            src.join(ch.eid, host, 7000, True, now)
        elif op < 0.7:
            src.heartbeat(ch.eid, host, 7000, now)
        elif op < 0.8:
            src.leave(ch.eid, host, 7000)
        else:
            before = {k: s.last_seen for k, s in ch.dst.items()}
            src.handle_timer(now)
            assert set(ch.dst) == {k for k, t in before.items() if not now - t > 5.0}
        seen = [s.last_seen for s in ch.dst.values()]
        t = src.get_timer(now)
        if not seen:
            assert t is None
        else:
            assert t is not None and min(seen) + 5.0 < t < min(seen) + 5.0 + 1e-6
