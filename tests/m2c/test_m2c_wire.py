"""ALC/LCT framing: codec vs scapy layers, fuzzing, corruption, and Wireshark."""

from __future__ import annotations

import json
import subprocess

import pytest
from hypothesis import given, settings, strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import wrpcap

from m2c.fec.errors import DecodeError
from m2c.fec.payload_id import LDPCOTI
from m2c.wire import codec
from m2c.wire.layers import ALC_FPI3, ALC_FPI129, LCT, ExtFTI, ExtM2C, ExtM2CCRC

U32 = st.integers(0, 2**32 - 1)

ldpc_fti = st.builds(LDPCOTI, st.integers(0, 2**48 - 1), st.integers(0, 2**16 - 1),
                     st.integers(0, 2**20 - 1), st.integers(0, 2**20 - 1), st.integers(0, 7),
                     st.integers(1, 31), st.integers(1, 2**31 - 2))


@st.composite
def packets(draw):
    cp = draw(st.sampled_from([3, 129]))
    if cp == 3:
        sbn, esi, sbl = draw(st.integers(0, 4095)), draw(st.integers(0, 2**20 - 1)), 0
        fti = draw(st.none() | ldpc_fti)
    else:
        sbn, esi, sbl = draw(U32), draw(st.integers(0, 65535)), draw(st.integers(0, 65535))
        fti = None
    data_less = draw(st.booleans()) and draw(st.booleans())
    if data_less:
        sbn = esi = sbl = 0
    # TOI 0 (a session's single object) omits the TOI field: drawn as often as any other
    return codec.AlcPacket(draw(U32), draw(st.just(0) | U32), cp, draw(U32),
                           draw(st.integers(0, 65535)),
                           draw(U32), draw(U32), draw(U32), sbn, esi,
                           b"" if data_less else draw(st.binary(max_size=64)), sbl, fti,
                           draw(st.booleans()), draw(st.booleans()), data_less)


def to_scapy(p: codec.AlcPacket):
    ext = []
    if p.fti is not None:
        f = p.fti
        ext.append(ExtFTI(transfer_length=f.transfer_length, symbol_size=f.symbol_size,
                          n1m3=f.n1m3, g=f.g, max_block_length=f.max_block_length,
                          max_n=f.max_n, seed=f.seed))
    ext += [ExtM2C(group=p.group, slot=p.slot, psn=p.psn, buffer_id=p.buffer_id,
                   offset=p.offset), ExtM2CCRC()]
    lct = LCT(tsi=p.session, toi=p.toi, o=1 if p.toi else 0, codepoint=p.codepoint,
              a=int(p.close_session),
              b=int(p.close_object), ext=ext)
    if p.data_less:
        return lct
    fpi = ALC_FPI3(sbn=p.sbn, esi=p.esi) if p.codepoint == 3 else ALC_FPI129(
        sbn=p.sbn, sbl=p.sbl, esi=p.esi)
    return lct / fpi / Raw(p.payload)


@settings(max_examples=150, deadline=None)
@given(packets())
def test_codec_and_scapy_same_bytes(p):
    wire = codec.encode(p)
    assert bytes(to_scapy(p)) == wire
    assert codec.decode(wire) == p
    assert codec.decode(wire, session=p.session) == p
    assert codec.peek_session(wire) == p.session
    # scapy dissects the codec's bytes into the same fields
    d = LCT(wire)
    m = d[ExtM2C]
    assert (d.tsi, d.toi, d.codepoint, m.group, m.slot, m.psn, m.buffer_id, m.offset) == (
        p.session, p.toi, p.codepoint, p.group, p.slot, p.psn, p.buffer_id, p.offset)
    if not p.data_less:
        fpi = d[ALC_FPI3] if p.codepoint == 3 else d[ALC_FPI129]
        assert (fpi.sbn, fpi.esi) == (p.sbn, p.esi)
    assert bytes(d) == wire


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=120))
def test_decoder_fuzz_arbitrary_bytes(data):
    try:
        v = codec.decode(data)
    except DecodeError:
        return
    assert isinstance(v, codec.AlcPacket)


@settings(max_examples=300, deadline=None)
@given(packets(), st.data())
def test_any_corruption_is_rejected(p, data):
    wire = bytearray(codec.encode(p))
    i = data.draw(st.integers(0, len(wire) - 1))
    flip = data.draw(st.integers(1, 255))
    wire[i] ^= flip
    with pytest.raises(DecodeError):
        codec.decode(bytes(wire), session=p.session)


@given(packets(), U32)
def test_foreign_session_rejected(p, other):
    if other == p.session:
        return
    with pytest.raises(DecodeError):
        codec.decode(codec.encode(p), session=other)


def test_mutated_prefix_fuzz_through_scapy_and_codec():
    p = codec.AlcPacket(7, 1, 3, 2, 1, 5, 9, 0, 1, 2, b"x" * 10)
    wire = codec.encode(p)
    for cut in range(len(wire)):
        with pytest.raises(DecodeError):
            codec.decode(wire[:cut] + b"\xff" * 3)


@pytest.mark.tool("tshark")
def test_wireshark_dissects_our_packets(tmp_path):
    pk = [codec.AlcPacket(0xCAFE, 3, 3, 17, 4, 1234, 8, 2800, 5, 321, b"\x01" * 32,
                          fti=LDPCOTI(10**6, 1024, 1000, 2000, 0, 1, 77)),
          codec.AlcPacket(0xCAFE, 3, 129, 17, 0, 9, 8, 0, 70000, 12, b"\x02" * 16, sbl=32),
          # TOI 0: the session's single object, TOI field omitted (our sessions' default)
          codec.AlcPacket(0xCAFE, 0, 3, 17, 4, 1235, 8, 2828, 6, 322, b"\x03" * 32)]
    frames = [Ether() / IP(src="127.0.0.1", dst="239.255.7.1") / UDP(sport=41000, dport=41001)
              / Raw(codec.encode(p)) for p in pk]
    pcap = tmp_path / "m2c.pcap"
    wrpcap(str(pcap), frames)
    out = subprocess.run(
        ["tshark", "-r", str(pcap), "-d", "udp.port==41001,alc", "-T", "json",
         "-e", "alc.version", "-e", "rmt-lct.tsi", "-e", "rmt-lct.toi", "-e", "rmt-lct.codepoint",
         "-e", "rmt-lct.hec.type", "-e", "rmt-fec.encoding_id", "-e", "rmt-fec.sbn",
         "-e", "rmt-fec.esi", "-e", "rmt-fec.sbl", "-e", "rmt-lct.cci"],
        capture_output=True, text=True, timeout=60, check=True)
    rows = [r["_source"]["layers"] for r in json.loads(out.stdout)]
    assert len(rows) == 3
    a, b, c = rows
    assert a["alc.version"] == ["1"] and a["rmt-lct.tsi"] == [str(0xCAFE)]
    assert a["rmt-lct.toi"] == ["3"] and a["rmt-lct.codepoint"] == ["3"]
    assert {"64", "120", "121"} <= set(a["rmt-lct.hec.type"])
    assert a["rmt-fec.sbn"] == ["5"] and int(a["rmt-fec.esi"][0], 0) == 321
    assert b["rmt-fec.encoding_id"] == ["129"] and b["rmt-fec.sbn"] == ["70000"]
    assert b["rmt-fec.sbl"] == ["32"] and int(b["rmt-fec.esi"][0], 0) == 12
    # CCI: WEBRC short format mirror (CTSI 17, channel 4, PSN 1234)
    assert a["rmt-lct.cci"][0].replace(":", "") == "110404d2"
    assert len(codec.encode(pk[2])) == len(codec.encode(pk[0])) - 20 - 4  # no EXT_FTI, no TOI
    assert c["rmt-lct.tsi"] == [str(0xCAFE)] and "rmt-lct.toi" not in c
    assert {"120", "121"} <= set(c["rmt-lct.hec.type"])
    assert c["rmt-fec.sbn"] == ["6"] and int(c["rmt-fec.esi"][0], 0) == 322
