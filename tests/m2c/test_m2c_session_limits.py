"""Session creation enforces RFC 5170's limits and the memory bound (issue 5
review, items 3, 5, 6): the 12-bit SBN (4.1, 4.2.2), the n-algorithm exactly
(5.5) with n - k >= N1 for every block, and a window of blocks that fits the
receiver's memory."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings, strategies as st

from m2c.aio.driver import MulticastReceiver, make_session
from m2c.core.filetx import (
    LDPC_MAX_BLOCKS,
    FecParams,
    FecScheme,
    FileReceiver,
    FileSender,
    Group,
    RateLadder,
    SessionDescription,
    default_fec,
)
from m2c.core.groups import WaveSchedule
from m2c.core.session import MAX_ACTIVE, ReceiverCore, describe_session
from m2c.fec.errors import FECError
from m2c.wire import codec

SCHED = WaveSchedule(20.0, 2000.0, tsd=0.5, k=2)


def sd_for(size: int, fec: FecParams, data: bytes = b"") -> SessionDescription:
    return SessionDescription(7, 1, "f", size, hashlib.sha256(data).hexdigest(), fec,
                              RateLadder.of(SCHED),
                              [Group("239.1.1.1", 4000)] * (SCHED.channels + 1))


def test_more_than_4096_ldpc_blocks_is_refused_at_session_creation():
    size = (LDPC_MAX_BLOCKS * 8 + 1) * 16  # 4,097 blocks of B = 8 symbols of 16 bytes
    with pytest.raises(FECError, match="2\\^12"):
        default_fec(size, "ldpc", 16, max_block_length=8)
    fec = FecParams(FecScheme.LDPC, symbol_size=16, max_block_length=8, max_n=16, n1=5, seed=1)
    with pytest.raises(ValueError, match="12-bit SBN"):  # was: FECError mid-carousel
        sd_for(size, fec)
    # without an explicit B, B grows until the file fits in 2^12 blocks
    fec = default_fec(LDPC_MAX_BLOCKS * 3000 * 2 + 5, "ldpc", 2)
    sd = sd_for(LDPC_MAX_BLOCKS * 3000 * 2 + 5, fec)
    assert fec.max_block_length == 3001 and sd.partition().blocks <= LDPC_MAX_BLOCKS
    with pytest.raises(FECError, match="symbol size"):  # beyond RFC 5170 5.2's max1_B
        default_fec(LDPC_MAX_BLOCKS * (1 << 19) + 1, "ldpc", 1)


@settings(max_examples=200, deadline=None)
@given(size=st.integers(0, 400_000), E=st.integers(1, 3000),
       B=st.none() | st.integers(1, 3000), n1=st.integers(3, 10))
def test_n_is_exactly_the_rfc5170_formula_with_room_for_n1(size, E, B, n1):
    T = -(-size // E)
    if B is not None and T > LDPC_MAX_BLOCKS * B:
        with pytest.raises(FECError):
            default_fec(size, "ldpc", E, B, n1=n1)
        return
    fec = default_fec(size, "ldpc", E, B, n1=n1)
    sd = sd_for(size, fec)  # validates every block's (k, n, N1)
    pt = sd.partition()
    assert pt.blocks <= LDPC_MAX_BLOCKS
    for k in {pt.a_large, pt.a_small} - {0}:
        n = sd.block_n(k)
        assert n == k * fec.max_n // fec.max_block_length  # RFC 5170 5.5, no max()
        assert n - k >= n1
        if pt.a_small >= n1 or pt.blocks == 1 and k >= n1:
            assert n == 2 * k  # code rate 1/2 unless a block is shorter than N1 symbols


def test_tiny_ldpc_file_decodes_with_the_rfc_n():
    data = b"tiny!" * 500  # 2 symbols of 1400 bytes: n - k = N1 = 5 needs max_n > 2B
    fec = default_fec(len(data), "ldpc", 1400, seed=3)
    sd = sd_for(len(data), fec, data)
    assert sd.block_n(2) == 7
    snd, rcv = FileSender(sd, lambda o, n: data[o:o + n]), FileReceiver(sd)
    out = bytearray(len(data))
    for _ in range(50):
        for _pdu, pkt in snd.next_pdus():
            if pkt.data_less or pkt.esi == 0:
                continue  # source symbol 0 is lost: a repair symbol must stand in
            for off, blk in rcv.feed(codec.decode(codec.encode(pkt), session=7), 100):
                out[off:off + len(blk)] = blk
        if rcv.complete:
            break
    assert rcv.complete and bytes(out) == data


def held(B: int, E: int, window: int) -> int:
    """A receiver's memory at ``window`` partial blocks (docs/m2c.md, "Memory bound."):
    2*B*E per partial block (source values and the equations' partial sums) plus 3*B*E
    once for the one block being eliminated or handed out decoded."""
    return 2 * B * E * window + 3 * B * E


@pytest.mark.parametrize("memory, B, E", [
    (1 << 20, 100, 1000), (256 << 20, 10, 100), (256 << 20, 2000, 1400),
    (256 << 20, 3000, 1428), (64 << 20, 3000, 1428), (7 * 3000 * 1428, 3000, 1428)])
def test_window_fits_the_memory_bound(memory, B, E):
    # a file of more blocks than any window: the window is the bound's, neither less nor more
    sd = describe_session("f", 200 * B * E, "0" * 64, session=7, fec_seed=1, symbol_size=E,
                          max_block_length=B, memory=memory)
    assert sd.partition().blocks == 200
    window = sd.window_blocks
    assert 1 <= window <= MAX_ACTIVE
    assert held(B, E, window) <= memory  # the window fits
    assert window == MAX_ACTIVE or held(B, E, window + 1) > memory  # one more block would not
    active = ReceiverCore(sd).file.max_active
    assert active == window and held(B, E, active) <= memory


def test_99_mb_is_one_carousel_window_at_256_mib():
    """Fig. 5(c)'s 99 MB (24 blocks of 3,000 symbols of 1,428 bytes): 29 partial blocks fit
    in 256 MiB, so the whole file is one window (3*B*E per block gave 20: windows of 20 and
    4 blocks, dup 171 %)."""
    kw = dict(session=7, fec_seed=1, symbol_size=1428, max_block_length=3000)
    sd = describe_session("f", 99_000_000, "0" * 64, **kw)
    assert sd.partition().blocks == 24 and sd.window_blocks == 0
    sd = describe_session("f", 200_000_000, "0" * 64, **kw)
    assert sd.window_blocks == 29 and ReceiverCore(sd).file.max_active == 29


def test_make_session_and_the_receiver_keep_the_memory_bound(tmp_path):
    src = tmp_path / "f.bin"
    src.write_bytes(bytes(range(256)) * 4000)  # 1,024,000 bytes: 11 blocks of 100 symbols
    sd = make_session(str(src), symbol_size=1000, max_block_length=100, memory=1 << 20)
    assert sd.partition().blocks == 11 and sd.window_blocks == 3
    rx = MulticastReceiver(sd, str(tmp_path / "out"))
    assert rx.file.max_active == 3 and held(100, 1000, 3) <= 1 << 20 < held(100, 1000, 4)
    with pytest.raises(FECError, match="memory"):  # one block of 2,000 x 1,400 needs 14 MB
        make_session(str(src), symbol_size=1400, max_block_length=2000, memory=1 << 20)
    with pytest.raises(FECError, match="memory"):  # 2*B*E + 3*B*E: 4*B*E is not enough
        describe_session("f", 10**6, "0" * 64, session=7, fec_seed=1, symbol_size=1000,
                         max_block_length=100, memory=4 * 100 * 1000)


def test_out_of_range_esi_allocates_no_decoder():
    data = bytes(5000)
    sd = sd_for(len(data), default_fec(len(data), "ldpc", 100, max_block_length=10), data)
    rcv = FileReceiver(sd, max_active=2)
    n = sd.block_n(10)
    for sbn in range(sd.partition().blocks):
        pkt = codec.AlcPacket(7, 1, sd.codepoint, 0, 0, 0, 0, 0, sbn, n, b"\0" * 100)
        assert rcv.feed(pkt, 150) == []
    assert rcv.active == {} and rcv.dropped_inactive == 0
    ok = codec.AlcPacket(7, 1, sd.codepoint, 0, 0, 0, 0, 0, 0, n - 1, b"\0" * 100)
    rcv.feed(ok, 150)
    assert list(rcv.active) == [0]
