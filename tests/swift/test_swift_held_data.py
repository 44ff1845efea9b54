"""DATA that cannot be verified only because its uncle hashes were lost with an earlier
datagram (RFC 7574 5.3; merkle.py ``last_missing``) is held about an RTT: when a
sibling's DATA brings those hashes, the held chunk is verified, stored and ACKed with
its own one-way delay (8.7), so the sender's LEDBAT does not count it lost.  Without the
hashes it is dropped as before (its request went back to the picker).  Sans-IO."""

from __future__ import annotations

from swift_support import LEECH_ADDR as LEECH, SEED_ADDR as SEED, pump, seeder_data, started_pair

from swift.core.receive import HOLD_MIN
from swift.wire import codec as C

N = 64


def _started():
    s, lp, now = started_pair(N)
    a, b = N - 2, N - 1
    assert not lp.content.have.has(a) and not lp.content.have.has(b)
    lch = next(iter(lp.channels.values()))
    for c in (a, b):  # both asked of the seeder 10 ms ago
        lch.down.ask(c, now - 0.010)
        lp.download.inflight.add(c)
    for _d in lp.datagrams_to_send(now):
        pass
    return s, lp, now, a, b


_data = seeder_data


def _acks(lp, now: float) -> dict[int, int]:
    out = {}
    for d, _a in lp.datagrams_to_send(now):
        for m in C.decode_datagram(d, lp.ctx).messages:
            if m.type == 2:  # an ACK may cover a run of chunks
                out.update(dict.fromkeys(range(m.start, m.end + 1), m.delay))
    return out


def test_data_missing_only_its_uncles_is_acked_once_a_sibling_brings_them() -> None:
    s, lp, now, a, b = _started()
    lp.datagram_received(_data(s, b, now - 0.020, uncles=1), SEED, now)  # upper uncles lost
    assert not lp.content.have.has(b) and lp.stats["unverifiable"] == 1
    assert b not in _acks(lp, now)
    later = now + 0.005
    lp.datagram_received(_data(s, a, later - 0.020), SEED, later)  # full uncles
    acks = _acks(lp, later)
    assert lp.content.have.has(a) and lp.content.have.has(b)
    assert lp.content.chunk_bytes(b) == s.content.chunk_bytes(b)
    assert a in acks and b in acks
    assert 19_000 <= acks[b] <= 21_000  # its one-way delay from the DATA timestamp (8.7)
    assert lp.stats["held_verified"] == 1 and lp.stats["rejected"] == 0


def test_a_held_chunk_expires_after_about_an_rtt() -> None:
    s, lp, now, a, b = _started()
    lp.datagram_received(_data(s, b, now, uncles=1), SEED, now)
    later = now + HOLD_MIN + max(HOLD_MIN, next(iter(lp.channels.values())).path.rtt)
    lp.datagram_received(_data(s, a, later), SEED, later)
    assert lp.content.have.has(a) and not lp.content.have.has(b)
    assert b not in _acks(lp, later) and lp.stats.get("held_verified", 0) == 0
    pump({SEED: s, LEECH: lp}, t0=later, until=lambda: lp.content.complete)
    assert lp.content.complete
