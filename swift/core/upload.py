"""Upload side of :class:`swift.core.peer.Peer`: what DATA to send, to whom, when.

Split from peer.py (one concern per module).  Requests that peers sent us
wait in each channel's :class:`~swift.core.channel.RangeQueue`; this object
picks the next channel by WFQ with weight = outstanding requests (paper
III-B), honours the channel's LEDBAT window (RFC 6817 2.4.2) and the
optional token-bucket upload cap, builds each DATA datagram with the
INTEGRITY / SIGNED_INTEGRITY it needs ahead of it (RFC 7574 5.3, 6.1), and
feeds ACKs, HAVEs and timeouts back into LEDBAT.  It owns the upload cap's
token bucket and push mode's position per channel; the per-channel sender
state (queue, DATA in flight, RACK, pacing, LEDBAT) lives on each
:class:`~swift.core.channel.Channel`, which the Peer owns and hands in.

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
from collections.abc import Callable
from typing import Any, Protocol

from swift.core.channel import Channel
from swift.core.chanstate import ChannelState
from swift.core.config import MTU_PAYLOAD, PeerConfig
from swift.core.content import Content, ContentView
from swift.core.live import LiveContent
from swift.wire import codec as C

_PACK_Q = struct.Struct(">Q").pack

#: bytes a channel may send back to back before pacing spaces its DATA
PACE_BURST = 65536
#: RACK's reordering window grows to at most this many quarter RTTs: libswift
#: announces the DATA it did not acknowledge up to several RTTs later
REO_MULT_MAX = 64
#: push mode: chunks queued ahead per channel (the rest follow as they leave)
PUSH_AHEAD = 64



class WireSpec(Protocol):
    """On-the-wire chunk specification of ``[lo, hi)`` (``clip``: a byte
    range ends at the content size): ``ChunkSpecs.wire``."""

    def __call__(self, lo: int, hi: int, clip: bool = False) -> bytes: ...


#: live tune-in: the signed munro messages a datagram to a channel carries
#: (``TuneIn.munro_push``)
MunroPush = Callable[[Channel, float], list[Any]]

_EST = ChannelState.EST


class UploadScheduler:
    """What DATA to send whom: WFQ, LEDBAT windows, pacing, loss repair, the
    upload cap (the Peer's one sender)."""

    #: serve a lone channel without a WFQ pick per DATA (upload_data)
    FAST_UPLOAD = True

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
        if n is None or pos >= n or ch.choking:
            return
        room = PUSH_AHEAD - len(ch.upload)
        ph = ch.peer_have
        while room > 0 and pos < n:
            a = ph.find_empty(pos, n)
            if a is None:
                pos = n
                break
            b = ph.find_filled(a, n)
            b = min(n if b is None else b, a + room)
            ch.upload.push(a, b)
            room -= b - a
            pos = b
        self.push_pos[ch.local_id] = pos

    def on_ack(self, ch: Channel, lo: int, hi: int, delay_us: int, now: float) -> None:
        """ACK (8.7): retire acknowledged DATA, one LEDBAT delay sample."""
        if delay_us >= 1 << 63:
            delay_us -= 1 << 64  # libswift clocks may run behind: signed sample
        acked = 0
        rtt = None
        do = ch.data_out
        newest, nseq = ch.acked_sent, ch.acked_seq
        amb = ch.ambiguous
        if ch.retried:
            self._spurious(ch, lo, hi, now)
        for c in range(lo, hi) if hi - lo <= len(do) else [c for c in do if lo <= c < hi]:
            x = do.pop(c, None)
            if x is not None:
                acked += x[1]
                if amb and c in amb:  # sent twice: whose ACK is this? (Karn)
                    amb.discard(c)
                    continue
                rtt = now - x[0]
                q = x[2] if len(x) > 2 else 0
                if x[0] > newest or (x[0] == newest and q > nseq):
                    newest, nseq = x[0], q  # RACK.segment (RFC 8985 6.2 step 2)
                    ch.acked_rtt = rtt
        ch.acked_sent, ch.acked_seq = newest, nseq
        if acked:
            ch.ledbat.on_ack(delay_us / 1e6, acked, now, rtt)

    def delivered_by_have(self, ch: Channel, lo: int, hi: int, now: float) -> None:
        """A HAVE covering DATA whose ACK was lost retires it without a delay
        sample: DATA sent before the newest DATA acknowledged (its ACK came,
        this one's did not), or older than a congestion timeout.

        Not by "older than 1.5 RTT" alone: libswift puts its HAVE before the
        ACK of the same chunk in one datagram, so with the smoothed RTT once
        below the real one every HAVE retired its chunk first, the ACK then
        gave LEDBAT no delay sample and the RTT estimate never recovered
        (test_swift_seeder_fastpath.py)."""
        do = ch.data_out
        if ch.retried:
            self._spurious(ch, lo, hi, now)
        if hi - lo == 1 and lo not in do:
            return  # libswift's HAVE right after the ACK for the same chunk
        led = ch.ledbat
        old = now - max(1.5 * (led.srtt or 0.5), led.cto)
        newest, nseq = ch.acked_sent, ch.acked_seq
        cands = range(lo, hi) if hi - lo <= len(do) else list(do)
        for c in cands:
            x = do.get(c)
            if x is not None and lo <= c < hi and (
                    x[0] < newest or x[0] < old
                    or (x[0] == newest and (x[2] if len(x) > 2 else 0) < nseq)):
                del do[c]
                ch.ledbat.on_delivered(x[1], now)

    def _spurious(self, ch: Channel, lo: int, hi: int, now: float) -> None:
        """An ACK or HAVE for chunks loss repair queued again: the original
        DATA arrived if the copy is still queued or left too recently to be
        the one acknowledged (RFC 8985 6.2 step 4 learns reordering from
        DSACK; this is our DSACK).  Then the reordering window doubles,
        beyond the RFC's one RTT (up to ``REO_MULT_MAX`` quarter RTTs):
        libswift acknowledges only the newest DATA of each burst it reads
        and announces the rest by HAVE, under load several RTTs later
        (measured: 30-80 ms after a 20 ms window at a 14 ms RTT), which made
        thousands of chunks of a 50 MiB transfer look lost (needless
        copies, LEDBAT halved every RTT).  A peer that acknowledges every
        DATA in order keeps the quarter RTT."""
        retried = ch.retried
        do = ch.data_out
        young = now - 0.5 * (ch.ledbat.srtt or 0.0)
        hits = [c for c in (range(lo, hi) if hi - lo <= 64 else list(retried))
                if lo <= c < hi and c in retried]
        if not hits:
            return
        retried.difference_update(hits)
        spurious = sum(1 for c in hits if (x := do.get(c)) is None or x[0] > young)
        if spurious:
            ch.reo_mult = min(2 * ch.reo_mult, REO_MULT_MAX)
            ch.reo_clean = 0
            self.stats["spurious"] = self.stats.get("spurious", 0) + spurious

    def sender_timeouts(self, ch: Channel, now: float) -> None:
        """DATA never acknowledged counts as lost; LEDBAT congestion timeout.
        Not sent again: a peer that acknowledged nothing for this long may
        not want it (a live viewer discards stale chunks unacknowledged);
        RACK and the tail loss probe repair the losses of a peer that
        acknowledges (see the module docstring)."""
        if ch.send_log and ch.acked_sent >= ch.send_log[0][1]:
            self._detect_losses(ch, now)  # RACK's overdue DATA with no batch since
        if ch.data_out:
            horizon = now - max(1.0, 2 * ch.ledbat.cto)
            old = [c for c, x in ch.data_out.items() if x[0] < horizon]
            for c in old:
                ch.ledbat.on_loss(ch.data_out.pop(c)[1], now)
            self._forget_hashes(ch, old)
        self._probe_tail(ch, now)
        if ch.ledbat.check_timeout(now):
            # the peer stopped acknowledging: everything in flight is lost
            self._forget_hashes(ch, self._in_flight(ch))
            ch.data_out.clear()
            ch.send_log.clear()

    def _probe_tail(self, ch: Channel, now: float) -> None:
        """Tail loss probe (RFC 8985 7): no ACK for two RTTs with DATA in
        flight, so one more DATA goes out beyond the window: the next queued
        chunk (7.3: new data first), else the newest DATA again.  Its ACK
        shows what came before it was lost (``_detect_losses``) instead of
        the peer's request timeout finding out seconds later.  Backs off
        while unanswered."""
        led = ch.ledbat
        if not ch.send_log or not led.srtt or led.last_ack is None:
            return
        if led.last_ack > ch.probe_at:
            ch.probes = 0
        pto = max(2 * led.srtt, 0.01) * (1 << min(ch.probes, 6))
        if now - max(led.last_ack, ch.probe_at) < pto:
            return
        ch.probes += 1
        ch.probe_at = now
        self.stats["probes"] = self.stats.get("probes", 0) + 1
        self._forget_hashes(ch, self._in_flight(ch))
        if len(ch.upload):
            ch.probe_credit = True
            return
        do = ch.data_out
        for c, t, _ in reversed(ch.send_log):
            x = do.get(c)
            if x is not None and x[0] == t and c not in ch.retried:
                del do[c]
                led.flightsize = max(0, led.flightsize - x[1])  # the probe takes its place
                self._resend(ch, [c])
                return

    def _detect_losses(self, ch: Channel, now: float) -> None:
        """RACK (RFC 8985 6.2): DATA sent before the newest acknowledged DATA
        (by send time, then send order: a window sent in one burst shares
        one time) and outstanding for longer than that DATA's RTT plus the
        reordering window (a quarter RTT, more once reordering was seen:
        ``_spurious``) was lost, unless the peer announced the chunk (a HAVE
        without an ACK: libswift acknowledges only the newest DATA of a
        burst).  So a loss is found about 1.25 RTT after it was sent.  Runs
        once per received batch (not per ACK: one datagram may acknowledge
        out of send order) and on the housekeeping tick; amortised O(1) per
        DATA sent."""
        log = ch.send_log
        do = ch.data_out
        led = ch.ledbat
        ph = ch.peer_have
        rack_t, rack_seq = ch.acked_sent, ch.acked_seq
        wait = ch.acked_rtt + ch.reo_mult * 0.25 * (led.srtt or 0.0)  # RACK.rtt + reo_wnd
        lost = []
        while log:
            c, t, q = log[0]
            x = do.get(c)
            if x is None or x[0] != t:
                log.popleft()  # acknowledged, or sent again since
                continue
            if not (t < rack_t or (t == rack_t and q < rack_seq)) or t + wait > now:
                break  # sent after the newest acknowledged, or not overdue yet
            log.popleft()
            del do[c]
            if ph.has(c):
                led.on_delivered(x[1], now)  # announced by HAVE: it arrived
                continue
            led.on_loss(x[1], now)
            lost.append(c)
        if lost:
            ch.reo_clean += 1
            if ch.reo_clean >= 16:  # 16 recoveries without a spurious one (RFC 8985 6.2)
                ch.reo_mult = max(1, ch.reo_mult // 2)
                ch.reo_clean = 0
            # DATA sent after these and still in flight either arrived or is
            # found lost here later; sent again it carries its full uncles
            self._forget_hashes(ch, lost)
            self._resend(ch, lost)

    @staticmethod
    def _in_flight(ch: Channel) -> list[int]:
        """Chunks of the DATA in flight, in send order."""
        do = ch.data_out
        return [c for c, t, _ in ch.send_log if (x := do.get(c)) is not None and x[0] == t]

    @staticmethod
    def _forget_hashes(ch: Channel, chunks: list[int]) -> None:
        """DATA lost, or maybe lost: the hashes it carried may not have
        arrived, so later DATA must not count on them (5.3).  Without this a
        lost datagram made every later sibling unverifiable at the peer."""
        for c in chunks:
            ch.sent.discard(c)

    def _resend(self, ch: Channel, chunks: list[int]) -> None:
        """Queue lost DATA again, first in line (the peer asked for it).
        Once per chunk: lost again, the peer may no longer want it (its own
        request timeout gave up on it) and asks again if it does."""
        if ch.choking or ch.state is not _EST or not chunks:
            return
        have = self.content.have
        retried = ch.retried
        again = []
        for c in chunks:
            if c in retried:
                retried.discard(c)
            elif have.has(c) and not ch.peer_have.has(c):
                again.append(c)
        if len(retried) > 4096:  # bound: lost retries are normally removed above
            retried.clear()
        retried.update(again)
        if again:
            ch.upload.push_front(again)
            ch.resent += len(again)
            self.stats["resent"] = self.stats.get("resent", 0) + len(again)

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
            t = ch.pace_at
            if (t > now and (due is None or t < due) and len(ch.upload)
                    and ch.state is _EST and not ch.choking and ch.ledbat.can_send(need)):
                due = t
            r = self._rack_due(ch)
            if r is not None and (due is None or r < due):
                due = max(r, now)
        return due

    @staticmethod
    def _rack_due(ch: Channel) -> float | None:
        """When the oldest DATA in flight, if sent before the newest
        acknowledged DATA, becomes overdue for RACK (None: none is)."""
        log = ch.send_log
        do = ch.data_out
        while log:
            c, t, q = log[0]
            x = do.get(c)
            if x is None or x[0] != t:
                log.popleft()  # acknowledged, or sent again since (as _detect_losses)
                continue
            if t < ch.acked_sent or (t == ch.acked_sent and q < ch.acked_seq):
                # the same sum as _detect_losses, so at this time it finds the loss
                return t + (ch.acked_rtt + ch.reo_mult * 0.25 * (ch.ledbat.srtt or 0.0))
            return None
        return None

    def _data_dgram(self, ch: Channel, i: int, now: float, ts: bytes | None = None) -> bytes:
        """One DATA datagram for chunk ``i``, preceded by the hashes (and
        live signatures) the receiver needs to verify it (5.3, 6.1).
        ``ts``: the DATA timestamp of ``now``, packed (once per batch)."""
        spec = self._wire_spec
        parts = [ch.remote_id.to_bytes(4, "big")]
        if ts is None:
            ts = _PACK_Q(int(now * 1e6) & 0xFFFFFFFFFFFFFFFF)
        static = self.view.static
        if self.FAST_UPLOAD and static is not None and ch.peer_any:
            # static content, a peer that announced something (the usual
            # DATA): what Content.integrity_for does for a warm peer, without
            # its per-chunk view object and item tuples
            known = ch.peer_have if ch.sent.has(i) else ch.known
            for b, h in static.tree.uncles(i, known):
                lay = ((b + 1) & ~b).bit_length() - 1  # bins.base_range, inline
                lo = (b >> (lay + 1)) << lay
                parts.append(b"\x04" + spec(lo, lo + (1 << lay)) + h)  # INTEGRITY (8.8)
            cs = static.chunk_size
            payload = (static.storage.read(i * cs, cs) if i + 1 < (static.n_chunks or 0)
                       else static.chunk_bytes(i))  # the last chunk may be short
            parts.append(b"\x01" + spec(i, i + 1, True) + ts + payload)
            return b"".join(parts)
        cold = not ch.peer_any and ch.peer_have.find_filled(0) is None
        items: list[Any] = self.content.integrity_for(i, ch.peer_have, cold, ch.sent)
        for item in items:
            b = item[1]
            lay = ((b + 1) & ~b).bit_length() - 1  # bins.base_range, inline
            lo = (b >> (lay + 1)) << lay
            if item[0] == "h":  # INTEGRITY (8.8)
                parts.append(b"\x04" + spec(lo, lo + (1 << lay)) + item[2])
            else:  # SIGNED_INTEGRITY (8.9)
                parts.append(b"\x07" + spec(lo, lo + (1 << lay)) + item[2].to_bytes(8, "big")
                             + item[3])
        parts.append(b"\x01" + spec(i, i + 1, True) + ts + self.content.chunk_bytes(i))
        lc = self.view.live
        if lc is not None and not ch.munro_done:
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

    def _next_upload(self, now: float) -> Channel | None:
        """WFQ (paper III-B): weight = the requester's outstanding requests, which are those
        still queued here and those whose DATA is in flight; least served per weight."""
        best = None
        best_v = 0.0
        for ch in self.channels.values():
            if ch.state is not _EST or ch.choking or not len(ch.upload) or ch.pace_at > now:
                continue
            if not ch.ledbat.can_send(self.config.chunk_size) and not ch.probe_credit:
                continue
            v = ch.served / (len(ch.upload) + len(ch.data_out))
            if best is None or v < best_v:
                best, best_v = ch, v
        return best

    def upload_data(self, now: float, budget: int) -> list[tuple[bytes, Any]]:
        """Up to ``budget`` DATA datagrams that WFQ, LEDBAT and the upload cap allow now.

        With one channel (a seeder serving one leecher, the libswift case)
        the WFQ pick is made once and the channel is served while its queue,
        window and pacing allow (``FAST_UPLOAD``): the same checks as
        :meth:`_next_upload`, without a call and a scan per DATA.  Same
        datagrams in the same order (test_swift_seeder_fastpath.py)."""
        out: list[tuple[bytes, Any]] = []
        cfg = self.config
        cap = cfg.upload_rate
        if cap is not None:
            if self.last_tokens is not None:
                self.tokens = min(cap * 0.1 + cfg.chunk_size,
                                  self.tokens + cap * (now - self.last_tokens))
            self.last_tokens = now
        sent = 0
        have = self.content.have
        for c in self.channels.values():
            if c.send_log and c.acked_sent >= c.send_log[0][1]:
                self._detect_losses(c, now)
        need = cfg.chunk_size
        alone = self.FAST_UPLOAD and len(self.channels) == 1
        full = not self.view.is_live and self.content.complete  # then every chunk is here
        ts = _PACK_Q(int(now * 1e6) & 0xFFFFFFFFFFFFFFFF)
        stats = self.stats
        ch: Channel | None = None
        while sent < budget:
            if cap is not None and self.tokens < need:
                break
            if ch is None or not alone:
                ch = self._next_upload(now)
                if ch is None:
                    break
            else:  # _next_upload's checks for the one channel it picked (state, choke unchanged)
                led = ch.ledbat
                if (not ch.upload.size or ch.pace_at > now
                        or (led.flightsize + need > led.cwnd and led.flightsize
                            and not ch.probe_credit)):
                    break
            i = ch.upload.pop()
            if i is None or (not full and not have.has(i)) or ch.peer_have.has(i):
                continue
            d = self._data_dgram(ch, i, now, ts)
            ch.sent.add(i)
            out.append((d, ch.addr))
            led = ch.ledbat
            old = ch.data_out.pop(i, None)
            if old is not None:  # asked again while in flight: one copy counts
                led.flightsize = max(0, led.flightsize - old[1])
            if old is not None or i in ch.retried:
                if len(ch.ambiguous) > 4096:  # bound: normally emptied by the ACKs
                    ch.ambiguous.clear()
                ch.ambiguous.add(i)
            seq = ch.send_seq = ch.send_seq + 1
            ch.data_out[i] = (now, len(d), seq)
            ch.send_log.append((i, now, seq))
            ch.probe_credit = False
            led.on_send(len(d), now)
            if led.srtt:  # pacing: the window over one RTT, PACE_BURST at once
                per_byte = led.srtt / led.cwnd
                ch.pace_at = max(ch.pace_at, now - PACE_BURST * per_byte) + len(d) * per_byte
            ch.served += len(d)
            ch.last_send = now
            ch.sent_since_recv += 1
            stats["sent_data"] += 1
            if cap is not None:
                self.tokens -= len(d)
            sent += 1
        return out
