"""The machine remembers each URI's key and origin (issue 17: three parses of the same URI per
request): what it remembers is what request_key and split_authority say, a hot URI is parsed
once, and the memory stays bounded however many URIs pass."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from vmc.core import machine as m
from vmc.core.key import request_key, split_authority
from vmc.core.machine import SharingMachine

HOSTS = st.sampled_from(["o", "o:8080", "[::1]:81", "Example.COM", "10.0.0.1:80"])
PATHS = st.text(alphabet="abc/%20?=&~", max_size=12).map(lambda p: "/" + p)


@settings(max_examples=200, deadline=None)
@given(HOSTS, PATHS)
def test_remembered_facts_are_the_parsers(host: str, path: str) -> None:
    mach = SharingMachine()
    uri = f"http://{host}{path}"
    for _ in range(2):  # parsed, then remembered
        key, upstream, auth = mach._facts(uri)
        assert key == request_key(uri)
        assert upstream == split_authority(uri.split("://", 1)[1].split("/", 1)[0])
        assert auth == uri.split("://", 1)[1].split("/", 1)[0].encode()


def test_a_hot_uri_is_parsed_once_and_the_memory_is_bounded(monkeypatch) -> None:
    calls = 0
    real = m.request_key

    def counting(uri: str) -> str:
        nonlocal calls
        calls += 1
        return real(uri)

    monkeypatch.setattr(m, "request_key", counting)
    mach = SharingMachine()
    for _ in range(100):
        mach._facts("http://o/hot")
    assert calls == 1
    for i in range(3 * m._FACTS):
        mach._facts(f"http://o/{i}")
    assert len(mach._uri_facts) <= m._FACTS
