"""PPSPP (RFC 7574) conformance cases: an external peer against ours, a raw test peer and a
tampering relay.

Roles: ``seeder`` cases drive the implementation's seeder with our leecher or
the raw test peer; ``leecher`` cases make the implementation download from
our seeder, directly or through :class:`~swift.conformance.harness.Relay`,
which corrupts chunks or uncle hashes in flight or injects CHOKE.
"""

from __future__ import annotations

import os
import time
from contextlib import ExitStack
from typing import Any

import pytest

from swift.conformance import ADDRESSING, harness as H
from swift.conformance.harness import (
    RawPeer,
    Relay,
    chunk_of_file,
    corrupt,
    ctx_for,
    free_udp_port,
    make_content,
    messages,
    our_leech,
    our_seeder,
    sha256_file,
    spec_for,
    to_chunks,
)
from swift.core import bins as B
from swift.core.merkle import MerkleTree
from swift.wire import codec as C
from swift.wire.constants import HashFunc, MsgType

CS = 1024
N_CHUNKS = 100


@pytest.fixture(autouse=True)
def _ppspp_profile(request):
    """The dialect of the implementation under test (registry ``env`` ``PPSPP_PROFILE``: rfc or
    libswift), for the helpers below and in :mod:`swift.conformance.harness`; back to rfc after the
    case."""
    chosen = getattr(getattr(request.node, "callspec", None), "params", {}).get("impl")
    H.set_profile(getattr(chosen, "env", {}).get("PPSPP_PROFILE", "rfc"))
    yield H.PROFILE
    H.set_profile("rfc")


def _content(tmp_path, n_chunks: int = N_CHUNKS, seed: int = 7) -> tuple[str, bytes]:
    path = str(tmp_path / "content.bin")
    return path, make_content(path, n_chunks * CS - 300, seed)  # a short last chunk


@pytest.fixture
def impl_seeder(impl, tmp_path):
    """Start the implementation seeding our content: ``start(addressing, n_chunks)`` returns
    (address, root hex, data, path); every seeder started is stopped at the end."""
    with ExitStack() as stack:
        def start(addressing: str = "chunk32", n_chunks: int = N_CHUNKS):
            path, data = _content(tmp_path, n_chunks)
            port = free_udp_port()
            # the READY line (with the root hash) is consumed by the plugin; we recompute the root
            stack.enter_context(impl.start("seed", path, "--port", port, "--addressing", addressing,
                                           "--chunk-size", CS, ready_line="READY"))
            return ("127.0.0.1", port), _root_of(data), data, path

        yield start


def _root_of(data: bytes) -> str:
    return MerkleTree.build([data[i:i + CS] for i in range(0, len(data), CS)], H.PROFILE.hash_func,
                            CS).root_hash.hex()


def _tree(data: bytes) -> MerkleTree:
    return MerkleTree.build(
        [data[i : i + CS] for i in range(0, len(data), CS)], H.PROFILE.hash_func, CS
    )


def _leech(impl, root: str, addr, out: str, addressing: str, timeout: float = 20):
    return impl.run("leech", root, f"{addr[0]}:{addr[1]}", "-o", out, "--addressing", addressing,
                    "--chunk-size", CS, "--timeout", timeout, timeout=timeout + 30)


# ------------------------------------------------------------------ download / seed, every
# addressing


@pytest.mark.conformance(protocol="ppspp", section="RFC 7574 sec. 4, 7.8, 3.3, 5", role="leecher")
@pytest.mark.parametrize("addressing", ADDRESSING)
def test_download_from_our_seeder(impl, tmp_path, addressing):
    """The implementation downloads from our seeder with each chunk addressing method; hash-verified
    file."""
    path, data = _content(tmp_path)
    out = str(tmp_path / "out.bin")
    with our_seeder(path, addressing, CS) as (addr, root):
        assert root == _root_of(data)
        cp = _leech(impl, root, addr, out, addressing)
    assert cp.returncode == 0, f"leech exit {cp.returncode}: {cp.stderr[-2000:]!r}"
    assert sha256_file(out) == sha256_file(path)


@pytest.mark.conformance(
    protocol="ppspp", section="RFC 7574 sec. 4, 7.8, 3.2-3.4, 5", role="seeder"
)
@pytest.mark.parametrize("addressing", ADDRESSING)
def test_seed_to_our_leecher(impl, impl_seeder, tmp_path, addressing):
    """Our leecher downloads from the implementation's seeder, verifying every chunk against the
    root hash."""
    addr, _, data, path = impl_seeder(addressing)
    out = str(tmp_path / "ours.bin")
    cp = our_leech(_root_of(data), addr, out, addressing, CS, timeout=20)
    assert cp.returncode == 0, f"our leecher: {cp.stderr[-2000:]!r}"
    assert sha256_file(out) == sha256_file(path)


# ------------------------------------------------------------------ handshake (raw test peer)

def _accepting_handshakes(dgrams, our_channel: int) -> list:
    return [m for d in dgrams if d.channel == our_channel for m in d.messages
            if m.type == MsgType.HANDSHAKE and m.channel != 0]


@pytest.mark.conformance(protocol="ppspp", section="RFC 7574 sec. 3.1, 7, 8.4, 3.2", role="seeder")
def test_handshake_reply_options_and_have(impl, impl_seeder):
    """A valid HANDSHAKE gets a HANDSHAKE to our channel with a non-zero channel and compatible
    options (version 1, our addressing, SHA-256 Merkle), then HAVE covering the whole content."""
    addr, _, data, _ = impl_seeder("chunk32")
    n = (len(data) + CS - 1) // CS
    ctx = ctx_for("chunk32", CS)
    with RawPeer(ctx) as p:
        p.handshake(addr, p.options(bytes.fromhex(_root_of(data))))

        def enough(_d) -> bool:
            seen = [x for _, x in p.received]
            return _have_covers(ctx, seen, n) and bool(_accepting_handshakes(seen, p.channel))

        got = p.recv(3.0, until=enough)
        allg = [x for _, x in p.received]
        hs = _accepting_handshakes(allg, p.channel)
        assert hs, (
            f"no HANDSHAKE reply to channel {p.channel:#x} within 3 s ({len(got)} "
            f"datagrams{_undecodable(p)})"
        )
        o = hs[0].options
        assert o.version in (None, 1), f"version {o.version}"
        assert o.addressing in (None, ctx.addressing)
        assert o.hash_func in (None, H.PROFILE.hash_func)
        assert o.integrity in (None, 1), (
            "Merkle hash tree (7.5 value 1) expected for static content"
        )
        assert _have_covers(ctx, allg, n), "no HAVE covering every chunk within 3 s"


def _undecodable(p: RawPeer) -> str:
    """For a failure message: the datagrams our codec could not decode (a decode failure is named as
    such)."""
    if not p.undecodable:
        return ""
    return (f"; {len(p.undecodable)} datagram(s) our codec could not decode, "
            f"first: {p.undecodable[0].describe()}")


def _accepting_head(data: bytes, our_channel: int) -> int:
    """The channel ID of an accepting HANDSHAKE at the head of a datagram, read from the fixed
    fields that precede any option (sec. 8.4, 3.11: destination channel, message type 0, the
    sender's channel ID); 0 if the datagram does not start so. Decides acceptance even when the
    options cannot be decoded."""
    if (
        len(data) < 9
        or int.from_bytes(data[:4], "big") != our_channel
        or data[4] != MsgType.HANDSHAKE
    ):
        return 0
    return int.from_bytes(data[5:9], "big")


def _assert_not_accepted(p: RawPeer, got: list, what: str) -> None:
    """A refusal is silence or a closing HANDSHAKE (channel 0). A reply our codec cannot parse is
    neither: an accepting HANDSHAKE head with options we cannot decode is an acceptance; anything
    else undecodable is reported as a decode failure, never counted as the refusal the case
    expects."""
    assert not _accepting_handshakes(got, p.channel), f"accepted {what}"
    heads = [(ch, u) for u in p.undecodable if (ch := _accepting_head(u.data, p.channel))]
    assert not heads, (
        f"accepted {what}: an accepting HANDSHAKE (its channel {heads[0][0]:#x}) whose options "
        f"our codec cannot decode: {heads[0][1].describe()}"
    )
    assert not p.undecodable, (
        f"cannot tell whether it refused {what}: {len(p.undecodable)} reply datagram(s) our codec "
        "could not "
        f"decode (a decode failure, not a refusal); first: {p.undecodable[0].describe()}"
    )


def _have_covers(ctx, dgrams, n: int) -> bool:
    have: set[int] = set()
    for m in messages(dgrams, MsgType.HAVE):
        lo, hi = to_chunks(ctx, m.start, m.end)
        have.update(range(lo, min(hi, n)))
    return len(have) >= n


@pytest.mark.conformance(protocol="ppspp", section="RFC 7574 sec. 7.2, 7.3", role="seeder")
@pytest.mark.parametrize("version,min_version", [(2, 2), (0, None), (9, 9)])
def test_refuses_unsupported_versions(impl, impl_seeder, version, min_version):
    """A HANDSHAKE asking for a version the implementation cannot speak (only 1 is defined) is not
    accepted: silence or a closing HANDSHAKE (channel 0), never an accepting one. A valid one
    afterwards still works."""
    addr, _, data, _ = impl_seeder("chunk32")
    ctx = ctx_for("chunk32", CS)
    swarm = bytes.fromhex(_root_of(data))
    with RawPeer(ctx, channel=0x0BADBAD0) as p:
        p.handshake(addr, p.options(swarm, version=version, min_version=min_version))
        _assert_not_accepted(p, p.recv(1.5), f"version {version} (min {min_version})")
    with RawPeer(ctx, channel=0x600D600D) as p:
        p.handshake(addr, p.options(swarm))
        assert _accepting_handshakes(
            p.recv(3.0, until=lambda d: bool(_accepting_handshakes([d], p.channel))), p.channel
        ), "refusing a bad version broke later handshakes"


@pytest.mark.conformance(protocol="ppspp", section="RFC 7574 sec. 3.1.1, 7.4, 7.8", role="seeder")
def test_refuses_unknown_swarm_and_mismatched_options(impl, impl_seeder):
    """Unknown swarm ID, or a different chunk size / hash function than the swarm's: not
    accepted."""
    addr, _, data, _ = impl_seeder("chunk32")
    ctx = ctx_for("chunk32", CS)
    swarm = bytes.fromhex(_root_of(data))
    for i, opts in enumerate(
        [
            dict(swarm=os.urandom(len(swarm))),
            dict(swarm=swarm, chunk_size=CS * 2),
            dict(swarm=swarm, hash_func=HashFunc.SHA512),
        ]
    ):
        with RawPeer(ctx, channel=0x100 + i) as p:
            sw = opts.pop("swarm")
            p.handshake(addr, p.options(sw, **opts))
            _assert_not_accepted(p, p.recv(1.0), str(opts or "an unknown swarm ID"))


@pytest.mark.conformance(protocol="ppspp", section="RFC 7574 sec. 3.1, 3.1.1, 7.8", role="seeder")
@pytest.mark.parametrize("other", ["bin32", "chunk64"])
def test_refuses_another_chunk_addressing_method(impl, impl_seeder, other):
    """The chunk addressing method is swarm metadata (sec. 3.1 (c)): a HANDSHAKE for the swarm's ID
    that names another method than the swarm's (chunk32 here) is for another swarm and gets no
    accepting reply."""
    addr, _, data, _ = impl_seeder("chunk32")
    with RawPeer(ctx_for(other, CS), channel=0x0ADD0ADD) as p:
        p.handshake(addr, p.options(bytes.fromhex(_root_of(data))))
        _assert_not_accepted(p, p.recv(1.0), f"a HANDSHAKE asking for {other} in a chunk32 swarm")


# ------------------------------------------------------------------ messages (raw test peer)

def _open(p: RawPeer, addr, swarm: bytes) -> int:
    p.handshake(addr, p.options(swarm))
    got = p.recv(3.0, until=lambda d: bool(_accepting_handshakes([d], p.channel)))
    hs = _accepting_handshakes(got, p.channel)
    assert hs, f"no HANDSHAKE reply{_undecodable(p)}"
    return hs[0].channel


@pytest.mark.conformance(
    protocol="ppspp", section="RFC 7574 sec. 3.7, 3.3, 3.5, 5.3, 8.6, 8.8", role="seeder"
)
@pytest.mark.parametrize("addressing", ["bin32", "chunk32", "byte64"])
def test_request_gets_data_with_correct_integrity(impl, impl_seeder, addressing) -> None:
    """REQUEST for chunks 0-7: each DATA carries exactly the chunk, and every INTEGRITY hash is the
    true Merkle node hash of the bin it names (checked against our tree of the same file)."""
    addr, _, data, _ = impl_seeder(addressing)
    ctx = ctx_for(addressing, CS)
    tree = _tree(data)
    with RawPeer(ctx) as p:
        remote = _open(p, addr, tree.root_hash)
        p.send(addr, remote, [C.Request(*spec_for(ctx, 0, 8))])
        seen: dict[int, bytes] = {}

        def done(d) -> bool:
            for m in messages([d], MsgType.DATA):
                lo, hi = to_chunks(ctx, m.start, m.end)
                seen[lo] = m.payload
                p.send(addr, remote, [C.Ack(m.start, m.end, 1000)])  # as a leecher would (sec. 3.4)
            return all(i in seen for i in range(8))

        p.recv(5.0, until=done)
        dgrams = [x for _, x in p.received]
        assert all(i in seen for i in range(8)), f"DATA for chunks {sorted(seen)} of 0-7 within 5 s"
        bad = [d.error for d in dgrams if d.error]
        assert not bad, f"malformed datagrams from the seeder (sec. 8): {bad[:3]}"
        for i in range(8):
            assert seen[i] == chunk_of_file(data, i, CS), f"chunk {i}: wrong payload"
        integ = messages(dgrams, MsgType.INTEGRITY)
        assert integ, "no INTEGRITY messages before the first chunks (sec. 5.3: uncle hashes)"
        for m in integ:
            lo, hi = to_chunks(ctx, m.start, m.end)
            w = hi - lo
            assert w > 0 and not (w & (w - 1)) and lo % w == 0, (
                f"INTEGRITY for a non-bin range {lo}-{hi}"
            )
            assert m.hash == tree.hash(B.make(w.bit_length() - 1, lo // w)), (
                f"wrong hash for chunks {lo}-{hi - 1}"
            )


@pytest.mark.conformance(protocol="ppspp", section="RFC 7574 sec. 3.11, 8.14", role="seeder")
def test_keepalive_keeps_the_channel(impl, impl_seeder):
    """Bare channel-ID datagrams (keep-alives) are accepted silently and the channel stays
    usable."""
    addr, _, data, _ = impl_seeder("chunk32")
    ctx = ctx_for("chunk32", CS)
    with RawPeer(ctx) as p:
        remote = _open(p, addr, bytes.fromhex(_root_of(data)))
        for _ in range(3):
            p.send(addr, remote, [])
            time.sleep(0.2)
        closes = [
            m
            for d in p.recv(0.5)
            for m in d.messages
            if m.type == MsgType.HANDSHAKE and m.channel == 0
        ]
        assert not closes, "closed the channel after keep-alives"
        p.send(addr, remote, [C.Request(0, 0)])
        got = p.recv(3.0, until=lambda d: any(m.type == MsgType.DATA for m in d.messages))
        assert messages(got, MsgType.DATA), "no DATA after keep-alives"


@pytest.mark.conformance(protocol="ppspp", section="RFC 7574 sec. 3.8, 8.11", role="seeder")
def test_cancel_and_unrequested_data(impl, impl_seeder, record_property):
    """CANCEL of requested chunks: the seeder never sends chunks that were not requested; how many
    cancelled chunks still arrive is recorded (finding ``after_cancel``)."""
    addr, _, data, _ = impl_seeder("chunk32", n_chunks=400)
    ctx = ctx_for("chunk32", CS)
    with RawPeer(ctx) as p:
        remote = _open(p, addr, bytes.fromhex(_root_of(data)))
        p.send(addr, remote, [C.Request(0, 199)])
        p.send(addr, remote, [C.Cancel(100, 199)])
        got = p.recv(2.0)
        chunks = [to_chunks(ctx, m.start, m.end)[0] for m in messages(got, MsgType.DATA)]
        assert all(c < 200 for c in chunks), (
            f"sent unrequested chunks {sorted(c for c in chunks if c >= 200)[:5]}"
        )
        after = sum(1 for c in chunks if c >= 100)
        record_property(
            "after_cancel", f"{after} of 100 cancelled chunks still sent; {len(chunks)} DATA in all"
        )


# ------------------------------------------------------------------ leecher side: integrity, choke,
# ACK


def _tamper_data(count: int):
    state: dict[str, Any] = {"left": count, "done": []}

    def tamper(d: C.Decoded, from_server: bool):
        if (
            not from_server
            or state["left"] <= 0
            or not any(m.type == MsgType.DATA for m in d.messages)
        ):
            return None
        new = []
        for m in d.messages:
            if m.type == MsgType.DATA and state["left"] > 0:
                state["left"] -= 1
                state["done"].append(m.start)
                m = C.Data(m.start, m.end, m.timestamp, corrupt(m.payload))
            new.append(m)
        return new

    return tamper, state


@pytest.mark.conformance(protocol="ppspp", section="RFC 7574 sec. 5.2, 5.3", role="leecher")
def test_corrupt_chunks_are_rejected_and_refetched(impl, tmp_path):
    """Our relay corrupts the first chunk delivered; the implementation must reject it (never write
    it) and still finish with the exact file (one bad datagram is no reason to give up on the
    peer)."""
    path, data = _content(tmp_path)
    out = str(tmp_path / "out.bin")
    ctx = ctx_for("chunk32", CS)
    tamper, st = _tamper_data(1)
    with our_seeder(path, "chunk32", CS) as (addr, root), Relay(addr, ctx, tamper) as relay:
        cp = _leech(impl, root, relay.address, out, "chunk32", timeout=20)
    assert len(st["done"]) == 1, "the relay never saw DATA to corrupt"
    assert cp.returncode == 0, f"did not complete after a corrupt chunk: {cp.stderr[-1500:]!r}"
    assert sha256_file(out) == sha256_file(path), "wrote corrupt data"


@pytest.mark.conformance(protocol="ppspp", section="RFC 7574 sec. 5.2, 5.3", role="leecher")
def test_always_corrupt_peer_never_gives_a_complete_file(impl, tmp_path):
    """Every chunk corrupted: the implementation must not report success, and no corrupted chunk may
    be in its output file."""
    path, data = _content(tmp_path, n_chunks=32)
    out = str(tmp_path / "out.bin")
    ctx = ctx_for("chunk32", CS)
    tamper, st = _tamper_data(10 ** 9)
    with our_seeder(path, "chunk32", CS) as (addr, root), Relay(addr, ctx, tamper) as relay:
        cp = _leech(impl, root, relay.address, out, "chunk32", timeout=4)
    assert st["done"], "the relay never saw DATA to corrupt"
    assert cp.returncode != 0, (
        "reported a complete download from a peer that only sent corrupt chunks"
    )
    if os.path.exists(out):
        written = open(out, "rb").read()
        for i in range(32):
            bad = corrupt(chunk_of_file(data, i, CS))
            assert written[i * CS : i * CS + len(bad)] != bad, (
                f"corrupt chunk {i} written to the file"
            )


@pytest.mark.conformance(protocol="ppspp", section="RFC 7574 sec. 5.1-5.3, 3.5", role="leecher")
def test_wrong_uncle_hashes_are_not_trusted(impl, tmp_path):
    """Our relay flips the INTEGRITY (uncle) hashes of the first datagram that carries them (the
    whole path to the root for the first chunk); the implementation must neither trust them
    (poisoning its tree: later chunks would then fail) nor write unverified data, and must finish
    with the exact file once correct hashes arrive."""
    path, data = _content(tmp_path)
    out = str(tmp_path / "out.bin")
    ctx = ctx_for("chunk32", CS)
    st = {"left": 1, "flipped": 0}

    def tamper(d: C.Decoded, from_server: bool):
        if (
            not from_server
            or st["left"] <= 0
            or not any(m.type == MsgType.INTEGRITY for m in d.messages)
        ):
            return None
        st["left"] -= 1
        new = []
        for m in d.messages:
            if m.type == MsgType.INTEGRITY:
                st["flipped"] += 1
                m = C.Integrity(m.start, m.end, corrupt(m.hash))
            new.append(m)
        return new

    with our_seeder(path, "chunk32", CS) as (addr, root), Relay(addr, ctx, tamper) as relay:
        cp = _leech(impl, root, relay.address, out, "chunk32", timeout=20)
    assert st["flipped"], "the relay never saw INTEGRITY to tamper with"
    assert cp.returncode == 0, f"did not complete after wrong uncle hashes: {cp.stderr[-1500:]!r}"
    assert sha256_file(out) == sha256_file(path)


@pytest.mark.conformance(protocol="ppspp", section="RFC 7574 sec. 3.4, 8.7, 3.2", role="leecher")
def test_acks_cover_every_verified_chunk(impl, tmp_path):
    """Every chunk the implementation received and verified is acknowledged (ACK, or HAVE) to the
    sender, and the corrupted ones are never acknowledged before their good copy arrived."""
    path, data = _content(tmp_path, n_chunks=64)
    out = str(tmp_path / "out.bin")
    ctx = ctx_for("chunk32", CS)
    tamper, st = _tamper_data(1)
    with our_seeder(path, "chunk32", CS) as (addr, root), Relay(addr, ctx, tamper) as relay:
        cp = _leech(impl, root, relay.address, out, "chunk32", timeout=20)
        time.sleep(0.3)
        up = relay.log(from_server=False)
        down = relay.to_client[:]
        up_t = relay.to_server[:]
    assert cp.returncode == 0 and sha256_file(out) == sha256_file(path)
    acked = set()
    for m in messages(up, MsgType.ACK) + messages(up, MsgType.HAVE):
        lo, hi = to_chunks(ctx, m.start, m.end)
        acked.update(range(lo, min(hi, 64)))
    assert acked >= set(range(64)), (
        f"chunks never acknowledged: {sorted(set(range(64)) - acked)[:10]}"
    )
    bad = st["done"][0]
    t_bad = next(
        t for t, d in down for m in d.messages if m.type == MsgType.DATA and m.start == bad
    )
    later_good = [
        t
        for t, d in down
        for m in d.messages
        if m.type == MsgType.DATA and m.start == bad and t > t_bad
    ]
    t_good = later_good[0] if later_good else float("inf")
    early = [
        t
        for t, d in up_t
        for m in d.messages
        if m.type == MsgType.ACK
        and to_chunks(ctx, m.start, m.end)[0] <= bad < to_chunks(ctx, m.start, m.end)[1]
        and t_bad <= t < t_good
    ]
    assert not early, f"acknowledged corrupted chunk {bad} before a good copy arrived"


@pytest.mark.conformance(protocol="ppspp", section="RFC 7574 sec. 3.9, 8.12", role="leecher")
def test_choke_stops_requests_until_unchoke(impl, tmp_path, record_property):
    """Our relay turns the seeder's UNCHOKE into CHOKE (and drops its DATA) for 1.5 s: no REQUEST
    may follow the CHOKE (after a 0.5 s grace for ones in flight); after our UNCHOKE the download
    completes."""
    path, data = _content(tmp_path, n_chunks=32)
    out = str(tmp_path / "out.bin")
    ctx = ctx_for("chunk32", CS)
    st = {"choke_at": None, "unchoked": False, "client_channel": None}

    def tamper(d: C.Decoded, from_server: bool):
        if not from_server or st["unchoked"]:
            return None
        new = []
        for m in d.messages:
            if m.type == MsgType.DATA:
                continue
            if m.type == MsgType.UNCHOKE:
                m = C.Choke()
            new.append(m)
        if any(m.type == MsgType.HANDSHAKE for m in d.messages) and not any(
            m.type == MsgType.CHOKE for m in new
        ):
            new.append(C.Choke())
        if any(m.type == MsgType.CHOKE for m in new) and st["choke_at"] is None:
            st["choke_at"] = time.monotonic()
            st["client_channel"] = d.channel
        return new

    import threading

    with our_seeder(path, "chunk32", CS) as (addr, root), Relay(addr, ctx, tamper) as relay:
        def unchoke() -> None:
            deadline = time.monotonic() + 10
            while st["choke_at"] is None and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(1.5)
            st["unchoked"] = True
            st["unchoke_at"] = time.monotonic()
            if st["client_channel"] is not None:
                relay.inject_to_client(st["client_channel"], [C.Unchoke()])

        th = threading.Thread(target=unchoke, daemon=True)
        th.start()
        cp = _leech(impl, root, relay.address, out, "chunk32", timeout=20)
        th.join(15)
        up = relay.to_server[:]
    assert st["choke_at"] is not None, "never got to send CHOKE (no handshake reply?)"
    window = (st["choke_at"] + 0.5, st.get("unchoke_at", float("inf")))
    reqs = [
        t
        for t, d in up
        for m in d.messages
        if m.type == MsgType.REQUEST and window[0] <= t < window[1]
    ]
    assert not reqs, f"{len(reqs)} REQUEST(s) sent to a choking peer"
    assert cp.returncode == 0, f"did not complete after UNCHOKE: {cp.stderr[-1500:]!r}"
    assert sha256_file(out) == sha256_file(path)


@pytest.mark.conformance(protocol="ppspp", section="RFC 7574 sec. 8.2-8.14", role="leecher")
@pytest.mark.parametrize("addressing", ["chunk32", "bin32", "byte64", "chunk64"])
def test_every_datagram_it_sends_parses(impl, tmp_path, addressing, record_property):
    """Through our relay, every datagram the implementation sends during a download parses
    completely with our codec under the negotiated addressing (no truncated or unknown message)."""
    path, data = _content(tmp_path, n_chunks=40)
    out = str(tmp_path / "out.bin")
    ctx = ctx_for(addressing, CS)
    with our_seeder(path, addressing, CS) as (addr, root), Relay(addr, ctx) as relay:
        cp = _leech(impl, root, relay.address, out, addressing, timeout=20)
        up = relay.log(from_server=False)
        short = [u.describe() for from_server, u in relay.undecodable if not from_server]
    assert cp.returncode == 0 and sha256_file(out) == sha256_file(path)
    bad = [d.error for d in up if d.error] + short
    assert not bad, f"{len(bad)} malformed datagram(s): {bad[:3]}"
    kinds = sorted({MsgType(m.type).name for d in up for m in d.messages})
    assert "HANDSHAKE" in kinds and "REQUEST" in kinds
    record_property("messages_sent", ",".join(kinds))
