"""Origin-form routing with the Host split remembered (issue 17: the Host and the default
upstream were split again on every request): the second and later requests with the same Host
route exactly as the first, for an allowed Host, the proxy's own, and one that is no
authority; the memory of Host values stays bounded."""

from __future__ import annotations

import pytest

from vmc.core import http as core_http
from vmc.core.http import HttpSharingCore
from vmc.core.reasons import Refused


@pytest.mark.parametrize("host, uri", [
    ("o:8080", "http://o:8080/x"),       # names an allowed upstream: used
    ("127.0.0.1:3128", "http://d/x"),    # the proxy's own address: the default
    ("bad host", "http://d/x"),          # no authority: the default
    ("", "http://d/x"),                  # empty: the default
])
def test_the_same_host_routes_the_same_every_time(host: str, uri: str) -> None:
    core = HttpSharingCore(default_authority="d:80", upstreams=["o:8080"])
    assert [core._route("/x", host or None) for _ in range(3)] == [uri] * 3


def test_without_a_default_an_unknown_host_is_refused_every_time() -> None:
    core = HttpSharingCore(upstreams=["o:8080"])
    for _ in range(3):
        assert core._route("/x", "elsewhere:80") is Refused.UPSTREAM_NOT_ALLOWED
        assert core._route("/x", "o:8080") == "http://o:8080/x"


def test_the_memory_of_host_values_is_bounded() -> None:
    core = HttpSharingCore(default_authority="d:80", upstreams=["o:8080"])
    for i in range(3 * core_http._HOSTS):
        assert core._route("/x", f"h{i}:80") == "http://d/x"
    assert len(core._hosts) <= core_http._HOSTS
