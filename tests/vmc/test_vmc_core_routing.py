"""Routing in the sans-IO HTTP sharing core, as the proxy routes (not an open proxy,
docs/security/vmc-proxy.md): with ``upstreams`` given, an absolute-form URI must name an allowed
upstream (else 403), https is refused (403), an origin-form request goes to the upstream its
Host names when allowed, else to the default; a target that is no URI gets 400. The URI the
machine keys on is normalised as the proxy normalises it."""

from __future__ import annotations

from deliverykit.protocol import StreamClose, StreamWrite
from vmc.core.events import Fetch
from vmc.core.http import HttpSharingCore
from vmc.core.key import normalise_uri
from vmc.core.linger import HalfClose
from vmc.core.reasons import by_name


def _ask(core: HttpSharingCore, target: bytes, host: bytes = b"h") -> list[object]:
    core.connection_made(1, 0.0)
    core.data_received(1, b"GET " + target + b" HTTP/1.1\r\nhost: " + host + b"\r\n\r\n", 0.0)
    return list(core.to_send(0.0))


def _status(out: list[object]) -> int:
    data = b"".join(o.data for o in out if isinstance(o, StreamWrite))
    assert data.count(b"HTTP/1.1 ") == 1
    return int(data.split(b" ", 2)[1])


def test_an_absolute_uri_to_an_upstream_not_allowed_is_refused_with_403() -> None:
    core = HttpSharingCore(upstreams=["origin:8080"])
    out = _ask(core, b"http://elsewhere:80/x")
    assert _status(out) == 403 and not [o for o in out if isinstance(o, Fetch)]
    assert not [o for o in out if isinstance(o, StreamClose)]  # the connection is kept
    assert by_name(core.stats.refused).get("upstream-not-allowed") == 1


def test_https_is_refused_with_403() -> None:
    out = _ask(HttpSharingCore(upstreams=["origin:8080"]), b"https://origin:8080/x")
    assert _status(out) == 403


def test_an_allowed_absolute_uri_is_fetched_normalised() -> None:
    out = _ask(HttpSharingCore(upstreams=["origin:8080"]), b"http://ORIGIN:8080/a/%7euser")
    (f,) = [o for o in out if isinstance(o, Fetch)]
    assert f.uri == normalise_uri("http://origin:8080/a/~user") == "http://origin:8080/a/~user"


def test_origin_form_goes_to_the_host_it_names_when_allowed_else_to_the_default() -> None:
    core = HttpSharingCore(upstreams=["a:81", "b:82"], default_authority="a:81")
    (f,) = [o for o in _ask(core, b"/x", host=b"b:82") if isinstance(o, Fetch)]
    assert f.uri == "http://b:82/x"
    core = HttpSharingCore(upstreams=["a:81", "b:82"], default_authority="a:81")
    (f,) = [o for o in _ask(core, b"/x", host=b"evil:80") if isinstance(o, Fetch)]
    assert f.uri == "http://a:81/x"


def test_origin_form_with_no_allowed_host_and_no_default_is_refused_with_403() -> None:
    out = _ask(HttpSharingCore(upstreams=["a:81"]), b"/x", host=b"evil:80")
    assert _status(out) == 403


def test_a_target_that_is_no_uri_gets_400_and_a_close() -> None:
    core = HttpSharingCore(upstreams=["a:81"])
    out = _ask(core, b"http://user@a:81/x")
    assert _status(out) == 400 and HalfClose(1) in out
    assert by_name(core.stats.refused).get("bad-target") == 1


def test_without_upstreams_the_core_routes_as_before() -> None:
    """The simulator's and the tests' use: any absolute URI, origin-form by Host."""
    (f,) = [o for o in _ask(HttpSharingCore(), b"http://any:1/x") if isinstance(o, Fetch)]
    assert f.uri == "http://any:1/x"


# ------------------------------------------------------------------ transparent mode

def _redirected(core: HttpSharingCore, conn: int, dst: tuple[str, int], target: bytes,
                host: bytes, now: float = 0.0) -> list[object]:
    """A connection the driver says was redirected on its way to ``dst`` (SO_ORIGINAL_DST)."""
    core.connection_made(conn, now)
    core.original_destination(conn, dst, now)
    core.data_received(conn, b"GET " + target + b" HTTP/1.1\r\nhost: " + host + b"\r\n\r\n", now)
    return list(core.to_send(now))


def test_transparent_a_redirected_request_goes_to_its_original_destination_under_its_host() -> None:
    core = HttpSharingCore(upstreams=["10.0.0.2:80", "10.0.0.3:80"])
    (f,) = [o for o in _redirected(core, 1, ("10.0.0.2", 80), b"/x", b"www.example")
            if isinstance(o, Fetch)]
    # the key and the upstream request keep the client's Host; the connection goes to 10.0.0.2
    assert f.uri == "http://www.example/x" and f.origin == ("10.0.0.2", 80)
    assert core.stats.transparent == 1


def test_transparent_host_cannot_steer_to_another_destination() -> None:
    """Aimed at a destination not allowed, with an allowed Host: 403, nothing fetched."""
    core = HttpSharingCore(upstreams=["10.0.0.2:80"])
    out = _redirected(core, 1, ("10.0.0.9", 80), b"/x", b"10.0.0.2")
    assert _status(out) == 403 and not [o for o in out if isinstance(o, Fetch)]
    assert by_name(core.stats.refused) == {"upstream-not-allowed": 1}


def test_transparent_the_same_uri_at_two_origin_addresses_is_never_shared() -> None:
    core = HttpSharingCore(upstreams=["10.0.0.2:80", "10.0.0.3:80"])
    fa = [o for o in _redirected(core, 1, ("10.0.0.2", 80), b"/x", b"www") if isinstance(o, Fetch)]
    fb = [o for o in _redirected(core, 2, ("10.0.0.3", 80), b"/x", b"www", 0.1)
          if isinstance(o, Fetch)]
    assert [f.origin for f in fa + fb] == [("10.0.0.2", 80), ("10.0.0.3", 80)]
    assert core.stats.joins == 0


def test_transparent_an_absolute_uri_on_a_redirected_connection_routes_as_a_forward_proxy() -> None:
    core = HttpSharingCore(upstreams=["10.0.0.2:80"])
    out = _redirected(core, 1, ("10.0.0.9", 80), b"http://10.0.0.2/x", b"10.0.0.2")
    (f,) = [o for o in out if isinstance(o, Fetch)]
    assert f.uri == "http://10.0.0.2/x" and f.origin is None and core.stats.transparent == 0
