"""Session description and receiver metrics (issue 5 review, items 2, 6, 8, 9, 10):
the ``source`` field, the zfec FEC Instance ID in ``fec``, metrics counted only for
packets of the session's object, null metrics for an incomplete transfer, and
``head`` from the real datagram and symbol lengths."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os

import pytest
from hypothesis import given, settings, strategies as st

from m2c.core.filetx import (
    FecScheme,
    FileReceiver,
    FileSender,
    RateLadder,
    SessionDescription,
    default_fec,
)
from m2c.core.groups import WaveSchedule
from m2c.fec.payload_id import ZFEC_INSTANCE_ID
from m2c.wire import codec

SCHED = WaveSchedule(20.0, 2000.0, tsd=0.5, k=2)


def sd_for(data: bytes, scheme="ldpc", **kw) -> SessionDescription:
    return SessionDescription(7, 1, "f", len(data), hashlib.sha256(data).hexdigest(),
                              default_fec(len(data), scheme, 100), RateLadder.of(SCHED),
                              [["239.1.1.1", 4000]] * (SCHED.channels + 1), **kw)


def packets(sd, data):
    fs = FileSender(sd, lambda off, n: data[off:off + n])
    out = []
    while len(out) < 4 * sd.partition().total_symbols + 10:
        out += [pkt for _, pkt in fs.next_pdus()]
    return out


def test_source_field_round_trips_and_is_validated():
    data = os.urandom(1000)
    sd = sd_for(data, source="127.0.0.1")
    assert SessionDescription.from_json(sd.to_json()).source == "127.0.0.1"
    d = json.loads(sd.to_json())
    del d["source"]  # an older session description: still accepted
    assert SessionDescription.from_json(json.dumps(d)).source == ""
    for bad in ("239.1.1.1", "host", 5):
        with pytest.raises(ValueError, match="source"):
            sd_for(data, source=bad)


def test_zfec_instance_id_is_in_the_fec_parameters_and_checked():
    data = os.urandom(5000)
    sd = sd_for(data, "rs")
    assert sd.fec.instance_id == ZFEC_INSTANCE_ID
    assert json.loads(sd.to_json())["fec"]["instance_id"] == ZFEC_INSTANCE_ID
    with pytest.raises(ValueError, match="instance"):
        dataclasses.replace(sd.fec, instance_id=5)
    d = json.loads(sd.to_json())
    del d["fec"]["instance_id"]  # older SDPs still load, and are written back without it
    old = SessionDescription.from_json(json.dumps(d))
    assert old.fec.scheme is FecScheme.RS and old.fec.instance_id is None
    assert "instance_id" not in json.loads(old.to_json())["fec"]
    ldpc = sd_for(data)
    assert "instance_id" not in json.loads(ldpc.to_json())["fec"]  # ID 3 is fully specified
    with pytest.raises(ValueError, match="instance"):
        dataclasses.replace(ldpc.fec, instance_id=ZFEC_INSTANCE_ID)


def test_foreign_object_packets_are_not_counted():
    """Item 6: packets of another TOI or codepoint are not part of the metrics."""
    data = os.urandom(3000)
    sd = sd_for(data)
    fr = FileReceiver(sd)
    pkt = next(p for p in packets(sd, data) if not p.data_less)
    for other in (dataclasses.replace(pkt, toi=2), dataclasses.replace(pkt, codepoint=129),
                  dataclasses.replace(pkt, sbn=99),
                  dataclasses.replace(pkt, payload=pkt.payload[:-1])):
        assert fr.feed(other, len(codec.encode(other))) == []
    assert fr.packets == 0 and fr.link_bytes == 0 and fr.app_bytes == 0
    fr.feed(pkt, len(codec.encode(pkt)))
    assert fr.packets == 1 and fr.link_bytes == len(codec.encode(pkt)) + 28


def test_metrics_of_an_incomplete_transfer_are_null():
    """Item 9: gput, sym, dup and comp mean nothing before the file is recovered."""
    data = os.urandom(30_000)
    sd = sd_for(data)
    fr = FileReceiver(sd)
    for pkt in packets(sd, data)[:20]:
        fr.feed(pkt, len(codec.encode(pkt)))
    assert not fr.complete
    m = fr.metrics(5.0, 1e-9, 0, 20)
    assert m.gput is None and m.sym is None and m.dup is None and m.comp is None
    assert m.tput > 0 and m.time == 5.0
    empty = FileReceiver(sd).metrics(1.0, 1e-9, 0, 0)
    assert (empty.gput, empty.sym, empty.dup, empty.comp, empty.head) == (None,) * 5


@pytest.mark.parametrize("scheme", ["ldpc", "rs"])
def test_head_is_measured_from_the_datagrams(scheme):
    """Item 10: an RS (FPI 129) datagram carries 52 header bytes, LDPC 48."""
    data = os.urandom(20_000)
    sd = sd_for(data, scheme)
    fr = FileReceiver(sd)
    sizes = []
    for pkt in packets(sd, data):
        if not fr.complete:
            wire = codec.encode(pkt)
            fr.feed(pkt, len(wire))
            if not pkt.data_less:
                sizes.append(len(wire) - len(pkt.payload))
    assert fr.complete
    hdr = {"ldpc": 48, "rs": 52}[scheme]
    assert set(sizes) == {hdr}
    m = fr.metrics(2.0, 1.0, 0, 100)
    assert m.head == pytest.approx((100 + hdr + 28) / 100 * 100 - 100)
    assert m.gput is not None and m.sym is not None


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c,
                                                                         max_size=3),
                    max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(source=JSON | st.ip_addresses(v=4).map(str), instance=JSON,
       scheme=st.sampled_from(["ldpc", "rs"]))
def test_new_session_fields_fuzzed(source, instance, scheme):
    """Any JSON in ``source`` or ``fec.instance_id``: a description or ValueError."""
    d = json.loads(sd_for(b"x" * 500, scheme).to_json())
    d["source"] = source
    d["fec"]["instance_id"] = instance
    try:
        sd = SessionDescription.from_json(json.dumps(d))
    except ValueError:
        return
    assert sd.source == source and scheme == "rs" and type(instance) is int
    assert instance == ZFEC_INSTANCE_ID


@pytest.mark.parametrize("scheme", ["ldpc", "rs"])
def test_decoded_blocks_are_typed_and_cover_the_file(scheme):
    """FileReceiver hands out DecodedBlock(offset, data), not positional tuples."""
    from m2c.core.filetx import DecodedBlock

    data = os.urandom(2500)
    sd = dataclasses.replace(sd_for(data, scheme),
                             fec=default_fec(len(data), scheme, 100, max_block_length=10))
    fr = FileReceiver(sd)
    out = bytearray(len(data))
    got = []
    for pkt in packets(sd, data):
        for blk in fr.feed(pkt, 200):
            assert isinstance(blk, DecodedBlock)
            out[blk.offset:blk.offset + len(blk.data)] = blk.data
            got.append(blk.offset)
        if fr.complete:
            break
    assert fr.complete and bytes(out) == data and len(got) == sd.partition().blocks > 1
