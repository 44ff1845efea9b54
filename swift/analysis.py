"""PPSPP analyser for ``deliverykit analyse CAPTURE`` (entry point ``ppspp``).

Decodes every PPSPP datagram (RFC 7574 section 8) with the fast codec
(:func:`swift.wire.codec.decode_datagram`).  The chunk addressing method,
chunk size, hash and signature sizes are taken from the HANDSHAKE options
(section 7) and remembered per conversation (unordered pair of UDP
endpoints), so bins, 32/64-bit chunk ranges and byte ranges are all turned
into chunk numbers.  Tables:

* ``ppspp_peers``: per UDP endpoint, datagrams/bytes/messages sent and
  received, chunks received, duplicate chunks (a chunk a peer
  already received, from any sender, in the same swarm), unacknowledged
  chunks (DATA the receiver never ACKed: RFC 7574 section 3.4 says a peer
  ACKs a chunk only after it verified it, so these are the chunks it
  rejected or lost), DATA after a CHOKE (section 3.9), and median latencies;
* ``ppspp_messages``: per endpoint and message type, sent and received;
* ``ppspp_latency``: per (receiver, sender): REQUEST -> DATA latency,
  DATA -> ACK round-trip time (seen at the capture point; retransmitted
  chunks are skipped, Karn's rule) and the one-way delay samples the ACKs
  carry (section 8.7), as count/min/median/p95/max in milliseconds;
* ``ppspp_conversations``: addressing method, chunk size and swarm per pair;
* ``ppspp_throughput``: received DATA payload bytes per receiver per
  interval (``--opt interval=SECONDS``, default 1);
* ``ppspp_errors``: undecodable datagrams by reason, state dropped by caps.

Plots: throughput over time per receiver, and latencies over time.

Options: ``ppspp-port=6778[,PORT...]`` (besides, any endpoint seen in a
channel-0 HANDSHAKE is followed), ``addressing=chunk32`` and
``chunk-size=1024`` for conversations whose handshake was not captured,
``max-peers``, ``max-state`` (pending requests/DATA awaiting ACK),
``max-chunks`` (highest chunk number tracked), ``max-bitmap-bytes`` (all
receivers' chunk bitmaps together), ``max-trees``, ``max-tree-chunks``,
``verify=0``, ``max-samples`` (latency samples
kept per series), ``interval``.  Memory is bounded by these caps; whatever a
cap refused is counted in ``ppspp_errors``.  Malformed datagrams are counted,
never raised.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from deliverykit.analyse import UNRELIABLE, cut_reason, foreign_port, time_slots
from swift.core import bins as B
from swift.core.merkle import MerkleTree
from swift.wire.codec import (
    Ack,
    Cancel,
    Data,
    DecodeError,
    Handshake,
    Integrity,
    Request,
    WireContext,
    decode_datagram,
)
from swift.wire.constants import (
    HASH_SIZES,
    SIG_SIZES,
    VARIABLE_CHUNK_SIZE,
    ChunkAddressing,
    HashFunc,
    IntegrityMethod,
    MsgType,
    SigAlg,
)

_TYPE_NAMES = {t.value: t.name.lower() for t in MsgType}
_ADDR_BY_NAME = {a.name.lower(): a for a in ChunkAddressing}
_MAX_EXPAND = 1 << 16  # chunks remembered per REQUEST/ACK range


def _ep(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def _summary(samples: list[float]) -> dict:
    if not samples:
        return {"samples": 0, "min_ms": None, "median_ms": None, "p95_ms": None, "max_ms": None}
    s = sorted(samples)
    return {"samples": len(s), "min_ms": round(s[0] * 1e3, 3),
            "median_ms": round(statistics.median(s) * 1e3, 3),
            "p95_ms": round(s[min(len(s) - 1, int(0.95 * len(s)))] * 1e3, 3),
            "max_ms": round(s[-1] * 1e3, 3)}


class _Conv:
    """What one conversation agreed in its handshakes (section 7)."""

    __slots__ = ("ctx", "swarm", "handshaken", "hash_func", "integrity")

    def __init__(self, ctx: WireContext) -> None:
        self.ctx = ctx
        self.swarm = b""
        self.handshaken = False
        self.hash_func: int = HashFunc.SHA256  # the RFC 7574 7.6 default (as on the wire)
        self.integrity: int = IntegrityMethod.MERKLE  # 7.5 default


class _Peer:
    __slots__ = ("dgrams_out", "bytes_out", "dgrams_in", "bytes_in", "msgs", "msgs_in", "chunks",
                 "dups", "data_bytes", "after_choke", "verify")

    def __init__(self) -> None:
        self.dgrams_out = self.bytes_out = self.dgrams_in = self.bytes_in = 0
        self.msgs: dict[str, int] = {}
        self.msgs_in: dict[str, int] = {}
        self.chunks = self.dups = self.data_bytes = self.after_choke = 0
        self.verify = {"verified": 0, "rejected": 0, "unverifiable": 0}


class _Series:
    """Latency samples for one (receiver, sender) pair, capped; counts all."""

    __slots__ = ("req", "rtt", "delay", "seen")

    def __init__(self) -> None:
        self.req: list[tuple[float, float]] = []
        self.rtt: list[tuple[float, float]] = []
        self.delay: list[tuple[float, float]] = []
        self.seen = [0, 0, 0]


class Analyser:
    """Per-peer PPSPP summary of a capture (see module docstring)."""

    name = "ppspp"
    handles_truncation = True

    def __init__(self, options: dict | None = None) -> None:
        o = options or {}
        self.ports = {int(p) for p in str(o.get("ppspp-port", "6778")).split(",") if p}
        name = str(o.get("addressing", "chunk32"))
        addressing = _ADDR_BY_NAME.get(name.lower())
        if addressing is None:
            raise ValueError(f"addressing={name!r}: one of {', '.join(_ADDR_BY_NAME)}")
        self.default_ctx = WireContext(addressing, 32, 64, int(o.get("chunk-size", 1024)))
        self.max_peers = int(o.get("max-peers", 10_000))
        self.max_state = int(o.get("max-state", 2_000_000))
        self.max_chunks = int(o.get("max-chunks", 1 << 26))
        self.max_bitmap_bytes = int(o.get("max-bitmap-bytes", 256 << 20))
        self.bitmap_bytes = 0
        self._spare = _Series()
        self.max_samples = int(o.get("max-samples", 200_000))
        self.interval = float(o.get("interval", 1.0))
        self.max_trees = int(o.get("max-trees", 64))
        self.max_tree_chunks = int(o.get("max-tree-chunks", 1 << 22))
        verify = str(o.get("verify", "1")).lower()
        if verify not in ("0", "no", "false", "off", "1", "yes", "true", "on"):
            raise ValueError(f"verify={verify!r}: 0 or 1")
        self.verify_on = verify not in ("0", "no", "false", "off")
        self.trees: dict[tuple[str, bytes], MerkleTree | None] = {}
        self.hashes: dict[tuple[str, str], list[tuple[int, bytes]]] = {}  # (tx, rx) INTEGRITY
        self.endpoints: set[tuple[str, int]] = set()
        self.convs: dict[tuple, _Conv] = {}
        self.peers: dict[str, _Peer] = {}
        self.have: dict[tuple[str, bytes], bytearray] = {}   # receiver, swarm -> chunk bitmap
        self.pending_req: dict[tuple[str, str], dict[int, float]] = {}  # (requester, server)
        self.pending_ack: dict[tuple[str, str], dict[int, float | None]] = {}  # (sender, receiver)
        self.choked: set[tuple[str, str]] = set()  # (choker, choked)
        self.series: dict[tuple[str, str], _Series] = {}
        self.tput: dict[str, dict[int, int]] = {}
        self.state = 0
        self.t0: float | None = None
        self.errors: dict[str, int] = {}
        self.dropped = {"peers": 0, "state": 0, "chunks_beyond_bitmap": 0, "samples": 0,
                        "range_expansion": 0, "trees": 0}
        self.datagrams = 0
        #: UDP datagrams on ports we do not follow (no handshake seen there)
        self.skipped_udp = 0
        #: UDP datagrams refused because another protocol owns their port (LISP 4341...)
        self.foreign = 0
        #: endpoints of datagrams the capture cut short (snap length): their figures are marked
        self.cut: dict[str, int] = {}
        #: receivers whose figures a cap left incomplete -> which cap
        self.capped: dict[str, str] = {}

    # ------------------------------------------------------------------
    def accepts(self, f) -> bool:
        """Strict: our port, an endpoint seen in a handshake, or a datagram that decodes
        entirely as an opening handshake; never a port another protocol owns."""
        if f.proto != 17 or f.sport is None:
            return False
        if f.sport in self.ports or f.dport in self.ports:
            return True
        if foreign_port(f, self.name, self.ports):
            self.foreign += 1
            return False
        if (f.src, f.sport) in self.endpoints or (f.dst, f.dport) in self.endpoints:
            return True
        if f.payload[:5] == b"\0\0\0\0\0" and self._opening(f.payload):
            return True
        self.skipped_udp += 1
        return False

    def _opening(self, data: bytes) -> bool:
        """A channel-0 datagram that decodes to its end, starting with a HANDSHAKE that
        opens a channel (non-zero source channel) and names a protocol version (7.2)."""
        try:
            dec = decode_datagram(data, self.default_ctx)
            if dec.error or not dec.messages or not isinstance(dec.messages[0], Handshake):
                return False
            hs = dec.messages[0]
            if hs.channel == 0 or hs.options.version is None:
                return False
            ctx = self._ctx_from(hs, self.default_ctx)
            return ctx == self.default_ctx or not decode_datagram(data, ctx).error
        except (DecodeError, ValueError, IndexError, KeyError, OverflowError):
            return False

    def _err(self, why: str) -> None:
        self.errors[why] = self.errors.get(why, 0) + 1

    def _peer(self, ep: str) -> _Peer | None:
        p = self.peers.get(ep)
        if p is None:
            if len(self.peers) >= self.max_peers:
                self.dropped["peers"] += 1
                return None
            p = self.peers[ep] = _Peer()
        return p

    @staticmethod
    def _ctx_from(hs: Handshake, ctx: WireContext) -> WireContext:
        o = hs.options
        try:
            return WireContext(
                ChunkAddressing(o.addressing) if o.addressing is not None else ctx.addressing,
                HASH_SIZES[HashFunc(o.hash_func)] if o.hash_func is not None else ctx.hash_size,
                SIG_SIZES.get(SigAlg(o.sig_alg), ctx.sig_size) if o.sig_alg is not None
                else ctx.sig_size,
                o.chunk_size if o.chunk_size is not None else ctx.chunk_size)
        except (ValueError, KeyError):
            return ctx

    def _chunks(self, ctx: WireContext, start: int, end: int) -> tuple[int, int]:
        """Wire spec -> inclusive chunk range (sections 4.1-4.3)."""
        a = ctx.addressing
        if a == ChunkAddressing.BIN32 or a == ChunkAddressing.BIN64:
            b = start
            lay = ((b + 1) & ~b).bit_length() - 1
            first = (b >> (lay + 1)) << lay
            return first, first + (1 << lay) - 1
        if a == ChunkAddressing.BYTE64:
            cs = ctx.chunk_size if ctx.chunk_size not in (0, VARIABLE_CHUNK_SIZE) else 1024
            return start // cs, end // cs
        return start, end

    def _sample(self, lst: list, seen: list, i: int, ts: float, v: float) -> None:
        seen[i] += 1
        if len(lst) < self.max_samples:
            lst.append((ts, v))
        else:
            self.dropped["samples"] += 1

    def _series(self, rx: str, tx: str) -> _Series:
        s = self.series.get((rx, tx))
        if s is None:
            if len(self.series) >= 4 * self.max_peers:
                self.dropped["peers"] += 1
                return self._spare  # counted nowhere: a hostile number of pairs
            s = self.series[(rx, tx)] = _Series()
        return s

    # ------------------------------------------------------------------
    def feed(self, f) -> None:
        try:
            self._feed(f)
        except (DecodeError, ValueError, IndexError, KeyError, OverflowError) as exc:
            self._err(type(exc).__name__)

    def _feed(self, f) -> None:
        self.datagrams += 1
        if self.t0 is None:
            self.t0 = f.ts
        a, b = (f.src, f.sport), (f.dst, f.dport)
        key = (a, b) if a <= b else (b, a)
        conv = self.convs.get(key)
        ctx = conv.ctx if conv is not None else self.default_ctx
        data = f.payload
        try:
            dec = decode_datagram(data, ctx)
        except DecodeError:
            self._err("shorter than a channel ID")
            return
        msgs = dec.messages
        if msgs and isinstance(msgs[0], Handshake):
            if conv is None:
                if len(self.convs) >= self.max_peers:
                    self.dropped["peers"] += 1
                    return
                conv = self.convs[key] = _Conv(ctx)
            new = self._ctx_from(msgs[0], conv.ctx)
            o = msgs[0].options
            if o.swarm_id:
                conv.swarm = o.swarm_id
            if o.hash_func is not None:
                conv.hash_func = o.hash_func
            if o.integrity is not None:
                conv.integrity = o.integrity
            conv.handshaken = True
            if new != ctx:
                conv.ctx = ctx = new
                dec = decode_datagram(data, ctx)
                msgs = dec.messages
            if len(self.endpoints) < 2 * self.max_peers:
                self.endpoints.add(a)
                self.endpoints.add(b)
            else:
                self.dropped["peers"] += 1
        elif (
            conv is None
            and dec.channel == 0
            and not (f.sport in self.ports or f.dport in self.ports)
        ):
            self._err("channel 0 without HANDSHAKE")
            return
        if dec.error:
            self._err(dec.error)
        src, dst = _ep(*a), _ep(*b)
        if f.truncated:  # messages after the cut are lost: both ends' figures are incomplete
            for ep in (src, dst):
                if ep in self.cut or len(self.cut) < self.max_peers:
                    self.cut[ep] = self.cut.get(ep, 0) + 1
        ps, pd = self._peer(src), self._peer(dst)
        if ps is not None:
            ps.dgrams_out += 1
            ps.bytes_out += f.length
        if pd is not None:
            pd.dgrams_in += 1
            pd.bytes_in += f.length
        ts = f.ts
        for m in msgs:
            t = int(m.type)
            n = _TYPE_NAMES.get(t, str(t))
            if ps is not None:
                ps.msgs[n] = ps.msgs.get(n, 0) + 1
            if pd is not None:
                pd.msgs_in[n] = pd.msgs_in.get(n, 0) + 1
            if t == 1:
                self._data(ts, src, dst, pd, conv, ctx, m)
            elif t == 4 and self.verify_on:
                self._integrity(src, dst, ctx, m)
            elif t == 2:
                self._ack(ts, src, dst, ctx, m)
            elif t == 8:
                self._request(ts, src, dst, ctx, m)
            elif t == 9:
                self._cancel(src, dst, ctx, m)
            elif t == 10:
                self.choked.add((src, dst))
            elif t == 11:
                self.choked.discard((src, dst))

    def _data(self, ts: float, src: str, dst: str, pd: _Peer | None, conv, ctx, m: Data) -> None:
        c0, c1 = self._chunks(ctx, m.start, m.end)
        n = len(m.payload)
        if pd is not None:
            pd.data_bytes += n
            if (src, dst) in self.choked:
                pd.after_choke += 1
        if self.t0 is not None:
            slot = int((ts - self.t0) / self.interval)
            tp = self.tput.get(dst)
            if tp is None:
                if len(self.tput) >= self.max_peers:
                    self.dropped["peers"] += 1
                    tp = None
                else:
                    tp = self.tput[dst] = {}
            if tp is not None and (slot in tp or len(tp) < self.max_samples):
                tp[slot] = tp.get(slot, 0) + n
            else:
                self._cap(dst, "throughput over max-peers/max-samples not counted")
        swarm = conv.swarm if conv is not None else b""
        hashes = self.hashes.pop((src, dst), None) if self.verify_on else None
        if pd is not None and self.verify_on:
            if conv is None:  # handshake not captured: no swarm ID, no hash function
                pd.verify["unverifiable"] += max(1, min(c1, c0 + _MAX_EXPAND - 1) - c0 + 1)
            elif c0 == c1:
                pd.verify[self._verify(dst, conv, c0, m.payload, hashes or [])] += 1
        bm = self.have.get((dst, swarm))
        if bm is None:
            if len(self.have) >= 4 * self.max_peers:
                self.dropped["peers"] += 1
                bm = bytearray()  # not kept: duplicates of this receiver are not tracked
                self._cap(dst, "chunk bitmap not kept (max-peers): chunks and duplicates "
                               "not counted")
            else:
                bm = self.have[(dst, swarm)] = bytearray()
        req = self.pending_req.get((dst, src))
        pa = self._pair(self.pending_ack, (src, dst))  # None over the cap: no ACK awaited
        ser = self._series(dst, src)
        if pa is None:
            self._cap(dst, "DATA awaiting ACK not tracked (max-peers): unacked_chunks and RTTs "
                           "incomplete")
        for c in range(c0, min(c1, c0 + _MAX_EXPAND - 1) + 1):
            byte, bit = c >> 3, 1 << (c & 7)
            if c < 0 or c >= self.max_chunks or not self._room(bm, byte):
                self.dropped["chunks_beyond_bitmap"] += 1
                self._cap(dst, "chunks beyond max-chunks/max-bitmap-bytes not counted")
            else:
                if pd is not None:
                    if bm[byte] & bit:
                        pd.dups += 1
                    else:
                        pd.chunks += 1
                bm[byte] |= bit
            if req is not None:
                t_req = req.pop(c, None)
                if t_req is not None:
                    self.state -= 1
                    self._sample(ser.req, ser.seen, 0, ts, ts - t_req)
            if pa is None:
                pass
            elif c in pa:
                pa[c] = None  # retransmission: no RTT sample (Karn)
            elif self.state < self.max_state:
                pa[c] = ts
                self.state += 1
            else:
                self.dropped["state"] += 1
                self._cap(dst, "max-state reached: unacked_chunks and RTTs incomplete")

    def _cap(self, ep: str, why: str) -> None:
        """A cap left this receiver's figures incomplete (the first reason is kept)."""
        if ep not in self.capped and len(self.capped) < self.max_peers:
            self.capped[ep] = why

    def _integrity(self, src: str, dst: str, ctx, m: Integrity) -> None:
        """Remember an uncle/peak hash until the next DATA on this path (5.3)."""
        c0, c1 = self._chunks(ctx, m.start, m.end)
        w = c1 - c0 + 1
        if w <= 0 or w & (w - 1) or c0 % w:
            return  # not a tree node
        lst = self.hashes.setdefault((src, dst), [])
        if len(lst) < 128:
            lst.append((B.make(w.bit_length() - 1, c0 // w), bytes(m.hash)))

    def _verify(self, rx: str, conv: _Conv, chunk: int, data: bytes,
                hashes: list[tuple[int, bytes]]) -> str:
        """Check a chunk as the receiver must (RFC 7574 5.2-5.6): against the swarm's root
        hash with the INTEGRITY hashes sent before it; the receiver's own view is rebuilt
        from the capture with swift's MerkleTree."""
        if conv.integrity != IntegrityMethod.MERKLE or not conv.swarm:
            return "unverifiable"
        key = (rx, conv.swarm)
        if key in self.trees:
            tree = self.trees[key]
        else:
            if len(self.trees) >= self.max_trees:
                self.dropped["trees"] += 1
                return "unverifiable"
            try:
                tree = MerkleTree(conv.swarm, HashFunc(conv.hash_func), conv.ctx.chunk_size)
            except (ValueError, KeyError):
                tree = None
            self.trees[key] = tree
        if tree is None:
            return "unverifiable"
        if tree.n_chunks is None:  # size from the peak hashes (5.6)
            peaks, first, last_w = [], 0, 1 << 62
            for b, h in hashes:
                lo, hi = B.base_range(b)
                if lo != first or hi - lo >= last_w:
                    break
                peaks.append((b, h))
                first, last_w = hi, hi - lo
            if first > self.max_tree_chunks:
                self.trees[key] = None
                self.dropped["trees"] += 1
                return "unverifiable"
            if not peaks or not tree.offer_peaks(peaks):
                return "unverifiable"
        if tree.known(B.chunk(chunk)):  # verified before: compare with the trusted leaf
            return "verified" if tree.leaf_ok(chunk, data) else "rejected"
        if tree.verify(chunk, data, dict(hashes)):
            return "verified"
        return "unverifiable" if getattr(tree, "last_missing", False) else "rejected"

    def _room(self, bm: bytearray, byte: int) -> bool:
        """Grow a receiver's chunk bitmap within the global budget."""
        if byte < len(bm):
            return True
        grow = byte + 1 - len(bm) + 64
        if self.bitmap_bytes + grow > self.max_bitmap_bytes:
            return False
        bm.extend(bytes(grow))
        self.bitmap_bytes += grow
        return True

    def _pair(self, table: dict, key: tuple) -> dict | None:
        """Per-(peer, peer) state, at most 4 x max-peers pairs."""
        d = table.get(key)
        if d is None:
            if len(table) >= 4 * self.max_peers:
                self.dropped["peers"] += 1
                return None
            d = table[key] = {}
        return d

    def _ack(self, ts: float, src: str, dst: str, ctx, m: Ack) -> None:
        ser = self._series(src, dst)
        self._sample(ser.delay, ser.seen, 2, ts, m.delay / 1e6)
        pa = self.pending_ack.get((dst, src))
        if not pa:
            return
        c0, c1 = self._chunks(ctx, m.start, m.end)
        if c1 - c0 >= len(pa):  # wide ACK: walk the pending chunks instead
            hit = [c for c in pa if c0 <= c <= c1]
        else:
            hit = [c for c in range(c0, c1 + 1) if c in pa]
        for c in hit:
            t_data = pa.pop(c)
            self.state -= 1
            if t_data is not None:
                self._sample(ser.rtt, ser.seen, 1, ts, ts - t_data)

    def _request(self, ts: float, src: str, dst: str, ctx, m: Request) -> None:
        c0, c1 = self._chunks(ctx, m.start, m.end)
        if c1 - c0 >= _MAX_EXPAND:
            self.dropped["range_expansion"] += c1 - c0 + 1 - _MAX_EXPAND
            c1 = c0 + _MAX_EXPAND - 1
        req = self._pair(self.pending_req, (src, dst))
        if req is None:
            return
        for c in range(c0, c1 + 1):
            if c in req:
                continue  # re-request: keep the first time
            if self.state >= self.max_state:
                self.dropped["state"] += c1 - c + 1
                return
            req[c] = ts
            self.state += 1

    def _cancel(self, src: str, dst: str, ctx, m: Cancel) -> None:
        req = self.pending_req.get((src, dst))
        if not req:
            return
        c0, c1 = self._chunks(ctx, m.start, m.end)
        for c in range(c0, min(c1, c0 + _MAX_EXPAND - 1) + 1):
            if req.pop(c, None) is not None:
                self.state -= 1

    # ------------------------------------------------------------------
    def tables(self) -> dict[str, list[dict]]:
        unacked: dict[str, int] = {}
        for (_tx, rx), pa in self.pending_ack.items():
            unacked[rx] = unacked.get(rx, 0) + len(pa)
        med: dict[str, dict[str, list[float]]] = {}
        for (rx, _tx), s in self.series.items():
            d = med.setdefault(rx, {"req": [], "rtt": [], "delay": []})
            d["req"].extend(v for _, v in s.req)
            d["rtt"].extend(v for _, v in s.rtt)
            d["delay"].extend(v for _, v in s.delay)

        def _m(rx: str, k: str):
            v = med.get(rx, {}).get(k)
            return round(statistics.median(v) * 1e3, 3) if v else None

        peers: list[dict] = []
        messages: list[dict] = []
        for ep, p in sorted(self.peers.items(), key=lambda kv: -kv[1].bytes_in):
            row = {"peer": ep, "datagrams_sent": p.dgrams_out, "bytes_sent": p.bytes_out,
                   "datagrams_received": p.dgrams_in, "bytes_received": p.bytes_in,
                   "messages_sent": sum(p.msgs.values())}
            for t in sorted(set(p.msgs) | set(p.msgs_in)):
                messages.append({"peer": ep, "type": t, "sent": p.msgs.get(t, 0),
                                 "received": p.msgs_in.get(t, 0)})
            row.update({"chunks_received": p.chunks, "duplicate_chunks": p.dups,
                        "unacked_chunks": unacked.get(ep, 0), "data_after_choke": p.after_choke,
                        "verified_chunks": p.verify["verified"],
                        "rejected_chunks": p.verify["rejected"],
                        "unverifiable_chunks": p.verify["unverifiable"],
                        "data_payload_bytes": p.data_bytes,
                        "request_to_data_median_ms": _m(ep, "req"),
                        "data_to_ack_rtt_median_ms": _m(ep, "rtt"),
                        "ack_delay_median_ms": _m(ep, "delay")})
            peers.append(row)
        lat = []
        for (rx, tx), s in sorted(self.series.items()):
            for kind, lst, i in (("request_to_data", s.req, 0), ("data_to_ack_rtt", s.rtt, 1),
                                 ("ack_delay_sample", s.delay, 2)):
                if s.seen[i]:
                    row = {"receiver": rx, "sender": tx, "what": kind, "observed": s.seen[i]}
                    row.update(_summary([v for _, v in lst]))
                    lat.append(row)
        convs = []
        for (a, b), c in sorted(self.convs.items()):
            convs.append({"a": _ep(*a), "b": _ep(*b), "addressing": c.ctx.addressing.name.lower(),
                          "chunk_size": c.ctx.chunk_size, "hash_size": c.ctx.hash_size,
                          "swarm": c.swarm.hex()})
        tput = []
        for rx, slots in sorted(self.tput.items()):
            for slot in time_slots(slots):
                by = slots.get(slot, 0)
                tput.append({"receiver": rx, "t": round(slot * self.interval, 3), "bytes": by,
                             "bit/s": round(8 * by / self.interval)})
        errs = [{"what": f"undecodable: {k}", "count": v} for k, v in sorted(self.errors.items())]
        errs += [{"what": f"dropped: {k}", "count": v} for k, v in self.dropped.items() if v]
        errs.append({"what": "datagrams analysed", "count": self.datagrams})
        if self.foreign:
            errs.append({"what": "UDP datagrams refused: on a port another protocol owns",
                         "count": self.foreign})
        if self.cut or self.capped:
            self._mark(peers, messages, lat, convs, tput)
        if self.skipped_udp and not self.convs:
            ports = ",".join(map(str, sorted(self.ports)))
            errs.append({"what": "UDP datagrams not followed: no PPSPP handshake seen and not on "
                                 f"ppspp-port {ports} (a capture that starts after the handshake: "
                                 "--opt ppspp-port=PORT)", "count": self.skipped_udp})
        return {
            "ppspp_peers": peers,
            "ppspp_messages": messages,
            "ppspp_latency": lat,
            "ppspp_conversations": convs,
            "ppspp_throughput": tput,
            "ppspp_errors": errs,
        }

    def _mark(self, peers: list[dict], messages: list[dict], lat: list[dict],
              convs: list[dict], tput: list[dict]) -> None:
        """Mark every row an endpoint of a cut datagram feeds (its messages after the cut
        were not decoded), and a capped receiver's chunk, ACK and throughput rows; the
        other rows get an empty mark (one column set per table)."""
        def why(*eps: str) -> str | None:
            n = max((self.cut.get(e, 0) for e in eps), default=0)
            return cut_reason(n) if n else None

        for r in peers + tput + lat:
            rx = r.get("peer") or r["receiver"]
            r[UNRELIABLE] = why(rx, r.get("sender", rx)) or self.capped.get(rx)
        for r in messages:
            r[UNRELIABLE] = why(r["peer"])
        for r in convs:
            r[UNRELIABLE] = why(r["a"], r["b"])

    def plots(self, outdir: Path) -> list[Path]:
        if not self.tput and not self.series:
            return []
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        out: list[Path] = []
        outdir = Path(outdir)
        if self.tput:
            fig, ax = plt.subplots(figsize=(8, 4))
            for rx, slots in sorted(self.tput.items())[:20]:
                xs = time_slots(slots)
                ax.step(
                    [x * self.interval for x in xs],
                    [8 * slots.get(x, 0) / self.interval / 1e6 for x in xs],
                    where="post",
                    label=rx,
                )
            ax.set_xlabel("time since first PPSPP datagram (s)")
            ax.set_ylabel("DATA received (Mbit/s)")
            ax.set_title("PPSPP throughput per receiver" + (
                " (UNRELIABLE: datagrams cut by the snap length)" if self.cut else ""))
            ax.legend(fontsize="small")
            p = outdir / "ppspp-throughput.png"
            fig.savefig(p, dpi=100, bbox_inches="tight")
            plt.close(fig)
            out.append(p)
        if self.series and self.t0 is not None:
            fig, ax = plt.subplots(figsize=(8, 4))
            for attr, label in (("req", "REQUEST->DATA"), ("rtt", "DATA->ACK")):
                xs, ys = [], []
                for s in self.series.values():
                    for t, v in getattr(s, attr):
                        xs.append(t - self.t0)
                        ys.append(v * 1e3)
                if xs:
                    ax.plot(xs, ys, ".", markersize=2, label=label)
            ax.set_xlabel("time since first PPSPP datagram (s)")
            ax.set_ylabel("latency (ms)")
            ax.set_title("PPSPP latency")
            ax.legend()
            p = outdir / "ppspp-latency.png"
            fig.savefig(p, dpi=100, bbox_inches="tight")
            plt.close(fig)
            out.append(p)
        return out
