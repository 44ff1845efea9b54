"""What a :class:`swift.core.peer.Peer` offers and accepts in a HANDSHAKE
(RFC 7574 3.1, 7), and which dialect each channel speaks.

:class:`Negotiator` owns the dialect of every channel whose dialect differs
from the profile's (profile "auto" settles it per channel,
docs/swift-libswift-compat.md) and the choices that follow a dialect: our
protocol options, the check of the peer's against the swarm metadata,
single-chunk ACKs and LEDBAT's TARGET.  The Peer keeps the channels and the
handshake's message flow; a channel's own handshake progress is its
``Channel.hs`` (:class:`~swift.core.channel.HandshakeState`).
"""

from __future__ import annotations

from swift.core.channel import Channel
from swift.core.config import Dialect, PeerConfig, refusal
from swift.core.ledbat import Ledbat
from swift.core.live import LiveContent
from swift.wire.codec import HandshakeOptions
from swift.wire.constants import IntegrityMethod, SigAlg, Version


class Negotiator:
    """Our HANDSHAKE options, the check of the peer's, and each channel's dialect."""

    def __init__(self, config: PeerConfig, swarm_id: bytes, live: LiveContent | None,
                 live_method: IntegrityMethod, sig_alg: SigAlg) -> None:
        self.config = config
        self.swarm_id = swarm_id
        #: the live content (None: static), for its discard window (7.9)
        self.live = live
        #: live: integrity method (6.1.1 or 6.1.2) and signature algorithm (7.7)
        self.live_method = live_method
        self.sig_alg = sig_alg
        #: the profile's dialect
        self.default = Dialect.LIBSWIFT if config.profile == "libswift" else Dialect.RFC
        #: local channel ID -> its dialect when it differs from the profile's
        #: default (profile "auto")
        self.dialects: dict[int, Dialect] = {}

    def dialect(self, ch: Channel) -> Dialect:
        """What ``ch`` speaks: the profile's, or what "auto" settled on."""
        got = self.dialects.get(ch.local_id)
        return got if got is not None else self.default

    def set_dialect(self, ch: Channel, dialect: Dialect) -> None:
        """Profile "auto" settled (or is trying) ``ch``'s dialect; LEDBAT's TARGET follows it."""
        self.dialects[ch.local_id] = dialect
        ch.send.ledbat.TARGET = self.ledbat_target(dialect)

    def forget(self, ch: Channel) -> None:
        """``ch`` closed."""
        self.dialects.pop(ch.local_id, None)

    def ledbat_target(self, dialect: Dialect) -> float:
        """LEDBAT's TARGET in s for a channel speaking ``dialect`` (PeerConfig.ledbat_target_ms)."""
        if self.config.ledbat_target_ms is not None:
            return self.config.ledbat_target_ms / 1000
        return Ledbat.LIBSWIFT_TARGET if dialect is Dialect.LIBSWIFT else Ledbat.TARGET

    def single_acks(self, ch: Channel) -> bool:
        """libswift takes one ACK per chunk (docs/swift-libswift-compat.md)."""
        return self.dialect(ch) is Dialect.LIBSWIFT

    def our_options(self, initiator: bool, dialect: Dialect = Dialect.RFC) -> HandshakeOptions:
        """The options of our HANDSHAKE (7): the swarm ID only when we initiate;
        no Chunk Size in libswift's dialect (it rejects the option)."""
        cfg = self.config
        live = self.live is not None
        return HandshakeOptions(
            version=Version.V1, min_version=Version.V1,
            swarm_id=self.swarm_id if initiator else None,
            integrity=self.live_method if live else IntegrityMethod.MERKLE,
            hash_func=cfg.hash_func,
            sig_alg=self.sig_alg if live else None,
            addressing=cfg.addressing,
            discard_window=self.live.window if self.live is not None else None,
            chunk_size=None if dialect is Dialect.LIBSWIFT else cfg.chunk_size,
        )

    def options_ok(self, o: HandshakeOptions, initiator_side: bool,
                   dialect: Dialect = Dialect.RFC) -> str | None:
        """Check a peer's options against our swarm metadata: None when they
        match, else why not (one line, for ``HandshakeRefused``)."""
        return refusal(o, self.config, self.swarm_id, initiator_side, dialect,
                       self.live_method if self.live is not None else None, self.sig_alg)
