"""PPSPP wire vectors: our codec and our scapy layers both read and rebuild every stored
datagram."""

from __future__ import annotations

from swift.conformance.vectors import ADDRESSINGS, datagrams, export, parse
from swift.wire import codec as C, layers as L
from swift.wire.constants import HashFunc, SigAlg


def _ctx(addressing: str) -> C.WireContext:
    return C.WireContext.make(ADDRESSINGS[addressing], HashFunc.SHA256,
                              SigAlg.ECDSAP256SHA256, 1024)


def test_vector_names_its_source(ppspp_vector):
    assert any(c.startswith("source:") for c in ppspp_vector["comments"])


def test_codec_round_trip(ppspp_vector):
    ctx = _ctx(ppspp_vector["addressing"])
    d = C.decode_datagram(ppspp_vector["bytes"], ctx)
    assert d.error is None
    assert C.encode_datagram(ctx, d.channel, d.messages) == ppspp_vector["bytes"]
    if ppspp_vector["name"] == "keepalive":
        assert d.is_keepalive
    else:
        assert d.messages


def test_scapy_layers_agree(ppspp_vector):
    ctx = _ctx(ppspp_vector["addressing"])
    with L.use_context(ctx):
        pkt = L.PPSPP(ppspp_vector["bytes"])
        assert bytes(pkt) == ppspp_vector["bytes"]
        channel, msgs = L.to_codec(pkt)
    d = C.decode_datagram(ppspp_vector["bytes"], ctx)
    assert (channel, msgs) == (d.channel, d.messages)


def test_exporter_reproduces_the_corpus(tmp_path, ppspp_vector):
    export(tmp_path)
    fresh = parse((tmp_path / ppspp_vector["file"].name).read_text())
    assert fresh["vectors"][ppspp_vector["name"]] == ppspp_vector["bytes"]


def test_corpus_covers_every_message_type():
    names = {n for n, _ in datagrams("chunk32")}
    assert {"data", "ack", "have", "integrity", "signed-integrity", "request", "cancel", "choke",
            "unchoke", "pex-req", "pex-res-v4", "pex-res-v6", "pex-res-cert",
            "handshake-initiation", "keepalive"} <= names
