"""DATA that arrives after its request was dropped as stale (docs/ledbat.md, "LEDBAT's loss
count above the queue's drops"): when the chunk is still missing it is verified, stored
and ACKed (RFC 7574 3.4, 8.7), so the sender's LEDBAT gets its delay sample instead of
counting a loss, and the chunk is not fetched twice.  Sans-IO: two cores in memory."""

from __future__ import annotations

from swift_support import LEECH_ADDR as LEECH, SEED_ADDR as SEED, pump, seeder_data, started_pair

from swift.core import bins as B
from swift.wire import codec as C

N = 64


def _started():
    """A leecher part-way through: the size is known, chunks are still missing."""
    return started_pair(N)


def _data(s, i: int, sent: float, payload: bytes | None = None) -> bytes:
    """The seeder's DATA datagram for chunk ``i`` (with its uncle hashes), sent at ``sent``."""
    return seeder_data(s, i, sent, payload=payload)


def _acked(lp, now: float) -> list[tuple[int, int]]:
    out = []
    for d, _a in lp.datagrams_to_send(now):
        out += [(m.start, m.end) for m in C.decode_datagram(d, lp.ctx).messages if m.type == 2]
    return out


def _drop_request(lp, i: int) -> None:
    """What the stale check does to a request (requests.py): gone from the channel,
    back to the picker."""
    lch = next(iter(lp.channels.values()))
    if i in lch.down.slot:
        lch.down.drop(i)
    lp.download.inflight.reset(B.chunk(i))
    lp.download.note_moved([i], "stale")


def test_late_data_for_a_missing_chunk_is_verified_stored_and_acked() -> None:
    s, lp, now = _started()
    i = max(c for c in range(N) if not lp.content.have.has(c))
    _drop_request(lp, i)
    _acked(lp, now)  # flush what was queued
    lp.datagram_received(_data(s, i, now - 0.030), SEED, now)
    assert lp.content.have.has(i)
    assert lp.content.chunk_bytes(i) == s.content.chunk_bytes(i)
    assert (i, i) in _acked(lp, now)
    assert lp.stats.get("late", 0) == 1 and lp.stats["rejected"] == 0


def test_late_data_that_fails_to_verify_is_dropped_without_blame() -> None:
    s, lp, now = _started()
    i = max(c for c in range(N) if not lp.content.have.has(c))
    _drop_request(lp, i)
    _acked(lp, now)
    lp.datagram_received(_data(s, i, now, b"\0" * 1024), SEED, now)
    assert not lp.content.have.has(i)
    assert (i, i) not in _acked(lp, now)
    assert lp.stats["rejected"] == 0 and lp.stats["unsolicited"] >= 1
    lch = next(iter(lp.channels.values()))
    assert not lch.verify.distrusted and not lp.download.inflight.has(i)
    # the download still completes
    pump({SEED: s, LEECH: lp}, t0=now, until=lambda: lp.content.complete)
    assert lp.content.complete
