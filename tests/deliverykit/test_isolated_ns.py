"""IsolatedNamespace: a namespace with no route out, and the refusal to start a forwarding role
elsewhere."""

from __future__ import annotations

import errno
import json
import subprocess
import sys

import pytest

from deliverykit.testbed.isolated import (
    IsolatedNamespace,
    NotIsolatedError,
    spawn_forwarding_role,
    start_forwarding_role,
)

pytestmark = pytest.mark.root

SEND_OUT = (
    "import socket, errno\n"
    "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
    "try:\n"
    "    s.sendto(b'x', ('192.0.2.1', 4341)); print('sent')\n"
    "except OSError as e:\n"
    "    print(errno.errorcode[e.errno])\n"
)


def _netns_names() -> set[str]:
    out = subprocess.run(["ip", "-j", "netns", "list"],
                         capture_output=True, text=True, check=True).stdout
    return {entry["name"] for entry in json.loads(out or "[]")}


def _sendto_public() -> str:
    import socket

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendto(b"x", ("192.0.2.1", 4341))
        return "sent"
    except OSError as exc:
        return errno.errorcode[exc.errno or 0]
    finally:
        s.close()


def test_fresh_namespace_has_only_loopback_and_no_route_out() -> None:
    with IsolatedNamespace(prefix="isot") as ns:
        ns.assert_no_route_out()
        shown = ns.run(["ip", "-j", "route", "show", "table", "all"], check=True)
        routes = json.loads(shown.stdout)
        assert routes and all(r["dev"] == "lo" for r in routes)
        links = json.loads(ns.run(["ip", "-j", "link"], check=True).stdout)
        assert [link["ifname"] for link in links if "UP" in link["flags"]] == ["lo"]
        before = ns.ip_counters()["OutNoRoutes"]
        proc = start_forwarding_role(ns, [sys.executable, "-c", SEND_OUT],
                                     stdout=subprocess.PIPE, text=True)
        out, _ = proc.communicate(timeout=30)
        assert out.strip() == "ENETUNREACH"
        assert spawn_forwarding_role(ns, _sendto_public).result(timeout=30) == "ENETUNREACH"
        # each start/spawn_forwarding_role probes once (+1) and each role sent once (+1)
        assert ns.ip_counters()["OutNoRoutes"] == before + 4
        name = ns.name
        assert name in _netns_names()
    assert name not in _netns_names()


def test_namespace_with_veth_and_default_route_is_refused() -> None:
    with IsolatedNamespace(prefix="isot") as ns:
        for argv in (
            ["ip", "link", "add", "out0", "type", "veth", "peer", "name", "out1"],
            ["ip", "addr", "add", "10.99.0.1/24", "dev", "out0"],
            ["ip", "link", "set", "out0", "up"],
            ["ip", "link", "set", "out1", "up"],
            ["ip", "route", "add", "default", "via", "10.99.0.2"],
        ):
            ns.run(argv, check=True)
        with pytest.raises(NotIsolatedError) as info:
            start_forwarding_role(ns, [sys.executable, "-c", "open('/tmp/should-not-run', 'w')"])
        text = str(info.value)
        assert "interface out0" in text and "route default" in text and "192.0.2.1" in text
        with pytest.raises(NotIsolatedError):
            spawn_forwarding_role(ns, _sendto_public)
        # the probe itself found the way out: the route lookup succeeds
        assert ns.spawn(_sendto_public).result(timeout=30) == "sent"


def test_down_extra_interface_or_catch_all_route_is_refused() -> None:
    with IsolatedNamespace(prefix="isot") as ns:
        # down, no address
        ns.run(["ip", "link", "add", "d0", "type", "veth", "peer", "name", "d1"], check=True)
        with pytest.raises(NotIsolatedError, match="interface d0"):
            ns.assert_no_route_out()
    with IsolatedNamespace(prefix="isot") as ns:
        # a catch-all route on lo: nothing leaves, but a connect() to anywhere now "works": refused
        ns.run(["ip", "route", "add", "default", "dev", "lo"], check=True)
        with pytest.raises(NotIsolatedError, match="connect.. to 192.0.2.1 succeeded"):
            ns.assert_no_route_out()


def test_refuses_anything_but_an_isolated_namespace() -> None:
    with pytest.raises(NotIsolatedError):
        start_forwarding_role("some-netns", ["true"])  # type: ignore[arg-type]  # wrong on purpose
