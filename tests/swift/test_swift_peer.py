"""Sans-IO peer driven in memory (no sockets): handshake, transfer, misbehaviour."""

import os
import random

import pytest
from hypothesis import given, settings, strategies as st
from swift_support import leecher, make_tree, pump, seeder

from swift.core import events as ev
from swift.core.content import Content, MemoryStorage
from swift.core.peer import Peer, PeerConfig
from swift.wire import codec as C
from swift.wire.constants import ChunkAddressing, HashFunc

SEED, LEECH, EVIL = ("10.0.0.1", 6778), ("10.0.0.2", 6778), ("10.0.0.3", 6778)


class CorruptStorage(MemoryStorage):
    def read(self, offset: int, n: int) -> bytes:
        b = bytearray(super().read(offset, n))
        if b:
            b[0] ^= 0xFF
        return bytes(b)


def events(p: Peer) -> list:
    out = []
    while (e := p.next_event()) is not None:
        out.append(e)
    return out


@pytest.mark.parametrize("cam", list(ChunkAddressing))
@pytest.mark.parametrize("hf", [HashFunc.SHA1, HashFunc.SHA256])
def test_transfer_every_addressing(cam, hf) -> None:
    data = os.urandom(150_000 + cam)
    cfg = PeerConfig(addressing=cam, hash_func=hf, seed=1)
    s = seeder(data, cfg)
    leech = leecher(s.swarm_id, PeerConfig(addressing=cam, hash_func=hf, seed=2))
    leech.connect(SEED, 0.0)
    pump({SEED: s, LEECH: leech}, until=lambda: leech.content.complete)
    assert leech.content.complete and leech.content.tree.size == len(data)
    assert bytes(leech.content.storage.buf[:len(data)]) == data
    kinds = {type(e) for e in events(leech)}
    assert {ev.ChannelOpened, ev.SizeKnown, ev.ChunkVerified, ev.DownloadComplete} <= kinds
    assert leech.stats["rejected"] == 0 and s.stats["malformed"] == 0


def _first_dgram(p: Peer) -> bytes:
    out = p.datagrams_to_send(0.0)
    assert len(out) == 1
    return out[0][0]


@pytest.mark.parametrize("opts,ok", [
    (dict(version=1, min_version=1), True),
    (dict(version=1, min_version=2), False),   # needs a version we lack
    (dict(version=0, min_version=0), False),   # reserved version
    (dict(version=1, min_version=1, hash_func=HashFunc.SHA1), False),
    (dict(version=1, min_version=1, chunk_size=4096), False),
    (dict(version=1, min_version=1, addressing=ChunkAddressing.BIN32), False),
    (dict(version=1, min_version=1, integrity=0), False),
])
def test_handshake_checks(opts, ok) -> None:
    data = os.urandom(5000)
    s = seeder(data, PeerConfig(seed=1))
    hs = C.Handshake(0x1234, C.HandshakeOptions(swarm_id=s.swarm_id, **opts))
    s.datagram_received(C.encode_datagram(s.ctx, 0, [hs]), LEECH, 0.0)
    out = s.datagrams_to_send(0.0)
    if ok:
        assert out and out[0][0][:4] == (0x1234).to_bytes(4, "big")
        assert C.decode_datagram(out[0][0], s.ctx).messages[0].type == 0
    else:
        assert out == [] and s.stats["refused"] == 1  # no reply at all (3.1.1)


def test_wrong_swarm_and_missing_swarm_get_no_reply() -> None:
    s = seeder(os.urandom(5000), PeerConfig(seed=1))
    for sid in (bytes(32), None):
        hs = C.Handshake(7, C.HandshakeOptions(version=1, min_version=1, swarm_id=sid))
        s.datagram_received(C.encode_datagram(s.ctx, 0, [hs]), LEECH, 0.0)
    assert s.datagrams_to_send(0.0) == [] and s.stats["refused"] == 2


def test_libswift_profile_handshake_bytes() -> None:
    # draft-10 as libswift sends it: v, min v, swarm id, CIPM, MHF=SHA-1, CAM, end;
    # no Chunk Size (libswift rejects unknown option 9) and no Supported Messages
    data = os.urandom(3000)
    cfg = PeerConfig.libswift(seed=3)
    root = make_tree(data, cfg).root_hash
    leech = leecher(root, cfg)
    leech.connect(SEED, 0.0)
    d = _first_dgram(leech)
    cid = d[5:9].hex()
    assert d.hex() == ("00000000" "00" + cid + "0001" "0101" "020014" + root.hex()
                       + "0301" "0400" "0602" "ff")


def test_corrupt_seeder_is_choked_then_dropped_and_good_one_completes() -> None:
    data = os.urandom(64 * 1024)
    cfg = PeerConfig(seed=1, picker="linear")
    good = seeder(data, cfg)
    tree = make_tree(data, cfg)
    evil = Peer(Content.seeded(tree, CorruptStorage(data)), PeerConfig(seed=4))
    leech = leecher(good.swarm_id, PeerConfig(seed=2, max_bad_chunks=3))
    leech.connect(EVIL, 0.0)
    pump({EVIL: evil, LEECH: leech}, steps=300)
    assert leech.stats["rejected"] >= 1 and leech.content.have.count() == 0
    evs = events(leech)
    assert any(isinstance(e, ev.ChunkRejected) for e in evs)
    # the evil peer was told CHOKE and then the channel closed
    closed = [e for e in evs if isinstance(e, ev.ChannelClosed)]
    assert closed and closed[0].reason == "corrupt data"
    assert EVIL in leech.blacklist
    # a blacklisted peer cannot come back
    leech.connect(SEED, 1.0)
    pump({SEED: good, LEECH: leech, EVIL: evil}, until=lambda: leech.content.complete)
    assert leech.content.complete and bytes(leech.content.storage.buf[:len(data)]) == data
    assert not any(c.addr == EVIL for c in leech.channels.values())


def test_corrupt_peer_gets_choke_message() -> None:
    data = os.urandom(16 * 1024)
    tree = make_tree(data, PeerConfig())
    evil = Peer(Content.seeded(tree, CorruptStorage(data)), PeerConfig(seed=4))
    leech = leecher(tree.root_hash, PeerConfig(seed=2, max_bad_chunks=1000))
    seen = []
    orig = evil.datagram_received

    def spy(d, a, now):
        try:
            seen.extend(m.type for m in C.decode_datagram(d, evil.ctx).messages)
        except C.DecodeError:
            pass
        orig(d, a, now)

    evil.datagram_received = spy  # type: ignore[method-assign]  # spy
    leech.connect(EVIL, 0.0)
    pump({EVIL: evil, LEECH: leech}, steps=200)
    assert 10 in seen  # CHOKE (8.12)
    assert leech.content.have.count() == 0


def test_unsolicited_data_is_ignored() -> None:
    data = os.urandom(20 * 1024)
    cfg = PeerConfig(seed=1)
    s = seeder(data, cfg)
    leech = leecher(s.swarm_id, PeerConfig(seed=2, picker="linear"))
    leech.connect(SEED, 0.0)
    pump({SEED: s, LEECH: leech}, steps=3)
    ch = next(iter(leech.channels.values()))
    assert ch.established
    # chunk 19 with correct hashes, but never requested from this peer
    tree = s.content.tree
    msgs = [C.Integrity(b_lo, b_hi - 1, h) for b, h in tree.uncles(19)
            for b_lo, b_hi in [__import__("swift.core.bins", fromlist=["x"]).base_range(b)]]
    msgs.append(C.Data(19, 19, 0, data[19 * 1024:20 * 1024]))
    ch.down.clear()  # pretend nothing is outstanding
    leech.datagram_received(C.encode_datagram(leech.ctx, ch.local_id, msgs), SEED, 0.01)
    assert 19 not in leech.content.have and leech.stats["unsolicited"] >= 1


def test_cancel_and_choke() -> None:
    data = os.urandom(40 * 1024)
    s = seeder(data, PeerConfig(seed=1))
    leech = leecher(s.swarm_id, PeerConfig(seed=2))
    leech.connect(SEED, 0.0)
    pump({SEED: s, LEECH: leech}, steps=2)
    sch = next(iter(s.channels.values()))
    lch = next(iter(leech.channels.values()))
    sch.send.upload.push(0, 40)
    s.datagram_received(C.encode_datagram(s.ctx, sch.local_id, [C.Cancel(0, 39)]), LEECH, 0.1)
    assert len(sch.send.upload) == 0
    leech.datagram_received(C.encode_datagram(leech.ctx, lch.local_id, [C.Choke()]), SEED, 0.1)
    assert lch.down.choked and not lch.down.requests
    assert all(m.type != 8 for d, _ in leech.datagrams_to_send(0.2)
               for m in C.decode_datagram(d, leech.ctx).messages)  # no REQUEST while choked
    leech.datagram_received(C.encode_datagram(leech.ctx, lch.local_id, [C.Unchoke()]), SEED, 0.3)
    pump({SEED: s, LEECH: leech}, until=lambda: leech.content.complete)
    assert leech.content.complete


def test_closing_handshake_and_spoofed_channel() -> None:
    s = seeder(os.urandom(5000), PeerConfig(seed=1))
    leech = leecher(s.swarm_id, PeerConfig(seed=2))
    leech.connect(SEED, 0.0)
    pump({SEED: s, LEECH: leech}, steps=3)
    sch = next(iter(s.channels.values()))
    # right channel, wrong source address: discarded (3.1.1 step 7)
    s.datagram_received(C.encode_datagram(s.ctx, sch.local_id, [C.Handshake(0)]), EVIL, 1.0)
    assert sch.state == "est"
    for d, _ in leech.close(1.0):
        s.datagram_received(d, LEECH, 1.0)
    assert not s.channels
    assert any(isinstance(e, ev.ChannelClosed) and e.reason == "closed by peer" for e in events(s))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 2))
def test_no_datagram_crashes_the_peer(raw, where) -> None:
    s = seeder(b"x" * 5000, PeerConfig(seed=1))
    leech = leecher(s.swarm_id, PeerConfig(seed=2))
    leech.connect(SEED, 0.0)
    pump({SEED: s, LEECH: leech}, steps=2)
    target = [s, leech][where % 2]
    if where == 2 and target.channels:
        raw = next(iter(target.channels)).to_bytes(4, "big") + raw
    target.datagram_received(raw, LEECH if target is s else SEED, 0.5)
    target.handle_timer(0.6)
    target.datagrams_to_send(0.6)


def test_vod_picker_prefers_playback_window() -> None:
    data = os.urandom(300 * 1024)
    s = seeder(data, PeerConfig(seed=1))
    leech = leecher(s.swarm_id, PeerConfig(seed=2, picker="vod", high_window=16, mid_window=32))
    assert leech.picker.windows is not None
    assert (leech.picker.windows.high, leech.picker.windows.mid) == (16, 32)
    leech.set_playpos(100)
    leech.connect(SEED, 0.0)
    order = []
    pump({SEED: s, LEECH: leech}, steps=40)
    for e in events(leech):
        if isinstance(e, ev.ChunkVerified):
            order.append(e.index)
    # after the size is known, the first chunks come from [100, 116) in order
    hw = [i for i in order if 100 <= i < 116]
    assert hw[:5] == sorted(hw[:5]) and order.index(hw[0]) <= 2


def test_availability_tree_counts() -> None:
    from swift.core.picker import Availability
    a = Availability()
    a.add_range(0, 100)
    a.add_range(50, 60)
    a.add_range(55, 56, -1)
    assert [a.count(i) for i in (0, 49, 50, 55, 59, 60, 99, 100)] == [1, 1, 2, 1, 2, 1, 1, 0]
    rnd = random.Random(5)
    b = Availability()
    m2 = [0] * 300
    for _ in range(100):
        lo = rnd.randrange(300)
        hi = rnd.randrange(lo, 301)
        b.add_range(lo, hi)
        for i in range(lo, hi):
            m2[i] += 1
    assert [b.count(i) for i in range(300)] == m2


def test_pex_introduces_leechers() -> None:
    data = os.urandom(30 * 1024)
    s = seeder(data, PeerConfig(seed=1))
    a = leecher(s.swarm_id, PeerConfig(seed=2, pex_connect=True))
    b = leecher(s.swarm_id, PeerConfig(seed=3, pex_connect=True))
    a.connect(SEED, 0.0)
    b.connect(SEED, 0.0)
    pump({SEED: s, LEECH: a, EVIL: b}, steps=200, dt=0.03)
    evs = events(a) + events(b)
    found = {e.addr for e in evs if isinstance(e, ev.PeerDiscovered)}
    assert LEECH in found or EVIL in found
    # the leechers opened a channel to each other from the PEX_RES address
    assert any(c.addr == EVIL for c in a.channels.values()) or any(
        c.addr == LEECH for c in b.channels.values())


def test_state_per_peer_is_bounded() -> None:
    data = os.urandom(64 * 1024)
    s = seeder(data, PeerConfig(seed=1, queue_limit=100, max_channels=4))
    leech = leecher(s.swarm_id, PeerConfig(seed=2))
    leech.connect(SEED, 0.0)
    pump({SEED: s, LEECH: leech}, steps=2)
    sch = next(iter(s.channels.values()))
    for _ in range(50):
        s.datagram_received(C.encode_datagram(s.ctx, sch.local_id, [C.Request(0, 0xFFFFFFF0)] * 20),
                            LEECH, 0.1)
    assert len(sch.send.upload) <= 100
    for k in range(160):  # 5920 INTEGRITY messages without a DATA
        msgs = [C.Integrity(2 * i, 2 * i + 1, bytes(32)) for i in range(k * 37, (k + 1) * 37)]
        s.datagram_received(C.encode_datagram(s.ctx, sch.local_id, msgs), LEECH, 0.1)
    assert len(sch.verify.hashes) <= 4096 and len(sch.verify.hash_order) <= 4096
    # handshakes from many addresses: channels capped; a new one takes the place of the
    # oldest half-open channel (never of an established one: test_swift_half_open.py)
    for i in range(20):
        hs = C.Handshake(1000 + i,
                         C.HandshakeOptions(version=1, min_version=1, swarm_id=s.swarm_id))
        s.datagram_received(C.encode_datagram(s.ctx, 0, [hs]), ("10.9.9.9", 1000 + i), 0.2)
    assert len(s.channels) <= 4 and sch.local_id in s.channels
    assert s.stats["half_open_evicted"] >= 16


def test_self_connection_is_dropped() -> None:
    s = seeder(os.urandom(4096), PeerConfig(seed=1))
    s.connect(SEED, 0.0)  # e.g. our own address learned through PEX
    pump({SEED: s}, steps=3)
    assert not s.channels and s.stats["refused"] == 1
    assert any(isinstance(e, ev.ChannelClosed) and e.reason == "self" for e in events(s))


def test_tracker_peer_introduces_seeder() -> None:
    data = os.urandom(20 * 1024)
    s = seeder(data, PeerConfig(seed=1, pex_connect=True))
    trk = leecher(s.swarm_id, PeerConfig(seed=5, tracker=True))
    leech = leecher(s.swarm_id, PeerConfig(seed=2, pex_connect=True))
    TRK = ("10.0.0.9", 6778)
    s.connect(TRK, 0.0)  # the seeder registers with the tracker
    pump({SEED: s, TRK: trk}, steps=20, dt=0.01)
    leech.connect(TRK, 0.3)  # the leecher only knows the tracker
    pump({SEED: s, TRK: trk, LEECH: leech}, steps=3000, dt=0.01,
         until=lambda: leech.content.complete)
    assert leech.content.complete and bytes(leech.content.storage.buf[:len(data)]) == data
    assert trk.content.have.count() == 0 and trk.stats["verified"] == 0


def test_keepalive_and_dead_peer() -> None:
    s = seeder(os.urandom(4096), PeerConfig(seed=1, keepalive=5.0, dead_after=30.0))
    leech = leecher(s.swarm_id, PeerConfig(seed=2, keepalive=5.0, dead_after=30.0))
    leech.connect(SEED, 0.0)
    now = pump({SEED: s, LEECH: leech}, until=lambda: leech.content.complete)
    sch = next(iter(s.channels.values()))
    # idle: after the keep-alive interval a bare channel ID goes out (8.14)
    s.handle_timer(now + 6)
    out = s.datagrams_to_send(now + 6)
    assert (sch.remote_id.to_bytes(4, "big"), LEECH) in out
    # the leecher goes silent: after dead_after and 3 unanswered datagrams, closed (3.12)
    t = now + 6
    for _ in range(5):
        t += 10
        s.handle_timer(t)
        s.datagrams_to_send(t)
    assert not s.channels
    assert any(isinstance(e, ev.ChannelClosed) and e.reason == "dead" for e in events(s))


def test_silent_seeder_requests_time_out_and_go_elsewhere() -> None:
    data = os.urandom(40 * 1024)
    cfg = PeerConfig(seed=1)
    good = seeder(data, cfg)
    mute = seeder(data, PeerConfig(seed=7))
    leech = leecher(good.swarm_id, PeerConfig(seed=2, picker="linear"))
    leech.connect(EVIL, 0.0)

    class Drop:
        """Deliver the mute seeder's handshakes and HAVEs, never its DATA."""

        def __init__(self, p):
            self.p = p

        def datagram_received(self, d, a, now):
            self.p.datagram_received(d, a, now)

        def datagrams_to_send(self, now):
            return [(d, a) for d, a in self.p.datagrams_to_send(now)
                    if not any(m.type == 1 for m in C.decode_datagram(d, self.p.ctx).messages)]

        def handle_timer(self, now):
            self.p.handle_timer(now)

    pump({EVIL: Drop(mute), LEECH: leech}, steps=300, dt=0.01)  # 3 s of silence
    assert leech.stats["timeouts"] >= 1 and leech.content.have.count() == 0
    leech.connect(SEED, 0.0)
    pump({SEED: good, EVIL: Drop(mute), LEECH: leech}, until=lambda: leech.content.complete,
         dt=0.01)
    assert leech.content.complete and bytes(leech.content.storage.buf[:len(data)]) == data


def test_missed_deadline_goes_to_another_peer() -> None:
    data = os.urandom(2048 * 1024)  # big enough that the end game does not start
    good = seeder(data, PeerConfig(seed=1))
    mute = seeder(data, PeerConfig(seed=7))
    leech = leecher(good.swarm_id, PeerConfig(seed=2, picker="vod", high_window=32,
                                              bitrate=16 * 1024, deadline_margin=2.0,
                                              request_timeout=30.0))

    class NoData:
        def __init__(self, p):
            self.p = p

        def datagram_received(self, d, a, now):
            self.p.datagram_received(d, a, now)

        def datagrams_to_send(self, now):
            return [(d, a) for d, a in self.p.datagrams_to_send(now)
                    if not any(m.type == 1 for m in C.decode_datagram(d, self.p.ctx).messages)
                    or 0 in [m.start for m in C.decode_datagram(d, self.p.ctx).messages
                             if m.type == 1]]

        def handle_timer(self, now):
            self.p.handle_timer(now)

    leech.connect(EVIL, 0.0)  # the mute peer delivers chunk 0 (size), then nothing
    pump({EVIL: NoData(mute), LEECH: leech}, steps=50, dt=0.01)
    leech.set_playpos(1, buffering=False)  # playing: deadlines apply
    leech.connect(SEED, 0.5)
    pump({SEED: good, EVIL: NoData(mute), LEECH: leech}, steps=400, dt=0.01,
         until=lambda: leech.content.have.is_filled_range(1, 33))
    assert leech.content.have.is_filled_range(1, 33)
    assert leech.stats.get("deadline_missed", 0) >= 1


def test_simultaneous_connects_keep_one_channel() -> None:
    data = os.urandom(8 * 1024)
    a = seeder(data, PeerConfig(seed=1))
    b = leecher(a.swarm_id, PeerConfig(seed=2))
    a.connect(LEECH, 0.0)
    b.connect(SEED, 0.0)  # both initiate before hearing from the other
    now = 0.0
    for _ in range(3):  # deliver both first datagrams "at once"
        now += 0.01
        da, db = a.datagrams_to_send(now), b.datagrams_to_send(now)
        for d, _ in da:
            b.datagram_received(d, SEED, now)
        for d, _ in db:
            a.datagram_received(d, LEECH, now)
    pump({SEED: a, LEECH: b}, until=lambda: b.content.complete)
    assert b.content.complete
    assert len(a.channels) == 1 and len(b.channels) == 1
