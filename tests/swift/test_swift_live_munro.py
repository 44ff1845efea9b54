"""When a live peer sends SIGNED_INTEGRITY (RFC 7574 6.1.2.3, 6.1.2.4).

6.1.2.3: before DATA for chunk C, INTEGRITY + SIGNED_INTEGRITY of C's munro in
the same datagram "unless Peer B indicated earlier in the exchange that it
already possess a chunk with the same corresponding munro (by means of HAVE
or ACK messages)" -- not "unless we sent it before".
6.1.2.4: the rightmost signed munro "in the third datagram, and in any
subsequent datagrams to Peer B, until Peer B indicates that it possess a
chunk with the same corresponding munro or a more recent munro"; never in
the first two (handshake) datagrams.
"""

import os

from swift.core import bins as B
from swift.core.live import LiveContent, LiveTree
from swift.core.peer import Peer, PeerConfig
from swift.wire import codec as C
from swift.wire.constants import MsgType

SRC, V1 = ("10.2.0.1", 1), ("10.2.0.2", 2)


def _run(steps: int = 400, feed: bool = False, cap: float | None = None):
    """Source with 100 chunks (munros of 4), a viewer tuning in; returns every
    datagram the source sent as (messages, (the viewer's highest chunk + 1
    and its chunks as the source knew them then, the source's rightmost
    munro then)).  ``feed``: one more chunk every step; ``cap``: the
    source's upload rate (B/s), so DATA lags behind the control datagrams."""
    src_tree = LiveTree.source(4, 1024)
    source = Peer(LiveContent(src_tree, window=4096), PeerConfig(seed=1, upload_rate=cap))
    t = 9700.0
    source.live_append(os.urandom(100 * 1024), t)
    v = Peer(LiveContent(LiveTree(src_tree.swarm_id, 4, 1024), window=4096), PeerConfig(seed=2))
    v.connect(SRC, t)
    sent = []
    for step in range(steps):
        t += 0.002
        if feed:
            source.live_append(os.urandom(1024), t)
        for d, _a in v.datagrams_to_send(t):
            source.datagram_received(d, V1, t)
        ch = next(iter(source.channels.values()), None)
        known = ((ch.remote.top, set(c for a, b in ch.remote.have.ranges() for c in range(a, b)))
                 if ch else (0, set()))
        right = B.base_range(max(src_tree.signed, key=lambda b: B.base_range(b)[1]))
        for d, _a in source.datagrams_to_send(t):
            sent.append(([m for m in C.decode_datagram(d, source.ctx).messages], known, right))
            v.datagram_received(d, SRC, t)
        if step % 10 == 0:
            source.handle_timer(t)
            v.handle_timer(t)
        if not feed and v.content.have.is_filled_range(84, 100):
            break
    assert v.stats["rejected"] == 0
    if not feed:
        assert v.live_start == 84 and v.content.have.is_filled_range(84, 100)
    return src_tree, sent


def _signed(msgs) -> set:
    return {(m.start, m.end) for m in msgs if m.type == MsgType.SIGNED_INTEGRITY}


def test_rightmost_munro_in_every_datagram_until_the_viewer_shows_it() -> None:
    """A live stream (a chunk every step) and a source whose DATA lags (upload
    cap): from the 4th datagram on, every datagram carries the source's
    rightmost signed munro until the viewer's HAVE/ACK shows a chunk under
    the munro first pushed or later; after that only DATA carries munros."""
    _tree, sent = _run(steps=300, feed=True, cap=10_000)
    hs_reply = sent[0][0]
    assert hs_reply[0].type == MsgType.HANDSHAKE and not _signed(hs_reply)  # 2nd datagram: none
    first = None
    phase, after = [], []
    for msgs, (pm, _have), (lo, hi) in sent[1:]:
        if first is None:
            first = lo
        (phase if pm <= first else after).append((msgs, (lo, hi - 1)))
    assert len(phase) >= 10 and after
    for msgs, right in phase:  # control and DATA datagrams alike
        assert right in _signed(msgs), [m.type for m in msgs]
    assert not any(_signed(msgs) for msgs, _ in after
                   if not any(m.type == MsgType.DATA for m in msgs))


def test_no_push_to_a_peer_that_already_shows_the_munro() -> None:
    """No feed: the viewer's first (probe) chunk is the newest one, so once its
    ACK is in, nothing but DATA carries a munro."""
    src_tree, sent = _run()
    lo, hi = B.base_range(max(src_tree.signed, key=lambda b: B.base_range(b)[1]))
    assert (lo, hi) == (96, 100)
    assert (96, 99) in _signed(sent[1][0])  # 4th datagram of the exchange
    later = [msgs for msgs, (pm, _), _r in sent if pm > lo]
    assert later and not any(_signed(msgs) for msgs in later
                             if not any(m.type == MsgType.DATA for m in msgs))


def test_munro_before_every_data_until_acked() -> None:
    _tree, sent = _run()
    n_data = 0
    for msgs, (_pm, have), _right in sent:
        for k, m in enumerate(msgs):
            if m.type != MsgType.DATA:
                continue
            n_data += 1
            mlo = m.start - m.start % 4
            if any(mlo <= c < mlo + 4 for c in have):
                continue  # the viewer showed a chunk under this munro: may be left out
            before = msgs[:k]
            assert (mlo, mlo + 3) in _signed(before), m.start
            ints = [x for x in before
                    if x.type == MsgType.INTEGRITY and (x.start, x.end) == (mlo, mlo + 3)]
            assert ints, m.start
    assert n_data >= 16
