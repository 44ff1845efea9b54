"""FEC OTI fields fit their wire fields (issue 5, review finding 13).

EXT_FTI for FEC Encoding ID 3 (RFC 5170 4.2.4.1, Figure 2) has a 20-bit max_n
field, so max_n is at most 2^20 - 1 even though RFC 5170 4.2.3 / 5.4 allow
"at most 2^20": with B = max1_B = 2^19 (5.2) and code rate 1/2, 5.4's
ceil(B / CR) = 2^20 cannot be written.  default_fec caps max_n at 2^20 - 1 and
session creation refuses anything larger; for FEC Encoding ID 129 (RFC 5445
5.2.2.2) B and max_n are 16-bit.
"""

from __future__ import annotations

import dataclasses
import hashlib

import pytest
from hypothesis import given, settings, strategies as st

from m2c.core.filetx import (
    LDPC_MAX_BLOCKS,
    FecParams,
    RateLadder,
    SessionDescription,
    default_fec,
)
from m2c.core.groups import WaveSchedule
from m2c.fec.errors import FECError
from m2c.fec.payload_id import LDPC_MAX_N, LDPCOTI, decode_ext_fti, encode_ext_fti

SCHED = WaveSchedule(20.0, 2000.0, tsd=0.5, k=2)


def sd_for(size: int, fec: dict) -> SessionDescription:
    return SessionDescription(7, 1, "f", size, hashlib.sha256(b"").hexdigest(), fec,
                              RateLadder.of(SCHED), [["239.1.1.1", 4000]] * (SCHED.channels + 1))


def fti_of(size: int, fec: dict) -> LDPCOTI:
    return LDPCOTI(size, fec.symbol_size, fec.max_block_length, fec.max_n,
                   fec.n1 - 3, 1, fec.seed)


def test_max_n_limit_is_the_20_bit_field():
    assert LDPC_MAX_N == (1 << 20) - 1
    with pytest.raises(FECError):
        LDPCOTI(1000, 100, 10, 1 << 20)


def test_b_of_2_to_19_gets_max_n_2_to_20_minus_1():
    # 2^12 blocks of 2^19 one-byte symbols: B grows to RFC 5170 5.2's max1_B = 2^19,
    # where 2B = 2^20 would not fit EXT_FTI's max_n field
    size = LDPC_MAX_BLOCKS * (1 << 19)
    fec = default_fec(size, "ldpc", 1)
    assert fec.max_block_length == 1 << 19
    assert fec.max_n == LDPC_MAX_N
    sd = sd_for(size, fec)  # validates every block's (k, n, N1) too
    k = sd.partition().a_large
    assert k == 1 << 19 and sd.block_n(k) == LDPC_MAX_N  # RFC 5170 5.5, n - k = 2^19 - 1
    oti = fti_of(size, fec)
    assert decode_ext_fti(encode_ext_fti(oti)) == oti  # no bit lost in the 20-bit field


def test_explicit_block_length_of_2_to_19_is_capped_too():
    fec = default_fec(5_000_000, "ldpc", 1, max_block_length=1 << 19)
    assert fec.max_n == LDPC_MAX_N
    sd_for(5_000_000, fec)


def test_max_n_beyond_the_field_is_refused_at_session_creation():
    fec = {"scheme": "ldpc", "symbol_size": 1, "max_block_length": 1 << 19, "max_n": 1 << 20,
           "n1": 5, "seed": 1}
    with pytest.raises(ValueError, match="20-bit"):
        FecParams.from_json_dict(fec)
    sd_for(4_000_000, FecParams.from_json_dict({**fec, "max_n": LDPC_MAX_N}))


def test_tiny_file_with_a_huge_block_length_is_refused_where_chosen():
    # a 2-symbol block needs n - k >= N1: max_n = ceil(7 B / 2) > 2^20 - 1 for B = 2^19
    with pytest.raises(FECError, match="max_n"):
        default_fec(2, "ldpc", 1, max_block_length=1 << 19)


@pytest.mark.parametrize("key, value", [("max_block_length", 1 << 16), ("max_n", 1 << 16)])
def test_rs_oti_fields_are_16_bits(key, value):
    fec = default_fec(10_000, "rs", 100)
    sd_for(10_000, fec)
    changes = {key: value} if key == "max_n" else {key: value, "max_n": value + 1}
    with pytest.raises(ValueError, match="16-bit"):
        dataclasses.replace(fec, **changes)


@settings(max_examples=200, deadline=None)
@given(size=st.integers(0, 1 << 40), E=st.integers(1, 65535),
       B=st.none() | st.integers(1, 1 << 19), n1=st.integers(3, 10))
def test_every_chosen_ldpc_oti_fits_ext_fti(size, E, B, n1):
    try:
        fec = default_fec(size, "ldpc", E, B, n1=n1)
    except FECError:
        return  # too many blocks, or a tiny file with a huge B: refused, not wrapped
    assert fec.max_block_length <= fec.max_n <= LDPC_MAX_N
    oti = fti_of(size, fec)
    assert decode_ext_fti(encode_ext_fti(oti)) == oti
