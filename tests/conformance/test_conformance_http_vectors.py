"""HTTP vectors: our Range / Content-Range parsers and multipart reader agree with every stored
vector, each vector names its source, and the exporter reproduces the corpus."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from vmc.conformance import vectors as V
from vmc.conformance.harness import Fetched, multipart_parts
from vmc.core import ranges
from vmc.core.errors import RangeError, UnsatisfiableRange

CORPUS = Path(__file__).resolve().parents[1] / "vectors" / "http"


def test_vector_names_its_source(http_vector):
    assert http_vector["source"].startswith("RFC 9")


def test_our_parsers_agree(http_vector):
    v, want = http_vector, http_vector["expect"]
    if v["set"] == "ranges":
        if want == "invalid":
            with pytest.raises(RangeError):
                ranges.parse_range(v["range"])
        elif want == "other-unit":
            assert ranges.parse_range(v["range"]) is None
        elif want == "unsatisfiable":
            with pytest.raises(UnsatisfiableRange):
                ranges.resolve(ranges.parse_range(v["range"]), V.LENGTH)
        else:
            resolved = ranges.resolve(ranges.parse_range(v["range"]), V.LENGTH)
            assert resolved == [tuple(r) for r in want]
    elif v["set"] == "content-range":
        if want == "invalid":
            with pytest.raises(RangeError):
                ranges.parse_content_range(v["value"])
        else:
            cr = ranges.parse_content_range(v["value"])
            assert [cr.first, cr.last, cr.length] == want
    elif v["set"] == "multipart":
        r = Fetched(status=206, headers={"content-type": v["content_type"]},
                    body=v["body"].encode(), complete=True)
        parts = multipart_parts(r)
        assert [[a, b, c] for a, b, c, _ in parts] == want
        assert all(len(body) == b - a + 1 for a, b, _, body in parts)
    else:
        raw = v["request"].encode("latin-1")
        head_end = raw.index(b"\r\n\r\n")
        assert b"/smuggled/" + v["name"].encode() in raw[head_end:], (
            "the smuggled request follows the first head")
        assert v["expect"] == "close" or set(v["expect"]) <= {400, 501}


def test_corpus_covers_every_set():
    assert sorted(p.stem for p in CORPUS.glob("*.vec")) == sorted(V.SETS)
    for name in V.SETS:
        names = [v["name"] for v in V.load(name, CORPUS)]
        assert names and len(names) == len(set(names)), name


def test_exporter_reproduces_the_corpus(tmp_path):
    cp = subprocess.run([sys.executable, "-m", "vmc.conformance.vectors", "export", str(tmp_path)],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    for p in CORPUS.glob("*.vec"):
        assert (tmp_path / p.name).read_text() == p.read_text(), p.name


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_vector_file_parser_fuzz(text):
    """Any text: a parsed corpus or ValueError (json.JSONDecodeError is one), nothing else."""
    try:
        v = V.parse(text)
    except ValueError:
        return
    assert isinstance(v["vectors"], list) and isinstance(v["comments"], list)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300) | st.lists(st.sampled_from([
    b"HTTP/1.1 200 OK\r\n", b"HTTP/1.0 400 Bad\r\n", b"Content-Length: 2\r\n",
    b"content-length: 99999\r\n",
    b"\r\n", b"ok", b"HTTP/1.1 100 Continue\r\n"]), max_size=12).map(b"".join))
def test_response_counter_fuzz(reply):
    """The smuggling case's response counter takes any bytes and returns status codes, never
    raises."""
    from vmc.conformance.test_http_vector_cases import _statuses

    out = _statuses(reply)
    assert all(100 <= s <= 999 for s in out) and len(out) <= len(reply) // 16
