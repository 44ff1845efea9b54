"""Upload side of :class:`swift.core.peer.Peer`: what DATA to send, to whom, when.

Split from peer.py (one concern per module).  Requests that peers sent us
wait in each channel's :class:`~swift.core.channel.RangeQueue`; this mixin
picks the next channel by WFQ with weight = outstanding requests (paper
III-B), honours the channel's LEDBAT window (RFC 6817 2.4.2) and the
optional token-bucket upload cap, builds each DATA datagram with the
INTEGRITY / SIGNED_INTEGRITY it needs ahead of it (RFC 7574 5.3, 6.1), and
feeds ACKs, HAVEs and timeouts back into LEDBAT.  A mixin: it reads and
updates the Peer's state.
"""

from __future__ import annotations

import struct
from typing import Any

from swift.core.channel import Channel
from swift.core.config import MTU_PAYLOAD
from swift.wire import codec as C

_PACK_Q = struct.Struct(">Q").pack


class UploadScheduler:
    """Sender-side scheduling and congestion accounting (mixin for Peer)."""

    def _on_ack(self, ch: Channel, lo: int, hi: int, delay_us: int, now: float) -> None:
        """ACK (8.7): retire acknowledged DATA, one LEDBAT delay sample."""
        if delay_us >= 1 << 63:
            delay_us -= 1 << 64  # libswift clocks may run behind: signed sample
        acked = 0
        rtt = None
        do = ch.data_out
        if hi - lo <= len(do):
            for c in range(lo, hi):
                x = do.pop(c, None)
                if x is not None:
                    acked += x[1]
                    rtt = now - x[0]
        else:
            for c in [c for c in do if lo <= c < hi]:
                x = do.pop(c)
                acked += x[1]
                rtt = now - x[0]
        if acked:
            ch.ledbat.on_ack(delay_us / 1e6, acked, now, rtt)

    def _delivered_by_have(self, ch: Channel, lo: int, hi: int, now: float) -> None:
        """A HAVE covering DATA whose ACK was lost retires it without a delay sample."""
        old = now - 1.5 * (ch.ledbat.srtt or 0.5)
        do = ch.data_out
        cands = range(lo, hi) if hi - lo <= len(do) else list(do)
        for c in cands:
            x = do.get(c)
            if x is not None and lo <= c < hi and x[0] < old:
                del do[c]
                ch.ledbat.on_delivered(x[1], now)

    def _sender_timeouts(self, ch: Channel, now: float) -> None:
        """DATA never acknowledged counts as lost; LEDBAT congestion timeout."""
        if ch.data_out:
            horizon = now - max(1.0, 2 * ch.ledbat.cto)
            old = [c for c, (t, _) in ch.data_out.items() if t < horizon]
            for c in old:
                _, nb = ch.data_out.pop(c)
                ch.ledbat.on_loss(nb, now)
        if ch.ledbat.check_timeout(now):
            ch.data_out.clear()

    def _data_dgram(self, ch: Channel, i: int, now: float) -> bytes:
        """One DATA datagram for chunk ``i``, preceded by the hashes (and
        live signatures) the receiver needs to verify it (5.3, 6.1)."""
        spec = self._wire_spec
        parts = [ch.remote_id.to_bytes(4, "big")]
        cold = not ch.peer_any and ch.peer_have.find_filled(0) is None
        items = self.content.integrity_for(i, ch.peer_have, cold, ch.sent)
        for item in items:
            b = item[1]
            lay = ((b + 1) & ~b).bit_length() - 1  # bins.base_range, inline
            lo = (b >> (lay + 1)) << lay
            if item[0] == "h":  # INTEGRITY (8.8)
                parts.append(b"\x04" + spec(lo, lo + (1 << lay)) + item[2])
            else:  # SIGNED_INTEGRITY (8.9)
                parts.append(b"\x07" + spec(lo, lo + (1 << lay)) + item[2].to_bytes(8, "big") + item[3])
        parts.append(b"\x01" + spec(i, i + 1, True) + _PACK_Q(int(now * 1e6) & 0xFFFFFFFFFFFFFFFF)
                     + self.content.chunk_bytes(i))
        if self.live and not ch.munro_done:
            # live tune-in (6.1.2.4): the rightmost signed munro rides in
            # DATA datagrams too, unless it is this chunk's own munro (then
            # already in ``items``) or would make a datagram that fits one
            # Ethernet frame stop fitting (then control datagrams carry it)
            push = self._munro_push(ch, now)
            m = self.content.rightmost_munro() if push else None
            if push and not any(x[0] == "s" and x[1] == m for x in items):
                extra = b"".join(C.encode_message(self.ctx, x) for x in push)
                rest = sum(map(len, parts))
                if rest + len(extra) <= MTU_PAYLOAD or rest > MTU_PAYLOAD:
                    parts.insert(1, extra)
        return b"".join(parts)

    def _next_upload(self, now: float) -> Channel | None:
        """WFQ (paper III-B): weight = outstanding requests; least served per weight."""
        best = None
        best_v = 0.0
        for ch in self.channels.values():
            if ch.state != "est" or ch.choking or not len(ch.upload):
                continue
            if not ch.ledbat.can_send(self.config.chunk_size):
                continue
            v = ch.served / len(ch.upload)
            if best is None or v < best_v:
                best, best_v = ch, v
        return best

    def _upload_data(self, now: float, budget: int) -> list[tuple[bytes, Any]]:
        """Up to ``budget`` DATA datagrams that WFQ, LEDBAT and the upload cap allow now."""
        out: list[tuple[bytes, Any]] = []
        cap = self.config.upload_rate
        if cap is not None:
            if self.last_tokens is not None:
                self.tokens = min(cap * 0.1 + self.config.chunk_size,
                                  self.tokens + cap * (now - self.last_tokens))
            self.last_tokens = now
        sent = 0
        have = self.content.have
        while sent < budget:
            if cap is not None and self.tokens < self.config.chunk_size:
                break
            ch = self._next_upload(now)
            if ch is None:
                break
            i = ch.upload.pop()
            if i is None or not have.has(i) or ch.peer_have.has(i):
                continue
            d = self._data_dgram(ch, i, now)
            ch.sent.add(i)
            out.append((d, ch.addr))
            ch.data_out[i] = (now, len(d))
            ch.ledbat.on_send(len(d), now)
            ch.served += len(d)
            ch.last_send = now
            ch.sent_since_recv += 1
            self.stats["sent_data"] += 1
            if cap is not None:
                self.tokens -= len(d)
            sent += 1
        return out
