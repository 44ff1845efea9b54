"""Chunk pickers (RFC 7574 section 9.1) and the paper's download algorithm.

* ``linear``: in order from the playback position (paper IV-A baseline);
  each block of 256 chunks rotated by a per-peer twist while no in-order
  consumer is attached.
* ``rarest``: rarest first over the whole content.
* ``std-vod``: high-priority window in order, mid and low sets rarest first,
  requests to any peer (paper IV-A baseline).
* ``vod``: the paper's algorithm (III-C): like std-vod, but the high-priority
  window is requested only from the *fast peers* chosen by eq. 1-2.

Availability (paper III-C): a tree with the shape of a fully expanded binmap
holding per-bin counters; a HAVE for bin ``b`` adds 1 at ``b`` only, so the
number of neighbours holding chunk ``i`` is the sum of the counters on the
path from leaf ``2i`` to the root.  Updates are O(log N) per HAVE bin.
Rarest-first draws up to ``SAMPLE`` candidate chunks (wanted, offered by the
peer, not in flight) from a random start in the set and takes the least
replicated one.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from swift._fast import next_wanted as _next_wanted
from swift.core import bins as B
from swift.core.binmap import Binmap

T = TypeVar("T")


class Availability:
    """Per-bin counters of how many neighbours announced each range."""

    def __init__(self) -> None:
        self.tags: dict[int, int] = {}
        #: one above the highest layer ever tagged: ``count`` stops there
        self.top = 1

    def add_bin(self, b: int, delta: int = 1) -> None:
        """Count one more (or less) neighbour holding bin ``b``."""
        lay = B.layer(b) + 1
        if lay > self.top:
            self.top = lay
        v = self.tags.get(b, 0) + delta
        if v:
            self.tags[b] = v
        else:
            self.tags.pop(b, None)

    def add_range(self, lo: int, hi: int, delta: int = 1) -> None:
        """Same for chunks ``[lo, hi)``."""
        if lo < hi:
            for b in B.from_range(lo, hi - 1):
                self.add_bin(b, delta)

    def count(self, chunk: int, top_layer: int = 40) -> int:
        """Neighbours known to hold ``chunk``."""
        tags = self.tags
        if not tags:
            return 0
        get = tags.get
        n = get(chunk << 1, 0)
        for lay in range(1, min(top_layer, self.top)):
            # B.make(lay, chunk >> lay), inlined: this runs for every candidate
            n += get(((chunk >> lay) << (lay + 1)) | ((1 << lay) - 1), 0)
        return n


@dataclass
class PickState:
    """What a picker may read (owned by the Peer)."""

    have: Binmap
    inflight: Binmap
    availability: Availability
    n_chunks: int
    #: playback position in chunks (VoD)
    playpos: int = 0
    rng: random.Random = field(default_factory=random.Random)
    #: availability of the current fast peers (paper III-A), for the VoD picker
    fast_haves: list[Binmap] = field(default_factory=list)


def next_wanted(st: PickState, peer: Binmap, pos: int, hi: int) -> int | None:
    """First chunk in ``[pos, hi)`` we lack, not in flight, that ``peer`` has
    (one C call, ``picker_next_wanted``; twin ``swift._fast.py_next_wanted``)."""
    c = _next_wanted(st.have, st.inflight, peer, pos, hi)
    return None if c < 0 else c


def in_order(st: PickState, peer: Binmap, lo: int, hi: int, want: int) -> list[int]:
    """Up to ``want`` wanted chunks from ``lo`` upward."""
    out: list[int] = []
    pos = lo
    while len(out) < want:
        c = next_wanted(st, peer, pos, hi)
        if c is None:
            break
        # extend to the whole run that is wanted, free and offered
        e = min(hi, c + want - len(out))
        for x in (st.have.find_filled(c, e), st.inflight.find_filled(c, e), peer.find_empty(c, e)):
            if x is not None and x < e:
                e = x
        out.extend(range(c, e))
        pos = e
    return out


SAMPLE = 32


def rarest(st: PickState, peer: Binmap, lo: int, hi: int, want: int) -> list[int]:
    """Up to ``want`` of the least replicated wanted chunks in ``[lo, hi)``.

    Picks one rare chunk and extends it with its in-order successors so that
    requests stay contiguous ranges (one REQUEST message, section 3.7).
    """
    if lo >= hi or want <= 0 or next_wanted(st, peer, lo, hi) is None:
        return []  # nothing there: no random draw either (requests.py memoises this)
    start = st.rng.randrange(lo, hi)
    cands: list[int] = []
    for a, b in ((start, hi), (lo, start)):
        pos = a
        while len(cands) < SAMPLE:
            c = next_wanted(st, peer, pos, b)
            if c is None:
                break
            cands.append(c)
            pos = c + 1 + st.rng.randrange(0, 4)
    if not cands:
        return []
    best = min(cands, key=lambda c: (st.availability.count(c), st.rng.random()))
    out = [best]
    c = best + 1
    while len(out) < want and c < hi and next_wanted(st, peer, c, c + 1) == c:
        out.append(c)
        c += 1
    return out


@dataclass(frozen=True, slots=True)
class Windows:
    """A VoD picker's priority windows (paper III-C), in chunks from the
    playback position."""

    #: the high-priority window: in order, with deadlines
    high: int
    #: the mid-priority window after it: rarest first
    mid: int
    #: only fast peers (eq. 2) are asked for the high window (the paper's
    #: algorithm); False: anyone (std-vod)
    fast_only_high: bool


class Picker(ABC):
    """What a download picker offers the Peer (the one interface; pickers are
    registered by name in :data:`PICKERS`, as aioquic's congestion controls).

    ``pick`` returns chunk indices to request from one peer.  A picker with
    a playback window says so in :attr:`windows`: the Peer then sizes its
    requests by eq. 3 while the high window is open and gives high-priority
    requests deadlines (paper III-C)."""

    name = "base"
    #: ``pick`` returns nothing exactly when no chunk below ``n_chunks`` is
    #: missing from ``have``, not in ``inflight`` and in ``peer`` (whatever
    #: the playback position, fast set or ``want``), and then draws nothing
    #: from ``rng``: the caller may skip it until one of those binmaps
    #: changes.  True for the built-in pickers (each covers ``[0, n)``).
    empty_means_none_wanted = False
    #: the VoD priority windows; None: the picker has no playback window
    windows: Windows | None = None

    @abstractmethod
    def pick(self, st: PickState, peer: Binmap, want: int, fast: bool) -> list[int]:
        """Up to ``want`` chunks to request from the peer holding ``peer``;
        ``fast``: that peer is in the fast set (or every peer is asked)."""

    def attach_reader(self) -> None:
        """An in-order consumer reads the content from the playback position
        (the HTTP gateway, ``InOrderReader``, a player): from now on the
        picker keeps position order, even at position 0.  The built-in
        pickers other than ``linear`` always do."""
        return None


#: chunks per block of the linear picker's twist (:class:`LinearPicker`)
TWIST_BLOCK = 256


def twisted(st: PickState, peer: Binmap, lo: int, hi: int, want: int, twist: int,
            keep: int) -> list[int]:
    """Up to ``want`` wanted chunks of ``[lo, hi)``, in order block by block
    (aligned blocks of :data:`TWIST_BLOCK` chunks), each block rotated to start
    at ``twist`` modulo its length; chunks below ``keep`` stay in plain order."""
    out: list[int] = []
    pos = lo
    while len(out) < want:
        c = next_wanted(st, peer, pos, hi)
        if c is None:
            break
        b = c - c % TWIST_BLOCK
        e = min(hi, b + TWIST_BLOCK)
        if c < keep:  # the playback position's block: no twist before it
            part = in_order(st, peer, c, min(e, keep), want - len(out))
        else:
            mid = max(c, b + twist % (e - b))
            part = in_order(st, peer, mid, e, want - len(out))
            if len(out) + len(part) < want:
                part += in_order(st, peer, c, mid, want - len(out) - len(part))
        out.extend(part)
        pos = min(e, keep) if c < keep else e
    return out


class LinearPicker(Picker):
    """In order from the playback position, then from the start.

    With ``twist`` (``PeerConfig.picker_twist``, on by default; the idea of
    libswift's sequential picker): each aligned block of :data:`TWIST_BLOCK`
    chunks is taken from a per-peer offset and then wraps, so a flash crowd's
    leechers, all starting together, ask the seeder for different chunks and
    have something to give one another, even when nothing is lost
    (docs/ledbat.md, "The default TARGET").  Order across blocks stays
    linear, and a player's block (playback position > 0) is taken in plain
    order from it.

    The twist applies only while no in-order consumer is attached
    (:meth:`attach_reader`): a reader playing from position 0 waits for the
    first chunks in order, which the twist would fetch last in their block
    (docs/ledbat.md, "What the twist costs an in-order consumer")."""

    name = "linear"
    empty_means_none_wanted = True

    def __init__(self, twist: bool = False) -> None:
        #: this peer's offset in each block: 0 without the twist; with it, drawn
        #: at the first pick that finds something (an empty pick draws nothing
        #: from ``rng``)
        self.twist: int | None = None if twist else 0
        #: an in-order consumer is attached (:meth:`attach_reader`): plain order
        self.reader = False

    def attach_reader(self) -> None:
        self.reader = True

    def pick(self, st: PickState, peer: Binmap, want: int, fast: bool) -> list[int]:
        n, p = st.n_chunks, st.playpos
        if next_wanted(st, peer, p, n) is None and (
                not p or next_wanted(st, peer, 0, p) is None):
            return []
        if self.reader:
            out = in_order(st, peer, p, n, want)
            if len(out) < want and p:
                out += in_order(st, peer, 0, p, want - len(out))
            return out
        if self.twist is None:
            self.twist = st.rng.randrange(TWIST_BLOCK)
        keep = p - p % TWIST_BLOCK + TWIST_BLOCK if p else 0
        out = twisted(st, peer, p, n, want, self.twist, keep)
        if len(out) < want and p:
            out += twisted(st, peer, 0, p, want - len(out), self.twist, 0)
        return out


class RarestPicker(Picker):
    """Rarest first over the whole content."""

    name = "rarest"
    empty_means_none_wanted = True

    def pick(self, st: PickState, peer: Binmap, want: int, fast: bool) -> list[int]:
        return rarest(st, peer, 0, st.n_chunks, want)


class VodPicker(Picker):
    """Three priority sets (paper III-C, after Give-to-Get [16]).

    ``high`` and ``mid`` are window sizes in chunks.  With
    ``fast_only_high`` (the paper's algorithm) only fast peers are asked for
    high-priority chunks; std-vod asks anyone.
    """

    windows: Windows

    def __init__(self, high: int = 64, mid: int = 256, fast_only_high: bool = True) -> None:
        self.windows = Windows(high, mid, fast_only_high)
        self.name = "vod" if fast_only_high else "std-vod"

    empty_means_none_wanted = True

    def pick(self, st: PickState, peer: Binmap, want: int, fast: bool) -> list[int]:
        n = st.n_chunks
        p = st.playpos
        w = self.windows
        fast_only_high = w.fast_only_high
        h_end = min(n, p + w.high)
        m_end = min(n, h_end + w.mid)
        out: list[int] = []
        if fast or not fast_only_high:
            out = in_order(st, peer, p, h_end, want)
            if out:
                return out
        else:
            # urgent chunks no fast peer can provide may come from anyone
            pos = p
            while len(out) < want:
                c = next_wanted(st, peer, pos, h_end)
                if c is None:
                    break
                if not any(fh.has(c) for fh in st.fast_haves):
                    out.append(c)
                pos = c + 1
            if out:
                return out
        out = rarest(st, peer, h_end, m_end, want)
        if out:
            return out
        out = rarest(st, peer, m_end, n, want)
        if out:
            return out
        if p:
            out = rarest(st, peer, 0, p, want)
        if not out and not fast and fast_only_high:
            # nothing else to do: a slow peer may still help the high window
            # once it is not urgent (the paper's deadline re-request covers it)
            out = in_order(st, peer, p, h_end, min(want, 1))
        return out


#: makes a picker from the VoD window sizes (high, mid) in chunks, which a
#: picker without a playback window ignores
PickerFactory = Callable[[int, int], Picker]

#: pickers by name (``PeerConfig.picker``, the CLI's ``--picker``)
PICKERS: dict[str, PickerFactory] = {
    "linear": lambda high, mid: LinearPicker(),
    "rarest": lambda high, mid: RarestPicker(),
    "std-vod": lambda high, mid: VodPicker(high, mid, fast_only_high=False),
    "vod": lambda high, mid: VodPicker(high, mid, fast_only_high=True),
}


def register_picker(name: str, factory: PickerFactory) -> None:
    """Add a picker by name (registry as aioquic's congestion controls)."""
    PICKERS[name] = factory


def make_picker(name: str, high: int = 64, mid: int = 256) -> Picker:
    """The picker registered as ``name``, with these VoD windows (chunks)."""
    try:
        factory = PICKERS[name]
    except KeyError:
        raise ValueError(f"unknown picker {name!r} (known: {', '.join(sorted(PICKERS))})") from None
    return factory(high, mid)


# --- paper section III-A: peer ranking ---------------------------------------


def expected_bandwidth(p: int, rtt: float, dip: float, loss: float, k: float = 1.0) -> float:
    """Eq. 1: R_i = S_i - k S_i L_r, S_i = P (1 - RTT_i) / DIP_i  (bytes/s).

    RTT and DIP in seconds; as in the paper the (1 - RTT) factor penalises
    long round trips and is clamped at 0 for RTT >= 1 s.
    """
    if dip <= 0:
        return 0.0
    s = p * max(0.0, 1.0 - rtt) / dip
    return max(0.0, s - k * s * loss)


def fast_set(ranked: list[tuple[float, T]], bitrate: float, x: float) -> list[T]:
    """Eq. 2: the first n peers by decreasing R_i with sum R_i >= x * BR_v.

    ``bitrate`` in bytes/s.  If all peers together fall short, all are fast.
    """
    out: list[T] = []
    total = 0.0
    for r, who in sorted(ranked, key=lambda t: -t[0]):
        out.append(who)
        total += r
        if total >= x * bitrate:
            break
    return out


def request_size(w_ledbat: float, high: int, n_fast: int) -> int:
    """Eq. 3: min(W_ledbat / 2, H / F) chunks, at least 1."""
    return max(1, int(min(w_ledbat / 2, high / max(1, n_fast))))
