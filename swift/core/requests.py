"""Download-side request planning and PEX for :class:`swift.core.peer.Peer`.

Split from peer.py (one concern per module): what to REQUEST from a peer
(RFC 7574 section 3.7, paper III-C), which peers are fast (eq. 1 and 2,
III-A) and high-priority deadlines (III-C), live tune-in (6.1.2.4), which peers to
offer in PEX_RES and what to do with the ones we get (section 3.10, 8.13,
12.2).  A mixin: it reads and updates the Peer's state.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from swift.core import bins as B
from swift.core import events as ev
from swift.core.channel import Channel
from swift.core.chanstate import ChannelState
from swift.core.picker import PickState, expected_bandwidth, fast_set, in_order, request_size
from swift.wire import codec as C
from swift.wire.constants import IntegrityMethod

_EST = ChannelState.EST


def _is_private(host: str) -> bool:
    try:
        a = ipaddress.ip_address(host)
    except ValueError:
        return False
    return a.is_private or a.is_link_local or a.is_multicast or a.is_loopback


def chunk_runs(chunks) -> list[tuple[int, int]]:
    """Sorted chunk indices -> contiguous ``[lo, hi)`` runs (for CANCEL)."""
    out: list[tuple[int, int]] = []
    for c in sorted(chunks):
        if out and out[-1][1] == c:
            out[-1] = (out[-1][0], c + 1)
        else:
            out.append((c, c + 1))
    return out


def _nth_missing(have: Any, first: int, n: int, k: int) -> int | None:
    """The ``k``-th (from 0) chunk below ``n`` missing from ``have``, counting
    from ``first`` (the first missing one); None if there are fewer."""
    pos: int | None = first
    while pos is not None and pos < n:
        f = have.find_filled(pos, n)
        end = n if f is None else f
        if end - pos > k:
            return pos + k
        k -= end - pos
        pos = None if f is None else have.find_empty(f, n)
    return None


class RequestPlanner:
    """Mixin: REQUEST planning (static and live) and PEX answers."""

    #: memoise "nothing to pick" per channel (:meth:`_pick`) and "nothing
    #: late anywhere" per flush (:meth:`_endgame`); False: the reference
    _memos = True
    #: the flush (``Peer.datagrams_to_send`` call) under way, None outside
    #: a Peer; (flush, inflight version) at which :meth:`_endgame` found
    #: no late request anywhere
    _flush_no: int | None = None
    _endgame_none: tuple[int, int] | None = None
    #: channel -> (have, inflight, peer_have versions, n) at which the picker
    #: last found nothing for it (made by the Peer)
    _nothing_to_pick: dict[int, tuple[int, int, int, int]]

    config: Any
    content: Any
    channels: dict
    inflight: Any
    availability: Any
    picker: Any
    playpos: int
    rng: Any
    fast: set
    live: bool
    live_start: int | None
    buffering: bool
    certs: Any
    swarm_id: bytes
    _complete_reported: bool
    events: Any
    blacklist: set
    stats: dict
    live_method: Any
    moved: dict[int, str]
    established: Any
    fast_factor: float
    next_rank: float
    _ranked: list[tuple[float, int]]
    _pushed_at: dict[int, float]

    def connect(self, addr: Any, now: float) -> int:
        raise NotImplementedError

    def _note_moved(self, chunks: Any, why: str) -> None:
        raise NotImplementedError

    def _no_longer_asked(self, ch: Channel, chunks: Any) -> list[int]:
        raise NotImplementedError

    def _specs(self, lo: int, hi: int, clip: bool = True) -> list[tuple[int, int]]:
        raise NotImplementedError

    def _request_msgs(self, ch: Channel, now: float) -> list:
        if (self._endgame_none is not None and self._endgame_none[0] == self._flush_no
                and self._idle(ch)):
            return []
        cfg = self.config
        content = self.content
        if ch.choked or self._complete_reported or cfg.tracker:
            return []
        if ch.distrusted and ch.requests:
            return []  # probation: one request at a time until max_bad_chunks
        n = content.n_chunks
        if cfg.push and not self.live and self._awaits_push(ch, n, now):
            return []
        if self.live:
            return self._live_requests(ch, now)
        if n is None:
            # size unknown: ask one peer for chunk 0 to get the peaks (5.6.2)
            if ch.peer_have.find_filled(0, 1) is None or any(
                    c.requests for c in self.channels.values()):
                return []
            # the peer with the fewest failed requests (a silent one is skipped)
            cands = [c for c in self.channels.values()
                     if c.state is _EST and not c.choked and c.peer_have.has(0)]
            if min(cands, key=lambda c: (c.lost, c.local_id)) is not ch:
                return []
            ch.requests[0] = now
            ch.req_seq[0] = ch.next_seq
            ch.next_seq += 1
            self.inflight.set(0)
            return [C.Request(s, t) for s, t in self._specs(0, 1)]
        # outstanding requests: what the peer delivers in max(0.5 s, 4 RTT), as
        # libswift's HINT planning, from a once-a-second rate measurement
        # the plan horizon: 4 x the path RTT without queueing (min RTT), or the
        # smoothed RTT (which includes data queued on the path) capped at 1 s:
        # the smoothed RTT also counts our own requests waiting at the sender,
        # so uncapped it would grow that queue without bound
        plan = max(0.25, 4 * ch.min_rtt, min(1.0, ch.rtt))
        rate = ch.rate if ch.rate > 0 else 32 / plan
        window = int(min(cfg.max_outstanding, max(8, plan * rate * 1.5)))
        if not ch.rate_samples:
            # no rate sample yet (the first 0.5 s): grow like slow start, one
            # more request per chunk delivered, so a fast peer is not held
            # at the initial guess for the whole first period
            window = min(cfg.max_outstanding, max(window, 2 * ch.received))
        if ch.distrusted:
            window = 1
        want = window - len(ch.requests)
        if want < max(1, min(16, window // 4)):
            return []
        wins = self.picker.windows
        high = wins.high if wins is not None and wins.fast_only_high else 0
        if high and not content.have.is_filled_range(self.playpos, min(n, self.playpos + high)):
            # eq. 3: while the high-priority window is open, ask at most
            # min(W_ledbat / 2, H / F) chunks at a time (W: this peer's window)
            want = min(want, request_size(window, high, max(1, len(self.fast))))
        picks = self._pick(ch, n, want)
        if ch.missed:
            # a chunk this peer was too late for goes to another peer that
            # has it (III-C); with none, it is asked here again, or nothing
            # would ever ask for it (the end game only takes chunks in flight)
            others = [c.peer_have for c in self.channels.values()
                      if c is not ch and c.state is _EST and not c.choked]
            keep = []
            for c in picks:
                if c not in ch.missed:
                    keep.append(c)
                elif any(h.has(c) for h in others):
                    self.inflight.reset(B.chunk(c))  # leave it to another peer
                else:
                    ch.missed.discard(c)
                    keep.append(c)
            picks = keep
            if len(ch.missed) > 4096:
                ch.missed.clear()
        if not picks:
            picks = self._endgame(ch, want, now)
            if not picks:
                return []
        picks.sort()
        out = []
        lo = picks[0]
        hi = lo + 1
        for c in picks[1:] + [-1]:
            if c == hi:
                hi += 1
                continue
            for s, t in self._specs(lo, hi):
                out.append(C.Request(s, t))
            lo, hi = c, c + 1
        for c in picks:
            if c in ch.requests:
                # re-asked: its slot keeps its place with a newer time, so
                # this channel's requests may be out of request order now
                self._unordered.add(ch)
            ch.requests[c] = now
            ch.req_seq[c] = ch.next_seq
            ch.next_seq += 1
        ch.last_progress = min(ch.last_progress, now) if ch.requests else now
        return out

    def _pick(self, ch: Channel, n: int, want: int) -> list[int]:
        """Up to ``want`` chunks from the picker for ``ch``, marked in flight.

        Memoised (docs/sim.md, "Hot spots" 2): a built-in picker finds
        nothing exactly when no chunk below ``n`` is missing, not in flight
        and offered by the peer (:attr:`Picker.empty_means_none_wanted`),
        a fact of three binmaps alone; so once it found nothing, the channel
        is skipped until one of them changes (their version counters).
        ``_memos = False`` runs the picker every time (the tests'
        reference)."""
        have, infl, ph = self.content.have, self.inflight, ch.peer_have
        memo = self._nothing_to_pick
        memo_on = self._memos and self.picker.empty_means_none_wanted
        if memo_on and memo.get(ch.local_id) == (have.version, infl.version, ph.version, n):
            return []
        st = PickState(have, infl, self.availability, n, self.playpos, self.rng,
                       [c.peer_have for c in self.channels.values()
                        if c.local_id in self.fast and c is not ch])
        picks: list[int] = []
        # while the player fills its start-up buffer, the urgent window is asked
        # of every peer ("requested ... in an aggressive way", paper IV-A)
        fast = self.buffering or ch.local_id in self.fast or not self.fast
        while len(picks) < want:
            got = self.picker.pick(st, ph, want - len(picks), fast)
            if not got:
                if memo_on:
                    if len(memo) > 4 * len(self.channels) + 64:  # bounded: drop closed ones
                        memo.clear()
                    memo[ch.local_id] = (have.version, infl.version, ph.version, n)
                break
            lo = prev = got[0]  # mark in flight run by run, not chunk by chunk
            for c in got[1:] + [-1]:
                if c != prev + 1:
                    infl.set_range(lo, prev + 1)
                    lo = c
                prev = c
            picks.extend(got)
        return picks

    def _idle(self, ch: Channel) -> bool:
        """True when, by both memos, ``_request_msgs`` would return nothing
        for ``ch`` whatever its window: the picker found nothing at these
        binmap versions (so the content size is known and the channel got
        past every earlier return) and no request is late anywhere in this
        flush.  Checked first: on this path nothing else is computed.  The
        one side effect of the path it skips, the bound on ``missed``, is
        kept.  Only called once the end game found nothing in this flush."""
        if not self._memos or self._endgame_none != (self._flush_no, self.inflight.version):
            return False
        if self._nothing_to_pick.get(ch.local_id) != (
                self.content.have.version, self.inflight.version, ch.peer_have.version,
                self.content.n_chunks):
            return False
        if ch.choked or self._complete_reported or self.config.tracker or (
                ch.distrusted and ch.requests) or self.config.push or self.live:
            return False  # an earlier return of _request_msgs (or its push rule) decides
        if len(ch.missed) > 4096:
            ch.missed.clear()
        return True

    def _awaits_push(self, ch: Channel, n: int | None, now: float) -> bool:
        """Push mode: True while ``ch``'s peer holds the whole content (or,
        size unknown, chunk 0) and pushes: its DATA came within
        ``push_fallback`` seconds (or the channel is that young).  After
        that, what the push lost is asked for as in pull mode."""
        ph = ch.peer_have
        if not (ph.is_filled_range(0, n) if n is not None else ph.has(0)):
            return False  # a leecher: leechers pull from each other
        last = self._pushed_at.get(ch.local_id, ch.opened_at)
        return now - last < self.config.push_fallback

    def _endgame(self, ch: Channel, want: int, now: float) -> list[int]:
        """End game: the last missing chunks are all requested elsewhere; ask
        this peer too (the first copy wins, the others get a CANCEL, 3.8).

        Only for a chunk that is late where it was asked (outstanding for
        more than 1.5 x that channel's request->DATA time) and at most once
        per chunk: asking every idle peer for every chunk in flight made
        95 % of the duplicate DATA in the flash crowd (docs/swift.md).

        The same picks as a walk over the first 256 missing chunks (each
        judged at the first other channel, in channel order, that asked
        for it; the lowest min(want, 32) kept), found from the other way:
        each channel's requests are in request order (but for a re-asked
        chunk, see ``_unordered``), so the late ones are a prefix, and the cost is
        O(late requests), not O(missing chunks) on every flush
        (docs/sim.md, "Hot spots")."""
        flush = self._flush_no if self._memos else None
        infl = self.inflight
        if flush is not None and self._endgame_none == (flush, infl.version):
            return []  # nothing late anywhere, found earlier in this flush
        holders = [c for c in self.channels.values() if c.requests]
        if not holders or (len(holders) == 1 and holders[0] is ch):
            return []  # nothing is in flight elsewhere (one seeder: the last window)
        content = self.content
        n = content.n_chunks
        have = content.have
        moved = self.moved
        mine = ch.requests
        unordered = self._prune_unordered()
        cands: list[int] = []
        late_anywhere = False
        for i, h in enumerate(holders):
            earlier = holders[:i]
            limit = 1.5 * h.rtt
            ordered = h not in unordered
            for pos, t in h.requests.items():  # oldest first, unless re-asked
                if not now - t > limit:
                    if ordered:
                        break  # the rest of this channel's requests are younger
                    continue
                if earlier and any(pos in e.requests for e in earlier):
                    continue  # judged at the first channel that asked for it
                if (pos < n and moved.get(pos) != "endgame"
                        and not have.has(pos) and infl.has(pos)):
                    late_anywhere = True
                    if h is not ch and pos not in mine and ch.peer_have.has(pos):
                        cands.append(pos)
        if not late_anywhere and flush is not None:
            # no channel has a late request any other channel could take;
            # within one flush (one ``now``, no DATA in between) that only
            # changes when something is marked in flight (a new request is
            # never late): skip the search until then
            self._endgame_none = (flush, infl.version)
        if not cands:
            return []
        cands.sort()
        out = cands[:min(want, 32)]
        first = have.find_empty(0, n)
        if first is not None and out[-1] - first >= 256:
            last = _nth_missing(have, first, n, 255)  # the walk looked no further
            out = [c for c in out if last is None or c <= last]
        self._note_moved(out, "endgame")
        return out

    @property
    def _unordered(self) -> set[Channel]:
        """Channels whose ``requests`` may be out of request order (a chunk
        re-asked keeps its old slot); the end game reads all their requests.
        A channel leaves the set once its requests drain or it is dropped."""
        u: set[Channel] | None = self.__dict__.get("_unordered_set")
        if u is None:
            u = self.__dict__["_unordered_set"] = set()
        return u

    def _prune_unordered(self) -> set[Channel]:
        u = self._unordered
        if u:
            for c in [c for c in u if not c.requests
                      or self.channels.get(c.local_id) is not c]:
                u.discard(c)
        return u

    def _live_requests(self, ch: Channel, now: float) -> list:
        """Live: in order from the tune-in point up to what the peer offers (6.1.2.4)."""
        lc = self.live_content
        if lc is None or lc.is_source or not ch.peer_max:
            return []
        if self.live_start is None:
            top = self.content.tree.frontier  # end of the newest trusted munro
            if not top:
                return self._tune_in_probe(ch, now)
            # 6.1.2.4: tune in from the rightmost *signed* munro, not from
            # a HAVE, which anyone can send
            self.live_start = max(0, top - self.config.live_prebuffer)
        want = 64 - len(ch.requests)
        if want < 8:
            return []
        st = PickState(self.content.have, self.inflight, self.availability, ch.peer_max,
                       self.live_start, self.rng)
        lo = max(self.live_start, ch.peer_max - lc.window)
        picks = in_order(st, ch.peer_have, lo, ch.peer_max, want)
        out = []
        for c in picks:
            self.inflight.set(B.chunk(c))
            ch.requests[c] = now
            ch.req_seq[c] = ch.next_seq
            ch.next_seq += 1
        if picks:
            for s, t in self._specs(picks[0], picks[-1] + 1):
                out.append(C.Request(s, t))
            if len(ch.requests) == len(picks):
                ch.last_progress = now
        return out

    def _tune_in_probe(self, ch: Channel, now: float) -> list:
        """Before any munro is trusted, ask each peer for the newest chunk it
        announced: its DATA comes with the signed munro (or, Sign All, the
        chunk's signature) that fixes the tune-in point (6.1.2.4).  A peer
        whose HAVE was a lie never delivers and so never moves it."""
        c = ch.peer_max - 1
        if ch.requests or self.content.have.has(c):
            return []
        self.inflight.set(B.chunk(c))
        ch.requests[c] = now
        ch.req_seq[c] = ch.next_seq
        ch.next_seq += 1
        ch.last_progress = now
        return [C.Request(s, t) for s, t in self._specs(c, c + 1)]

    def _pex_msgs(self, ch: Channel, now: float) -> list:
        if not ch.pex_requested:
            return []
        ch.pex_requested = False
        cfg = self.config
        out: list = []
        private_ok = _is_private(str(ch.addr[0])) if isinstance(ch.addr, tuple) else True
        seen = {ch.addr}
        for c in self.channels.values():
            if c.addr in seen or c.state is not _EST or now - c.last_recv > 60 or not isinstance(c.addr, tuple):
                continue
            seen.add(c.addr)
            host, port = c.addr[0], c.addr[1]
            if _is_private(host) and not private_ok:
                continue  # 8.13: no private addresses to public peers
            try:
                v = ipaddress.ip_address(host)
            except ValueError:
                continue
            if cfg.pex_ca is not None:  # certified PEX only (8.13, 12.2.2)
                # never relay an expired certificate (None once notAfter passed)
                cert = self.certs.get(c.addr, now)
                if cfg.pex_ca_key is not None and (
                        cert is None or not self.certs.fresh(c.addr, now)):
                    # we are the CA: (re-)issue when < 10 % of the lifetime is left
                    from swift.core.pexcert import issue
                    cert = issue(cfg.pex_ca_key, self.swarm_id, host, port, now,
                                 cfg.pex_cert_lifetime)
                    self.certs.put(c.addr, cert, float(int(now)),
                                   float(int(now + cfg.pex_cert_lifetime)))
                if cert is not None:
                    out.append(C.PexResCert(cert))
                    if len(out) >= 8:
                        break
                continue
            out.append(C.PexResV4(host, port) if v.version == 4 else C.PexResV6(host, port))
            if len(out) >= 8:
                break
        return out

    # -- live tune-in (6.1.2.4) ---------------------------------------------------

    def _munro_push(self, ch: Channel, now: float, alone: bool = False) -> list:
        """Secure tune-in (6.1.2.4): with the Unified Merkle Tree our rightmost
        signed munro (INTEGRITY + SIGNED_INTEGRITY) goes in every datagram to
        ``ch`` from the third (initiator) or fourth (responder) on -- control
        and DATA datagrams alike -- until the peer's HAVE or ACK shows a
        chunk under the first munro we pushed or a later one; then this
        channel's tune-in is over (later munros go with the DATA under them,
        6.1.2.3).  ``alone``: the datagram would carry nothing else; then it
        is sent only as the first push or as a repeat after 1 s of silence,
        in case the datagrams that carried it were lost."""
        if ch.munro_done or not self.live or self.live_method != IntegrityMethod.UNIFIED_MERKLE:
            return []
        m = self.content.rightmost_munro()
        if m is None:
            return []
        lo, hi = B.base_range(m)
        first = lo if ch.pushed_munro is None else ch.pushed_munro[0]
        if ch.peer_max > first:
            ch.munro_done = True  # the peer knows this munro or a later one
            return []
        if alone and ch.pushed_munro is not None and now - ch.pushed_munro[1] < 1.0:
            return []
        ch.pushed_munro = (first, now)
        h, ts, sig = self.content.tree.signed[m]
        s, t = self._specs(lo, hi, clip=False)[0]
        return [C.Integrity(s, t, h), C.SignedIntegrity(s, t, ts, sig)]

    def _skip_stale(self, i: int) -> None:
        """Live: chunk ``i`` was stale.  Timestamps grow with the chunk index,
        so everything before it and before the oldest trusted munro is stale
        too: move the start past them and CANCEL what is still asked (3.8),
        so the sender does not spend its window on data we must discard."""
        tree = self.content.tree
        fresh = [B.base_range(m)[0] if tree.per_sig > 1 else m for m in tree.signed]
        start = max(i + 1, min((c for c in fresh if c > i), default=i + 1))
        self.live_start = max(self.live_start or 0, start)
        for ch in self.channels.values():
            old = [c for c in ch.requests if c < self.live_start]
            for c in old:
                del ch.requests[c]
                ch.req_seq.pop(c, None)
                self.inflight.reset(B.chunk(c))
            if old:
                ch.cancels.extend(chunk_runs(old))

    # -- PEX received (3.10, 8.13, 12.2) -------------------------------------------

    def _discovered(self, ch: Channel, addr: Any, now: float) -> None:
        self.events.append(ev.PeerDiscovered(addr))
        if self.config.pex_connect and addr not in self.blacklist and not any(
                c.addr == addr for c in self.channels.values()):
            if len(self.channels) < self.config.max_channels:
                self.connect(addr, now)

    def _on_cert(self, ch: Channel, der: bytes, now: float) -> None:
        """PEX_REScert (8.13, 12.2.1): check the membership certificate
        (CA signature, swarm, validity, SAN URI) before using its address;
        a sender of defective certificates gets the rest of its ignored
        ("check a few ... and discard the rest if they are defective")."""
        from swift.core.pexcert import CertError, CertExpired, check_cert
        if self.config.pex_ca is None or ch.bad_certs >= 2:
            self.stats["pex_cert_ignored"] = self.stats.get("pex_cert_ignored", 0) + 1
            return
        if self.certs.known(der, now) is not None:
            # a replay of a certificate we checked: no parse, no ECDSA verify
            self.stats["cert_cached"] = self.stats.get("cert_cached", 0) + 1
            return
        try:
            host, port, nb, na = check_cert(der, self.config.pex_ca, self.swarm_id, now)
        except CertExpired:
            # genuine but out of date: unusable, yet not the sender's defect
            self.stats["expired_cert"] = self.stats.get("expired_cert", 0) + 1
            return
        except CertError:
            ch.bad_certs += 1
            self.stats["bad_cert"] = self.stats.get("bad_cert", 0) + 1
            return
        self.stats["good_cert"] = self.stats.get("good_cert", 0) + 1
        addr = (host, port)
        self.certs.put(addr, der, nb, na)
        self._discovered(ch, addr, now)

    # -- deadlines and ranking (paper III-A, III-C) ------------------------------------

    def _deadlines(self, now: float) -> None:
        """Paper III-C: high-priority requests have a deadline (the playback
        time minus a safety margin); a request that misses it is cancelled and
        asked of another peer."""
        cfg = self.config
        p, cs = self.playpos, cfg.chunk_size
        h_end = p + cfg.high_window
        for ch in self.channels.values():
            late = [c for c, t in ch.requests.items()
                    if p <= c < h_end and (c - p) * cs / cfg.bitrate < cfg.deadline_margin
                    and now - t > max(0.2, 2 * ch.min_rtt)]
            for c in late:
                del ch.requests[c]
                ch.req_seq.pop(c, None)
            gone = self._no_longer_asked(ch, late)  # in flight still where asked again
            for c in late:
                ch.cancels.append((c, c + 1))
                ch.missed.add(c)
                ch.lost += 1
                self.stats["deadline_missed"] = self.stats.get("deadline_missed", 0) + 1
            self._note_moved(gone, "deadline")

    def _rank(self, now: float) -> None:
        """Fast peers by eq. 1 and eq. 2 (paper III-A), once a second."""
        self.next_rank = now + 0.5
        for ch in self.channels.values():
            t0, n0 = ch.rate_mark
            if now > t0:
                r = (ch.received - n0) / (now - t0)
                ch.rate = r if ch.rate == 0 else 0.5 * ch.rate + 0.5 * r
                if ch.received > n0:
                    # a sample that saw data ends the start-up window growth;
                    # the one taken right after connect never does
                    ch.rate_samples += 1
            ch.rate_mark = (now, ch.received)
        ranked = []
        for ch in self.established:
            if ch.received < 2 or ch.distrusted:
                continue
            # DIP: mean inter-arrival over the last rate sample (the EWMA of
            # single gaps underestimates it for bursty senders)
            dip = 1.0 / ch.rate if ch.rate > 0 else ch.dip
            r = expected_bandwidth(self.config.chunk_size, ch.min_rtt, dip, ch.loss_ratio, ch.k)
            ranked.append((r, ch.local_id))
        self._ranked = ranked
        self.fast = set(fast_set(ranked, self.config.bitrate, self.fast_factor))
