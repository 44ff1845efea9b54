"""A live PPSPP seeder and a live leecher on loopback, fed mutated and random
datagrams while the leecher downloads from the seeder (issue 13, "Done when": fuzz);
and a tracker peer under the same fuzzing while a leecher that knows only the
tracker finds the seeder through it and downloads.

Two fuzzers run beside the download for ``FUZZ_SECONDS`` (bounded in time and count):

* blind, from addresses that never completed a handshake (127.0.0.2, 127.9.9.9):
  mutations of real PPSPP datagrams built with the codec and the scapy layers
  (initiating HANDSHAKEs with the right and a wrong swarm ID, closing handshakes,
  and HAVE/REQUEST/DATA/INTEGRITY/ACK/PEX datagrams on the *real* channel IDs of
  the download, as an on-path observer would send them), plus random bytes;
* established, from 127.0.0.3: it completes the three-way handshake with each
  role, then sends mutations on its own channel: DATA whose chunk fails the hash
  check, REQUEST/HAVE/ACK/CANCEL with chunk ranges far out of bounds, INTEGRITY
  with garbage hashes, PEX_RES naming public and loopback addresses.

Asserted: both roles stay up (no local error, no datagram raised in a handler:
``internal_error`` stays 0), they count what they drop (``malformed``,
``refused``, ``unknown_channel``, ``unsolicited``, ``rejected``), every datagram
they send goes to the configured peer or to an address that sent them an
initiating HANDSHAKE, and to an address that never completed the handshake only
HANDSHAKE/HAVE (never DATA, REQUEST, INTEGRITY or PEX), and never more datagrams
than it was sent (no amplification in count); the download beside
completes with the seeder's SHA-256.  What no PPSPP peer can detect without
per-datagram authentication (a spoofer using the seeder's own address and port):
docs/security/ppspp.md.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from swift.aio.node import SwiftNode, downloader, seeder
from swift.core.peer import PeerConfig
from swift.wire import codec as C, layers as L
from swift.wire.constants import MsgType

from .conftest import Mutator, Target, bounded, fuzz_udp

pytestmark = pytest.mark.timeout(180)

BLIND = ("127.0.0.2", "127.9.9.9")
ESTABLISHED = "127.0.0.3"
MAX_DATAGRAMS = 100_000
#: only these may go to an address that never completed the handshake
HANDSHAKE_ONLY = {MsgType.HANDSHAKE, MsgType.HAVE}
#: swarm ID -> the options of a proper initiating HANDSHAKE (the role's own)
OPTIONS: dict[bytes, C.HandshakeOptions] = {}
DROPS = ("malformed", "refused", "unknown_channel", "unsolicited", "rejected")


@dataclass
class Sent:
    """Every datagram a node sent: destination -> message types (decoded with its context)."""

    ctx: C.WireContext
    by_dest: dict[tuple[str, int], list[set[int]]] = field(default_factory=dict)

    def record(self, items: list[tuple[bytes, Any]]) -> None:
        for data, addr in items:
            try:
                _, msgs, _ = C.decode_raw(data, self.ctx)
                types = {m[0] for m in msgs}
            except C.DecodeError:
                types = {-1}
            self.by_dest.setdefault(tuple(addr[:2]), []).append(types)


def _record_sends(node: SwiftNode) -> Sent:
    """Instrument the node's send path (the real socket still sends)."""
    sent = Sent(node.peer.ctx)
    real = node._send

    def send(items: list[tuple[bytes, Any]]) -> None:
        sent.record(items)
        real(items)

    node._send = send  # type: ignore[method-assign]  # spy on the send path
    return sent


def _seeds(ctx: C.WireContext, swarm: bytes, cids: list[int], n_chunks: int) -> list[Any]:
    """Real PPSPP datagrams (bytes and scapy packets) to mutate."""
    opts = OPTIONS[swarm]
    wrong = C.HandshakeOptions(version=1, min_version=1, swarm_id=os.urandom(len(swarm)))
    far = 2**31 - 1
    bodies = [
        [C.Have(0, n_chunks - 1)], [C.Have(far, far)], [C.Have(5, 2)],
        [C.Request(0, 10)], [C.Request(n_chunks, far)], [C.Request(0, far)],
        [C.Integrity(0, 0, os.urandom(ctx.hash_size)), C.Data(0, 0, 1, os.urandom(1024))],
        [C.Data(n_chunks + 5, n_chunks + 5, 0, os.urandom(1024))],
        [C.Data(3, 3, 0, os.urandom(100))],
        [C.Ack(0, far, 0)], [C.Cancel(0, far)], [C.Choke()], [C.Unchoke()], [C.PexReq()],
        [C.PexResV4("8.8.8.8", 6778), C.PexResV4("127.66.6.6", 1)],
        [C.PexResV6("2001:db8::1", 6778)],
    ]
    out: list[Any] = [C.encode_datagram(ctx, 0, [C.Handshake(0x1234, opts)]),
                      C.encode_datagram(ctx, 0, [C.Handshake(0x1234, wrong)]),
                      C.encode_datagram(ctx, 0, [C.Handshake(0x1234, opts), C.Request(0, far)]),
                      C.encode_datagram(ctx, 0x1234, [C.Handshake(0)])]
    for cid in cids or [0x1234]:
        out += [C.encode_datagram(ctx, cid, b) for b in bodies]
    with L.use_context(ctx):
        out += [L.from_codec(0, [C.Handshake(0x1234, opts)])]
        out += [L.from_codec(cids[0] if cids else 7, b) for b in bodies[:8]]
    return out


async def _handshake(s: socket.socket, target: tuple[str, int], swarm: bytes,
                     ctx: C.WireContext, rng: random.Random) -> int | None:
    """A proper three-way handshake from ``s``; the role's channel ID, or None."""
    loop = asyncio.get_running_loop()
    mine = rng.randrange(1, 2**32)
    for _ in range(20):  # bounded: at most 20 tries of 0.25 s
        s.sendto(C.encode_datagram(ctx, 0, [C.Handshake(mine, OPTIONS[swarm])]), target)
        deadline = time.monotonic() + 0.25
        while time.monotonic() < deadline:
            try:
                data = await asyncio.wait_for(loop.sock_recv(s, 65536), 0.25)
            except asyncio.TimeoutError:
                break
            if int.from_bytes(data[:4], "big") != mine:
                continue  # DATA still coming on an older channel
            _, msgs, _ = C.decode_raw(data, ctx)
            if msgs and msgs[0][0] == MsgType.HANDSHAKE and msgs[0][1]:
                theirs = msgs[0][1]
                s.sendto(theirs.to_bytes(4, "big"), target)  # third leg: the channel is up
                return theirs
    return None


async def _established_fuzzer(target: tuple[str, int], swarm: bytes, ctx: C.WireContext,
                              rng: random.Random, seconds: float, n_chunks: int) -> dict[str, int]:
    """Handshake properly from ESTABLISHED, then send mutated messages on that channel;
    handshake again every 256 datagrams (a mutation may close the channel or get us
    blacklisted: then the role refuses us, which is what it should do)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((ESTABLISHED, 0))
    s.setblocking(False)
    out = {"sent": 0, "answers": 0, "handshakes": 0}
    try:
        theirs = await _handshake(s, target, swarm, ctx, rng)
        assert theirs, f"no handshake reply from {target}"
        out["handshakes"] += 1
        bodies = [b[4:] for b in _seeds(ctx, swarm, [theirs], n_chunks)
                  if isinstance(b, bytes) and b[:4] == theirs.to_bytes(4, "big")]
        mut = Mutator(bodies, rng)
        end = time.monotonic() + seconds
        for n in bounded(range(MAX_DATAGRAMS), seconds, MAX_DATAGRAMS):
            if n % 256 == 255 and time.monotonic() < end - 1:
                again = await _handshake(s, target, swarm, ctx, rng)
                if again:
                    theirs = again
                    out["handshakes"] += 1
            body = mut.one() if rng.random() < 0.7 else rng.choice(bodies)
            try:
                s.sendto(theirs.to_bytes(4, "big") + body, target)
                out["sent"] += 1
            except OSError:
                pass
            while True:  # drain what the role answers (DATA for our REQUESTs)
                try:
                    s.recv(65536)
                    out["answers"] += 1
                except BlockingIOError:
                    break
            if n % 16 == 15:
                await asyncio.sleep(0.002)  # pace: the download beside shares the loop
    finally:
        s.close()
    return out


def _check_destinations(name: str, sent: Sent, allowed: set[tuple[str, int]]) -> int:
    """Check every destination; returns the datagrams sent to blind addresses."""
    blind = 0
    for dest, datagrams in sent.by_dest.items():
        assert dest[0].startswith("127."), f"{name} sent to {dest}"
        if dest in allowed or dest[0] == ESTABLISHED:
            continue
        assert dest[0] in BLIND, f"{name} sent to {dest}, neither configured nor a fuzzer"
        blind += len(datagrams)
        for types in datagrams:
            assert types <= HANDSHAKE_ONLY, (
                f"{name} sent {sorted(types)} to {dest}, which never completed a handshake")
    return blind


async def test_fuzzed_seeder_and_leecher_stay_up_and_the_download_completes(tmp_path):
    seed = random.SystemRandom().randrange(1 << 32)
    seed = int(os.environ.get("FUZZ_SEED", seed))
    print(f"fuzz seed {seed} (FUZZ_SEED={seed} reproduces this run)")
    rng = random.Random(seed)
    seconds = float(os.environ.get("FUZZ_SECONDS", "3"))
    src = tmp_path / "v.bin"
    src.write_bytes(os.urandom(3_000_000))
    out = tmp_path / "r.bin"
    # rate-capped so the download runs as long as the fuzzing does
    async with seeder(str(src), PeerConfig(upload_rate=3_000_000 / max(seconds, 1.0) / 1.5)) as s:
        s_sent = _record_sends(s)
        async with downloader(s.peer.swarm_id, str(out), PeerConfig()) as d:
            d_sent = _record_sends(d)
            d.connect(s.addr)
            for _ in range(100):  # the real channel IDs, for the blind fuzzer's seeds
                await asyncio.sleep(0.02)
                if s.peer.established and d.peer.established:
                    break
            n = s.peer.content.n_chunks or 1
            ctx, swarm = s.peer.ctx, s.peer.swarm_id
            OPTIONS[swarm] = d.peer._our_options(True)
            targets = [
                Target("seeder", s.addr, _seeds(ctx, swarm, list(s.peer.channels), n), BLIND),
                Target("leecher", d.addr, _seeds(ctx, swarm, list(d.peer.channels), n), BLIND),
            ]
            t0 = time.monotonic()
            blind = asyncio.to_thread(fuzz_udp, targets, seconds, rng.getrandbits(32),
                                      MAX_DATAGRAMS, lambda _n: time.sleep(0.002))
            est_s = _established_fuzzer(s.addr, swarm, ctx, random.Random(rng.getrandbits(32)),
                                        seconds, n)
            est_d = _established_fuzzer(d.addr, swarm, ctx, random.Random(rng.getrandbits(32)),
                                        seconds, n)
            sent_blind, sent_s, sent_d = await asyncio.gather(blind, est_s, est_d)
            fuzz_time = time.monotonic() - t0
            assert await d.wait_complete(90), f"download incomplete: {d.progress}"
            print(f"fuzzed {fuzz_time:.1f} s: blind {sent_blind}, established seeder {sent_s}, "
                  f"leecher {sent_d}")
            print("seeder stats", s.peer.stats)
            print("leecher stats", d.peer.stats)
            for name, node in (("seeder", s), ("leecher", d)):
                assert node.error is None, f"{name}: {node.error}"
                assert node.sock is not None, f"{name} closed its socket"
                assert node.peer.stats.get("internal_error", 0) == 0, f"{name} raised in a handler"
                assert sum(node.peer.stats.get(k, 0) for k in DROPS) > 0, f"{name} counted no drop"
                assert node.peer.stats["unknown_channel"] > 0 and node.peer.stats["refused"] > 0
                assert node.peer.stats["malformed"] > 0
            # no amplification in count: at most one answer per datagram a blind sender sent
            to_blind = _check_destinations("seeder", s_sent, {d.addr})
            assert to_blind <= sent_blind["seeder"], (to_blind, sent_blind)
            to_blind = _check_destinations("leecher", d_sent, {s.addr})
            assert to_blind <= sent_blind["leecher"], (to_blind, sent_blind)
    with open(src, "rb") as f1, open(out, "rb") as f2:
        assert hashlib.sha256(f1.read()).digest() == hashlib.sha256(f2.read()).digest()


async def test_a_fuzzed_tracker_still_introduces_the_seeder(tmp_path):
    """A tracker peer under the same fuzzing: it stays up, counts its drops, sends
    only to peers that handshook with it (HANDSHAKE/HAVE to blind senders), and a
    leecher that knows only the tracker finds the seeder by PEX and completes."""
    from swift.core.content import Content, MemoryStorage
    from swift.core.merkle import MerkleTree
    from swift.core.peer import Peer

    seed = int(os.environ.get("FUZZ_SEED", random.SystemRandom().randrange(1 << 32)))
    print(f"fuzz seed {seed} (FUZZ_SEED={seed} reproduces this run)")
    rng = random.Random(seed)
    seconds = float(os.environ.get("FUZZ_SECONDS", "3"))
    src = tmp_path / "v.bin"
    src.write_bytes(os.urandom(1_000_000))
    out = tmp_path / "r.bin"
    async with seeder(str(src), PeerConfig(upload_rate=500_000)) as s:
        root = s.peer.swarm_id
        tcfg = PeerConfig(tracker=True)
        tracker = SwiftNode(Peer(Content(MerkleTree.for_root(root), MemoryStorage()), tcfg))
        async with tracker:
            t_sent = _record_sends(tracker)
            s.connect(tracker.addr)  # the seeder registers
            for _ in range(100):
                await asyncio.sleep(0.02)
                if tracker.peer.established:
                    break
            ctx = tracker.peer.ctx
            OPTIONS[root] = s.peer._our_options(True)
            targets = [Target("tracker", tracker.addr,
                              _seeds(ctx, root, list(tracker.peer.channels), 1000), BLIND)]
            blind = asyncio.to_thread(fuzz_udp, targets, seconds, rng.getrandbits(32),
                                      MAX_DATAGRAMS, lambda _n: time.sleep(0.002))
            est = _established_fuzzer(tracker.addr, root, ctx, random.Random(rng.getrandbits(32)),
                                      seconds, 1000)
            async with downloader(root, str(out), PeerConfig(pex_connect=True)) as d:
                d_sent = _record_sends(d)
                d.connect(tracker.addr)  # knows only the tracker
                sent_blind, sent_est = await asyncio.gather(blind, est)
                assert await d.wait_complete(90), f"download incomplete: {d.progress}"
            print(f"blind {sent_blind}, established {sent_est}; tracker stats {tracker.peer.stats}")
            assert tracker.error is None and tracker.sock is not None
            st = tracker.peer.stats
            assert st.get("internal_error", 0) == 0
            assert st["malformed"] > 0 and st["refused"] > 0 and st["unknown_channel"] > 0
            assert st["verified"] == 0 and st["sent_data"] == 0  # a tracker never moves content
            to_blind = _check_destinations("tracker", t_sent, {s.addr, d.addr})
            assert to_blind <= sent_blind["tracker"]
            _check_destinations("leecher", d_sent, {tracker.addr, s.addr})
    with open(src, "rb") as f1, open(out, "rb") as f2:
        assert hashlib.sha256(f1.read()).digest() == hashlib.sha256(f2.read()).digest()
