"""A request's route remembered per (target, Host) (issue 17, VMCFAST step 3): wrk's and most
clients' requests repeat the same target and Host, and each was normalised again (the URI
parsed, percent-normalised, re-formatted). The remembered route is the one computed; a
transparent connection's route is never remembered (its original destination decides, and it
is counted); the memory is bounded."""

from __future__ import annotations

import pytest

from vmc.core import http as core_http
from vmc.core.http import HttpSharingCore
from vmc.core.reasons import Refused


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every call of the URI normaliser the core makes (the real one still runs)."""
    calls: list[str] = []
    real = core_http.normalise_uri

    def spy(target: str, host: str | None = None) -> str:
        calls.append(target)
        return real(target, host)

    monkeypatch.setattr(core_http, "normalise_uri", spy)
    return calls


@pytest.mark.parametrize("target, host, routed", [
    ("/a%7e?x=1", "o:8080", "http://o:8080/a~?x=1"),
    ("/a", "127.0.0.1:3128", "http://d/a"),
    ("http://o:8080/b", None, "http://o:8080/b"),
    ("http://elsewhere/b", None, Refused.UPSTREAM_NOT_ALLOWED),
    ("*", "o:8080", Refused.BAD_TARGET),
])
def test_a_repeated_route_is_normalised_once(counted: list[str], target: str, host: str | None,
                                             routed: str | Refused) -> None:
    core = HttpSharingCore(default_authority="d:80", upstreams=["o:8080"])
    assert [core._route(target, host) for _ in range(5)] == [routed] * 5
    assert len(counted) <= 1


def test_transparent_routes_are_not_remembered(counted: list[str]) -> None:
    core = HttpSharingCore(upstreams=["o:8080"])
    for _ in range(3):
        assert core._route("/t", "o:8080", ("o", 8080)) == "http://o:8080/t"
    assert len(counted) == 3 and core.stats.transparent == 3


def test_the_memory_of_routes_is_bounded() -> None:
    core = HttpSharingCore(default_authority="d:80", upstreams=["o:8080"])
    for i in range(3 * core_http._ROUTES):
        assert core._route(f"/x{i}", "o:8080") == f"http://o:8080/x{i}"
    assert 0 < len(core._routes) <= core_http._ROUTES
