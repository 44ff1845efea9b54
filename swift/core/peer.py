"""Sans-IO PPSPP peer for one swarm (RFC 7574), aioquic-style.

Theory of operation.  The driver feeds datagrams with
:meth:`Peer.datagram_received(data, addr, now)`, calls
:meth:`Peer.handle_timer(now)` when :meth:`Peer.get_timer` fires, sends what
:meth:`Peer.datagrams_to_send(now)` returns and reads :meth:`Peer.next_event`.
Time is always passed in (seconds, float); the core never reads a clock or
touches a socket.  Content storage is injected (:mod:`swift.core.content`).

Per channel (section 3.11) the life cycle is::

    initiator:  init --HANDSHAKE reply with our channel--> est
    responder:  reply --any datagram with our channel--> est
    either:     est --closing HANDSHAKE / dead / corrupt data--> closed

A bad first HANDSHAKE gets no answer at all (3.1.1 step 2).  Heavy payload
(DATA) only flows on ``est`` channels.  Every chunk is checked against the
Merkle tree before it is stored, acknowledged, announced or served (5.2);
DATA we did not request is ignored; a peer whose chunks fail is choked and,
after ``max_bad_chunks``, dropped and not contacted again (12.7).

Profiles: ``rfc`` speaks RFC 7574; ``libswift`` speaks draft-10 as the
libswift reference implementation does (docs/swift-libswift-compat.md): no
Chunk Size or Supported Messages options (libswift rejects the first and
mis-parses the second), SHA-1, single-chunk ACKs.

Split by state ownership (docs/swift-peer-state.md): the Peer composes
:class:`~swift.core.requests.RequestScheduler` (what to ask whom: picker,
chunks in flight, fast set, deadlines), :class:`~swift.core.upload.UploadScheduler`
(what DATA to send whom: WFQ, LEDBAT, pacing, loss repair),
:class:`~swift.core.receive.Verifier` (received DATA: verify, store, ACK),
:class:`~swift.core.announce.Announcer` (the HAVE log, HAVE and ACK
messages), :class:`~swift.core.handshake.Negotiator` (HANDSHAKE options and
each channel's dialect), :class:`~swift.core.pex.Pex`,
:class:`~swift.core.tunein.TuneIn` and :class:`~swift.core.specs.ChunkSpecs`,
each owning its state and handed its collaborators through its constructor;
this module keeps the channels, the handshake's flow, message dispatch and
timers.  Each :class:`~swift.core.channel.Channel` is split the same way:
one part per owner (``ch.send``, ``ch.down``, ``ch.path``, ...).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
import struct
from array import array
from collections import deque
from collections.abc import Sequence
from typing import cast

from deliverykit.errors import LocalProtocolError
from deliverykit.protocol import Address, Outgoing
from swift._fast import decode_msgs, sendside_recv
from swift.core import bins as B, events as ev
from swift.core.announce import Announcer
from swift.core.binmap import Binmap
from swift.core.certcache import CertCache
from swift.core.channel import REQUEST_CHANGES, Channel, DirtySet
from swift.core.chanstate import ChannelEvent, ChannelState
from swift.core.config import MAX_DGRAM, Dialect, PeerConfig, dialect_of
from swift.core.content import Content, ContentView
from swift.core.handshake import Negotiator
from swift.core.ledbat import OwnQueue
from swift.core.live import LiveContent
from swift.core.pex import Pex
from swift.core.picker import Availability, Picker
from swift.core.receive import Verifier
from swift.core.requests import RequestScheduler
from swift.core.specs import ChunkSpecs
from swift.core.tunein import TuneIn
from swift.core.upload import UploadScheduler
from swift.wire import codec as C
from swift.wire.constants import (
    HASH_SIZES,
    HashFunc,
    IntegrityMethod,
    MsgType,
    SigAlg,
)

_PACK_II = struct.Struct(">II").pack
#: chunk32 ACK (type, start, end, delay) and HAVE / REQUEST / CANCEL (type,
#: start, end): ``codec.encode_message``'s bytes for them, in one call (_pack)
_PACK_ACK32 = struct.Struct(">BIIQ").pack
_PACK_SPEC32 = struct.Struct(">BII").pack
_ACK, _SPEC_ONLY = C.Ack, (C.Have, C.Request, C.Cancel)
#: seconds after our PEX_REQ during which PEX_RES* answers are accepted
PEX_ANSWER_WINDOW = 5.0

_INIT, _REPLY = ChannelState.INIT, ChannelState.REPLY
_EST, _CLOSED = ChannelState.EST, ChannelState.CLOSED
#: messages that give their channel nothing to say by themselves (no mark): an
#: ACK or HAVE marks it only when it offers a chunk the peer did not announce
#: before and we lack; a REQUEST or CANCEL only queues or unqueues DATA, which
#: ``upload_data`` sends on every flush
_NO_MARK = frozenset((MsgType.ACK, MsgType.HAVE, MsgType.REQUEST, MsgType.CANCEL))
_MAX_CHUNKS = Binmap.MAX_CHUNKS


class Peer:
    """One swarm's protocol engine; see the module docstring."""

    #: visit only the channels the :class:`DirtySet` names on a flush; False
    #: (or the request memos off, ``RequestScheduler._memos``): every channel
    #: on every flush (the tests' reference)
    DIRTY_SET = True
    #: the housekeeping tick visits every channel only when it changed what
    #: a visit reads (requests, ranking, a channel closed); False: every
    #: tick (the tests' reference, docs/sim.md session 16)
    TICK_MARKS = True
    #: a flush at the same instant as the last one, with no input to the Peer
    #: since and nothing that one left to do (no channel marked or due, no
    #: chunk freed, DATA stopped for want of window or pacing, not of budget),
    #: returns nothing at once: the driver's call that confirms a flush is
    #: over.  False: it runs the whole flush (the tests' reference,
    #: docs/sim-fig6.md session 20)
    QUIET_REPEAT = True

    def __init__(self, content: Content | LiveContent, config: PeerConfig | None = None) -> None:
        self.config = cfg = config or PeerConfig()
        self.content = content
        if content.tree.chunk_size != cfg.chunk_size or content.tree.func != cfg.hash_func:
            raise ValueError("content tree does not match the swarm metadata")
        #: the content as the one kind it is (:class:`ContentView`), handed
        #: to the components; ``live_content`` is its live side (None for
        #: static content), so nothing probes for attributes one kind lacks
        self.view = view = ContentView.of(content)
        self.live_content = view.live
        self.live = view.is_live
        #: live: integrity method (6.1.1 Sign All or 6.1.2 Unified Merkle Tree)
        #: and signature algorithm (7.7), both fixed by the source's key
        self.live_method = IntegrityMethod.UNIFIED_MERKLE
        self.sig_alg = SigAlg.ECDSAP256SHA256
        sig_size = 64
        if view.live is not None:
            ltree = view.live.tree
            self.swarm_id = ltree.swarm_id
            self.live_method = ltree.method
            self.sig_alg, sig_size = ltree.signer.alg, ltree.signer.sig_size
        elif view.static is not None:
            self.swarm_id = view.static.tree.root_hash
        else:
            raise TypeError(f"content must be Content or LiveContent, not {type(content).__name__}")
        self.ctx = C.WireContext(cfg.addressing, HASH_SIZES[cfg.hash_func], sig_size,
                                 cfg.chunk_size)
        #: ``decode_msgs``'s arguments after the buffer and position (as decode_raw passes them)
        self._msg_args = (int(self.ctx.addressing), self.ctx.hash_size, self.ctx.sig_size,
                          self.ctx.chunk_size)
        #: chunk ranges <-> wire chunk specifications (the swarm's addressing)
        self.chunk_specs = ChunkSpecs(cfg, content, self.ctx)
        self._to_chunks = self.chunk_specs.to_chunks
        #: chunk32 addressing (the default): to_chunks is (start, end + 1), inline in _dispatch
        self._chunk32 = self.chunk_specs.chunk32
        self._specs = self.chunk_specs.specs
        self._wire_spec = self.chunk_specs.wire
        lc = self.live_content
        if lc is not None and not lc.tree.custom_spec:
            # live signatures cover the on-the-wire chunk specification in
            # this swarm's addressing (RFC 7574 6.1.1, 6.1.2.2): 4 bytes for
            # bin32, 16 for byte64, ...
            lc.tree.spec_bytes = self._wire_spec
        self.rng = random.Random(cfg.seed)
        self.channels: dict[int, Channel] = {}
        self.by_remote: dict[tuple[Address, int], Channel] = {}
        self.blacklist: set[Address] = set()
        self.events: deque[ev.SwiftEvent] = deque()
        self.availability = Availability()
        #: a static swarm complete from the start never picks: no availability
        #: counts (None in their place), no chunk-size detection per datagram
        self._seeder = not self.live and bool(self.content.complete)
        self._avail: Availability | None = None if self._seeder else self.availability
        #: a seeder's chunk count (fixed: its content was complete from the
        #: start), read per datagram without Content.n_chunks; 0 otherwise
        self._seed_n = (self.content.n_chunks or 0) if self._seeder else 0
        self._pending_close: list[Outgoing] = []
        #: the peer's chunk size when its DATA shows one other than ours
        #: before any chunk verified (libswift sends no Chunk Size option):
        #: the download's hint names it, the CLI restarts with it
        self.chunk_size_seen: int | None = None
        self.stats = {"malformed": 0, "refused": 0, "unknown_channel": 0, "unsolicited": 0,
                      "rejected": 0, "verified": 0, "dup": 0, "sent_data": 0, "timeouts": 0}
        self._next_tick: float | None = None
        self._arrived = 0.0
        #: the kernel arrival time of the datagram being handled (None: not
        #: known): the end of the RTT sample pacing uses (SendSide.on_ack)
        self._ack_arrived: float | None = None
        if cfg.pex_ca_key is not None and cfg.pex_ca is None:
            # our own copy: the caller's PeerConfig may be shared by other peers
            from swift.core.pexcert import ca_public_bytes
            self.config = cfg = dataclasses.replace(cfg, pex_ca=ca_public_bytes(cfg.pex_ca_key))
        #: what we announce: the HAVE log, HAVE and ACK messages
        #: our HANDSHAKE options, the check of the peer's, each channel's dialect
        self.negotiator = neg = Negotiator(cfg, self.swarm_id, self.live_content,
                                           self.live_method, self.sig_alg)
        #: our uplink's queue as our channels' delay samples read it, shared by them
        #: (LEDBAT's young-base reference leaves it out: OwnQueue); None when off,
        #: as by default
        self._own_queue = OwnQueue() if OwnQueue.ENABLED else None
        #: (the negotiator's, under the names they had on the Peer)
        self.dialect = neg.dialect
        self._our_options = neg.our_options
        #: the channels the next flush visits, and the channel order
        self._dirty = DirtySet()
        self._orders = itertools.count()
        self.announcer = Announcer(content.have, self._specs, neg.single_acks, self._dirty,
                                   cfg.have_interval, cfg.have_grid)
        #: what to ask whom: picker, chunks in flight, fast set, deadlines
        self.download = RequestScheduler(cfg, view, self.channels, self.availability,
                                         self.rng, self.stats, self._specs)
        #: peer exchange and the membership certificates
        self.pex = Pex(cfg, self.swarm_id, self.channels, self.stats, self.events,
                       self.blacklist, self.connect)
        #: live tune-in: the signed munro pushed to new channels
        self.tunein = TuneIn(self.live_content, self.live_method, self._specs)
        #: received DATA: verify, store, ACK, duplicates, rejected chunks
        self.verifier = Verifier(cfg, view, self.channels, self.download, self.stats,
                                 self.events, self.dialect, self.announcer.log, self._drop_corrupt)
        #: the sender: WFQ, LEDBAT windows, pacing, loss repair, upload cap
        self.upload = UploadScheduler(cfg, view, self.channels, self.stats, self.ctx,
                                      self._wire_spec, self.tunein.munro_push)
        #: set by get_timer when the wake-up it returned is a pacing or HAVE
        #: one only (not the housekeeping tick)
        self._early_wake = False
        #: ``announcer.version`` at the last flush: a change concerns the
        #: channels up to date (``Announcer.idle``)
        self._have_seen = self.announcer.version
        #: set by a flush that left nothing to do (``QUIET_REPEAT``): its time
        #: and what it read (:meth:`_quiet_state`); cleared by every input
        self._quiet: tuple[float, int, int, int, int, int] | None = None

    # -- public API -----------------------------------------------------------------

    def connect(self, addr: Address, now: float) -> int:
        """Open a channel to ``addr`` (we initiate the handshake)."""
        self._quiet = None
        ch = self._new_channel(addr, True, now)
        self._next_tick = now
        return ch.local_id

    def next_event(self) -> ev.SwiftEvent | None:
        """Oldest pending event or None."""
        return self.events.popleft() if self.events else None

    def set_playpos(self, chunk: int, buffering: bool | None = None) -> None:
        """The player's position and state, for the VoD pickers and x of eq. 2:
        :meth:`RequestScheduler.set_playpos <swift.core.requests.RequestScheduler.set_playpos>`."""
        self._quiet = None
        down = self.download
        before = (down.buffering, down.fast_factor)
        down.set_playpos(chunk, buffering)
        if (down.buffering, down.fast_factor) != before:
            self._dirty.mark_all()  # the fast set or who is asked for the high window
        else:
            self._eq3_lifted()

    def _eq3_lifted(self) -> None:
        """Visit every channel at the next flush when eq. 3 limited requests
        since the last such visit and limits none now (the channels' visits
        read it; nothing else marks them for it)."""
        down = self.download
        if down.eq3_limited and not down.eq3_limits():
            down.eq3_limited = False
            self._dirty.mark_all()

    def close(self, now: float) -> list[Outgoing]:
        """Closing HANDSHAKEs for every channel (section 3.1.1 step 8)."""
        self._quiet = None
        out = []
        for ch in list(self.channels.values()):
            if ch.state is not _CLOSED and ch.remote_id:
                out.append((self._close_dgram(ch), ch.addr))
            self._drop(ch, "local", notify=True)
        return out

    @property
    def established(self) -> list[Channel]:
        return [c for c in self.channels.values() if c.state is _EST]

    # -- the components' state under the names it had on the Peer ------------------

    @property
    def FAST_UPLOAD(self) -> bool:  # noqa: N802  (the class constant it was)
        """The sender serves a lone channel without a WFQ pick per DATA."""
        return self.upload.FAST_UPLOAD

    @FAST_UPLOAD.setter
    def FAST_UPLOAD(self, on: bool) -> None:  # noqa: N802
        self.upload.FAST_UPLOAD = on

    def _data_dgram(self, ch: Channel, i: int, now: float, ts: bytes | None = None) -> bytes:
        return self.upload._data_dgram(ch, i, now, ts)

    @property
    def picker(self) -> Picker:
        """The download picker (``RequestScheduler.picker``)."""
        return self.download.picker

    @property
    def inflight(self) -> Binmap:
        """Chunks requested and not yet here (``RequestScheduler.inflight``)."""
        return self.download.inflight

    @property
    def moved(self) -> dict[int, str]:
        """Why requests left a peer (``RequestScheduler.moved``)."""
        return self.download.moved

    @property
    def playpos(self) -> int:
        return self.download.playpos

    @property
    def buffering(self) -> bool:
        return self.download.buffering

    @property
    def fast(self) -> set[int]:
        """The fast set of eq. 2 (``RequestScheduler.fast``)."""
        return self.download.fast

    @property
    def fast_factor(self) -> float:
        """x of eq. 2 (``RequestScheduler.fast_factor``)."""
        return self.download.fast_factor

    @property
    def live_start(self) -> int | None:
        """Live: the tune-in point (``RequestScheduler.live_start``)."""
        return self.download.live_start

    @property
    def certs(self) -> CertCache:
        """Membership certificates (``Pex.certs``)."""
        return self.pex.certs

    @property
    def have_version(self) -> int:
        return self.announcer.version

    @property
    def have_log(self) -> array[int]:
        return self.announcer.log_

    @property
    def have_log_base(self) -> int:
        return self.announcer.log_base

    def _log_have(self, chunks: list[int]) -> None:
        self.announcer.log(chunks)

    def _have_msgs(self, ch: Channel, room: int) -> list[C.Message]:
        return self.announcer.have_msgs(ch, room)

    def note_stall(self) -> None:
        """A player stall widens the fast set (``RequestScheduler.note_stall``)."""
        self.download.note_stall()

    def _rank(self, now: float) -> None:
        self.download.rank(now)

    def _request_msgs(self, ch: Channel, now: float) -> list[C.Message]:
        return self.download.request_msgs(ch, now)

    def _pex_msgs(self, ch: Channel, now: float) -> list[C.Message]:
        return self.pex.answer(ch, now)

    def _on_cert(self, ch: Channel, der: bytes, now: float) -> None:
        self.pex.on_cert(ch, der, now)

    # -- channel management -----------------------------------------------------------

    def _new_channel(self, addr: Address, initiator: bool, now: float) -> Channel:
        while True:
            cid = self.rng.getrandbits(32)
            if cid and cid not in self.channels:
                break
        ch = Channel(cid, addr, initiator, now, self.config.chunk_size + 64,
                     self.config.queue_limit, self.config.slow_start,
                     ledbat_target=self.negotiator.ledbat_target(self.negotiator.default),
                     own=self._own_queue)
        self.channels[cid] = ch
        ch.order = next(self._orders)
        self._dirty.mark(ch)
        self.download.inputs += 1
        return ch

    def _drop(self, ch: Channel, reason: str, notify: bool = True) -> None:
        if ch.state is _CLOSED:
            return
        ch.handle(ChannelEvent.CLOSE)
        self.download.inputs += 1
        self._dirty.mark_all()  # requests freed, room for a channel (PEX_REQ)
        self.announcer.idle.discard(ch)
        self.download.forget(ch)
        ch.remote.withdraw(self._avail)
        self.channels.pop(ch.local_id, None)
        self.negotiator.forget(ch)
        self.by_remote.pop((ch.addr, ch.remote_id), None)
        self.upload.forget(ch)
        self.pex.certs.pop(ch.addr)
        if notify:
            self.events.append(ev.ChannelClosed(ch.addr, ch.local_id, reason))

    def _drop_corrupt(self, ch: Channel) -> None:
        """``ch``'s peer sent ``max_bad_chunks`` chunks that failed: close the
        channel, blacklist the address and drop the channel (12.7)."""
        self._pending_close.append((self._close_dgram(ch), ch.addr))
        self.blacklist.add(ch.addr)
        self._drop(ch, "corrupt data")

    def _close_dgram(self, ch: Channel) -> bytes:
        return C.encode_datagram(self.ctx, ch.remote_id, [C.Handshake(0)])

    # -- handshake (sections 3.1, 7, 8.4) -----------------------------------------------

    def _refused(self, addr: Address, reason: str) -> None:
        """Count a refused handshake and say why (``HandshakeRefused``)."""
        self.stats["refused"] += 1
        self.events.append(ev.HandshakeRefused(addr, reason))

    def _hs_backoff(self, ch: Channel) -> float:
        """Seconds before our unanswered handshake goes out again
        (:meth:`HandshakeState.backoff <swift.core.channel.HandshakeState.backoff>`)."""
        return ch.hs.backoff(self.config.profile == "auto")

    def _on_initiation(self, data: bytes, addr: Address, now: float) -> None:
        try:
            _, msgs, error = C.decode_raw(data, self.ctx)
        except C.DecodeError:
            self.stats["malformed"] += 1
            return
        if error:
            self.stats["malformed"] += 1
        if not msgs or msgs[0][0] != MsgType.HANDSHAKE or msgs[0][1] == 0:
            self.stats["refused"] += 1
            return
        hs = C.Handshake(msgs[0][1], msgs[0][3])
        neg = self.negotiator
        dialect = dialect_of(hs.options) if self.config.profile == "auto" else None
        why = ("address blacklisted" if addr in self.blacklist else
               neg.options_ok(hs.options, True, dialect or neg.default))
        if why is not None:
            # no reply: it may be spoofed (3.1.1 step 2); a legacy swift
            # handshake for this swarm gets libswift's closing reply (9 bytes
            # for its 34: no amplification), so it stops retrying at once
            self._refused(addr, why)
            if hs.options.legacy and hs.options.swarm_id == self.swarm_id:
                self.stats["legacy"] = self.stats.get("legacy", 0) + 1
                close = hs.channel.to_bytes(4, "big") + b"\x00" + bytes(4)
                self._pending_close.append((close, addr))
            return
        mine = self.channels.get(hs.channel)
        if mine is not None and mine.state is _INIT and mine.addr == addr:
            self._drop(mine, "self")  # our own handshake came back: a self-connection
            self.stats["refused"] += 1
            return
        # both sides connected at once (e.g. after PEX): keep one channel, the
        # one initiated with the larger channel ID (both ends decide alike)
        for c in list(self.channels.values()):
            if c.initiator and c.state is _INIT and c.addr == addr:
                if c.local_id > hs.channel:
                    self.stats["duplicate"] = self.stats.get("duplicate", 0) + 1
                    return
                self._drop(c, "duplicate", notify=False)
        old = self.by_remote.get((addr, hs.channel))
        if old is not None:
            old.hs.need = True  # duplicate: answer again (8.2)
            self._dirty.mark(old)
            if old.state is _REPLY:  # our reply was lost, and the HAVEs it carried
                old.ann.restart()
            return
        if len(self.channels) >= self.config.max_channels and not self._evict_half_open():
            self.stats["refused"] += 1
            return
        ch = self._new_channel(addr, False, now)
        if dialect is not None:
            neg.set_dialect(ch, dialect)
        ch.remote_id = hs.channel
        ch.hs.options = hs.options
        self.by_remote[(addr, ch.remote_id)] = ch
        ch.liveness.heard(now)
        self._dispatch(ch, msgs[1:], now)

    def _evict_half_open(self) -> bool:
        """Drop the oldest channel still waiting for its initiator (reply
        state) to make room; False when every channel is established."""
        half = [c for c in self.channels.values() if c.state is _REPLY]
        if not half:
            return False
        self._drop(min(half, key=lambda c: c.liveness.last_recv), "half-open", notify=False)
        self.stats["half_open_evicted"] = self.stats.get("half_open_evicted", 0) + 1
        return True

    # -- receiving ------------------------------------------------------------------------

    def datagram_received(self, data: bytes, addr: Address, now: float,
                          arrived: float | None = None) -> None:
        """Process one UDP datagram from ``addr``.  ``arrived``: when the
        kernel received it (SO_TIMESTAMPNS); with ``delay_from_kernel`` the
        one-way delay in ACK (8.7) is measured from it, leaving out the
        time the datagram waited for our event loop."""
        self._arrived = (arrived if arrived is not None and self.config.delay_from_kernel
                         and 0 < arrived <= now else now)
        self._ack_arrived = arrived
        self._quiet = None
        down = self.download
        down.last_now = now
        down.inputs += 1  # (the end game's walk memo, RequestScheduler._late)
        if len(data) < 4:
            self.stats["malformed"] += 1
            return
        cid = int.from_bytes(data[:4], "big")
        if cid == 0:
            self._on_initiation(data, addr, now)
            return
        ch = self.channels.get(cid)
        if ch is None or ch.addr != addr:
            self.stats["unknown_channel"] += 1  # 3.1.1 steps 3 and 7
            return
        # decode_raw's loop, whose first C call takes every message of the usual
        # datagram (HAVE, ACK, DATA, INTEGRITY, REQUEST): without its frame
        msgs, pos, error = decode_msgs(data, 4, *self._msg_args)
        if error is None and pos < len(data):  # a HANDSHAKE, PEX_RES or unknown type in it
            _, msgs, error = C.decode_raw(data, self.ctx)
        if error:
            self.stats["malformed"] += 1
        if (self.chunk_size_seen is None and not self._seeder and not self.stats["verified"]
                and ch.state is _EST and not self.content.complete):
            self.chunk_size_seen = self.chunk_specs.size_seen(data, msgs, error)
        lv = ch.liveness  # (Liveness.heard, inline: every datagram)
        lv.last_recv = now
        lv.sent_since_recv = 0
        if error or ch.state is not _EST:
            # (DirtySet.mark, inline): a handshake's answer, a state change, or
            # what the peer sent is not understood; an established channel is
            # marked by what its messages give it to say (_dispatch)
            self._dirty.marked.add(ch)
        if ch.state is _INIT:
            if not msgs or msgs[0][0] != MsgType.HANDSHAKE:
                if error and len(data) > 4 and data[4] == MsgType.HANDSHAKE:
                    # an answer we cannot parse: say so (the hint repeats it)
                    self._refused(addr, f"handshake reply not understood: {error}")
                return
            hs = C.Handshake(msgs[0][1], msgs[0][3])
            if self.config.profile == "auto":
                self.negotiator.set_dialect(ch, dialect_of(hs.options))
            why = ("closing handshake" if hs.channel == 0 else
                   self.negotiator.options_ok(hs.options, False, self.dialect(ch)))
            if why is not None:
                o = hs.options
                if (o.chunk_size not in (None, self.config.chunk_size) and not self.live
                        and self.negotiator.options_ok(dataclasses.replace(o, chunk_size=None),
                                                       False, self.dialect(ch)) is None):
                    self.chunk_size_seen = o.chunk_size  # only the chunk size differs
                self._refused(addr, f"handshake reply refused: {why}")
                if hs.channel:
                    ch.remote_id = hs.channel
                    self._pending_close.append((self._close_dgram(ch), addr))
                self._drop(ch, "refused")
                return
            ch.remote_id = hs.channel
            ch.hs.options = hs.options
            self.by_remote[(addr, ch.remote_id)] = ch
            ch.handle(ChannelEvent.HANDSHAKE_REPLY)
            self.events.append(ev.ChannelOpened(addr, ch.local_id))
            msgs = msgs[1:]
        elif ch.state is _REPLY:
            ch.handle(ChannelEvent.PEER_DATAGRAM)
            self.events.append(ev.ChannelOpened(addr, ch.local_id))
        infl = down.inflight
        v0 = infl.version
        got = self._dispatch(ch, msgs, now)
        # one DATA that verified its chunk took it out of flight: not a chunk
        # freed for the pickers (it is ours now), so the flush need not visit
        # every channel for it (docs/sim.md, "Fewer flushes per datagram").
        # Told by one change of ``inflight`` that took the chunk out, and its
        # ACK queued last (receive.py queues one only for a chunk we hold)
        if (got >= 0 and v0 == down._infl_seen and infl.version == v0 + 1
                and ch.state is _EST and (acks := ch.ann.acks) and acks[-1][0] == got
                and not infl.has(got)):
            down._infl_seen = infl.version  # (RequestScheduler.freed: seen)
            marked = self._dirty.marked
            for c in self.channels.values():
                if c.down.cancels:  # the end game's copies of it, CANCELled (receive.py)
                    marked.add(c)
            if down.eq3_limited:
                self._eq3_lifted()

    def _dispatch(self, ch: Channel, msgs: list[C.RawMessage], now: float) -> int:
        """Handle the messages of one datagram, as :func:`swift.wire.codec.decode_raw`
        5-tuples (no message objects on the receive path), most frequent first.
        Returns the chunk of its one DATA when the other messages are
        INTEGRITY, ACK, HAVE, REQUEST and CANCEL (none of which changes
        ``inflight``), else a negative number."""
        limit = self._seed_n or self.content.n_chunks or (1 << 40)
        to_chunks = self._to_chunks
        c32 = self._chunk32
        live = self.live
        send, remote, avail = ch.send, ch.remote, self._avail
        own = self._own_queue
        # the peer's discard window (live): what its HAVEs keep (6.2)
        win = ch.hs.discard_window if live else None
        have_s = have_e = -1  # the spec of this datagram's last HAVE (static content)
        marked = self._dirty.marked
        # news of chunks we hold gives nothing to ask (a seeder holds them all)
        ours = None if self._seeder else self.content.have
        got = -1
        for m in msgs:
            if ch.state is _CLOSED:
                return -2
            t, s, e, x, y = m
            if t not in _NO_MARK:
                # may give the channel something to say (an ACK for DATA, an
                # answer to PEX_REQ, a state to act on): visited next flush
                marked.add(ch)  # (DirtySet.mark, inline)
                if t != 1 and t != 4:
                    got = -2
            if t == 1:  # DATA
                lo, hi = (s, e + 1) if c32 else to_chunks(s, e)
                got = lo if got == -1 and hi == lo + 1 else -2
                self.verifier.on_data(ch, lo, hi, x, y, now, self._arrived)
            elif t == 4:  # INTEGRITY
                if c32:
                    # (VerifyState.add_hash, inline: two per DATA) chunk32's
                    # [s, e] names a bin when it is aligned; that bin is
                    # B.make(layer, s // w) = (s << 1) | (w - 1)
                    vf = ch.verify
                    w = e + 1 - s
                    if w > 0 and not (w & (w - 1)) and s % w == 0 and (
                            len(vf.hash_order) < vf.MAX_HASHES):
                        b = (s << 1) | (w - 1)
                        vf.hashes[b] = x
                        vf.hash_order.append((b, x))
                else:
                    ch.verify.add_hash(*to_chunks(s, e), x)
            elif t == 2 or t == 3:  # ACK or HAVE: the peer has these chunks
                lo, hi = (s, e + 1) if c32 else to_chunks(s, e)  # (ChunkSpecs.to_chunks)
                if t == 2 and s == have_s and e == have_e:
                    pass  # libswift's HAVE i, ACK i: the HAVE just added the same chunks
                elif not live and hi - lo == 1 and hi <= limit and hi <= _MAX_CHUNKS:
                    # one chunk of static content (libswift's HAVE i, ACK i):
                    # RemoteHave.add's test-and-set without its frame (no window)
                    if remote.have.add_new(lo):
                        if avail is not None:
                            avail.add_range(lo, hi, 1)
                        remote.some = True
                        if hi > remote.top:
                            remote.top = hi
                        if ours is not None and not ours.has(lo):
                            marked.add(ch)  # something new to ask this peer for (mark)
                elif remote.add(lo, hi if live and t == 3 else min(hi, limit), avail, win) and (
                        live or ours is not None
                        and ours.find_empty(lo, min(hi, limit)) is not None):
                    marked.add(ch)  # (live: every flush visits every channel)
                if t == 2:
                    # SendSide.on_ack in one C call (-1: loss repair under way, the method)
                    # (while a channel takes its first delay samples: the method, which
                    # keeps the peer's view of its uplink, OwnQueue)
                    if ((own is not None and own.young)
                            or sendside_recv(send, lo, hi, x, now, self._ack_arrived) < 0) and (
                            spurious := send.on_ack(lo, hi, x, now, self._ack_arrived)):
                        self.upload.note_spurious(spurious)
                else:
                    if not live:
                        have_s, have_e = s, e
                    up = send.upload  # HAVE is an implicit CANCEL (3.8); at a seeder
                    if up.size and up.queued.any_in(lo, hi):  # usually nothing queued
                        up.remove(lo, hi)
                    # delivered even if its ACK was lost (SendSide.delivered_by_have,
                    # in C as above)
                    if send.data_out and sendside_recv(send, lo, hi, None, now, None) < 0 and (
                            spurious := send.delivered_by_have(lo, hi, now)):
                        self.upload.note_spurious(spurious)
            elif t == MsgType.SIGNED_INTEGRITY:
                ch.verify.add_sig(*to_chunks(s, e), x, y)
            elif t == MsgType.REQUEST:
                if not send.choking:
                    lo, hi = to_chunks(s, e)
                    n = self.content.n_chunks
                    if n is not None:
                        send.upload.push(max(0, lo), min(hi, n))
            elif t == MsgType.CANCEL:
                send.upload.remove(*to_chunks(s, e))
            elif t == MsgType.CHOKE:
                ch.down.choked = True
                self.download.release(ch, lost=False)
            elif t == MsgType.UNCHOKE:
                ch.down.choked = False
            elif t == MsgType.HANDSHAKE:
                if s == 0:  # the closing handshake (8.4)
                    self._drop(ch, "closed by peer")
                    return -2
            elif t == MsgType.PEX_REQ:
                ch.pex.requested = True
            elif t in (MsgType.PEX_RESv4, MsgType.PEX_RESv6, MsgType.PEX_REScert) and (
                    not ch.pex.answer_expected(now, PEX_ANSWER_WINDOW)):
                # PEX_RES answers our PEX_REQ (3.10.1): unsolicited ones are
                # dropped before any parse or signature check
                self.stats["pex_unsolicited"] = self.stats.get("pex_unsolicited", 0) + 1
            elif t in (MsgType.PEX_RESv4, MsgType.PEX_RESv6):
                if self.config.pex_ca is not None:
                    self.stats["pex_uncertified"] = self.stats.get("pex_uncertified", 0) + 1
                    continue  # this swarm gossips certified addresses only
                self.pex.discovered(ch, (x, y), now)
            elif t == MsgType.PEX_REScert:
                self.pex.on_cert(ch, x, now)
        lc = self.live_content
        if lc is not None and ch.verify.sigs and ch.state is not _CLOSED:
            # signed munros with no DATA after them: a tune-in push (6.1.2.4).
            # Learn the rightmost one only (one signature check per datagram)
            # and forget the rest: INTEGRITY for a DATA shares its datagram
            top = max(ch.verify.sigs, key=lambda b: B.base_range(b)[1])
            lc.learn(ch.verify.hash_order, {top: ch.verify.sigs[top]}, now)
            ch.verify.clear()
        return got

    def _peer_has(self, ch: Channel, lo: int, hi: int) -> None:
        """The peer announced ``[lo, hi)`` (HAVE, ACK): :meth:`RemoteHave.add
        <swift.core.channel.RemoteHave.add>`; something new marks the channel."""
        if ch.remote.add(lo, hi, self._avail,
                         ch.hs.discard_window if self.live else None):
            self._dirty.mark(ch)  # something new to ask this peer for

    # -- sending ----------------------------------------------------------------------------

    def live_append(self, payload: bytes, now: float) -> list[int]:
        """Live source: add stream bytes; signed chunks get announced with HAVE."""
        if self.live_content is None:
            raise LocalProtocolError("live_append on a static swarm")
        self._quiet = None
        got = self.live_content.append(payload, now)
        if got:
            self.announcer.log(got)
        return got

    def _pack(self, ch: Channel, dest: int, msgs: list[C.Message],
              every: Sequence[C.Message] = ()) -> list[bytes]:
        """Messages -> datagrams of at most MAX_DGRAM bytes; ``every`` (the
        live tune-in munro, 6.1.2.4) ends each of them."""
        tail = b"".join(C.encode_message(self.ctx, m) for m in every)
        room = MAX_DGRAM - len(tail)
        out = []
        cur = bytearray(dest.to_bytes(4, "big"))
        enc, ctx, c32 = C.encode_message, self.ctx, self._chunk32
        for m in msgs:
            tm = type(m)
            if c32 and (tm is _ACK or tm in _SPEC_ONLY):
                # chunk32's ACK, HAVE, REQUEST, CANCEL (one per chunk to a
                # libswift peer) without encode_message's match and
                # encode_spec; what does not fit goes there for its error
                try:
                    if tm is _ACK:
                        a = cast(C.Ack, m)
                        e = _PACK_ACK32(2, a.start, a.end, a.delay)
                    else:  # Have, Request, Cancel: type, start, end alike
                        h = cast(C.Have, m)
                        e = _PACK_SPEC32(h.type, h.start, h.end)
                except struct.error:
                    e = enc(ctx, m)
            else:
                e = enc(ctx, m)
            if len(cur) + len(e) > room and len(cur) > 4:
                out.append(bytes(cur + tail))
                cur = bytearray(dest.to_bytes(4, "big"))
            cur += e
        if len(cur) > 4 or tail:
            out.append(bytes(cur + tail))
        return out

    def datagrams_to_send(self, now: float, budget: int = 256) -> list[Outgoing]:
        """Datagrams due now (at most ``budget`` DATA datagrams).

        The driver calls this after every batch of received datagrams, so it
        first has the content storage write the chunks the batch verified
        (one gathered write instead of one per chunk; an OSError from the
        disk surfaces here).  Only the channels the :class:`DirtySet` names
        are visited, unless something may concern them all (docs/sim.md,
        "Hot spots" 4): the same datagrams as visiting every channel."""
        quiet = self._quiet
        if quiet is not None:
            if (quiet == self._quiet_state(now) and not self._pending_close
                    and self._dirty.idle(now) and self.QUIET_REPEAT):
                return []  # the last flush left nothing to do (QUIET_REPEAT)
            self._quiet = None
        self.content.flush()
        down = self.download
        down.new_flush()  # the end game's memo (requests.py)
        out: list[Outgoing] = list(self._pending_close)
        self._pending_close.clear()
        cfg = self.config
        every_have = False
        if self.announcer.version != self._have_seen:  # a chunk to announce to everyone
            self._have_seen = self.announcer.version
            if self._have_wait() > 0:
                self.announcer.new_round(now)
            else:  # at once: live, the completing chunk, or no interval
                every_have = True
        visit = self._dirty.take(now)
        if every_have:
            visit = None
        if down.freed() or not (self.DIRTY_SET and down._memos) or cfg.push or self.live:
            visit = None  # chunks left flight / the references / push and live: not tracked
        elif visit is not None and self.content.n_chunks is None:
            visit = None  # size unknown: the first request may go to anyone
        every = visit is None
        if visit is None:
            visit = list(self.channels.values())
        elif not down.nothing_late(now):  # the end game: also who could take a late request
            visit = self._late_takers(visit, -1)
        infl = down.inflight
        i = 0
        while i < len(visit):
            ch = visit[i]
            i += 1
            if ch.state is _CLOSED:
                continue
            v = infl.version
            self._flush_channel(ch, now, out)
            if not every and infl.version != v:
                if down.freed():  # this channel freed a chunk: any later one may take it
                    every = True
                    visit = visit[:i] + [c for c in self.channels.values() if c.order > ch.order]
                elif not down.nothing_late(now):  # a late request counts again (requests.py)
                    visit = visit[:i] + self._late_takers(visit[i:], ch.order)
        data = self.upload.upload_data(now, budget)
        out += data
        if (self.QUIET_REPEAT and len(data) < budget and self._dirty.idle(now)
                and not (cfg.push or self.live or self.content.n_chunks is None)
                and self.DIRTY_SET and down._memos):
            # nothing marked or due and no DATA held back by the budget: a
            # flush at this instant before any input would find nothing to
            # visit, no chunk freed, nothing to announce, the same late
            # requests for the same takers (none asked now, or it would be
            # marked) and the same channels unable to send DATA
            self._quiet = self._quiet_state(now)
        return out

    def _quiet_state(self, now: float) -> tuple[float, int, int, int, int, int]:
        """What a flush's result depends on besides the dirty set and the
        inputs that clear ``_quiet`` (``QUIET_REPEAT``): the time, the inputs
        counted, ``inflight`` (and whether a change was not seen as freed),
        ``have``, the HAVE log and every channel's requests."""
        down = self.download
        v = down.inflight.version
        return (now, down.inputs, v if v == down._infl_seen else -1,
                self.content.have.version, self.announcer.version
                if self.announcer.version == self._have_seen else -1, REQUEST_CHANGES.n)

    def _have_wait(self) -> float:
        """Seconds a HAVE alone waits after the channel's last (``have_interval``);
        live and once complete none (the last HAVEs go out at once)."""
        return 0.0 if self.live or self.content.complete else self.config.have_interval

    def _late_takers(self, marked: list[Channel], after: int) -> list[Channel]:
        """The channels after ``after`` in channel order that are ``marked``
        or could take over a late request elsewhere (the end game)."""
        m = set(marked)
        rest = [c for c in self.channels.values() if c.order > after]
        takers = set(self.download.late_takers([c for c in rest if c not in m]))
        return [c for c in rest if c in m or c in takers]

    def _flush_channel(self, ch: Channel, now: float, out: list[Outgoing]) -> None:
        """What ``ch`` has to send now, onto ``out``; marks it for the next
        flush when it sent something (it may have more) and files its next
        deadline (:class:`DirtySet`)."""
        msgs: list[C.Message] = []
        dest = ch.remote_id
        announcer = self.announcer
        dirty = self._dirty
        hs = ch.hs
        if hs.need and (ch.state is not _INIT or now - hs.sent_at >= self._hs_backoff(ch)):
            if ch.state is _INIT and self.config.profile == "auto":
                # unanswered: every other try without the options libswift
                # rejects (it drops a handshake with option 9 unanswered); a
                # SHA-1 swarm (a 40-hex root: in practice libswift's) tries
                # libswift's dialect first, the RFC one 0.5 s later
                first = 1 if self.config.hash_func is HashFunc.SHA1 else 0
                self.negotiator.set_dialect(ch, Dialect.LIBSWIFT if (hs.tries + first) % 2
                                            else Dialect.RFC)
            msgs.append(C.Handshake(ch.local_id, self._our_options(ch.initiator,
                                                                   self.dialect(ch))))
            hs.sent(now, again=ch.state is _INIT)
            if ch.state is _INIT:
                dest = 0
            msgs += announcer.due(ch, now, 0.0, True)[0]
        elif ch.state is _INIT:
            # the handshake's back-off (a hair early: float rounding)
            dirty.wake(ch, hs.sent_at + self._hs_backoff(ch) - 1e-9)
            return
        push: list[C.Message] = []
        if ch.state is _EST:
            wake = math.inf
            cfg = self.config
            send = ch.send
            if send.send_choke is not None:
                msgs.append(C.Choke() if send.send_choke else C.Unchoke())
                send.send_choke = None
            # (each part tested for something to say first)
            ann = ch.ann
            if ann.acks:
                msgs += announcer.ack_msgs(ch)  # before HAVE: the delay sample must count
            if ann.extra_have:
                for c in ann.extra_have[:64]:
                    msgs += [C.Have(x, y) for x, y in self._specs(c, c + 1)]
                ann.extra_have.clear()
            have_pos = len(msgs)  # the HAVEs go here, once we know whether they go alone
            if ch.down.cancels:
                if hs.takes(MsgType.CANCEL):
                    for lo, hi in ch.down.cancels:
                        msgs += [C.Cancel(s, t) for s, t in self._specs(lo, hi)]
                ch.down.cancels.clear()
            infl = self.download.inflight
            v = infl.version
            reqs = self.download.request_msgs(ch, now)
            msgs += reqs
            if reqs or infl.version != v or len(ch.down.missed) > 4096:
                # asked (the end game may have more) / picked (maybe all dropped
                # again) / the missed bound pending: visited again next flush
                dirty.mark(ch)
            if cfg.push and self.download.complete and not self.live:
                self.upload.push_fill(ch)
            if ch.pex.requested:
                msgs += self.pex.answer(ch, now)
            if cfg.pex_connect and not self.download.complete:
                if now >= ch.pex.next_req and len(self.channels) < cfg.max_channels:
                    msgs.append(C.PexReq())  # ask for more peers (3.10.1)
                    ch.pex.next_req = now + 5.0
                    ch.pex.asked = now
                if ch.pex.next_req > now:  # (else: when a channel closes, mark_all)
                    wake = ch.pex.next_req
            # HAVEs ride on anything else; alone they wait for the interval
            haves, later = announcer.due(ch, now, self._have_wait(), bool(msgs))
            if haves:
                msgs[have_pos:have_pos] = haves
            wake = min(wake, later)
            # live tune-in (6.1.2.4)
            if self.live:
                push = self.tunein.munro_push(ch, now, alone=not msgs)
            if wake < math.inf:
                dirty.wake(ch, wake)
        if msgs or push:
            for d in self._pack(ch, dest, msgs, push):
                out.append((d, ch.addr))
            ch.liveness.spoke(now)
            if hs.need or ch.ann.version != announcer.version or push:
                # more to say next flush: the handshake's back-off to file,
                # HAVEs beyond this datagram's room, the live munro.  What
                # else a flush sends (ACKs, CANCELs, PEX, CHOKE) it sends
                # whole; requests are marked above (docs/sim.md, "Fewer
                # flushes per datagram")
                dirty.mark(ch)

    # -- timers -----------------------------------------------------------------------------

    def get_timer(self, now: float) -> float:
        """When :meth:`handle_timer` should run next (a fixed deadline, not
        pushed back by traffic, so housekeeping runs while busy)."""
        if self._next_tick is None:
            self._next_tick = now
        elif self._next_tick > now + 0.05 and any(c.send.data_out for c in self.channels.values()):
            self._next_tick = now + 0.05  # DATA in flight: its losses are due soon (upload.py)
        # DATA held back by pacing (upload.py), HAVEs waiting for their interval
        due = min(t for t in (self._next_tick, self.upload.pace_due(now),
                              self.announcer.next_due()) if t is not None)
        self._early_wake = due < self._next_tick
        return due

    def handle_timer(self, now: float) -> None:
        """Timeouts: requests, LEDBAT CTO, lost DATA, dead peers, ranking."""
        self._quiet = None
        self.download.last_now = now
        self.download.inputs += 1
        self.announcer.expire(now)
        if self._early_wake and self._next_tick is not None and now < self._next_tick:
            self._early_wake = False
            return  # a pacing or HAVE wake-up: only DATA or HAVEs are due (datagrams_to_send)
        # what the tick changes that a channel's visit reads: requests given
        # back or moved (lost, stale, no progress, past a deadline: they
        # change REQUEST_CHANGES.n), the ranking's rates and fast set, a
        # channel closed (_drop): then every channel is visited.  Otherwise
        # none for the tick (docs/sim.md, session 16): what time alone makes
        # due has its own wake-up (handshake, PEX_REQ, HAVE interval) or is
        # found by the flush (late requests, DATA to send)
        changes = REQUEST_CHANGES.n
        busy = any(c.down.slot or len(c.send.upload) or c.send.data_out or c.state is _INIT
                   for c in self.channels.values())
        self._next_tick = now + (0.05 if busy else 0.5)
        cfg = self.config
        for ch in list(self.channels.values()):
            if ch.state is _INIT:
                if ch.hs.tries >= 6 and now - ch.hs.sent_at > 8:
                    self._drop(ch, "no reply")
                continue
            if ch.state is _REPLY and now - ch.liveness.last_recv > cfg.half_open_timeout:
                self._drop(ch, "half-open", notify=False)  # answered, never heard again
                self.stats["half_open_expired"] = self.stats.get("half_open_expired", 0) + 1
                continue
            if ch.liveness.dead(now, cfg.dead_after):
                self._drop(ch, "dead")
                continue
            if (ch.initiator and ch.down.slot and ch.liveness.sent_since_recv >= 3
                    and now - ch.liveness.last_recv > max(cfg.rehandshake_after, 8 * ch.path.rtt)):
                # silent while we ask for chunks: a restarted peer discards
                # our datagrams as an unknown channel (3.1.1 step 7) and will
                # never answer them; hand the requests back and handshake
                # anew (the peer is declared dead only by the rules of 3.12)
                self.stats["rehandshakes"] = self.stats.get("rehandshakes", 0) + 1
                addr = ch.addr
                # a peer that was only slow stops serving the old channel
                # (closing HANDSHAKE, 3.1.1 step 4); a restarted one drops it
                self._pending_close.append((self._close_dgram(ch), addr))
                self._drop(ch, "silent")
                self.connect(addr, now)
                continue
            if ch.state is _EST and now - ch.liveness.last_send > cfg.keepalive:
                self._pending_close.append((ch.remote_id.to_bytes(4, "big"), ch.addr))
                ch.liveness.spoke(now)
            self.download.request_timeouts(ch, now)  # lost requests, no progress
            self.upload.sender_timeouts(ch, now)  # DATA never acknowledged: lost (LEDBAT)
        down = self.download
        if not down.buffering and down.picker.windows is not None:
            down.deadlines(now)
        dirty = self._dirty
        if REQUEST_CHANGES.n != changes or not self.TICK_MARKS:
            dirty.mark_all()  # requests given back or moved: anyone may ask
        if now >= down.next_rank:
            # new rates: a channel whose request window changed is visited,
            # every channel when the fast set (eq. 2) changed
            fast, most = down.fast, cfg.max_outstanding
            windows = [(c, c.path.window(most)) for c in self.channels.values()]
            down.rank(now)
            if down.fast != fast:
                dirty.mark_all()
            else:
                for c, w in windows:
                    if c.path.window(most) != w:
                        dirty.marked.add(c)
