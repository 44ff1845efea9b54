"""Reed-Solomon via zfec; FEC Payload IDs, EXT_FTI and block partitioning."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from m2c.fec import payload_id as fpi, rs
from m2c.fec.errors import DecodeError, FECError
from m2c.fec.partition import n_for_block, partition


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 64), st.integers(0, 64), st.integers(1, 40),
       st.randoms(use_true_random=False))
def test_rs_decodes_from_any_k(k, extra, E, rnd):
    p = rs.RSParams(k, min(256, k + extra), E)
    src = rnd.randbytes(k * E)
    rep = rs.encode(p, src)
    syms = [src[i * E:(i + 1) * E] for i in range(k)] + [rep[i * E:(i + 1) * E]
                                                         for i in range(p.n - k)]
    pick = rnd.sample(range(p.n), k)
    assert rs.decode(p, {i: syms[i] for i in pick}) == src
    if k > 1:
        assert rs.decode(p, {i: syms[i] for i in pick[:-1]}) is None


def test_rs_limits():
    with pytest.raises(FECError):
        rs.RSParams(10, 257, 8)
    with pytest.raises(FECError):
        rs.RSParams(10, 9, 8)


@given(st.sampled_from([3, 4, 5, 129]), st.integers(0, 2**32 - 1), st.integers(0, 2**20 - 1),
       st.integers(0, 2**16 - 1))
def test_payload_id_roundtrip(fec_id, sbn, esi, sbl):
    lim = {3: (12, 20), 4: (12, 20), 5: (24, 8), 129: (32, 16)}[fec_id]
    pid = fpi.PayloadID(sbn % (1 << lim[0]), esi % (1 << lim[1]),
                        sbl if fec_id == 129 else 0)
    wire = fpi.encode_payload_id(fec_id, pid)
    assert len(wire) == fpi.payload_id_size(fec_id)
    assert fpi.decode_payload_id(fec_id, wire + b"junk") == pid


def test_payload_id_ldpc_layout():
    # RFC 5170 Figure 1: SBN in the top 12 bits, ESI in the low 20
    assert fpi.encode_payload_id(3, fpi.PayloadID(0xABC, 0x12345)) == bytes.fromhex("abc12345")
    assert fpi.encode_payload_id(5, fpi.PayloadID(0x010203, 0x04)) == bytes.fromhex("01020304")
    with pytest.raises(FECError):
        fpi.encode_payload_id(3, fpi.PayloadID(1 << 12, 0))


@given(st.integers(0, 255), st.binary(max_size=12))
def test_payload_id_decoder_fuzz(fec_id, data):
    try:
        v = fpi.decode_payload_id(fec_id, data)
    except DecodeError:
        return
    assert isinstance(v, fpi.PayloadID)


@given(st.integers(0, 2**48 - 1), st.integers(0, 2**16 - 1), st.integers(0, 2**20 - 1),
       st.integers(0, 2**20 - 1), st.integers(0, 7), st.integers(1, 31), st.integers(1, 2**31 - 2))
def test_ext_fti_roundtrip(L, E, B, max_n, n1m3, g, seed):
    oti = fpi.LDPCOTI(L, E, B, max_n, n1m3, g, seed)
    wire = fpi.encode_ext_fti(oti)
    assert len(wire) == 20 and wire[:2] == b"\x40\x05"
    assert fpi.decode_ext_fti(wire) == oti


@given(st.binary(max_size=30))
def test_ext_fti_decoder_fuzz(data):
    try:
        v = fpi.decode_ext_fti(data)
    except DecodeError:
        return
    assert isinstance(v, fpi.LDPCOTI)


@given(st.integers(0, 10**7), st.integers(1, 5000), st.integers(1, 1500))
def test_partition_rfc5052(L, B, E):
    p = partition(L, B, E)
    assert p.n_large * p.a_large + (p.blocks - p.n_large) * p.a_small == p.total_symbols
    assert p.a_large <= B and 0 <= p.n_large < max(p.blocks, 1)
    assert p.a_large - p.a_small in (0, 1) or p.blocks == 0
    if p.blocks:
        off, ln = p.block_bytes(p.blocks - 1)
        assert off + ln == L
        assert p.block_offset(p.blocks - 1) + p.block_length(p.blocks - 1) == p.total_symbols


def test_n_algorithm():
    assert n_for_block(1000, 2000, 1000) == 2000
    assert n_for_block(999, 2000, 1000) == 1998
