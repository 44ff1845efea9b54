"""LISP / CoreCast wire vectors: codec round trip, scapy layers rebuild them, signed messages
verify."""

from __future__ import annotations

from scapy.packet import Padding, Raw

from corecast.conformance.vectors import export, parse
from corecast.wire import layers as L
from corecast.wire.codec import (
    Ecm,
    MapRegister,
    decode_cc,
    decode_control,
    decode_lisp_data,
    ecm_unwrap,
    encode_cc,
    encode_control,
    encode_lisp_data,
    verify_auth,
)


def test_vector_names_its_source(lisp_vector):
    assert any(c.startswith("source:") for c in lisp_vector["comments"])


def test_codec_round_trip(lisp_vector):
    b = lisp_vector["bytes"]
    if lisp_vector["kind"] == "control":
        m = decode_control(b)
        assert encode_control(m) == b
        if isinstance(m, Ecm):
            _ip, _s, dport, inner = ecm_unwrap(m)
            assert dport == 4342 and decode_control(bytes(inner))
    elif lisp_vector["kind"] == "data":
        h, rest = decode_lisp_data(b)
        assert encode_lisp_data(h) == b and len(rest) == 0
    else:
        assert encode_cc(decode_cc(b)) == b


def test_signed_messages_verify_only_with_their_key(lisp_vector):
    if lisp_vector["kind"] != "control":
        return
    m = decode_control(lisp_vector["bytes"])
    if isinstance(m, MapRegister):
        assert verify_auth(m, lisp_vector["psk"])
        assert not verify_auth(m, lisp_vector["psk"] + b"x")


def test_scapy_layers_rebuild(lisp_vector):
    layers = {"control": L.LISPControl, "data": L.LISPData, "corecast": L.CoreCast}
    cls = layers[lisp_vector["kind"]]
    p = cls(lisp_vector["bytes"])
    assert Raw not in p and Padding not in p, p.summary()
    p.clear_cache()
    assert bytes(p) == lisp_vector["bytes"]


def test_exporter_reproduces_the_corpus(tmp_path, lisp_vector):
    export(tmp_path)
    fresh = parse((tmp_path / "lisp.vec").read_text())
    assert (lisp_vector["kind"], lisp_vector["name"], lisp_vector["bytes"]) in fresh["vectors"]
