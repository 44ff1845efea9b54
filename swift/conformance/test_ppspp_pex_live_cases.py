"""PPSPP (RFC 7574) conformance cases for peer address exchange (sec. 3.10, 8.13) and live streaming
(sec. 6).

PEX cases drive the implementation's seeder with raw test peers. Live cases
use the roles ``live-source`` and ``live-viewer`` (contract in
:mod:`swift.conformance`): our live viewer (``python -m swift live-view``,
which verifies every signature and chunk) against the implementation's
source, raw test peers for the discard window, and our live source behind a
relay that corrupts signatures for the implementation's viewer.
"""

from __future__ import annotations

import os
import time

import pytest

from swift.conformance.harness import (
    RawPeer,
    Relay,
    ctx_for,
    free_udp_port,
    in_stream_at_chunk,
    live_ctx,
    make_content,
    messages,
    our_live_source,
    our_live_view,
    spec_for,
    to_chunks,
)
from swift.conformance.test_ppspp_cases import (  # noqa: F401 (fixtures)
    CS,
    _open,
    _ppspp_profile,
    _root_of,
    impl_seeder,
)
from swift.core import bins as B
from swift.core.live import LiveTree
from swift.wire import codec as C
from swift.wire.constants import IntegrityMethod, MsgType, SigAlg

PEX_RES = (MsgType.PEX_RESv4, MsgType.PEX_RESv6)


def _pex_addrs(dgrams) -> set[tuple[str, int]]:
    return {(m.ip, m.port) for d in dgrams for m in d.messages if m.type in PEX_RES}


def _join(p: RawPeer, addr, swarm: bytes) -> int:
    """Handshake, then a keep-alive on the new channel so the peer has heard from us (sec. 3.11)."""
    remote = _open(p, addr, swarm)
    p.send(addr, remote, [])
    return remote


@pytest.mark.conformance(protocol="ppspp", section="RFC 7574 sec. 3.10, 8.13", role="seeder")
def test_pex_req_is_answered_with_known_peers(
    impl, impl_seeder, record_property,  # noqa: F811 (the fixture imported above)
):
    """Peer B joins the swarm; peer A then sends PEX_REQ: the answer is PEX_RESv4/v6 naming B (a
    peer the implementation recently exchanged messages with), each address a well-formed IPv4/IPv6
    one."""
    addr, _, data, _ = impl_seeder("chunk32")
    ctx = ctx_for("chunk32", CS)
    swarm = bytes.fromhex(_root_of(data))
    with RawPeer(ctx, channel=0xB0B0B0B0) as b, RawPeer(ctx, channel=0xA1A1A1A1) as a:
        rb = _join(b, addr, swarm)
        ra = _join(a, addr, swarm)
        b.send(addr, rb, [])  # B stays lively
        a.send(addr, ra, [C.PexReq()])
        got = a.recv(
            3.0,
            until=lambda d: (b.sock.getsockname()[0], b.sock.getsockname()[1]) in _pex_addrs([d]),
        )
        found = _pex_addrs(got)
        record_property("pex_res", ",".join(f"{h}:{p}" for h, p in sorted(found)) or "none")
        assert tuple(b.sock.getsockname()) in found, (
            f"PEX_REQ got {sorted(found) or 'no PEX_RES'}; want B at {b.sock.getsockname()}")
        record_property("includes_requester", str(tuple(a.sock.getsockname()) in found))


@pytest.mark.conformance(protocol="ppspp", section="RFC 7574 sec. 3.10, 8.13", role="seeder")
def test_no_pex_res_unless_requested(impl, impl_seeder):  # noqa: F811 (the fixture, above)
    """Two peers in the swarm, neither sends PEX_REQ: neither ever gets a PEX_RES (PEX_RES answers a
    PEX_REQ, sec. 3.10; unsolicited address lists are the amplification sec. 13 warns of)."""
    addr, _, data, _ = impl_seeder("chunk32")
    ctx = ctx_for("chunk32", CS)
    swarm = bytes.fromhex(_root_of(data))
    with RawPeer(ctx, channel=0xC0C0C0C0) as c, RawPeer(ctx, channel=0xD0D0D0D0) as d:
        rc = _join(c, addr, swarm)
        rd = _join(d, addr, swarm)
        for _ in range(3):
            c.send(addr, rc, [])
            d.send(addr, rd, [C.Request(0, 3)])
            c.recv(0.5)
            d.recv(0.5)
        for who, p in (("C", c), ("D", d)):
            unsolicited = _pex_addrs([x for _, x in p.received])
            assert not unsolicited, f"{who} got PEX_RES {sorted(unsolicited)} without asking"
        assert messages([x for _, x in d.received], MsgType.DATA), (
            "D's REQUEST got no DATA: channel not working"
        )


# ------------------------------------------------------------------ live streaming (sec. 6)

PER_SIG = 4


def _live_file(tmp_path, size: int, seed: int = 11) -> tuple[str, bytes]:
    path = str(tmp_path / "live.bin")
    return path, make_content(path, size, seed)


@pytest.mark.conformance(
    protocol="ppspp", section="RFC 7574 sec. 6.1, 6.1.2, 7.7, 8.9", role="live-source"
)
def test_live_stream_plays_at_our_viewer(impl, tmp_path):
    """The implementation injects a file live; our viewer, which trusts a chunk only under a munro
    whose SIGNED_INTEGRITY verifies with the swarm ID (the source's public key), plays 40 KB of it
    in order: whole chunks of the file from wherever it joined."""
    path, data = _live_file(tmp_path, 300 * CS)
    port = free_udp_port()
    with impl.start("live-source", path, "--port", port, "--per-sig", PER_SIG, "--rate", 100_000,
                    ready_line="READY") as src:
        swarm = src.ready_line.split()[1]
        out = str(tmp_path / "viewed.bin")
        cp = our_live_view(swarm, ("127.0.0.1", port), out, 40_000, PER_SIG, duration=12)
    got = open(out, "rb").read() if os.path.exists(out) else b""
    assert cp.returncode == 0 and len(got) >= 40_000, (
        f"our viewer played {len(got)} bytes (exit {cp.returncode}): {cp.stderr[-1500:]!r}")
    assert in_stream_at_chunk(data, got), (
        "played bytes are not a run of the injected stream's chunks"
    )


def _chunk_of(ctx, m) -> int:
    return to_chunks(ctx, m.start, m.end)[0]


@pytest.mark.conformance(
    protocol="ppspp", section="RFC 7574 sec. 6.1.2.2, 6.2, 7.9, 8.9", role="live-source"
)
def test_live_signed_integrity_and_discard_window(impl, tmp_path, record_property) -> None:
    """A source with a 32-chunk discard window that has injected 400 chunks: a REQUEST inside the
    window gets DATA preceded by the munro hash and a SIGNED_INTEGRITY whose signature verifies with
    the swarm ID (and the chunk verifies under it); a REQUEST for chunks 0-3, long out of the
    window, gets no DATA."""
    path, data = _live_file(tmp_path, 400 * CS)
    port = free_udp_port()
    ctx = live_ctx(CS)
    with impl.start(
        "live-source",
        path,
        "--port",
        port,
        "--per-sig",
        PER_SIG,
        "--window",
        32,
        "--rate",
        0,
        ready_line="READY",
    ) as src:
        swarm = bytes.fromhex(src.ready_line.split()[1])
        time.sleep(1.0)  # every chunk injected
        with RawPeer(ctx, channel=0x11FE11FE) as p:
            p.handshake(
                ("127.0.0.1", port),
                p.options(
                    swarm,
                    integrity=IntegrityMethod.UNIFIED_MERKLE,
                    sig_alg=SigAlg.ECDSAP256SHA256,
                    discard_window=1 << 20,
                ),
            )  # ours is wide: only the source's own window may hide chunks 0-3
            p.recv(
                2.0,
                until=lambda d: bool(messages([d], MsgType.HAVE)) and p.remote_channel is not None,
            )
            assert p.remote_channel is not None, "no HANDSHAKE reply to a live handshake"
            have = [
                to_chunks(ctx, m.start, m.end)
                for m in messages([x for _, x in p.received], MsgType.HAVE)
            ]
            assert have, "no HAVE from the live source"
            top = max(hi for _, hi in have)
            low = min(lo for lo, _ in have)
            record_property("have_span", f"{low}-{top - 1}")
            want = (top // PER_SIG - 2) * PER_SIG  # a whole signed group well inside the window
            src_addr = ("127.0.0.1", port)

            # acknowledge DATA as a viewer would (sec. 3.4), so congestion control
            # goes on; done once chunk ``last`` has arrived
            def ack_until(last: int):
                chan = p.remote_channel
                assert chan is not None, "the source's HANDSHAKE reply named no channel"

                def done(d) -> bool:
                    got = messages([d], MsgType.DATA)
                    for m in got:
                        p.send(src_addr, chan, [C.Ack(m.start, m.end, 1000)])
                    return any(_chunk_of(ctx, m) == last for m in got)
                return done

            p.send(src_addr, p.remote_channel, [C.Request(*spec_for(ctx, want, want + PER_SIG))])
            dgrams = p.recv(5.0, until=ack_until(want + PER_SIG - 1))
            # Then chunks 0-3 (out of the window), then a marker group inside the window: a source
            # serves
            # one peer's requests in order, so anything it would send for 0-3 arrives before the
            # marker's
            # last chunk. Waiting for the marker, not for a fixed time, keeps a slow (loaded) source
            # honest.
            marker = want - PER_SIG
            p.send(src_addr, p.remote_channel, [C.Request(*spec_for(ctx, 0, PER_SIG))])
            p.send(
                src_addr, p.remote_channel, [C.Request(*spec_for(ctx, marker, marker + PER_SIG))]
            )
            dgrams += p.recv(8.0, until=ack_until(marker + PER_SIG - 1))
            dgrams += p.recv(0.3, until=ack_until(-1))  # ACK and keep stragglers sent out of order
        # what arrived, in order: INTEGRITY (munro, uncles), SIGNED_INTEGRITY, DATA
        tree = LiveTree(swarm, PER_SIG, CS)
        hashes: dict[int, bytes] = {}
        verified, sig_ok, got_old, marker_seen = [], [], [], []
        for d in dgrams:
            for m in d.messages:
                if m.type == MsgType.INTEGRITY:
                    lo, hi = to_chunks(ctx, m.start, m.end)
                    hashes[B.make((hi - lo).bit_length() - 1, lo // (hi - lo))] = m.hash
                elif m.type == MsgType.SIGNED_INTEGRITY:
                    lo, hi = to_chunks(ctx, m.start, m.end)
                    b = B.make((hi - lo).bit_length() - 1, lo // (hi - lo))
                    sig_ok.append(
                        b in hashes
                        and tree.offer_munro(b, hashes[b], m.timestamp, m.signature, time.time())
                    )
                elif m.type == MsgType.DATA:
                    i = _chunk_of(ctx, m)
                    if i < PER_SIG:
                        got_old.append(i)
                    elif want <= i < want + PER_SIG:
                        verified.append(tree.verify(i, m.payload, hashes) and
                                        m.payload == data[i * CS:(i + 1) * CS])
                    elif marker <= i < marker + PER_SIG:
                        marker_seen.append(i)
    assert not got_old, (
        f"DATA for chunks {got_old}, which left the 32-chunk discard window long ago (sec. 6.2)"
    )
    assert sig_ok and all(sig_ok), (
        f"SIGNED_INTEGRITY verification: {sig_ok or 'none received'} (sec. 6.1.2.2, 8.9)"
    )
    assert len(verified) == PER_SIG and all(verified), (
        f"chunks {want}-{want + PER_SIG - 1}: verified {verified}"
    )
    assert marker + PER_SIG - 1 in marker_seen, (
        f"chunks {marker}-{marker + PER_SIG - 1}, requested after 0-3 and inside the window, never "
        "arrived: "
        "cannot tell whether the source would have served the old chunks"
    )
    record_property("window_respected", str(top - low <= 32 + PER_SIG))


def _flip_signatures(d, from_server: bool):
    if not from_server or not any(m.type == MsgType.SIGNED_INTEGRITY for m in d.messages):
        return None
    return [C.SignedIntegrity(m.start, m.end, m.timestamp, bytes(b ^ 0x5A for b in m.signature))
            if m.type == MsgType.SIGNED_INTEGRITY else m for m in d.messages]


@pytest.mark.conformance(
    protocol="ppspp", section="RFC 7574 sec. 6.1.2.3, 6.1.2.4, 5.3", role="live-viewer"
)
def test_live_viewer_refuses_chunks_with_a_bad_signature(impl, tmp_path):
    """The implementation views our live stream through a relay. Untouched: it plays whole chunks of
    the stream. With every SIGNED_INTEGRITY's signature corrupted (data and hashes genuine): it must
    write nothing, since no munro can be trusted."""
    path, data = _live_file(tmp_path, 600 * CS)
    with our_live_source(path, rate=100_000, per_sig=PER_SIG) as (addr, swarm):
        for tamper, name in ((None, "clean"), (_flip_signatures, "bad-signature")):
            out = str(tmp_path / f"{name}.bin")
            with Relay(addr, live_ctx(CS), tamper=tamper) as relay:
                cp = impl.run(
                    "live-view",
                    swarm,
                    f"127.0.0.1:{relay.address[1]}",
                    "-o",
                    out,
                    "--per-sig",
                    PER_SIG,
                    "--bytes",
                    8 * CS,
                    "--timeout",
                    5 if tamper is None else 3,
                    timeout=40,
                )
            got = open(out, "rb").read() if os.path.exists(out) else b""
            if tamper is None:
                assert cp.returncode == 0 and in_stream_at_chunk(data, got), (
                    f"clean stream: exit {cp.returncode}, {len(got)} bytes {cp.stderr[-1000:]!r}")
            else:
                assert not got, (
                    f"wrote {len(got)} bytes under munros whose signatures do not verify"
                )
                assert cp.returncode != 0, "exit 0 without a verifiable chunk"
