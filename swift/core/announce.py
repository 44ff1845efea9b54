"""What we announce (RFC 7574 3.2, 4.3.1, 8.7): HAVE and ACK composition.

:class:`Announcer` owns the log of chunks verified (or, live, signed) since
the start: each channel announces only what is new since its last HAVE
(``Channel.ann``: :class:`~swift.core.channel.AnnounceState`) instead of
rescanning the whole binmap, which with rarest-first holes cost O(runs) per
verified chunk.  It also turns a channel's pending ACKs into messages.

When HAVEs go out (:meth:`Announcer.due`): they ride on whatever a channel
sends anyway; a HAVE that would go alone waits until ``have_interval`` has
passed since the channel's last one, as libswift's channels add their HAVEs
to what they send on their own schedule (docs/sim-fig6.md, "HAVEs on the
channel's schedule").  The channels up to date are kept in a set, so a new
chunk visits each of them once (:meth:`Announcer.new_round`) and a channel
waiting for its interval is woken by the :class:`~swift.core.channel.DirtySet`.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections.abc import Callable

from swift.core.binmap import Binmap
from swift.core.channel import Channel, DirtySet
from swift.core.requests import Specs, chunk_runs as _runs
from swift.wire import codec as C


class Announcer:
    """The HAVE log and the HAVE/ACK messages for each channel."""

    def __init__(self, have: Binmap, specs: Specs,
                 single_acks: Callable[[Channel], bool], dirty: DirtySet,
                 interval: float = 0.0, grid: bool = False) -> None:
        #: our verified chunks (``Content.have``)
        self.have = have
        self._specs = specs
        #: the channel's peer takes one ACK per chunk (libswift's dialect)
        self.single_acks = single_acks
        #: bumped with every chunk logged: a channel whose ``have_version``
        #: differs has something to announce
        self.version = 0
        #: chunks verified since the start, in order (``log_base`` is the
        #: global index of its first entry)
        self.log_: array[int] = array("q")  # 8 B a chunk, no int object each
        self.log_base = 0
        #: seconds a HAVE alone waits after the channel's last one (config.py)
        self.interval = interval
        #: HAVEs that wait are due on one grid of ``interval`` (``PeerConfig.have_grid``)
        self.grid = grid
        self._dirty = dirty
        #: established channels told every chunk logged so far: a new one
        #: is theirs to announce (at once, or after their interval)
        self.idle: set[Channel] = set()
        #: deadlines of HAVEs waiting for their interval (``AnnounceState.have_due``),
        #: for the Peer's timer; an entry no channel waits for any more is harmless
        self._heap: list[float] = []

    # -- when (the channel's schedule) ----------------------------------------------

    def new_round(self, now: float) -> None:
        """Chunks were logged: every channel that was up to date has HAVEs
        due; visit those whose interval has passed, wake the others at its
        end (the channels already waiting keep their wake-up)."""
        dirty = self._dirty
        wait = self.interval
        grid = self.grid and wait > 0
        for ch in self.idle:
            due = ch.ann.have_at + wait
            if grid and due > now:
                due = _on_grid(due, wait)
            if due <= now:
                dirty.mark(ch)
            else:
                self._later(ch, due)
        self.idle.clear()

    def _later(self, ch: Channel, due: float) -> None:
        ann = ch.ann
        if ann.have_due != due:
            ann.have_due = due
            heapq.heappush(self._heap, due)
        if due < ch.wake_at:
            self._dirty.wake(ch, due)

    def due(self, ch: Channel, now: float, wait: float,
            riding: bool) -> tuple[list[C.Message], float]:
        """(the HAVEs to send ``ch`` now, when they are due otherwise: inf
        when none wait).  ``riding``: the channel sends something else now,
        so they go with it; alone they go once ``wait`` s have passed since
        its last HAVE (or at once while its first scan of the binmap is not
        done)."""
        ann = ch.ann
        out: list[C.Message] = []
        later = math.inf
        if ann.version != self.version:
            due = ann.have_at + wait
            if self.grid and wait > 0 and due > now:
                due = _on_grid(due, wait)
            if riding or due <= now or ann.pos < self.log_base:
                out = self.have_msgs(ch, 60)
                if out:
                    ann.have_at = now
                ann.have_due = math.inf
            else:
                self._later(ch, due)
                later = due
        if ann.version == self.version:
            self.idle.add(ch)
        return out, later

    def next_due(self) -> float | None:
        """The earliest deadline of HAVEs waiting for their interval."""
        return self._heap[0] if self._heap else None

    def expire(self, now: float) -> None:
        """Deadlines up to ``now`` passed (their channels' wake-ups are due)."""
        heap = self._heap
        while heap and heap[0] <= now:
            heapq.heappop(heap)

    # -- what ------------------------------------------------------------------------

    def log(self, chunks: list[int]) -> None:
        """``chunks`` are ours now: announce them to every channel."""
        self.version += 1
        log = self.log_
        log.extend(chunks)
        if len(log) > 1 << 16:  # bounded: channels behind fall back to one full scan
            self.log_base += len(log)
            del log[:]

    def have_msgs(self, ch: Channel, room: int) -> list[C.Message]:
        """HAVEs for verified chunks not yet announced to ``ch`` (3.2, 4.3.1).

        A new channel gets one scan of the whole binmap (``room`` messages at
        a time); after that only the chunks verified since (``log_``),
        merged into runs: O(new chunks) per call, so HAVEs go out with every
        flush without costing more as the content fills up.
        """
        st = ch.ann
        if st.version == self.version:
            return []
        end = self.log_base + len(self.log_)
        ann = st.announced
        if st.pos >= self.log_base:
            new = self.log_[st.pos - self.log_base:]
            st.pos = end
            st.version = self.version
            out: list[C.Message] = []
            for lo, hi in _runs(ann.lacking(new)):
                for s, t in self._specs(lo, hi):
                    out.append(C.Have(s, t))
                ann.set_range(lo, hi)
            return out
        have = self.have
        out = []
        pos = 0
        while len(out) < room:
            a = have.find_filled(pos)
            if a is None:
                break
            b = ann.find_empty(a)
            if b is None:
                break
            if b != a:
                pos = b
                continue
            e1 = have.find_empty(a)
            if e1 is None:
                break  # nothing empty up to the binmap's span: not a real content
            e2 = ann.find_filled(a)
            e = e1 if e2 is None else min(e1, e2)
            for s, t in self._specs(a, e):
                out.append(C.Have(s, t))
            ann.set_range(a, e)
            pos = e
        else:
            return out
        st.version = self.version
        st.pos = end
        return out

    def ack_msgs(self, ch: Channel) -> list[C.Message]:
        """ACKs for the chunks received from ``ch`` since the last ones
        (8.7), merged into ranges unless its peer takes single chunks
        (:meth:`AnnounceState.take_acks <swift.core.channel.AnnounceState.take_acks>`)."""
        if not ch.ann.acks:
            return []
        out: list[C.Message] = []
        for lo, hi, d in ch.ann.take_acks(self.single_acks(ch)):
            for s, t in self._specs(lo, hi):
                out.append(C.Ack(s, t, d))
        return out


def _on_grid(t: float, step: float) -> float:
    """The first multiple of ``step`` at or after ``t`` (``PeerConfig.have_grid``)."""
    return math.ceil(t / step) * step
