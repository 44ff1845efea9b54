"""Crafted-but-valid packets (right TSI, valid CRC: the checksum is no
authentication) fed to FileReceiver.feed and SequencerReceiver.feed (issue 5
review, items 4 and 7): never an exception, memory stays bounded, and a
forged far buffer id cannot make the genuine stream late for ever."""

from __future__ import annotations

import hashlib
import random

from hypothesis import HealthCheck, given, settings, strategies as st

from m2c.core.filetx import FileReceiver, FileSender, RateLadder, SessionDescription, default_fec
from m2c.core.groups import WaveSchedule
from m2c.core.sequencer import SequencerReceiver
from m2c.wire import codec
from m2c.wire.constants import Codepoint

SCHED = WaveSchedule(20.0, 2000.0, tsd=0.5, k=2)
U32 = st.integers(0, 2**32 - 1)


def session(scheme: str, data: bytes) -> SessionDescription:
    fec = default_fec(len(data), scheme, 100, max_block_length=20)
    return SessionDescription(77, 1, "f", len(data), hashlib.sha256(data).hexdigest(), fec,
                              RateLadder.of(SCHED), [["239.1.1.1", 4000]] * (SCHED.channels + 1))


def forged_packet(scheme: str):
    cp = st.sampled_from([Codepoint.LDPC_STAIRCASE, Codepoint.SMALL_BLOCK_SYSTEMATIC])
    return st.builds(
        lambda c, toi, sbn, esi, sbl, payload, dl, g, psn, bid, off: codec.AlcPacket(
            77, toi, c, 0, g, psn, bid, off,
            0 if dl else (sbn & 0xFFF if c == Codepoint.LDPC_STAIRCASE else sbn),
            0 if dl else (esi if c == Codepoint.LDPC_STAIRCASE else esi & 0xFFFF),
            b"" if dl else payload, 0 if dl or c == Codepoint.LDPC_STAIRCASE else sbl,
            data_less=dl),
        cp, st.sampled_from([1, 1, 1, 0, 2**32 - 1]),
        st.integers(0, 8) | U32, st.integers(0, 50) | st.integers(0, 2**20 - 1),
        st.integers(0, 2**16 - 1), st.binary(min_size=0, max_size=120) | st.just(b"\x5a" * 100),
        st.booleans(), st.integers(0, 2**16 - 1), U32, U32, U32)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scheme=st.sampled_from(["ldpc", "rs"]), forged=st.lists(
    st.tuples(st.integers(0, 400), forged_packet("ldpc")), max_size=40), seed=st.integers(0, 99))
def test_file_receiver_feed_takes_any_valid_packet(scheme, forged, seed):
    data = random.Random(seed).randbytes(3000)
    sd = session(scheme, data)
    snd = FileSender(sd, lambda o, n: data[o:o + n])
    rcv = FileReceiver(sd, max_active=2)
    genuine = [pkt for _ in range(15) for _pdu, pkt in snd.next_pdus()]
    stream = [(i, p) for i, p in enumerate(genuine)] + [(i, p) for i, p in forged]
    stream.sort(key=lambda x: x[0])
    for _, pkt in stream:
        wire = codec.encode(pkt)
        got = codec.decode(wire, session=77)  # valid CRC and TSI: it gets through
        for off, blk in rcv.feed(got, len(wire), defer=bool(seed & 1)) + rcv.flush():
            assert 0 <= off and off + len(blk) <= len(data)
        assert len(rcv.active) <= 2
    assert rcv.needed >= 0 and rcv.symbols <= len(stream)


def sequencer_stream(n_buffers: int, parts: int = 4) -> list[tuple[int, int, bytes]]:
    return [(b, j * 10, bytes([b & 255]) * 10) for b in range(1000, 1000 + n_buffers)
            for j in range(parts)]


def test_one_forged_far_buffer_id_does_not_make_the_stream_late():
    r = SequencerReceiver()
    out = []
    stream = sequencer_stream(20)
    for i, (b, off, d) in enumerate(stream):
        if i == 10:
            out += r.feed(b + (1 << 30), 0, b"forged")  # was: became _newest for ever
        out += r.feed(b, off, d)
    assert r.far == 1 and r.late == 0
    assert [x.buffer_id for x in out] == list(range(1000, 1019))
    assert all(len(x.prefix) == 40 for x in out)


def test_a_forged_first_datagram_and_a_genuine_jump_resync():
    r = SequencerReceiver()
    out = r.feed(7, 0, b"forged")
    for b, off, d in sequencer_stream(10):
        out += r.feed(b, off, d)
    assert r.resyncs == 1 and [x.buffer_id for x in out][-8:] == list(range(1001, 1009))
    # a genuine outage of 5,000 buffers: RESYNC datagrams in a row move the receiver
    for b, off, d in sequencer_stream(10):
        out += r.feed(b + 5000, off, d)
    assert r.resyncs == 2 and out[-1].buffer_id == 6008 and r.far == 0


@settings(max_examples=200, deadline=None)
@given(forged=st.lists(st.tuples(st.integers(0, 80),
                                 U32.filter(lambda b: abs(b - 1010) > 200 and b < 2**32 - 200),
                                 U32, st.binary(max_size=64)),
                       max_size=SequencerReceiver.RESYNC - 1),
       hold=st.integers(0, 2))
def test_sequencer_receiver_feed_takes_anything(forged, hold):
    r = SequencerReceiver(max_buffer=4096, hold=hold)
    stream = [(i, b, off, d) for i, (b, off, d) in enumerate(sequencer_stream(20))]
    stream += [(i, b, off, d) for i, b, off, d in forged]
    stream.sort(key=lambda x: x[0])
    out = []
    for _, b, off, d in stream:
        out += r.feed(b, off, d)
        assert r._bytes <= 4096
    # fewer far forged datagrams than RESYNC: every genuine buffer comes out whole
    # (a forged id *near* the current one is the paper's rule at work: it closes
    # the open buffer early, and only MAX_AHEAD buffers can be lost to it)
    assert r.current == 1019 and r.far == len(forged)
    got = {x.buffer_id: x for x in out}
    assert all(len(got[b].prefix) == 40 for b in range(1000, 1019 - hold))
