"""What to ask whom: the download side of :class:`swift.core.peer.Peer`.

:class:`RequestScheduler` owns the request state of one swarm: the picker,
the chunks in flight, why requests moved, the playback position and the
fast set (paper III-A eq. 1 and 2), request sizes (eq. 3), deadlines
(III-C), the end game, request timeouts and live tune-in requests
(RFC 7574 3.7, 6.1.2.4).  The per-channel request log (``Channel.down``:
:class:`~swift.core.channel.DownloadSide`) and path measurements
(``Channel.path``: :class:`~swift.core.channel.PathEstimate`) live on each
channel; the Peer owns the channels and hands them in, with the counters and
the chunk-specification function, through the constructor.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable
from typing import Protocol

from swift.core import bins as B
from swift.core.binmap import Binmap
from swift.core.channel import REQUEST_CHANGES, Channel
from swift.core.chanstate import ChannelState
from swift.core.config import PeerConfig
from swift.core.content import Content, ContentView
from swift.core.live import LiveContent
from swift.core.picker import (
    Availability,
    LinearPicker,
    PickState,
    expected_bandwidth,
    fast_set,
    in_order,
    make_picker,
    request_size,
)
from swift.wire import codec as C

_EST = ChannelState.EST


def chunk_runs(chunks: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted chunk indices -> contiguous ``[lo, hi)`` runs (for CANCEL)."""
    out: list[tuple[int, int]] = []
    for c in sorted(chunks):
        if out and out[-1][1] == c:
            out[-1] = (out[-1][0], c + 1)
        else:
            out.append((c, c + 1))
    return out


def _nth_missing(have: Binmap, first: int, n: int, k: int) -> int | None:
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


class Specs(Protocol):
    """Chunks ``[lo, hi)`` -> wire (start, end) pairs (``ChunkSpecs.specs``)."""

    def __call__(self, lo: int, hi: int, clip: bool = True) -> list[tuple[int, int]]: ...


class RequestScheduler:
    """What to REQUEST from whom, and when a request is given up."""

    #: memoise "nothing to pick" per channel (:meth:`_pick`) and "nothing
    #: late anywhere" per flush (:meth:`_endgame`); False: the reference
    _memos = True
    #: the end game's walk (:meth:`_late`) memoised across flushes at one
    #: instant while nothing it reads changed (no input to the Peer, no
    #: request, ``inflight`` and ``have`` the same); False: per flush (the
    #: tests' reference, docs/sim.md session 16)
    WALK_ACROSS = True

    def __init__(self, config: PeerConfig, content: Content | LiveContent | ContentView,
                 channels: dict[int, Channel], availability: Availability,
                 rng: random.Random, stats: dict[str, int], specs: Specs) -> None:
        self.config = cfg = config
        #: the content as the one kind it is (live or static)
        self.view = ContentView.of(content)
        self.content = self.view.content
        #: the Peer's channels (owned there; their request logs are read and
        #: updated here)
        self.channels = channels
        #: who announced what (owned by the Peer's HAVE/ACK path; read here)
        self.availability = availability
        #: the Peer's seeded RNG (channel IDs and the pickers share one stream)
        self.rng = rng
        #: the Peer's counters (owned there; this adds to them)
        self.stats = stats
        self._specs = specs
        self.picker = make_picker(cfg.picker, cfg.high_window, cfg.mid_window)
        if cfg.picker_twist and isinstance(self.picker, LinearPicker):
            self.picker.twist = None  # drawn from ``rng`` at the first pick
        #: chunks requested from some peer and not yet here
        self.inflight = Binmap()
        #: chunk -> why its request was last taken from a peer ("lost",
        #: "stale", "timeout", "endgame", "deadline"; bounded): a copy that
        #: still arrives counts as ``stats["dup_<why>"]``
        self.moved: dict[int, str] = {}
        self.playpos = 0
        #: start-up / rebuffering: no fast-peer restriction (paper IV-A)
        self.buffering = True
        self.fast: set[int] = set()
        #: x of eq. 2 (paper III-A); grows with stalls (:meth:`note_stall`),
        #: shrinks back with stall-free playback (:meth:`set_playpos`)
        self.fast_factor = cfg.fast_factor
        #: playback left its start-up buffer once: buffering again is a stall
        self._played = False
        #: playback position at the last change of x (stall-free playback
        #: is counted from there)
        self._x_mark = 0
        #: eq. 1 values of the last ranking, (R_i, channel): a change of x
        #: re-applies eq. 2 at once
        self._ranked: list[tuple[float, int]] = []
        self.next_rank = 0.0
        #: live: the first chunk we want (the tune-in point, 6.1.2.4)
        self.live_start: int | None = None
        #: push mode (``PeerConfig.push``): channel -> when its last unasked
        #: DATA came (it pushes to us)
        self.pushed_at: dict[int, float] = {}
        #: every chunk is here: nothing more is asked of anyone
        self.complete = self.content.complete
        #: the latest time the driver passed in (``no_longer_asked``)
        self.last_now = 0.0
        #: channel -> (have, inflight, peer_have versions, n) at which the
        #: picker last found nothing for it
        self._nothing_to_pick: dict[int, tuple[int, int, int, int]] = {}
        #: the flush (``Peer.datagrams_to_send`` call) under way (:meth:`new_flush`);
        #: (flush, inflight version) at which :meth:`_endgame` found no late
        #: request anywhere
        self._flush_no: int | None = None
        self._endgame_none: tuple[int, int] | None = None
        #: channels whose ``requests`` may be out of request order (see :meth:`_unordered`)
        self._unordered_set: set[Channel] = set()
        #: the end game's walk (:meth:`_late`) for (flush, ``inflight.version``,
        #: now): every channel's visit in a flush reads it, not a walk each
        self._late_key: tuple[int, int, float] | None = None
        #: and for (inputs, request changes, ``inflight.version``,
        #: ``have.version``, now): everything the walk reads, so a later
        #: flush at the same instant with none of it changed reads it too
        self._late_state: tuple[int, int, int, int, float] | None = None
        #: bumped by the Peer on every input (a datagram, a timer, a channel
        #: opened or closed): what the walk reads besides requests, ``inflight``
        #: and ``have`` (round-trip times, the channels) changes only then
        self.inputs = 0
        self._late_list: list[tuple[int, Channel]] = []
        #: (channel, chunk, request time) of late requests no other peer
        #: could take, left where they are (:meth:`_forwardable`; bounded)
        self._late_kept: set[tuple[int, int, float]] = set()
        #: ``inflight.version`` after the chunks this object marked in flight
        #: itself; any other change may have freed chunks (:meth:`freed`)
        self._infl_seen = self.inflight.version
        #: eq. 3 limited a channel's requests since the Peer last cleared this
        #: (then visited every channel): once the limit lifts, any may ask more
        self.eq3_limited = False

    def new_flush(self) -> None:
        """A new ``datagrams_to_send`` call: the end game's memo is per flush."""
        self._flush_no = (self._flush_no or 0) + 1

    def freed(self) -> bool:
        """True when ``inflight`` changed other than by chunks this object
        marked in flight since the last call (a request given back, DATA
        that failed, a test): a channel whose picker found nothing may find
        something now.  Resynchronises, so each change is reported once."""
        v = self.inflight.version
        if v == self._infl_seen:
            return False
        self._infl_seen = v
        return True

    def nothing_late(self, now: float) -> bool:
        """True when no channel has a late request that another channel could
        take over (the end game's "nothing late anywhere", memoised for this
        flush and ``inflight`` version as :meth:`_endgame` does): then a
        channel whose picker found nothing sends no request."""
        if self._endgame_none == (self._flush_no, self.inflight.version):
            return True
        n = self.content.n_chunks
        holders = [c for c in self.channels.values() if c.down.slot]
        return n is None or not holders or not self._late(None, n, now, holders)[0]

    def late_takers(self, chans: list[Channel]) -> list[Channel]:
        """Those of ``chans`` that could take over a late request (the end
        game's candidates for them are not empty), by the walk
        :meth:`nothing_late` made for this flush: an idle channel that
        cannot sends nothing however late the requests elsewhere are."""
        moved = self.moved
        late = [(pos, h) for pos, h in self._late_list if moved.get(pos) != "endgame"]
        return [c for c in chans if any(h is not c and pos not in c.down.slot
                                        and c.remote.have.has(pos) for pos, h in late)]

    def forget(self, ch: Channel) -> None:
        """``ch`` closed: its requests leave ``inflight`` (unless asked
        elsewhere) and what this holds for it goes."""
        self.no_longer_asked(ch, ch.down.chunks())
        ch.down.clear()
        self.fast.discard(ch.local_id)
        self.pushed_at.pop(ch.local_id, None)
        self._nothing_to_pick.pop(ch.local_id, None)

    def download_complete(self) -> None:
        """Every chunk verified: stop asking anyone."""
        self.complete = True
        for c in self.channels.values():
            self.release(c, lost=False)

    @property
    def established(self) -> list[Channel]:
        return [c for c in self.channels.values() if c.state is _EST]

    def set_playpos(self, chunk: int, buffering: bool | None = None) -> None:
        """Playback position for the VoD pickers (paper III-C); ``buffering``
        tells whether the player is filling its buffer (then every peer, not
        only the fast set, is asked for the high-priority window).

        The player's state drives x of eq. 2 (paper III-A: "a dynamic factor
        that varies based on the experienced playback behaviour, e.g., the
        number of playback stalls"): buffering again after playback started
        is a stall (:meth:`note_stall`); ``fast_relax_s`` seconds of video
        played since x last changed take one step back."""
        self.picker.attach_reader()  # a playback position means an in-order reader
        self.playpos = max(0, chunk)
        if buffering is None:
            return
        if buffering and not self.buffering and self._played:
            self.note_stall()
        self.buffering = buffering
        if buffering:
            return
        if not self._played:
            self._played = True
            self._x_mark = self.playpos
        cfg = self.config
        if self.fast_factor > cfg.fast_factor:
            relax = max(1, int(cfg.fast_relax_s * cfg.bitrate / cfg.chunk_size))
            if self.playpos - self._x_mark >= relax:
                self.fast_factor = max(cfg.fast_factor, self.fast_factor - cfg.fast_factor_step)
                self._x_mark = self.playpos
                self._apply_fast_factor()

    def note_stall(self) -> None:
        """A player stall makes the fast set larger: x of eq. 2 grows by
        ``fast_factor_step`` up to ``fast_factor_max``, and the fast set is
        chosen again from the last ranking at once (not at the next one)."""
        cfg = self.config  # this peer's own x, not the (maybe shared) config
        self.fast_factor = min(cfg.fast_factor_max, self.fast_factor + cfg.fast_factor_step)
        self.stats["fast_widened"] = self.stats.get("fast_widened", 0) + 1
        self._x_mark = self.playpos
        self._apply_fast_factor()

    def _apply_fast_factor(self) -> None:
        """Eq. 2 over the last eq. 1 values with the current x."""
        if self._ranked:
            self.fast = set(fast_set(self._ranked, self.config.bitrate, self.fast_factor))

    def no_longer_asked(self, ch: Channel, chunks: Collection[int]) -> list[int]:
        """``ch`` no longer asks for ``chunks`` (stale, timed out, past its
        deadline, channel closed): each leaves ``inflight`` unless another
        channel asks for it too (re-asked there by the end game or after a
        missed deadline) and that request is not late itself, so the picker
        does not hand it to a third peer.  Returns the chunks that left."""
        if not chunks:
            return []  # (called per channel by every timer: no scan for nothing)
        others = [(o.down, 1.5 * o.path.rtt) for o in self.channels.values()
                  if o is not ch and o.down.slot]
        now = self.last_now
        out: list[int] = []
        for c in chunks:
            # only a request there that is not late itself (the end game's
            # rule: 1.5 x that channel's request->DATA time) keeps it
            if not any((k := d.slot.get(c)) is not None and now - d.sent[k] <= lim
                       for d, lim in others):
                self.inflight.discard(c)
                out.append(c)
        return out

    def note_moved(self, chunks: Iterable[int], why: str) -> None:
        """Remember why the requests for ``chunks`` left a peer (see ``moved``)."""
        m = self.moved
        if len(m) > 1 << 16:
            m.clear()
        for c in chunks:
            m[c] = why

    def release(self, ch: Channel, lost: bool) -> None:
        self.no_longer_asked(ch, ch.down.chunks())
        if lost:
            ch.path.lost += len(ch.down.slot)
        ch.down.clear()

    def request_timeouts(self, ch: Channel, now: float) -> None:
        """The housekeeping tick for ``ch``'s requests: lost single requests
        and a channel that stopped making progress give their chunks back."""
        cfg = self.config
        # single requests far older than the smoothed request->DATA time
        # were lost even if others keep arriving: re-pick them
        down = ch.down
        if down.slot:
            limit = now - max(4 * ch.path.rtt, cfg.request_timeout)
            stale = []
            # insertion order is oldest first, unless a chunk was asked
            # again on this channel (a newer time in its old slot): then
            # every request is looked at, not only up to the first young one
            unordered = ch in self._prune_unordered()
            chunk, sent = down.chunk, down.sent
            for k in range(down.ends[0], down.ends[1]):
                c = chunk[k]
                if c < 0:
                    continue  # a free slot
                if sent[k] >= limit:
                    if unordered:
                        continue
                    break
                stale.append(c)
            if stale and len(stale) < len(down.slot):
                for c in stale:
                    ch.down.drop(c)
                ch.path.lost += len(stale)
                ch.down.cancels.extend(chunk_runs(stale))
                # one asked again elsewhere (end game, deadline) stays in
                # flight there, and keeps why it moved
                self.note_moved(self.no_longer_asked(ch, stale), "stale")
        # requests: no progress for a while -> give them back, CANCEL, re-pick
        tmo = max(cfg.request_timeout, 3 * ch.path.rtt)
        if down.slot and now - down.last_progress > tmo:
            self.stats["timeouts"] += 1
            asked = down.chunks()
            down.cancels.extend(chunk_runs(asked))  # exactly what we drop
            self.note_moved(asked, "timeout")
            self.release(ch, lost=True)
            ch.down.last_progress = now

    def request_msgs(self, ch: Channel, now: float) -> list[C.Message]:
        if (self._endgame_none is not None and self._endgame_none[0] == self._flush_no
                and self._idle(ch)):
            return []
        cfg = self.config
        content = self.content
        if ch.down.choked or self.complete or cfg.tracker:
            return []
        if ch.verify.distrusted and ch.down.slot:
            return []  # probation: one request at a time until max_bad_chunks
        n = content.n_chunks
        if cfg.push and not self.view.is_live and self._awaits_push(ch, n, now):
            return []
        if self.view.is_live:
            return self._live_requests(ch, now)
        if n is None:
            # size unknown: ask one peer for chunk 0 to get the peaks (5.6.2)
            if ch.remote.have.find_filled(0, 1) is None or any(
                    c.down.slot for c in self.channels.values()):
                return []
            # the peer with the fewest failed requests (a silent one is skipped)
            cands = [c for c in self.channels.values()
                     if c.state is _EST and not c.down.choked and c.remote.have.has(0)]
            if min(cands, key=lambda c: (c.path.lost, c.local_id)) is not ch:
                return []
            ch.down.ask(0, now)
            self.inflight.set(0)
            return [C.Request(s, t) for s, t in self._specs(0, 1)]
        # outstanding requests: what the peer delivers in max(0.5 s, 4 RTT)
        window = ch.path.window(cfg.max_outstanding)
        if ch.verify.distrusted:
            window = 1
        want = window - len(ch.down.slot)
        if want < max(1, min(16, window // 4)):
            return []
        wins = self.picker.windows
        if wins is not None and self.eq3_limits():
            # eq. 3: while the high-priority window is open, ask at most
            # min(W_ledbat / 2, H / F) chunks at a time (W: this peer's window)
            want = min(want, request_size(window, wins.high, max(1, len(self.fast))))
            self.eq3_limited = True
        picks = self._pick(ch, n, want)
        if ch.down.missed:
            # a chunk this peer was too late for goes to another peer that
            # has it (III-C) and was not too late for it itself; with none,
            # it is asked here again, or nothing would ever ask for it (the
            # end game only takes chunks in flight; two peers that had both
            # missed it left it to each other for good: session 14)
            keep = []
            for c in picks:
                if c not in ch.down.missed:
                    keep.append(c)
                elif self._holder_for(c, ch):
                    self.inflight.reset(B.chunk(c))  # leave it to another peer
                else:
                    ch.down.missed.discard(c)
                    keep.append(c)
            picks = keep
            if len(ch.down.missed) > 4096:
                ch.down.missed.clear()
        if not picks:
            picks = self._endgame(ch, want, now)
            if not picks:
                return []
        picks.sort()
        out: list[C.Message] = []
        lo = picks[0]
        hi = lo + 1
        for c in picks[1:] + [-1]:
            if c == hi:
                hi += 1
                continue
            for s, t in self._specs(lo, hi):
                out.append(C.Request(s, t))
            lo, hi = c, c + 1
        if ch.down.ask_all(picks, now):
            # re-asked: its slot keeps its place with a newer time, so
            # this channel's requests may be out of request order now
            self._unordered.add(ch)
        ch.down.last_progress = min(ch.down.last_progress, now) if ch.down.slot else now
        return out

    def eq3_limits(self) -> bool:
        """Whether eq. 3 limits the requests of a pick now: the paper's vod
        picker (``fast_only_high``) while its high-priority window from the
        playback position holds a chunk we lack."""
        wins = self.picker.windows
        n = self.content.n_chunks
        if wins is None or not wins.fast_only_high or not wins.high or n is None:
            return False
        return not self.content.have.is_filled_range(self.playpos,
                                                     min(n, self.playpos + wins.high))

    def _pick(self, ch: Channel, n: int, want: int) -> list[int]:
        """Up to ``want`` chunks from the picker for ``ch``, marked in flight.

        Memoised (docs/sim.md, "Hot spots" 2): a built-in picker finds
        nothing exactly when no chunk below ``n`` is missing, not in flight
        and offered by the peer (:attr:`Picker.empty_means_none_wanted`),
        a fact of three binmaps alone; so once it found nothing, the channel
        is skipped until one of them changes (their version counters).
        ``_memos = False`` runs the picker every time (the tests'
        reference)."""
        have, infl, ph = self.content.have, self.inflight, ch.remote.have
        memo = self._nothing_to_pick
        memo_on = self._memos and self.picker.empty_means_none_wanted
        if memo_on and memo.get(ch.local_id) == (have.version, infl.version, ph.version, n):
            return []
        chans = self.channels
        # the fast peers' availability (only asked "does any have it"): from
        # the fast set, not a scan of every channel per pick
        st = PickState(have, infl, self.availability, n, self.playpos, self.rng,
                       [f.remote.have for i in self.fast
                        if (f := chans.get(i)) is not None and f is not ch])
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
            synced = infl.version == self._infl_seen
            lo = prev = got[0]  # mark in flight run by run, not chunk by chunk
            for c in got[1:] + [-1]:
                if c != prev + 1:
                    infl.set_range(lo, prev + 1)
                    lo = c
                prev = c
            if synced:  # only added: nothing was freed (:meth:`freed`)
                self._infl_seen = infl.version
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
                self.content.have.version, self.inflight.version, ch.remote.have.version,
                self.content.n_chunks):
            return False
        if ch.down.choked or self.complete or self.config.tracker or (
                ch.verify.distrusted and ch.down.slot) or self.config.push or self.view.is_live:
            return False  # an earlier return of _request_msgs (or its push rule) decides
        if len(ch.down.missed) > 4096:
            ch.down.missed.clear()
        return True

    def _awaits_push(self, ch: Channel, n: int | None, now: float) -> bool:
        """Push mode: True while ``ch``'s peer holds the whole content (or,
        size unknown, chunk 0) and pushes: its DATA came within
        ``push_fallback`` seconds (or the channel is that young).  After
        that, what the push lost is asked for as in pull mode."""
        ph = ch.remote.have
        if not (ph.is_filled_range(0, n) if n is not None else ph.has(0)):
            return False  # a leecher: leechers pull from each other
        last = self.pushed_at.get(ch.local_id, ch.hs.opened_at)
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
        holders = [c for c in self.channels.values() if c.down.slot]
        if not holders or (len(holders) == 1 and holders[0] is ch):
            return []  # nothing is in flight elsewhere (one seeder: the last window)
        content = self.content
        n = content.n_chunks
        if n is None:
            return []  # the size is known before anything is asked of two peers
        _, cands = self._late(ch, n, now, holders)
        have = content.have
        if not cands:
            return []
        cands.sort()
        out = cands[:min(want, 32)]
        first = have.find_empty(0, n)
        if first is not None and out[-1] - first >= 256:
            last = _nth_missing(have, first, n, 255)  # the walk looked no further
            out = [c for c in out if last is None or c <= last]
        self.note_moved(out, "endgame")
        return out

    def _late(self, ch: Channel | None, n: int, now: float,
              holders: list[Channel]) -> tuple[bool, list[int]]:
        """The end game's walk over the channels with requests (``holders``,
        in channel order): whether any has a late request below ``n`` that
        another channel could take, and which of them ``ch`` could take
        (none for ``ch`` None).  Memoises "nothing late anywhere" for this
        flush and ``inflight`` version."""
        flush = self._flush_no if self._memos else None
        infl = self.inflight
        key = None if flush is None else (flush, infl.version, now)
        if key is None:
            late = self._walk_late(n, now, holders)
        elif key == self._late_key:
            late = self._late_list
        else:
            state = (self.inputs, REQUEST_CHANGES.n, infl.version,
                     self.content.have.version, now)
            if not (self.WALK_ACROSS and state == self._late_state):
                self._late_list = self._walk_late(n, now, holders)
                self._late_state = state
            # (a walk now would find the same: nothing it reads changed)
            self._late_key = key
            late = self._late_list
        moved = self.moved
        mine = ch.down.slot if ch is not None else {}
        cands: list[int] = []
        late_anywhere = False
        for pos, h in late:
            if moved.get(pos) == "endgame":
                continue  # asked again once already (this flush, maybe)
            late_anywhere = True
            if ch is not None and h is not ch and pos not in mine and ch.remote.have.has(pos):
                cands.append(pos)
        if not late_anywhere and flush is not None:
            # no channel has a late request any other channel could take;
            # within one flush (one ``now``, no DATA in between) that only
            # changes when something is marked in flight (a new request is
            # never late): skip the search until then
            self._endgame_none = (flush, infl.version)
        return late_anywhere, cands

    def _walk_late(self, n: int, now: float,
                   holders: list[Channel]) -> list[tuple[int, Channel]]:
        """(chunk, channel) for each request that is late where it was asked
        (outstanding for more than 1.5 x that channel's request->DATA time)
        for a chunk below ``n`` we lack and hold in flight, judged at the
        first channel (in channel order) that asked for it.  Within one
        flush this changes only with ``inflight`` (the end game's own
        requests are marked "endgame" in ``moved``, which the caller checks):
        each channel's requests are in request order (but for a re-asked
        chunk, see ``_unordered``), so the late ones are a prefix."""
        have = self.content.have
        infl = self.inflight
        unordered = self._prune_unordered()
        out: list[tuple[int, Channel]] = []
        for i, h in enumerate(holders):
            earlier = holders[:i]
            limit = 1.5 * h.path.rtt
            ordered = h not in unordered
            d = h.down
            chunk, sent = d.chunk, d.sent
            for k in range(d.ends[0], d.ends[1]):  # oldest first, unless re-asked
                pos = chunk[k]
                if pos < 0:
                    continue  # a free slot
                if not now - sent[k] > limit:
                    if ordered:
                        break  # the rest of this channel's requests are younger
                    continue
                if earlier and any(pos in e.down.slot for e in earlier):
                    continue  # judged at the first channel that asked for it
                if pos < n and not have.has(pos) and infl.has(pos):
                    out.append((pos, h))
        return out

    @property
    def _unordered(self) -> set[Channel]:
        """Channels whose ``requests`` may be out of request order (a chunk
        re-asked keeps its old slot); the end game reads all their requests.
        A channel leaves the set once its requests drain or it is dropped."""
        return self._unordered_set

    def _prune_unordered(self) -> set[Channel]:
        u = self._unordered
        if u:
            for c in [c for c in u if not c.down.slot
                      or self.channels.get(c.local_id) is not c]:
                u.discard(c)
        return u

    def _live_requests(self, ch: Channel, now: float) -> list[C.Message]:
        """Live: in order from the tune-in point up to what the peer offers (6.1.2.4)."""
        lc = self.view.live
        if lc is None or lc.is_source or not ch.remote.top:
            return []
        if self.live_start is None:
            top = lc.tree.frontier  # end of the newest trusted munro
            if not top:
                return self._tune_in_probe(ch, now)
            # 6.1.2.4: tune in from the rightmost *signed* munro, not from
            # a HAVE, which anyone can send
            self.live_start = max(0, top - self.config.live_prebuffer)
        want = 64 - len(ch.down.slot)
        if want < 8:
            return []
        st = PickState(self.content.have, self.inflight, self.availability, ch.remote.top,
                       self.live_start, self.rng)
        lo = max(self.live_start, ch.remote.top - lc.window)
        picks = in_order(st, ch.remote.have, lo, ch.remote.top, want)
        out: list[C.Message] = []
        for c in picks:
            self.inflight.set(B.chunk(c))
            ch.down.ask(c, now)
        if picks:
            for s, t in self._specs(picks[0], picks[-1] + 1):
                out.append(C.Request(s, t))
            if len(ch.down.slot) == len(picks):
                ch.down.last_progress = now
        return out

    def _tune_in_probe(self, ch: Channel, now: float) -> list[C.Message]:
        """Before any munro is trusted, ask each peer for the newest chunk it
        announced: its DATA comes with the signed munro (or, Sign All, the
        chunk's signature) that fixes the tune-in point (6.1.2.4).  A peer
        whose HAVE was a lie never delivers and so never moves it."""
        c = ch.remote.top - 1
        if ch.down.slot or self.content.have.has(c):
            return []
        self.inflight.set(B.chunk(c))
        ch.down.ask(c, now)
        ch.down.last_progress = now
        return [C.Request(s, t) for s, t in self._specs(c, c + 1)]

    def skip_stale(self, i: int) -> None:
        """Live: chunk ``i`` was stale.  Timestamps grow with the chunk index,
        so everything before it and before the oldest trusted munro is stale
        too: move the start past them and CANCEL what is still asked (3.8),
        so the sender does not spend its window on data we must discard."""
        lc = self.view.live
        if lc is None:
            return
        tree = lc.tree
        fresh = [B.base_range(m)[0] if tree.per_sig > 1 else m for m in tree.signed]
        start = max(i + 1, min((c for c in fresh if c > i), default=i + 1))
        self.live_start = max(self.live_start or 0, start)
        for ch in self.channels.values():
            old = [c for c in ch.down.chunks() if c < self.live_start]
            for c in old:
                ch.down.drop(c)
                self.inflight.reset(B.chunk(c))
            if old:
                ch.down.cancels.extend(chunk_runs(old))

    def deadlines(self, now: float) -> None:
        """Paper III-C: high-priority requests have a deadline (the playback
        time minus a safety margin); a request that misses it is cancelled and
        asked of another peer."""
        cfg = self.config
        p, cs = self.playpos, cfg.chunk_size
        h_end = p + cfg.high_window
        for ch in self.channels.values():
            late = [c for c, t in ch.down.items()
                    if p <= c < h_end and (c - p) * cs / cfg.bitrate < cfg.deadline_margin
                    and now - t > max(0.2, 2 * ch.path.min_rtt)]
            if late:
                late = self._forwardable(ch, late)
            for c in late:
                ch.down.drop(c)
            gone = self.no_longer_asked(ch, late)  # in flight still where asked again
            for c in late:
                ch.down.cancels.append((c, c + 1))
                ch.down.missed.add(c)
                ch.path.lost += 1
                self.stats["deadline_missed"] = self.stats.get("deadline_missed", 0) + 1
            self.note_moved(gone, "deadline")

    def _holder_for(self, c: int, ch: Channel) -> bool:
        """Whether a peer other than ``ch``'s, on an established channel that
        does not choke us, holds chunk ``c`` and has not missed its deadline
        for it: a request ``ch`` was too late for can go there."""
        return any(o is not ch and o.state is _EST and not o.down.choked
                   and c not in o.down.missed and o.remote.have.has(c)
                   for o in self.channels.values())

    def _forwardable(self, ch: Channel, late: list[int]) -> list[int]:
        """Those of ``late`` (requests on ``ch`` past their deadline) that
        another peer could take (:meth:`_holder_for`): the paper forwards a late request "to a
        different peer" (III-C).  One that no other peer holds stays asked
        where it is (counted once as missed): a CANCEL and a new REQUEST to
        the same peer only moved it to the back of that peer's queue, again
        every 0.2 s while playback ran into it (docs/sim-fig6.md, session
        14)."""
        out: list[int] = []
        kept = self._late_kept
        if len(kept) > 4096:
            kept.clear()
        for c in late:
            if self._holder_for(c, ch):
                out.append(c)
                continue
            key = (ch.local_id, c, ch.down.sent[ch.down.slot[c]])
            if key not in kept:  # this request, once
                kept.add(key)
                self.stats["deadline_missed"] = self.stats.get("deadline_missed", 0) + 1
                self.stats["deadline_kept"] = self.stats.get("deadline_kept", 0) + 1
        return out

    def rank(self, now: float) -> None:
        """Fast peers by eq. 1 and eq. 2 (paper III-A), once a second."""
        self.next_rank = now + 0.5
        for ch in self.channels.values():
            ch.path.sample_rate(now)
        ranked = []
        for ch in self.established:
            path = ch.path
            if path.received < 2 or ch.verify.distrusted:
                continue
            # DIP: mean inter-arrival over the last rate sample (the EWMA of
            # single gaps underestimates it for bursty senders)
            dip = 1.0 / path.rate if path.rate > 0 else path.dip
            r = expected_bandwidth(self.config.chunk_size, path.min_rtt, dip, path.loss_ratio,
                                   path.k)
            ranked.append((r, ch.local_id))
        self._ranked = ranked
        self.fast = set(fast_set(ranked, self.config.bitrate, self.fast_factor))
