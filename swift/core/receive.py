"""Receive path for DATA of :class:`swift.core.peer.Peer`: verify, store, ACK.

Split from peer.py (one concern per module).  A DATA message (RFC 7574
3.3, 8.6) for a chunk we asked this peer for is checked against the Merkle
tree (5.2; live: the signed munro, 6.1) with the INTEGRITY / SIGNED_INTEGRITY
that came ahead of it, then stored, acknowledged with its one-way delay
(8.7) and announced; end-game copies still requested elsewhere are
CANCELled (3.8).  Also here: requests served out of order are taken back as
lost, a chunk we hold already is ACKed again (and counted as a duplicate by
the rule that moved its request), DATA arriving after its request was taken
back is still verified, kept and ACKed, other unsolicited DATA is ignored, and a peer
whose chunks fail is choked and, after ``max_bad_chunks``, dropped and
blacklisted (12.7).

:class:`Verifier` owns no protocol state of its own: it judges each DATA
and routes the outcome to the state's owners, all handed in through its
constructor -- the request log (:class:`~swift.core.requests.RequestScheduler`),
the content, the channel's ACK/HAVE/CANCEL queues, the counters and events,
the Peer's HAVE log (``log_have``) and the Peer's way of dropping a
corrupt peer (``drop_corrupt``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from swift.core import bins as B, events as ev
from swift.core.channel import Channel
from swift.core.chanstate import ChannelState
from swift.core.config import Dialect, PeerConfig
from swift.core.content import Content, ContentView
from swift.core.live import LiveContent
from swift.core.requests import RequestScheduler, chunk_runs as _runs

_EST = ChannelState.EST
#: DATA that failed only for lost uncle hashes is kept this long (s, about an
#: RTT, at least :data:`HOLD_MIN`) in case the hashes come with other DATA
HOLD_MIN = 0.05
#: at most this many such chunks held
HOLD_MAX = 64


@dataclass(frozen=True, slots=True)
class Held:
    """A chunk whose DATA lacked uncle hashes (lost with an earlier datagram, 5.3)."""

    #: the channel it came on (its local ID)
    channel: int
    #: the chunk's bytes
    payload: bytes
    #: the DATA's timestamp, for the ACK's one-way delay (8.7)
    timestamp: int
    #: when the datagram arrived
    arrived: float
    #: dropped after this time
    until: float


class Verifier:
    """Received DATA: integrity check, store, ACK, duplicates, rejected chunks."""

    #: static content of known size: ``MerkleTree.verify`` called directly with
    #: the INTEGRITY hashes as they are kept (False: through ``Content.verify``,
    #: the reference the tests compare it with; docs/swift-perf.md, session 17)
    TREE_DIRECT = True

    def __init__(self, config: PeerConfig, content: Content | LiveContent | ContentView,
                 channels: dict[int, Channel], download: RequestScheduler,
                 stats: dict[str, int], events: deque[ev.SwiftEvent],
                 dialect: Callable[[Channel], Dialect],
                 log_have: Callable[[list[int]], None],
                 drop_corrupt: Callable[[Channel], None]) -> None:
        self.config = config
        #: the content as the one kind it is (live or static)
        self.view = ContentView.of(content)
        self.content = self.view.content
        #: the Peer's channels, counters and events (owned there)
        self.channels = channels
        self.stats = stats
        self.events = events
        #: the request log: what was asked of whom (owned there)
        self.download = download
        #: the dialect a channel speaks (``Peer.dialect``)
        self.dialect = dialect
        #: chunks verified: announce them (``Peer._log_have``)
        self.log_have = log_have
        #: a peer sent ``max_bad_chunks`` corrupt chunks: close, blacklist, drop
        self.drop_corrupt = drop_corrupt
        #: chunk -> DATA that could not be verified only for lost uncle hashes;
        #: verified and ACKed once other DATA brings those hashes (bounded).
        #: Its request goes back to the picker as before: nothing waits on it
        self.held: dict[int, Held] = {}

    def on_data(self, ch: Channel, lo: int, hi: int, timestamp: int, payload: bytes,
                now: float, arrived: float) -> None:
        """DATA for chunks ``[lo, hi)`` (3.3, 8.6): verify, store, ACK.
        ``arrived``: when the datagram arrived, for the ACK's one-way delay (8.7)."""
        i = lo
        down = ch.down
        verify = ch.verify
        older = down.skipped(i)
        if older:
            # requests are served in order: ones asked for before this chunk
            # (beyond a reordering margin of one) were lost or skipped; ask
            # again (as libswift drops "likely snubbed" hints)
            for c in older:
                # back to the picker at once, even if another channel asks for
                # it too (unlike the timers' give-backs, _no_longer_asked):
                # kept in flight there, the flash crowd's slowest leecher
                # waited for that channel's request timeout (docs/sim.md)
                self.download.inflight.reset(B.chunk(c))
            ch.path.lost += len(older)
            self.download.note_moved(older, "lost")
            # if they were only delayed, the sender must not send them later
            down.cancels.extend(_runs(older))
        sent_at = down.answered(i)
        if hi == lo + 1 and self.content.have.has(i):
            # a chunk we hold already (the end-game copy we CANCELled, a
            # retransmission whose first copy was only late): not stored
            # again, but acknowledged with its one-way delay when it is the
            # chunk we hold (3.4: a chunk whose integrity is checked MUST be
            # ACKed; 8.7), so the sender retires it now and LEDBAT gets its
            # sample instead of counting it lost at a timeout
            if sent_at is None:
                self.stats["unsolicited"] += 1
            else:
                self.download.inflight.discard(i)
                ch.down.last_progress = now
            if self.view.live is not None and verify.sigs:
                self.view.live.learn(verify.hash_order, verify.sigs, now)
            verify.clear()
            if ch.state is _EST and self.content.holds(i, payload):
                self.stats["dup"] += 1
                key = "dup_" + self.download.moved.get(i, "other")
                self.stats[key] = self.stats.get(key, 0) + 1
                if self.dialect(ch) is Dialect.LIBSWIFT:  # per channel: --profile auto mixes them
                    ch.ann.extra_have.append(i)  # libswift turns this ACK into a HAVE
                else:
                    delay = int(arrived * 1e6) - timestamp
                    ch.ann.acks.append((i, delay & 0xFFFFFFFFFFFFFFFF))
            else:
                self.stats["dup_mismatch"] = self.stats.get("dup_mismatch", 0) + 1
                if sent_at is None:
                    ch.ann.extra_have.append(i)  # as libswift: a HAVE retires it at the sender
            return
        # DATA for a chunk we still lack whose request was taken back (stale,
        # lost, timed out: ``moved``): verified below and, if good, kept and
        # ACKed, so the sender's LEDBAT gets its sample rather than a false
        # loss; if not, ignored without blame.  DATA never asked of anyone is not
        late = (sent_at is None and hi == lo + 1 and not self.config.push
                and self.view.static is not None and ch.state is _EST
                and i in self.download.moved)
        if sent_at is None and hi == lo + 1 and self.config.push and not self.view.is_live:
            # push mode (RFC 7574 3.7): DATA nobody asked for is taken,
            # verified like any other below
            self.download.pushed_at[ch.local_id] = now
            self.stats["pushed"] = self.stats.get("pushed", 0) + 1
        elif (sent_at is None or hi != lo + 1) and not late:
            self.stats["unsolicited"] += 1  # not requested from this peer: ignore
            if sent_at is not None:
                # asked for, but the spec is not that one chunk (malformed):
                # its request is gone, so it must not stay marked in flight,
                # or with one peer (no end game) nothing asks for it again
                self.download.inflight.discard(i)
            if self.view.live is not None and verify.sigs:
                self.view.live.learn(verify.hash_order, verify.sigs, now)
            verify.clear()
            if hi == lo + 1 and len(ch.down.cancels) < 256:
                ch.down.cancels.append((i, i + 1))  # stale at the sender: purge its queue
            return
        if not late:  # a late chunk may be in flight elsewhere: kept so until verified
            self.download.inflight.discard(i)
        static = self.view.static
        tree = None if static is None else static.tree
        if tree is not None and tree.n_chunks is not None and self.TREE_DIRECT:
            # Content.verify without its frame and its dict: the size is known
            # (no peak hashes to learn), and ``hashes`` is ``dict(hash_order)``
            ok = ch.state is _EST and tree.verify(i, payload, verify.hashes)
        else:
            n_before = self.content.n_chunks
            ok = ch.state is _EST and self.content.verify(i, payload, verify.hash_order,
                                                          verify.sigs, now)
            if n_before is None and self.content.n_chunks is not None and not self.view.is_live:
                self.events.append(ev.SizeKnown(self.content.n_chunks))
        verify.hashes.clear()  # (VerifyState.clear, inline)
        verify.hash_order.clear()
        verify.sigs.clear()
        if late:
            if not ok:
                self.stats["unsolicited"] += 1
                return
            self.download.inflight.discard(i)
            self.stats["late"] = self.stats.get("late", 0) + 1
        down.last_progress = now
        if not ok:
            lc = self.view.live
            if lc is not None and lc.tree.last_stale:
                # live: genuine but older than the tune-in age (6.1.2.4):
                # discard it, but it is not corrupt.  Before we trust any
                # munro, pick the tune-in point again from the newest HAVE
                self.stats["stale"] = self.stats.get("stale", 0) + 1
                if not self.content.n_chunks:
                    self.download.live_start = None
                elif self.download.live_start is not None:
                    self.download.skip_stale(i)
                return
            if self.view.static is not None and self.view.static.tree.last_missing:
                # hashes lost with an earlier datagram (5.3): not the peer's
                # fault; ask again, the sender then resends the full uncles.
                # Held meanwhile: a sibling's resend may bring them first
                self.stats["unverifiable"] = self.stats.get("unverifiable", 0) + 1
                if len(self.held) < HOLD_MAX:
                    self.held[i] = Held(ch.local_id, payload, timestamp, arrived,
                                        now + max(HOLD_MIN, ch.path.rtt))
                return
            self.stats["rejected"] += 1
            self.events.append(ev.ChunkRejected(i, ch.addr))
            ch.send.choke()
            if verify.blame() >= self.config.max_bad_chunks:
                self.drop_corrupt(ch)
            return
        self.held.pop(i, None)
        self._store(ch, i, payload, timestamp, arrived, now, sent_at)
        if self.held:
            self._retry_held(now)

    def _store(self, ch: Channel, i: int, payload: bytes, timestamp: int, arrived: float,
               now: float, sent_at: float | None) -> None:
        """Chunk ``i`` verified: store, announce, CANCEL copies asked elsewhere, ACK."""
        self.content.store_chunk(i, payload)
        self.log_have([i])
        for other in self.channels.values():  # end game duplicates: CANCEL (3.8)
            od = other.down
            if other is not ch and i in od.slot:
                od.drop(i)
                od.cancels.append((i, i + 1))
        self.stats["verified"] += 1
        ch.path.note_data(now, None if sent_at is None else now - sent_at)
        delay = int(arrived * 1e6) - timestamp
        ch.ann.acks.append((i, delay & 0xFFFFFFFFFFFFFFFF))
        self.events.append(ev.ChunkVerified(i, ch.addr))
        if not self.download.complete and self.content.complete:
            size = 0 if self.view.static is None else self.view.static.tree.size
            self.events.append(ev.DownloadComplete(size or 0))
            self.download.download_complete()  # stop asking anyone

    def _retry_held(self, now: float) -> None:
        """Verify held chunks against the hashes trusted since; store and ACK
        those that pass, forget expired ones and ones that arrived meanwhile."""
        have = self.content.have
        for i, h in list(self.held.items()):
            ch = self.channels.get(h.channel)
            if now > h.until or have.has(i) or ch is None or ch.state is not _EST:
                del self.held[i]
                continue
            if not self.content.verify(i, h.payload, [], {}, now):
                continue
            del self.held[i]
            self.stats["held_verified"] = self.stats.get("held_verified", 0) + 1
            if i in ch.down.slot:  # asked again meanwhile: the copy on its way is not needed
                ch.down.drop(i)
                ch.down.cancels.append((i, i + 1))
            self.download.inflight.discard(i)
            self._store(ch, i, h.payload, h.timestamp, h.arrived, now, None)
