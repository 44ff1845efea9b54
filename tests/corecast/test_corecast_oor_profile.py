"""Our ETR registers the way Open Overlay Router's map-server expects (issue 15 item 3).

OOR's map-server (oor/control/lisp_ms.c, oor/lib/hmac.c) reads RFC 6833's
16-bit Key ID (1 = HMAC-SHA-1) and compares all 20 bytes of the HMAC-SHA-1;
the RFC 9301 default we send (12-byte HMAC-SHA-1-96 or HMAC-SHA-256-128) gets
no answer (../shared/captures/oor/etr-to-oor-alg*.pcap).  ``--profile oor``
sends bytes ``00 01`` and the whole MAC.  Checked here with OOR's own
verification rule, and end to end over UDP on loopback against our map-server
configured the natural way (Key ID 1), which must accept the same bytes.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import socket

import pytest

from corecast.aio.nodes import EtrNode, MapServerNode
from corecast.core.etr import Etr
from corecast.core.mapserver import MapServer, Site
from corecast.core.maptrie import parse_prefix
from corecast.core.register import (
    OOR_PROFILE,
    RFC9301_PROFILE,
    Registrar,
    RegistrarConfig,
    with_profile,
)
from corecast.wire.codec import MapRegister, decode_control

KEY = b"testkey"


def _oor_accepts(datagram: bytes, key: bytes) -> bool:
    """OOR's map-server check: 16-bit Key ID 1 (HMAC_SHA_1_96 in its enum), 20 MAC bytes,
    HMAC-SHA-1 over the message with them zeroed."""
    if datagram[12:14] != b"\x00\x01" or datagram[14:16] != b"\x00\x14":
        return False
    zeroed = datagram[:16] + bytes(20) + datagram[36:]
    return hmac.compare_digest(hmac.new(key, zeroed, hashlib.sha1).digest(), datagram[16:36])


def _cfg(**kw) -> RegistrarConfig:
    return RegistrarConfig(("198.51.100.0/24",), ("127.0.0.1",), ("127.0.0.1", 4342), KEY,
                           key_id=1, **kw)


@pytest.mark.parametrize("profile", [RFC9301_PROFILE, OOR_PROFILE], ids=["rfc9301", "oor"])
def test_oor_profile_is_what_oor_accepts(profile):
    reg = Registrar(with_profile(_cfg(), profile))
    [(data, _dst)] = reg.tick(0.0)
    assert _oor_accepts(data, KEY) == (profile is OOR_PROFILE)
    msg = decode_control(data)
    assert isinstance(msg, MapRegister)
    assert len(msg.auth_data) == (20 if profile is OOR_PROFILE else 16)


def test_mac_length_must_fit_the_algorithm():
    with pytest.raises(ValueError, match="MAC length"):
        Registrar(_cfg(algorithm_id=1, mac_length=21))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_oor_profile_registers_with_a_natural_key_id_1_site():
    """Our map-server (site Key ID 1, as an operator copying OOR's ``key-type = 1`` writes it)
    accepts the OOR-profile registration over UDP and our ETR takes its Map-Notify."""

    async def run() -> tuple[Registrar, MapServer]:
        ms_port, ctl_port = _free_port(), _free_port()
        ms = MapServer([Site("s", {1: KEY}, (ipaddress.ip_network("198.51.100.0/24"),))],
                       notify_port=None)
        ms_node = MapServerNode(ms, "127.0.0.1", ms_port)
        cfg = with_profile(RegistrarConfig(("198.51.100.0/24",), ("127.0.0.1",),
                                           ("127.0.0.1", ms_port), KEY, key_id=1), OOR_PROFILE)
        reg = Registrar(cfg)
        etr = Etr([parse_prefix("232.0.0.0/8")], eids=[parse_prefix("198.51.100.0/24")],
                  trusted_rlocs=None)
        node = EtrNode(etr, "127.0.0.1", reg, _free_port(), ctl_port)
        await ms_node.start()
        await node.start()
        try:
            for _ in range(100):  # safety bound: 10 s
                if reg.registered:
                    break
                await asyncio.sleep(0.1)
        finally:
            await node.close()
            await ms_node.close()
        return reg, ms

    reg, ms = asyncio.run(run())
    assert ms.counters["accepted"] >= 1 and ms.counters["auth_old_style_key_id"] >= 1, ms.counters
    assert reg.registered and reg.counters["notified"] >= 1, reg.counters
