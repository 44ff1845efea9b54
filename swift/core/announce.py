"""What we announce (RFC 7574 3.2, 4.3.1, 8.7): HAVE and ACK composition.

:class:`Announcer` owns the log of chunks verified (or, live, signed) since
the start: each channel announces only what is new since its last HAVE
(``Channel.ann``: :class:`~swift.core.channel.AnnounceState`) instead of
rescanning the whole binmap, which with rarest-first holes cost O(runs) per
verified chunk.  It also turns a channel's pending ACKs into messages.
"""

from __future__ import annotations

from collections.abc import Callable

from swift.core.binmap import Binmap
from swift.core.channel import Channel
from swift.core.requests import Specs, chunk_runs as _runs
from swift.wire import codec as C


class Announcer:
    """The HAVE log and the HAVE/ACK messages for each channel."""

    def __init__(self, have: Binmap, specs: Specs,
                 single_acks: Callable[[Channel], bool]) -> None:
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
        self.log_: list[int] = []
        self.log_base = 0

    def log(self, chunks: list[int]) -> None:
        """``chunks`` are ours now: announce them to every channel."""
        self.version += 1
        log = self.log_
        log.extend(chunks)
        if len(log) > 1 << 16:  # bounded: channels behind fall back to one full scan
            self.log_base += len(log)
            log.clear()

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
            for lo, hi in _runs(c for c in new if not ann.has(c)):
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
