"""Upload side of :class:`swift.core.peer.Peer`: what DATA to send, to whom, when.

Split from peer.py (one concern per module).  Requests that peers sent us
wait in each channel's :class:`~swift.core.sendside.RangeQueue`; this object
picks the next channel by WFQ with weight = outstanding requests (paper
III-B), honours the channel's LEDBAT window (RFC 6817 2.4.2) and the
optional token-bucket upload cap, builds each DATA datagram with the
INTEGRITY / SIGNED_INTEGRITY it needs ahead of it (RFC 7574 5.3, 6.1), and
feeds ACKs, HAVEs and timeouts back into LEDBAT.  It owns the upload cap's
token bucket and push mode's position per channel; the per-channel sender
state (queue, DATA in flight, RACK, pacing, LEDBAT) and the logic that only
touches it are each channel's :class:`~swift.core.sendside.SendSide`
(``Channel.send``): this object chooses which channel sends and counts.

Pacing: a channel's DATA leaves at most ``PACE_BURST`` bytes back to back,
then at ``cwnd / srtt`` (LEDBAT's window spread over one RTT, as libswift
spaces its sends by ``rtt / cwnd``): a window sent in one burst overran a
libswift leecher's socket buffer.  Loss repair: DATA still unacknowledged
while DATA sent a quarter RTT after it was acknowledged (RACK, RFC 8985
6.1) was lost, and a tail loss probe finds losses at the end of a
flight; the chunk is queued again ahead of the rest, since the peer asked
for it and has not said it has it, instead of leaving the peer to notice
after its request timeout (docs/swift.md, "Seeder toward a libswift
leecher").
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import Protocol

from deliverykit.protocol import Outgoing
from swift._fast import seed_datagram
from swift.core.binmap import Binmap
from swift.core.channel import Channel
from swift.core.chanstate import ChannelState
from swift.core.config import MTU_PAYLOAD, PeerConfig
from swift.core.content import Content, ContentView, PayloadSource
from swift.core.live import LiveContent
from swift.core.merkle import MerkleTree
from swift.core.sendside import SendSide
from swift.wire import codec as C
from swift.wire.constants import ChunkAddressing

_PACK_Q = struct.Struct(">Q").pack

#: push mode: chunks queued ahead per channel (the rest follow as they leave)
PUSH_AHEAD = 64


class WireSpec(Protocol):
    """On-the-wire chunk specification of ``[lo, hi)`` (``clip``: a byte
    range ends at the content size): ``ChunkSpecs.wire``."""

    def __call__(self, lo: int, hi: int, clip: bool = False) -> bytes: ...


#: live tune-in: the signed munro messages a datagram to a channel carries
#: (``TuneIn.munro_push``)
MunroPush = Callable[[Channel, float], list[C.Message]]

_EST = ChannelState.EST


#: :meth:`UploadScheduler._static_fast`: tree, last chunk, chunk size, payload source
_StaticFast = tuple[MerkleTree, int, int, PayloadSource]


class UploadScheduler:
    """What DATA to send whom: WFQ, LEDBAT windows, pacing, loss repair, the
    upload cap (the Peer's one sender)."""

    #: serve a lone channel without a WFQ pick per DATA (upload_data)
    FAST_UPLOAD = True
    #: WFQ's pick (:meth:`_next_upload`) looks only at the channels with DATA
    #: queued when :meth:`upload_data` began; False: at every channel per
    #: DATA (the tests' reference, docs/sim-fig6.md session 20)
    WFQ_QUEUED = True

    def __init__(self, config: PeerConfig, content: Content | LiveContent | ContentView,
                 channels: dict[int, Channel], stats: dict[str, int], ctx: C.WireContext,
                 wire_spec: WireSpec, munro_push: MunroPush) -> None:
        self.config = config
        #: the content as the one kind it is (live or static)
        self.view = ContentView.of(content)
        self.content = self.view.content
        #: the Peer's channels (owned there; read and served here)
        self.channels = channels
        #: the Peer's counters (owned there; this adds to them)
        self.stats = stats
        self.ctx = ctx
        self._wire_spec = wire_spec
        #: chunk32 addressing: DATA datagrams built whole by MerkleTree.data_datagram
        self.chunk32 = ctx.addressing == ChunkAddressing.CHUNK32
        self._munro_push = munro_push
        #: the upload cap's token bucket (``PeerConfig.upload_rate``)
        self.tokens = 0.0
        self.last_tokens: float | None = None
        #: push mode (``PeerConfig.push``): channel -> next chunk to queue for it
        self.push_pos: dict[int, int] = {}

    def forget(self, ch: Channel) -> None:
        """``ch`` closed: drop what this holds for it."""
        self.push_pos.pop(ch.local_id, None)

    def push_fill(self, ch: Channel) -> None:
        """Push mode: queue the next chunks ``ch``'s peer lacks as if it had
        asked for them (RFC 7574 3.7), ``PUSH_AHEAD`` at a time, so WFQ,
        LEDBAT, pacing and the upload cap schedule them as requested DATA.
        Each chunk is queued once; what is lost on the way is sent again
        by the sender's loss repair or asked for by the peer (pull)."""
        n = self.content.n_chunks
        pos = self.push_pos.get(ch.local_id, 0)
        if n is None or pos >= n or ch.send.choking:
            return
        room = PUSH_AHEAD - len(ch.send.upload)
        ph = ch.remote.have
        while room > 0 and pos < n:
            a = ph.find_empty(pos, n)
            if a is None:
                pos = n
                break
            b = ph.find_filled(a, n)
            b = min(n if b is None else b, a + room)
            ch.send.upload.push(a, b)
            room -= b - a
            pos = b
        self.push_pos[ch.local_id] = pos

    def note_spurious(self, n: int) -> None:
        """``n`` chunks loss repair sent again had arrived after all (an ACK
        or HAVE said so: :meth:`SendSide.spurious
        <swift.core.sendside.SendSide.spurious>`)."""
        self.stats["spurious"] = self.stats.get("spurious", 0) + n

    def sender_timeouts(self, ch: Channel, now: float) -> None:
        """DATA never acknowledged for max(1 s, 2 CTO) counts as lost, not
        sent again (a peer that acknowledged nothing for this long may not
        want it: a live viewer discards stale chunks unacknowledged); RACK
        and the tail loss probe repair the losses of a peer that
        acknowledges (see the module docstring), and at LEDBAT's congestion
        timeout what was in flight is queued again like RACK's losses
        (``SendSide.requeue``: only within ``REPAIR_FOR`` of a chunk's first
        loss), except in a live swarm, where a viewer that acknowledged
        nothing discarded what it got as too old (6.1.2.4): sending it again
        only delays the chunks it does want."""
        s = ch.send
        if s.rack_pending():
            self._detect_losses(ch, now)  # RACK's overdue DATA with no batch since
        s.expire(now)
        if s.tail_probe(now):
            self.stats["probes"] = self.stats.get("probes", 0) + 1
            c = s.probe_chunk()
            if c is not None:
                self._resend(ch, [c], now)
        lost = s.congestion_timeout(now)
        if lost and not self.view.is_live:  # a live viewer discarded them as stale
            self._resend(ch, lost, now)

    def _detect_losses(self, ch: Channel, now: float) -> None:
        """RACK (:meth:`SendSide.detect_losses
        <swift.core.sendside.SendSide.detect_losses>`), then the lost DATA is
        queued again.  Runs once per received batch (not per ACK: one
        datagram may acknowledge out of send order) and on the housekeeping
        tick."""
        lost = ch.send.detect_losses(now, ch.remote.have)
        if lost:
            self._resend(ch, lost, now)

    def _resend(self, ch: Channel, chunks: list[int], now: float) -> None:
        """Queue lost DATA again, first in line (the peer asked for it), on
        an established channel (:meth:`SendSide.requeue
        <swift.core.sendside.SendSide.requeue>`)."""
        if ch.state is not _EST:
            return
        s = ch.send
        gave_up = s.given_up
        n = s.requeue(chunks, self.content.have, ch.remote.have, now)
        if n:
            self.stats["resent"] = self.stats.get("resent", 0) + n
        if s.given_up != gave_up:  # repair stopped: the peer must ask again (a stall)
            self.stats["repair_given_up"] = (self.stats.get("repair_given_up", 0)
                                             + s.given_up - gave_up)

    def pace_due(self, now: float) -> float | None:
        """The earliest time pacing lets a channel with queued requests and
        window room send again, or RACK's reordering timer finds DATA lost
        (RFC 8985 6.2 step 5: without it a loss in a window sent as one
        burst waited for the next window's ACKs, a second RTT); None:
        neither is pending.  A wake-up at this time runs ``upload_data``
        only (Peer.get_timer / handle_timer)."""
        due = None
        need = self.config.chunk_size
        for ch in self.channels.values():
            s = ch.send
            t = s.pace_at
            if (t > now and (due is None or t < due) and s.upload.size
                    and ch.state is _EST and not s.choking and s.ledbat.can_send(need)):
                due = t
            if s.send_log:  # (rack_due is None without a send log: no call per idle channel)
                r = s.rack_due()
                if r is not None and (due is None or r < due):
                    due = max(r, now)
        return due

    def _static_fast(self) -> _StaticFast | None:
        """What the static fast path of :meth:`_data_dgram` looks up (chunk32,
        static content :meth:`MerkleTree.data_datagram` can read): the tree,
        the last chunk (which may be short: the general path), the chunk size
        and the payload source; None when it does not apply.  Once per flush."""
        static = self.view.static
        if not (self.FAST_UPLOAD and self.chunk32 and static is not None):
            return None
        src = static.payload_source()
        if src is None:
            return None
        return static.tree, (static.tree.n_chunks or 0) - 1, static.chunk_size, src

    def _data_dgram(self, ch: Channel, i: int, now: float, ts: bytes | None = None,
                    fast: _StaticFast | None = None) -> bytes:
        """One DATA datagram for chunk ``i``, preceded by the hashes (and
        live signatures) the receiver needs to verify it (5.3, 6.1).
        ``ts``: the DATA timestamp of ``now``, packed (once per batch);
        ``fast``: :meth:`_static_fast`, when the caller looked it up already."""
        if ts is None:
            ts = _PACK_Q(int(now * 1e6) & 0xFFFFFFFFFFFFFFFF)
        static = self.view.static
        remote = ch.remote
        if self.FAST_UPLOAD and static is not None and remote.some:
            # static content, a peer that announced something (the usual
            # DATA): what Content.integrity_for does for a warm peer, without
            # its per-chunk view object and item tuples
            s = ch.send
            sent_i = s.sent.has(i)
            fast = fast or self._static_fast()
            if fast is not None and i < fast[1]:
                # the whole datagram in one C call, the chunk pread into it:
                # tree.data_datagram(ch.remote_id, i, known, ...) over known's
                # binmaps (the peer's alone when this chunk went out before)
                tree, _last, csz, src = fast
                ma = remote.have if sent_i else s.known.a
                mb = ma if sent_i else s.known.b
                if type(ma) is Binmap and type(mb) is Binmap:
                    return seed_datagram(ch.remote_id, tree, i, ma, mb, ts, src, i * csz, csz)
                return tree.data_datagram(ch.remote_id, i, remote.have if sent_i else s.known,
                                          ts, src, i * csz, csz)
            known = remote.have if sent_i else s.known
            spec = self._wire_spec
            parts = [ch.remote_id.to_bytes(4, "big")]
            cs = static.chunk_size
            for b, h in static.tree.uncles(i, known):
                lay = ((b + 1) & ~b).bit_length() - 1  # bins.base_range, inline
                lo = (b >> (lay + 1)) << lay
                parts.append(b"\x04" + spec(lo, lo + (1 << lay)) + h)  # INTEGRITY (8.8)
            payload = (static.storage.read(i * cs, cs) if i + 1 < (static.n_chunks or 0)
                       else static.chunk_bytes(i))  # the last chunk may be short
            parts.append(b"\x01" + spec(i, i + 1, True) + ts + payload)
            return b"".join(parts)
        spec = self._wire_spec
        parts = [ch.remote_id.to_bytes(4, "big")]
        cold = not remote.some and remote.have.find_filled(0) is None
        items = self.content.integrity_for(i, remote.have, cold, ch.send.sent)
        for item in items:
            b = item[1]
            lay = ((b + 1) & ~b).bit_length() - 1  # bins.base_range, inline
            lo = (b >> (lay + 1)) << lay
            if len(item) == 3:  # ("h", bin, hash): INTEGRITY (8.8)
                parts.append(b"\x04" + spec(lo, lo + (1 << lay)) + item[2])
            else:  # ("s", bin, timestamp, signature): SIGNED_INTEGRITY (8.9)
                parts.append(b"\x07" + spec(lo, lo + (1 << lay)) + item[2].to_bytes(8, "big")
                             + item[3])
        parts.append(b"\x01" + spec(i, i + 1, True) + ts + self.content.chunk_bytes(i))
        lc = self.view.live
        if lc is not None and not ch.tunein.done:
            # live tune-in (6.1.2.4): the rightmost signed munro rides in
            # DATA datagrams too, unless it is this chunk's own munro (then
            # already in ``items``) or would make a datagram that fits one
            # Ethernet frame stop fitting (then control datagrams carry it)
            push = self._munro_push(ch, now)
            m = lc.rightmost_munro() if push else None
            if push and not any(x[0] == "s" and x[1] == m for x in items):
                extra = b"".join(C.encode_message(self.ctx, x) for x in push)
                rest = sum(map(len, parts))
                if rest + len(extra) <= MTU_PAYLOAD or rest > MTU_PAYLOAD:
                    parts.insert(1, extra)
        return b"".join(parts)

    def _next_upload(self, now: float,
                     chans: Iterable[Channel] | None = None) -> Channel | None:
        """WFQ (paper III-B): weight = the requester's outstanding requests, which are those
        still queued here and those whose DATA is in flight; least served per weight.
        ``chans``: the channels to look at, in channel order (default: every channel);
        :meth:`upload_data` passes those with DATA queued."""
        best = None
        best_v = 0.0
        for ch in self.channels.values() if chans is None else chans:
            s = ch.send
            if ch.state is not _EST or s.choking or not len(s.upload) or s.pace_at > now:
                continue
            if not s.ledbat.can_send(self.config.chunk_size) and not s.probe_credit:
                continue
            v = s.served / (len(s.upload) + len(s.data_out))
            if best is None or v < best_v:
                best, best_v = ch, v
        return best

    def upload_data(self, now: float, budget: int) -> list[Outgoing]:
        """Up to ``budget`` DATA datagrams that WFQ, LEDBAT and the upload cap allow now.

        With one channel (a seeder serving one leecher, the libswift case)
        the WFQ pick is made once and the channel is served while its queue,
        window and pacing allow (``FAST_UPLOAD``): the same checks as
        :meth:`_next_upload`, without a call and a scan per DATA.  Same
        datagrams in the same order (test_swift_seeder_fastpath.py)."""
        out: list[Outgoing] = []
        cfg = self.config
        cap = cfg.upload_rate
        if cap is not None:
            if self.last_tokens is not None:
                self.tokens = min(cap * 0.1 + cfg.chunk_size,
                                  self.tokens + cap * (now - self.last_tokens))
            self.last_tokens = now
        sent = 0
        have = self.content.have
        # the channels with DATA queued, in channel order: the only ones WFQ can
        # pick in this call (nothing below queues DATA on another channel)
        queued: list[Channel] = []
        for c in self.channels.values():
            cs = c.send  # (SendSide.rack_pending, inline: every channel on every flush)
            if cs.send_log and cs.acked_sent >= cs.send_log[0][1]:
                self._detect_losses(c, now)  # (requeues on this channel only)
            if cs.upload.size:
                queued.append(c)
        if not queued:
            return out  # no channel has DATA queued: _next_upload would find none
        chans = queued if self.WFQ_QUEUED else None
        need = cfg.chunk_size
        alone = self.FAST_UPLOAD and len(self.channels) == 1
        full = not self.view.is_live and self.content.complete  # then every chunk is here
        ts = _PACK_Q(int(now * 1e6) & 0xFFFFFFFFFFFFFFFF)
        stats = self.stats
        ch: Channel | None = None
        s: SendSide | None = None
        fast = self._static_fast()  # (its lookups once per flush, not per DATA)
        while sent < budget:
            if cap is not None and self.tokens < need:
                break
            if ch is None or s is None or not alone:
                ch = self._next_upload(now, chans)
                if ch is None:
                    break
                s = ch.send
            else:  # _next_upload's checks for the one channel it picked (state, choke unchanged)
                led = s.ledbat
                if (not s.upload.size or s.pace_at > now
                        or (led.flightsize + need > led.cwnd and led.flightsize
                            and not s.probe_credit)):
                    break
            i = s.upload.pop()
            if i is None or (not full and not have.has(i)):
                continue
            if ch.remote.have.has(i):
                continue
            d = self._data_dgram(ch, i, now, ts, fast)
            out.append((d, ch.addr))
            s.on_sent(i, len(d), now)
            lv = ch.liveness  # (Liveness.spoke, inline: every DATA)
            lv.last_send = now
            lv.sent_since_recv += 1
            stats["sent_data"] += 1
            if cap is not None:
                self.tokens -= len(d)
            sent += 1
        return out
