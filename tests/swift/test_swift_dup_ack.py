"""DATA for a chunk the receiver already holds (RFC 7574 3.4, 8.7; RFC 6817).

3.4: a peer that has checked the integrity of a chunk MUST send an ACK for
it, with the one-way delay from the DATA's timestamp (8.7).  A duplicate (an
end-game copy from a second peer, a retransmission whose first copy was only
late) is such a chunk: its ACK retires it at the sender at once and gives
LEDBAT its delay sample, where a HAVE (or silence) would leave it in flight
until the sender counts it lost and halves its window.
"""

import dataclasses
import os

import pytest
from swift_support import leecher, pump, seeder

from swift.core import bins as B
from swift.core.peer import PeerConfig
from swift.wire import codec as C

SEED, LEECH = ("10.0.0.1", 6778), ("10.0.0.2", 6778)


def _setup(n_chunks: int = 40):
    data = os.urandom(n_chunks * 1024)
    s = seeder(data, PeerConfig(seed=1))
    leech = leecher(s.swarm_id, PeerConfig(seed=2))
    leech.connect(SEED, 0.0)
    now = pump({SEED: s, LEECH: leech}, until=lambda: leech.content.complete)
    assert leech.content.complete
    for _ in range(3):  # let the last ACKs reach the seeder
        now += 0.01
        for d, _a in leech.datagrams_to_send(now):
            s.datagram_received(d, LEECH, now)
    return data, s, leech, now


def _dup(s, i: int, now: float, payload: bytes | None = None) -> bytes:
    """A DATA datagram for chunk ``i`` as the seeder sends it (with its hashes)."""
    sch = next(iter(s.channels.values()))
    msgs = [C.Integrity(*B.base_range(b), h) for b, h in s.content.tree.uncles(i)]
    msgs = [C.Integrity(m.start, m.end - 1, m.hash) for m in msgs]
    msgs.append(C.Data(i, i, int(now * 1e6),
                       payload if payload is not None else s.content.chunk_bytes(i)))
    return C.encode_datagram(s.ctx, sch.remote_id, msgs), sch


def _acks(leech, now: float) -> list:
    out = []
    for d, _a in leech.datagrams_to_send(now):
        out += [m for m in C.decode_datagram(d, leech.ctx).messages if m.type == 2]
    return out


def test_duplicate_data_is_acked_with_a_delay_sample() -> None:
    data, s, leech, now = _setup()
    dgram, sch = _dup(s, 7, now - 0.030)
    # the seeder believes it sent chunk 7 again 30 ms ago
    sch.send.data_out[7] = (now - 0.030, len(dgram))
    sch.send.ledbat.on_send(len(dgram), now - 0.030)
    acks_before = sch.send.ledbat.acks
    leech.datagram_received(dgram, SEED, now)
    acks = _acks(leech, now)
    assert [(a.start, a.end) for a in acks] == [(7, 7)]
    assert 29_000 <= acks[0].delay <= 31_000  # one-way delay from the DATA timestamp (8.7)
    assert leech.stats["dup"] == 1
    for d, _a in [(C.encode_datagram(leech.ctx, sch.local_id, acks), LEECH)]:
        s.datagram_received(d, LEECH, now + 0.001)
    assert 7 not in sch.send.data_out and sch.send.ledbat.acks == acks_before + 1


def test_unrequested_duplicate_is_acked_too() -> None:
    """Not requested from this peer (e.g. the end-game loser after our CANCEL):
    still not stored again, but acknowledged rather than announced by HAVE."""
    data, s, leech, now = _setup()
    lch = next(iter(leech.channels.values()))
    assert 3 not in lch.down.requests
    dgram, _ = _dup(s, 3, now)
    leech.datagram_received(dgram, SEED, now)
    assert [(a.start, a.end) for a in _acks(leech, now)] == [(3, 3)]


def test_corrupt_duplicate_is_not_acked() -> None:
    data, s, leech, now = _setup()
    bad = bytearray(s.content.chunk_bytes(5))
    bad[0] ^= 1
    dgram, _ = _dup(s, 5, now, bytes(bad))
    leech.datagram_received(dgram, SEED, now)
    assert _acks(leech, now) == []
    assert bytes(leech.content.storage.buf[5 * 1024:6 * 1024]) == data[5 * 1024:6 * 1024]


@pytest.mark.parametrize("leecher_profile", ["libswift", "auto"])
def test_libswift_dialect_answers_a_duplicate_with_have(leecher_profile: str) -> None:
    """docs/swift-libswift-compat.md row 6: libswift turns the ACK for a duplicate into a
    HAVE; its profile does the same, and so does a channel that --profile auto settled on
    libswift's dialect (the dialect is the channel's, not the config's)."""
    data = os.urandom(40 * 1024)
    s = seeder(data, PeerConfig.libswift(seed=1))
    leech = leecher(s.swarm_id,
                    dataclasses.replace(PeerConfig.libswift(seed=2), profile=leecher_profile))
    leech.connect(SEED, 0.0)
    now = pump({SEED: s, LEECH: leech}, until=lambda: leech.content.complete)
    assert leech.content.complete
    leech.datagrams_to_send(now)
    dgram, _ = _dup(s, 9, now)
    leech.datagram_received(dgram, SEED, now)
    msgs = [m for d, _a in leech.datagrams_to_send(now)
            for m in C.decode_datagram(d, leech.ctx).messages]
    assert [(m.start, m.end) for m in msgs if m.type == 3] == [(9, 9)]
    assert not [m for m in msgs if m.type == 2]


def test_duplicates_are_counted_by_the_rule_that_moved_their_request() -> None:
    """stats["dup_<why>"]: which rule had taken the request from this peer
    (flash-crowd diagnostics, docs/swift.md)."""
    data, s, leech, now = _setup()
    leech.download.note_moved([4], "endgame")
    for i in (4, 6):
        dgram, _ = _dup(s, i, now)
        leech.datagram_received(dgram, SEED, now)
    assert (leech.stats["dup"] == 2 and leech.stats["dup_endgame"] == 1
            and leech.stats["dup_other"] == 1)
