"""Swarm metadata and local policy for :class:`swift.core.peer.Peer`.

Split from peer.py.  The swarm metadata of RFC 7574 section 3.1 (a-f:
chunk size, hash function, chunk addressing; the swarm ID comes from the
content), the compatibility profile (``rfc`` or ``libswift``, see
docs/swift-libswift-compat.md) and local policy: download algorithm and
VoD windows (paper III-C), eq. 2's video bit rate, bounds per peer,
timeouts, LEDBAT options, upload cap, PEX and live settings.  Re-exported
by :mod:`swift.core.peer`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from swift.wire.constants import ChunkAddressing, HashFunc, IntegrityMethod, SigAlg, Version

if TYPE_CHECKING:
    from swift.wire.codec import HandshakeOptions

#: largest datagram we compose (bytes): one 1 KiB chunk with its hashes
#: fits an Ethernet MTU (RFC 7574 8.1)
MAX_DGRAM = 1400
#: UDP payload of one 1500-byte Ethernet frame over IPv6 (1500 - 40 - 8)
MTU_PAYLOAD = 1452


class Dialect(Enum):
    """What one channel speaks (docs/swift-libswift-compat.md): kept per
    channel, so one swarm may serve RFC 7574 peers and libswift at once."""

    #: RFC 7574: Chunk Size option sent, a missing Merkle hash option means SHA-256
    RFC = "rfc"
    #: draft-10 as libswift speaks it: no Chunk Size / Supported Messages
    #: options (libswift drops a handshake carrying them), missing hash = SHA-1
    LIBSWIFT = "libswift"


#: profiles: "rfc" and "libswift" fix every channel's dialect; "auto" starts
#: a channel we open in RFC 7574 and alternates with the libswift dialect
#: while the handshake goes unanswered, and answers a handshake in the
#: dialect it came in (one without a Chunk Size option gets a reply without)
PROFILES = ("rfc", "libswift", "auto")


@dataclass
class PeerConfig:
    """Swarm metadata (section 3.1 a-f) and local policy."""

    chunk_size: int = 1024
    hash_func: HashFunc = HashFunc.SHA256
    addressing: ChunkAddressing = ChunkAddressing.CHUNK32
    #: "rfc" (RFC 7574), "libswift" (draft-10 as libswift implements it) or
    #: "auto" (the dialect per channel, see :data:`PROFILES`)
    profile: str = "rfc"
    picker: str = "linear"
    #: the linear picker starts each block of 256 chunks at a per-peer offset
    #: (picker.LinearPicker), so a loss-free flash crowd's leechers share at
    #: LEDBAT's 25 ms TARGET; not while an in-order consumer is attached (the
    #: HTTP gateway; ``-o -`` runs the VoD picker): docs/ledbat.md
    picker_twist: bool = True
    #: VoD windows in chunks (paper III-C) and video bit rate in bytes/s (eq. 2)
    high_window: int = 64
    mid_window: int = 256
    bitrate: float = 125_000.0
    #: x of eq. 2 (paper III-A) at the start; a playback stall adds
    #: ``fast_factor_step`` (up to ``fast_factor_max``), every
    #: ``fast_relax_s`` seconds of video played without a stall takes one
    #: step back (down to ``fast_factor``); docs/swift.md, "The paper's
    #: algorithms"
    fast_factor: float = 1.5
    fast_factor_step: float = 0.5
    fast_factor_max: float = 4.0
    fast_relax_s: float = 10.0
    #: push mode (paper II: "we implement Libswift as a push protocol";
    #: RFC 7574 3.7): a complete peer sends every peer the chunks it lacks
    #: without waiting for REQUESTs, and DATA nobody asked for is accepted
    #: (Merkle-verified as any other).  A push leecher asks a complete peer
    #: for nothing while its DATA keeps coming; after ``push_fallback``
    #: seconds without any it asks as in pull mode (what push lost).
    #: Leechers among themselves pull.  Off: pull only (the default)
    push: bool = False
    push_fallback: float = 2.0
    max_channels: int = 64
    #: seconds a channel we answered (reply state) waits for the initiator's
    #: next datagram (RFC 7574 3.1.1 step 4) before it is dropped; at
    #: ``max_channels`` a new handshake evicts the oldest such channel:
    #: spoofed or blind handshakes never complete and must not hold the slots.
    #: Longer than ``keepalive``: an initiator with nothing to say completes
    #: the handshake with its first keep-alive
    half_open_timeout: float = 30.0
    queue_limit: int = 65536
    max_outstanding: int = 4096
    max_bad_chunks: int = 3
    keepalive: float = 20.0
    #: seconds a HAVE that would go alone in a datagram waits after the
    #: channel's last HAVE: HAVEs ride on whatever the channel sends anyway
    #: (ACK, REQUEST, ...), and on a quiet channel at most one HAVE-only
    #: datagram goes out per interval (libswift's schedule: about one RTT;
    #: docs/sim-fig6.md, "HAVEs on the channel's schedule").  The completing
    #: chunk and live chunks are announced at once; 0: every chunk at once
    have_interval: float = 0.05
    #: a HAVE waiting for its interval is due at the next multiple of
    #: ``have_interval`` (one grid for every channel of the peer) rather than
    #: at its channel's last HAVE + the interval: the channels waiting share
    #: one wake-up per interval instead of one each.  A HAVE alone may wait up
    #: to one interval longer.  Off by default: 19-35 % less CPU in simulated
    #: VoD swarms, but it changes them (32 leechers: start-up 1.3 s and
    #: completion 0.7 s sooner, a few more stalls; docs/sim-fig6.md, sessions
    #: 20 and 24)
    have_grid: bool = False
    dead_after: float = 180.0
    #: seconds of silence, while our requests are outstanding, after which
    #: the initiator re-handshakes (a restarted peer drops the old channel)
    rehandshake_after: float = 4.0
    request_timeout: float = 0.5
    #: seconds of playback before a high-priority chunk is due: a request
    #: still unanswered then goes to another peer (paper III-C)
    deadline_margin: float = 1.0
    upload_rate: float | None = None
    #: ACK delay from the kernel arrival time (SO_TIMESTAMPNS) instead of
    #: the time our loop handled the DATA.  Off by default: the wait in our
    #: receive buffer is a queue the sender should slow down for (on
    #: loopback the kernel time cost 15-20 % more CPU and lower MB/s, and it
    #: did not measurably help the loaded flash crowd; docs/swift.md)
    delay_from_kernel: bool = False
    slow_start: bool = True
    #: LEDBAT's TARGET queuing delay in ms (RFC 6817 3.2.2: at most 100).  None:
    #: 25 ms toward every peer (libswift's own LEDBAT_TARGET), which leaves a
    #: competing TCP flow >= 90 % of the link where 100 ms does not; the
    #: picker's twist keeps seeder-limited swarms sharing (docs/ledbat.md,
    #: "The default TARGET")
    ledbat_target_ms: float | None = None
    pex_connect: bool = False
    #: tracker: keep channels and answer PEX_REQ only, never request data
    #: (RFC 7574 3.10.1: "PEX messages can be used to construct a dedicated
    #: tracker peer")
    tracker: bool = False
    #: PEX with swarm-membership certificates (8.13, 12.2.2): the CA
    #: (tracker) public key as DER SubjectPublicKeyInfo, part of the swarm
    #: metadata.  When set, PEX answers carry PEX_REScert only and plain
    #: PEX_RESv4/v6 are ignored; a certificate is checked before its
    #: address is contacted or passed on.
    pex_ca: bytes | None = None
    #: the tracker's CA private key: it certifies the peers it handshook with
    pex_ca_key: Any = None
    pex_cert_lifetime: float = 3600.0
    #: live: start this many chunks behind the newest one announced (6.1.2.4)
    live_prebuffer: int = 16
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ValueError(f"profile must be one of {', '.join(PROFILES)}, not {self.profile!r}")
        if self.ledbat_target_ms is not None and not 0 < self.ledbat_target_ms <= 100:
            raise ValueError(f"LEDBAT target must be in (0, 100] ms (RFC 6817 3.2.2), "
                             f"not {self.ledbat_target_ms!r}")
        if not 0 <= self.have_interval <= 10:
            raise ValueError(f"HAVE interval must be in [0, 10] s, not {self.have_interval!r}")

    @staticmethod
    def libswift(**kw: Any) -> PeerConfig:
        """The libswift compatibility profile (SHA-1, 32-bit chunk ranges)."""
        kw.setdefault("hash_func", HashFunc.SHA1)
        kw.setdefault("addressing", ChunkAddressing.CHUNK32)
        return PeerConfig(profile="libswift", **kw)


def dialect_of(o: HandshakeOptions) -> Dialect:
    """The dialect of a peer's handshake under profile "auto": libswift never
    sends the Chunk Size or Supported Messages options, an RFC 7574 peer
    always sends Chunk Size (7.11)."""
    if o.chunk_size is None and o.supported is None:
        return Dialect.LIBSWIFT
    return Dialect.RFC


def refusal(o: HandshakeOptions, cfg: PeerConfig, swarm_id: bytes, initiator_side: bool,
            dialect: Dialect, live_method: IntegrityMethod | None, sig_alg: SigAlg) -> str | None:
    """Why a peer's handshake options do not fit our swarm metadata (one line
    naming what and why), or None when they do.  ``initiator_side``: the
    options open a channel (they must name the swarm); ``live_method``: the
    live integrity method, None for static content."""
    if o.legacy:
        return "legacy swift handshake (libswift's pre-PPSPP fallback, not spoken here)"
    if o.version is not None and o.version < Version.V1:
        return f"protocol version {o.version}, this peer speaks 1"
    if o.min_version is not None and o.min_version > Version.V1:
        return f"minimum version {o.min_version}, this peer speaks 1"
    if o.version is None and dialect is Dialect.RFC and cfg.profile == "rfc":
        return "no version option"
    if initiator_side and o.swarm_id is None:
        return "no swarm ID"
    if o.swarm_id is not None and o.swarm_id != swarm_id:
        return f"swarm ID {o.swarm_id.hex()[:16]}... is not {swarm_id.hex()[:16]}..."
    live = live_method is not None
    want = live_method if live_method is not None else IntegrityMethod.MERKLE
    # an absent option means the default: Merkle Hash Tree for static
    # content, Unified Merkle Tree for live (7.5); ECDSAP256SHA256 (7.7)
    default_im = IntegrityMethod.UNIFIED_MERKLE if live else IntegrityMethod.MERKLE
    im = o.integrity if o.integrity is not None else default_im
    if im != want:
        return f"integrity method {im}, this swarm uses {int(want)}"
    sa = o.sig_alg if o.sig_alg is not None else SigAlg.ECDSAP256SHA256
    if live and sa != sig_alg:
        return f"live signature algorithm {sa}, this swarm uses {int(sig_alg)}"
    default_hf = HashFunc.SHA1 if dialect is Dialect.LIBSWIFT else HashFunc.SHA256
    hf = o.hash_func if o.hash_func is not None else default_hf
    if hf != cfg.hash_func:
        return f"Merkle hash function {hf}, this swarm uses {int(cfg.hash_func)}"
    cam = o.addressing if o.addressing is not None else ChunkAddressing.CHUNK32
    if cam != cfg.addressing:
        return f"chunk addressing {cam}, this swarm uses {int(cfg.addressing)}"
    if o.chunk_size is not None and o.chunk_size != cfg.chunk_size:
        return f"chunk size {o.chunk_size}, this swarm uses {cfg.chunk_size}"
    return None
