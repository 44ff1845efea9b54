"""The status endpoint answered by the sans-IO sharing core (``vmc proxy --engine core``): the
proxy's JSON at ``status_path`` for a peer inside ``status_allow`` (it lists recent URIs), 403
``status-not-allowed`` for any other peer or one whose address the driver never gave; neither is
forwarded to an origin nor counted as a request."""

from __future__ import annotations

import json

from deliverykit.protocol import StreamWrite
from vmc.core.events import Fetch
from vmc.core.http import HttpSharingCore
from vmc.core.reasons import by_name


def _ask(core: HttpSharingCore, peer: str | None, target: bytes) -> tuple[int, bytes, list]:
    core.connection_made(1, 0.0)
    if peer is not None:
        core.peer_known(1, peer, 0.0)
    core.data_received(1, b"GET " + target + b" HTTP/1.1\r\nhost: p\r\n\r\n", 0.0)
    out = list(core.to_send(0.0))
    data = b"".join(o.data for o in out if isinstance(o, StreamWrite))
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body, out


def _core() -> HttpSharingCore:
    return HttpSharingCore(upstreams=["o:80"], default_authority="o:80",
                           status_path="/_vmc/status", status_allow=["127.0.0.0/8", "::1/128"])


def test_a_loopback_peer_gets_the_status_json() -> None:
    core = _core()
    status, body, out = _ask(core, "127.0.0.1", b"/_vmc/status?recent=5")
    assert status == 200
    snap = json.loads(body)
    assert snap["engine"] == "core" and snap["requests"] == 0 and snap["recent"] == []
    assert snap["live_sessions"] == 0 and "window" in snap
    assert not [o for o in out if isinstance(o, Fetch)]


def test_another_peer_or_an_unknown_one_gets_403() -> None:
    for peer in ("10.1.2.3", None):
        core = _core()
        status, body, out = _ask(core, peer, b"/_vmc/status")
        assert status == 403 and b"status-not-allowed" in body
        assert by_name(core.stats.refused) == {"status-not-allowed": 1}
        assert not [o for o in out if isinstance(o, Fetch)]


def test_an_ipv4_mapped_loopback_peer_is_loopback() -> None:
    status, _, _ = _ask(_core(), "::ffff:127.0.0.1", b"/_vmc/status")
    assert status == 200


def test_without_a_status_path_the_path_goes_to_the_origin() -> None:
    core = HttpSharingCore(upstreams=["o:80"], default_authority="o:80")
    core.connection_made(1, 0.0)
    core.data_received(1, b"GET /_vmc/status HTTP/1.1\r\nhost: p\r\n\r\n", 0.0)
    assert [o for o in core.to_send(0.0) if isinstance(o, Fetch)]
