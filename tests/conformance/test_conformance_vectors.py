"""The vector corpus: each file names its source, our codecs reproduce it, the exporter
rewrites it."""

from __future__ import annotations

import zfec

from m2c.conformance.vectors import export, format_vector, parse
from m2c.fec import ldpc, rs


def test_fec_vector_names_its_source(fec_vector):
    assert any(c.startswith("source:") for c in fec_vector["comments"])
    assert len(fec_vector["source"]) == fec_vector["k"] * fec_vector["E"]
    assert len(fec_vector["repair"]) == (fec_vector["n"] - fec_vector["k"]) * fec_vector["E"]


def test_fec_vector_matches_our_codec(fec_vector):
    v = fec_vector
    if v["code"] == "ldpc":
        p = ldpc.LDPCParams(k=v["k"], n=v["n"], symbol_size=v["E"], n1=v["n1"], seed=v["seed"])
        assert ldpc.encode(p, v["source"]) == v["repair"]
        # and the block decodes back from the repair symbols plus what peeling needs
        syms = v["source"] + v["repair"]
        e = v["E"]
        pairs = [(i, syms[i * e:(i + 1) * e]) for i in range(v["n"])]
        assert ldpc.decode(p, pairs) == v["source"]
    else:
        assert rs.encode(rs.RSParams(v["k"], v["n"], v["E"]), v["source"]) == v["repair"]


def test_rs_vectors_against_zfec_directly(fec_vector):
    v = fec_vector
    if v["code"] != "rs":
        return
    k, n, e = v["k"], v["n"], v["E"]
    blocks = [v["source"][i * e:(i + 1) * e] for i in range(k)]
    assert b"".join(zfec.Encoder(k, n).encode(blocks, list(range(k, n)))) == v["repair"]


def test_exporter_reproduces_the_stored_corpus(tmp_path, fec_vector):
    export(tmp_path)
    fresh = parse((tmp_path / fec_vector["path"].name).read_text())
    assert fresh["source"] == fec_vector["source"] and fresh["repair"] == fec_vector["repair"]


def test_format_parse_round_trip():
    v = {"name": "x", "code": "ldpc", "k": 2, "n": 5, "n1": 3, "seed": 9, "E": 1,
         "source": b"\x01\x02", "repair": b"\xff\x00\x10"}
    back = parse(format_vector(v, "a test"))
    assert {k: back[k] for k in ("code", "k", "n", "n1", "seed", "E", "source", "repair")} == {
        k: v[k] for k in ("code", "k", "n", "n1", "seed", "E", "source", "repair")}
    assert "source: a test" in back["comments"]
