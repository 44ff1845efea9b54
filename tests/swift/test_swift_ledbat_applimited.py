"""RFC 6817's window cap only for a sender that had nothing to send.

RFC 6817 2.4.2 caps the window at what is in flight plus ALLOWED_INCREASE
MSS, so that a sender that does not use its window does not grow it (RFC
7661 calls such a sender "not cwnd-limited").  Our seeder measured "what is
in flight" over the last RTT; toward a libswift leecher on loopback the RTT
(0.1-1 ms) is shorter than the seeder's own cycle of reading a batch of ACKs
and refilling the window, so each batch found the flight drained by the
previous one and the cap cut a full window to what was left: 35 KiB to 3 KiB
within 80 ms, 2 DATA per flush, and the seeder spent its CPU on flushes
(docs/swift-perf.md, session 10).  Now the sender says after each flush
whether it had nothing left to send (``Ledbat.app_limited``), and only then
does the cap apply.
"""

from __future__ import annotations

from swift_support import take_over_channel

from swift.core.config import PeerConfig
from swift.core.content import Content, MemoryStorage
from swift.core.ledbat import Ledbat
from swift.core.merkle import MerkleTree
from swift.core.peer import Peer
from swift.wire.constants import HashFunc

MSS = 1024


def _two_batches(app_limited: bool) -> Ledbat:
    """A full 64 KiB window on a 0.3 ms path: one batch of ACKs drains it
    (the sender busy reading them), the next batch comes 1 ms later, before
    the sender refilled it."""
    led = Ledbat(mss=MSS)
    led.slow_start = False
    now = 100.0
    for _ in range(64):
        led.on_send(MSS, now)
    led.cwnd = float(64 * MSS)
    led.on_ack(0.0001, MSS, now + 0.0003, 0.0003)  # an RTT estimate: 0.3 ms
    led.app_limited = app_limited
    for _ in range(60):  # the first batch
        led.on_ack(0.0001, MSS, now + 0.001, 0.0003)
    for _ in range(2):  # the next, before any refill
        led.on_ack(0.0001, MSS, now + 0.002, 0.0003)
    return led


def test_a_window_limited_sender_keeps_its_window_across_drained_batches() -> None:
    led = _two_batches(app_limited=False)
    assert led.cwnd >= 64 * MSS  # grew a little, below TARGET; was cut to ~3 KiB before


def test_a_sender_with_nothing_to_send_is_still_capped() -> None:
    """RFC 6817's cap itself stays: with nothing to send, the window follows the flight."""
    led = _two_batches(app_limited=True)
    # 3 KiB were in flight when the second batch came: the cap of that moment
    assert led.cwnd <= 3 * MSS + Ledbat.ALLOWED_INCREASE * MSS


def _seeder_and_channel():
    data = bytes(range(256)) * 4 * 600  # 600 chunks
    tree = MerkleTree.build([data[i:i + MSS] for i in range(0, len(data), MSS)],
                            HashFunc.SHA1, chunk_size=MSS)
    seeder = Peer(Content.seeded(tree, MemoryStorage(data)), PeerConfig.libswift(seed=1))
    leech = Peer(Content(MerkleTree.for_root(tree.root_hash, HashFunc.SHA1, chunk_size=MSS),
                         MemoryStorage()), PeerConfig.libswift(seed=2))
    ch = take_over_channel(seeder, leech, 10.0, ("127.0.0.1", 1), ("127.0.0.1", 2))
    return seeder, ch


def test_the_upload_says_whether_it_had_anything_left_to_send() -> None:
    seeder, ch = _seeder_and_channel()
    ch.send.upload.push(0, 500)  # far more than the window (full since the handshake)
    seeder.datagrams_to_send(10.001)
    assert ch.send.upload.size  # the window stopped it, requests left
    assert ch.send.ledbat.app_limited is False
    ch.send.upload.clear()
    seeder.datagrams_to_send(10.002)
    assert ch.send.ledbat.app_limited is True  # nothing left to send
