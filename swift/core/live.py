"""Live streaming with the Unified Merkle Tree (RFC 7574 section 6.1.2).

The injector adds chunks to a growing hash tree; every ``per_sig``
(NCHUNKS_PER_SIG, a power of 2 >= 2) chunks it signs the hash of the new
subtree's root, the *munro* (6.1.2.1), with ECDSA P-256 (DNSSEC algorithm 13,
the RFC's default, 7.7).  The swarm ID is the public key as a DNSKEY without
Base64: algorithm octet then the 64-byte X||Y point (6.1, RFC 6605 section 4).
The signature covers the munro's on-the-wire chunk spec, a 64-bit NTP
timestamp and the munro hash (6.1.2.2); it is sent as r||s (64 bytes, 8.9).

Receivers trust a munro once its signature verifies and its timestamp is
not too old (6.1.2.4), then check each chunk against it with uncle hashes
inside the munro subtree (5.2).  Peers forget chunks behind the live discard
window (6.2).
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from swift.core import bins as B
from swift.core.binmap import Binmap
from swift.wire.constants import HASH_NAMES, HASH_SIZES, HashFunc, IntegrityMethod, SigAlg

if TYPE_CHECKING:
    from swift.core.livesig import LiveSigner

#: what goes before a DATA: ("h", bin, hash) or ("s", bin, timestamp, signature)
IntegrityItem = tuple[str, int, bytes] | tuple[str, int, int, bytes]

NTP_EPOCH_OFFSET = 2208988800  # seconds from 1900-01-01 to 1970-01-01


def ntp64(unix: float) -> int:
    """64-bit NTP timestamp (RFC 5905) for a Unix time."""
    sec = int(unix) + NTP_EPOCH_OFFSET
    frac = int((unix - int(unix)) * (1 << 32)) & 0xFFFFFFFF
    return ((sec & 0xFFFFFFFF) << 32) | frac


def ntp_to_unix(ts: int) -> float:
    """Inverse of :func:`ntp64` (era 0)."""
    return (ts >> 32) - NTP_EPOCH_OFFSET + (ts & 0xFFFFFFFF) / (1 << 32)


class Trust(enum.Enum):
    """Result of offering a signature to a live tree (6.1.1, 6.1.2.4).

    ``STALE``: the signature is valid but too old to tune in at (or behind
    the newest trusted timestamp by more than the allowed age).  It is the
    source's honest old data, not a bad chunk: the receiver must discard it
    (6.1.2.4) but must not blame the sender.  Only ``OK`` is truthy.
    """

    OK = "ok"
    BAD = "bad"
    STALE = "stale"

    def __bool__(self) -> bool:
        return self is Trust.OK


def _age_ok(ts: int, newest: int | None, unix_now: float, max_age: float) -> bool:
    """RFC 7574 6.1.2.4: when tuning in (nothing trusted yet) a signature
    older than ``max_age`` against our clock MUST be discarded; once tuned
    in, chunks inside the discard window are judged against the newest
    trusted timestamp (the stream's own clock), so a viewer that joined a
    paused stream or sits behind the live edge keeps verifying."""
    ref = unix_now if newest is None else ntp_to_unix(newest)
    return ref - ntp_to_unix(ts) <= max_age


def _chunk32_spec(lo: int, hi: int) -> bytes:
    """Chunks [lo, hi) as a 32-bit chunk range on the wire (8 bytes, 4.3.3)."""
    return lo.to_bytes(4, "big") + (hi - 1).to_bytes(4, "big")


def _signer() -> type[LiveSigner]:
    """:class:`~swift.core.livesig.LiveSigner`, imported at the first live swarm:
    it loads ``cryptography`` (~10 MB RSS), which a static transfer never needs
    (issue 17)."""
    from swift.core.livesig import LiveSigner
    return LiveSigner


def key_from_swarm_id(sid: bytes) -> Any:
    """The injector's public key in a live swarm ID (6.1), any algorithm of
    7.7 (ValueError if malformed): the parser of
    :meth:`~swift.core.livesig.LiveSigner.from_swarm_id`, one path."""
    return _signer().from_swarm_id(sid).pub


def munro_of(chunk: int, per_sig: int) -> int:
    """Bin of the munro covering ``chunk``."""
    lay = per_sig.bit_length() - 1
    return B.make(lay, chunk >> lay)


class LiveTree:
    """Growing hash tree with signed munros (source and receiver side)."""

    method = IntegrityMethod.UNIFIED_MERKLE

    def __init__(self, swarm_id: bytes, per_sig: int = 4, chunk_size: int = 1024,
                 func: HashFunc = HashFunc.SHA256,
                 spec_bytes: Callable[[int, int], bytes] | None = None,
                 private_key: object = None, signer: LiveSigner | None = None) -> None:
        if per_sig < 2 or per_sig & (per_sig - 1):
            raise ValueError("NCHUNKS_PER_SIG must be a power of 2 >= 2 (6.1.2.1)")
        if signer is None:
            signer = (_signer().from_key(private_key) if private_key is not None
                      else _signer().from_swarm_id(swarm_id))
        self.signer = signer
        self.swarm_id = swarm_id
        self.pub = signer.pub
        self.key = signer.key
        self.per_sig = per_sig
        self.chunk_size = chunk_size
        self.func = HashFunc(func)
        self.hash_size = HASH_SIZES[self.func]
        self._h = getattr(hashlib, HASH_NAMES[self.func])
        #: chunks [lo, hi) -> the on-the-wire chunk specification that is
        #: signed (6.1.1, 6.1.2.2); the Peer sets it from the swarm's chunk
        #: addressing unless given here (default: 32-bit chunk ranges)
        self.spec_bytes = spec_bytes or _chunk32_spec
        self.custom_spec = spec_bytes is not None
        self.hashes: dict[int, bytes] = {}
        #: munro bin -> (hash, NTP timestamp, signature) for verified munros
        self.signed: dict[int, tuple[bytes, int, bytes]] = {}
        #: one past the last chunk covered by a trusted munro
        self.frontier = 0
        #: newest trusted NTP timestamp (None until tuned in, 6.1.2.4)
        self.newest_ts: int | None = None
        #: the last refusal was for age only (not the sender's fault)
        self.last_stale = False
        #: munros with a valid signature that were too old (bounded): the
        #: sender sends a munro once, so its other chunks are stale too
        self.stale: set[int] = set()

    # -- source --------------------------------------------------------------

    @classmethod
    def source(cls, per_sig: int = 4, chunk_size: int = 1024, func: HashFunc = HashFunc.SHA256,
               key: object = None, alg: SigAlg | None = None, **kw: Any) -> LiveTree:
        """A new injector with a fresh (or given) key, any algorithm of 7.7
        (default ECDSAP256SHA256; with ``key``, ``alg`` must fit it)."""
        signer = (_signer().from_key(key, alg) if key is not None
                  else _signer().generate(alg or SigAlg.ECDSAP256SHA256))
        return cls(signer.swarm_id, per_sig, chunk_size, func, signer=signer, **kw)

    def sign_group(self, first: int, chunks: list[bytes], unix_now: float) -> int:
        """Hash ``per_sig`` new chunks from ``first``, sign their munro; returns its bin."""
        if self.key is None:
            raise ValueError("only the injector signs")
        if len(chunks) != self.per_sig or first % self.per_sig:
            raise ValueError("a munro covers exactly NCHUNKS_PER_SIG aligned chunks")
        level = [self._h(c).digest() for c in chunks]
        for j, d in enumerate(level):
            self.hashes[B.chunk(first + j)] = d
        lay = 0
        while len(level) > 1:
            lay += 1
            level = [self._h(level[k] + level[k + 1]).digest() for k in range(0, len(level), 2)]
            for j, d in enumerate(level):
                self.hashes[B.make(lay, (first >> lay) + j)] = d
        m = munro_of(first, self.per_sig)
        ts = ntp64(unix_now)
        self.signed[m] = (level[0], ts, self.signer.sign(self._signed_text(m, ts, level[0])))
        self.frontier = max(self.frontier, first + self.per_sig)
        self.newest_ts = ts if self.newest_ts is None else max(self.newest_ts, ts)
        return m

    def _signed_text(self, m: int, ts: int, h: bytes) -> bytes:
        lo, hi = B.base_range(m)
        return self.spec_bytes(lo, hi) + ts.to_bytes(8, "big") + h

    # -- receiver ------------------------------------------------------------

    def offer_munro(self, m: int, h: bytes, ts: int, sig: bytes, unix_now: float,
                    max_age: float = 60.0) -> Trust:
        """Check a signed munro (6.1.2.3-4); on success trust its hash.

        The signature is checked before the age, so a forgery is ``BAD``
        whatever its timestamp; a genuine but too old munro is ``STALE``.
        """
        self.last_stale = False
        if m in self.signed:
            return Trust.OK if self.signed[m][0] == h else Trust.BAD
        if B.layer(m) != self.per_sig.bit_length() - 1 or len(h) != self.hash_size:
            return Trust.BAD
        if not self.signer.verify(sig, self._signed_text(m, ts, h)):
            return Trust.BAD
        if not _age_ok(ts, self.newest_ts, unix_now, max_age):
            self.last_stale = True
            if len(self.stale) >= 1024:
                self.stale.clear()
            self.stale.add(m)
            return Trust.STALE  # too old: MUST discard (6.1.2.4), not corrupt
        self.stale.discard(m)
        self.signed[m] = (h, ts, sig)
        self.hashes[m] = h
        self.frontier = max(self.frontier, B.base_range(m)[1])
        self.newest_ts = ts if self.newest_ts is None else max(self.newest_ts, ts)
        return Trust.OK

    def verify(self, chunk: int, data: bytes, offered: dict[int, bytes]) -> bool:
        """Check a chunk against its trusted munro with uncle hashes (5.2)."""
        m = munro_of(chunk, self.per_sig)
        if m not in self.signed or not data or len(data) > self.chunk_size:
            return False
        b = B.chunk(chunk)
        d = self._h(data).digest()
        path = []
        while b != m and b not in self.hashes:
            s = B.sibling(b)
            sd = self.hashes.get(s) or offered.get(s)
            if sd is None:
                return False
            path.append((s, sd))
            path.append((b, d))
            d = self._h(d + sd).digest() if B.is_left(b) else self._h(sd + d).digest()
            b = B.parent(b)
        if self.hashes.get(b) != d:
            return False
        for pb, pd in path:
            self.hashes[pb] = pd
        return True

    def uncles(self, chunk: int, peer_has: Binmap | None) -> list[tuple[int, bytes]]:
        """Hashes a receiver needs for ``chunk`` below its munro, height descending."""
        m = munro_of(chunk, self.per_sig)
        b = B.chunk(chunk)
        out = []
        while b != m:
            p = B.parent(b)
            if peer_has is not None and not peer_has.is_empty(p):
                break
            s = B.sibling(b)
            out.append((s, self.hashes[s]))
            b = p
        out.reverse()
        return out

    def forget_before(self, chunk: int) -> None:
        """Drop hashes and munros wholly before ``chunk`` (discard window, 6.2)."""
        for b in [b for b in self.hashes if B.base_range(b)[1] <= chunk]:
            del self.hashes[b]
        for m in [m for m in self.signed if B.base_range(m)[1] <= chunk]:
            del self.signed[m]


class SignAllTree:
    """RFC 7574 section 6.1.1 "Sign All": the injector signs every chunk.

    The signature covers the chunk's on-the-wire chunk specification, a
    64-bit NTP timestamp and the chunk itself, in that order; a sender puts
    SIGNED_INTEGRITY for the chunk right before its DATA.  No hash tree: one
    signature check per chunk (hence the RFC recommends the Unified Merkle
    Tree on the Internet).  Same interface as :class:`LiveTree` for
    :class:`LiveContent` (``per_sig`` is 1: each chunk is its own "munro").
    """

    method = IntegrityMethod.SIGN_ALL
    per_sig = 1

    def __init__(self, swarm_id: bytes, chunk_size: int = 1024, func: HashFunc = HashFunc.SHA256,
                 spec_bytes: Callable[[int, int], bytes] | None = None,
                 signer: LiveSigner | None = None) -> None:
        self.signer = signer or _signer().from_swarm_id(swarm_id)
        self.swarm_id = swarm_id
        self.key = self.signer.key
        self.chunk_size = chunk_size
        self.func = HashFunc(func)
        self.hash_size = HASH_SIZES[self.func]
        #: chunks [lo, hi) -> the on-the-wire chunk specification that is
        #: signed (6.1.1, 6.1.2.2); the Peer sets it from the swarm's chunk
        #: addressing unless given here (default: 32-bit chunk ranges)
        self.spec_bytes = spec_bytes or _chunk32_spec
        self.custom_spec = spec_bytes is not None
        #: chunk -> (NTP timestamp, signature), for chunks in the window
        self.signed: dict[int, tuple[int, bytes]] = {}
        self.frontier = 0
        self.newest_ts: int | None = None
        self.last_stale = False

    @classmethod
    def source(cls, chunk_size: int = 1024, func: HashFunc = HashFunc.SHA256, key: object = None,
               alg: SigAlg | None = None, **kw: Any) -> SignAllTree:
        signer = (_signer().from_key(key, alg) if key is not None
                  else _signer().generate(alg or SigAlg.ECDSAP256SHA256))
        return cls(signer.swarm_id, chunk_size, func, signer=signer, **kw)

    def _text(self, i: int, ts: int, data: bytes) -> bytes:
        return self.spec_bytes(i, i + 1) + ts.to_bytes(8, "big") + data

    def sign_group(self, first: int, chunks: list[bytes], unix_now: float) -> int:
        """Sign each chunk from ``first`` (the injector); returns the last bin."""
        ts = ntp64(unix_now)
        for j, c in enumerate(chunks):
            self.signed[first + j] = (ts, self.signer.sign(self._text(first + j, ts, c)))
        self.frontier = max(self.frontier, first + len(chunks))
        self.newest_ts = ts if self.newest_ts is None else max(self.newest_ts, ts)
        return B.chunk(first + len(chunks) - 1)

    def offer(self, i: int, data: bytes, ts: int, sig: bytes, unix_now: float,
              max_age: float = 60.0) -> Trust:
        """Check chunk ``i`` against its signature (6.1.1).  A genuine but too
        old chunk is ``STALE`` (discarded, 6.1.2.4), a forgery ``BAD``."""
        self.last_stale = False
        if not data or len(data) > self.chunk_size:
            return Trust.BAD
        if not self.signer.verify(sig, self._text(i, ts, data)):
            return Trust.BAD
        if not _age_ok(ts, self.newest_ts, unix_now, max_age):
            self.last_stale = True
            return Trust.STALE
        self.signed[i] = (ts, sig)
        self.frontier = max(self.frontier, i + 1)
        self.newest_ts = ts if self.newest_ts is None else max(self.newest_ts, ts)
        return Trust.OK

    def forget_before(self, chunk: int) -> None:
        for c in [c for c in self.signed if c < chunk]:
            del self.signed[c]


class LiveContent:
    """Live counterpart of :class:`swift.core.content.Content` (kept in RAM).

    Holds at most ``window`` chunks (the live discard window, 6.2): older
    chunks, their hashes and munros are forgotten as the stream advances.
    """

    live = True

    def __init__(self, tree: LiveTree, window: int = 4096) -> None:
        self.tree = tree
        self.chunk_size = tree.chunk_size
        self.window = window
        self.have = Binmap()
        self.data: dict[int, bytes] = {}
        self._pending: list[bytes] = []
        self.next_chunk = 0
        self.complete = False

    @property
    def n_chunks(self) -> int | None:
        """One past the newest chunk covered by a trusted munro (None before any)."""
        return self.tree.frontier or None

    @property
    def is_source(self) -> bool:
        return self.tree.key is not None

    def read_chunk(self, i: int) -> bytes:
        return self.data[i]

    def chunk_bytes(self, i: int) -> bytes:
        return self.data[i]

    def flush(self) -> None:
        """Nothing to write: live chunks stay in RAM."""

    def holds(self, i: int, data: bytes) -> bool:
        """True when ``data`` is the verified chunk ``i`` we hold (a duplicate
        DATA we may acknowledge, RFC 7574 3.4)."""
        return self.data.get(i) == data

    def store_chunk(self, i: int, data: bytes) -> None:
        self.data[i] = data
        self.have.set(B.chunk(i))
        self._forget()

    def _forget(self) -> None:
        top = max(self.data) + 1 if self.data else 0
        low = top - self.window
        if low > 0:
            for c in [c for c in self.data if c < low]:
                del self.data[c]
            self.have.reset_range(0, low)
            # keep the munro covering the window start so late peers verify
            m = munro_of(low, self.tree.per_sig)
            self.tree.forget_before(B.base_range(m)[0])

    def append(self, payload: bytes, unix_now: float) -> list[int]:
        """Source: add stream bytes; returns chunk indices newly signed (6.1.2.3)."""
        cs = self.chunk_size
        buf = b"".join(self._pending) + payload
        self._pending = []
        full = [buf[i:i + cs] for i in range(0, len(buf) - len(buf) % cs, cs)]
        rest = buf[len(full) * cs:]
        if rest:
            self._pending = [rest]
        self._queue = getattr(self, "_queue", []) + full
        out: list[int] = []
        per = self.tree.per_sig
        while len(self._queue) >= per:
            group, self._queue = self._queue[:per], self._queue[per:]
            first = self.next_chunk
            self.tree.sign_group(first, group, unix_now)
            for j, c in enumerate(group):
                self.data[first + j] = c
            self.have.set_range(first, first + per)
            self.next_chunk += per
            out.extend(range(first, first + per))
        self._forget()
        return out

    def integrity_for(self, i: int, peer_have: Binmap, cold: bool,
                      sent: Binmap | None = None) -> list[IntegrityItem]:
        """Items to put before DATA i, in order (6.1.2.3): ("h", bin, hash),
        ("s", bin, ts, sig): the signed munro unless the peer indicated (HAVE
        or ACK) a chunk under it -- with every DATA under it until then, not
        only the first: a munro that went with a lost or reordered datagram
        would otherwise leave the rest unverifiable -- then the uncles below
        the munro."""
        t = self.tree
        if isinstance(t, SignAllTree):  # 6.1.1: SIGNED_INTEGRITY before every DATA
            ts, sig = t.signed[i]
            return [("s", B.chunk(i), ts, sig)]
        m = munro_of(i, t.per_sig)
        out: list[IntegrityItem] = []
        lo, hi = B.base_range(m)
        if peer_have.is_empty_range(lo, hi):
            h, ts, sig = t.signed[m]
            out += [("h", m, h), ("s", m, ts, sig)]
        out += [("h", b, h) for b, h in t.uncles(i, peer_have)]
        return out

    def rightmost_munro(self) -> int | None:
        """Bin of the newest signed munro we hold (6.1.2.4), or None."""
        t = self.tree
        if isinstance(t, SignAllTree) or not t.frontier:
            return None
        m = munro_of(t.frontier - 1, t.per_sig)
        if m in t.signed:
            return m
        return max(t.signed, key=lambda b: B.base_range(b)[1], default=None)

    def learn(self, hashes: list[tuple[int, bytes]], sigs: dict[int, tuple[int, bytes]],
              now: float) -> None:
        """Trust the signed munros that came with a DATA we do not keep (an
        unsolicited or duplicate chunk): the sender sends a munro once, so
        dropping it would fail every later chunk under it (6.1.2.3)."""
        t = self.tree
        if isinstance(t, SignAllTree) or not sigs:
            return
        offered = dict(hashes)
        for m, (ts, sig) in sigs.items():
            if m in offered and m not in t.signed:
                t.offer_munro(m, offered[m], ts, sig, now)

    def verify(self, i: int, data: bytes, hashes: list[tuple[int, bytes]],
               sigs: dict[int, tuple[int, bytes]], now: float) -> bool:
        """Trust offered signed munros, then check chunk ``i`` (6.1.2.1).

        False with ``tree.last_stale`` set: genuine but too old (6.1.2.4)."""
        t = self.tree
        if isinstance(t, SignAllTree):
            got = sigs.get(B.chunk(i))
            t.last_stale = False
            return got is not None and bool(t.offer(i, data, got[0], got[1], now))
        offered = dict(hashes)
        stale = False
        for m, (ts, sig) in sigs.items():
            if m in offered:
                stale |= t.offer_munro(m, offered[m], ts, sig, now) is Trust.STALE
        ok = t.verify(i, data, offered)
        # stale only if the chunk failed for want of that too-old munro
        m = munro_of(i, t.per_sig)
        t.last_stale = not ok and m not in t.signed and (stale or m in t.stale)
        return ok
