"""Real Open Overlay Router exchanges (../shared/captures/oor, issue 15 items 3 and 7).

* Every LISP datagram of every capture decodes with our codec: control
  messages on UDP 4342 (an ECM's inner Map-Request too) and data packets on
  UDP 4341; our decode of each control message's type, nonce, Key ID and
  flags agrees with tshark's ``lisp`` dissector (the Map-Notify R bit too).
* Our map-server, fed OOR's Map-Register from a-key1.pcap / a-key0.pcap,
  answers with a Map-Notify whose 20-byte MAC verifies with OOR's key
  ``testkey`` the way OOR checks it (HMAC-SHA-1 over the message with the
  authentication data zeroed), with the site configured the way OOR's docs
  suggest (Key ID 1 for ``key-type = 1``) as well as with Key ID 0.

The captures are found beside the clone (../shared/captures from the repo
root); without them these tests skip with that reason.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import subprocess
from pathlib import Path

import pytest

from corecast.core.events import RegistrationAccepted
from corecast.core.mapserver import MapServer, Site
from corecast.wire.codec import (
    Ecm,
    MapRegister,
    MapRequest,
    decode_control,
    decode_lisp_data,
    ecm_unwrap,
)
from corecast.wire.constants import LispType
from deliverykit.pcap import Frame, Reader
from deliverykit.testing import require_data, require_tool

SHARED = Path(__file__).resolve().parents[3] / "shared" / "captures" / "oor"
CAPTURES = sorted(SHARED.glob("*.pcap")) if SHARED.is_dir() else []
OOR_KEY = b"testkey"
OOR_PREFIX = ipaddress.ip_network("192.0.2.0/24")

@pytest.fixture
def _captures() -> None:
    require_data(bool(CAPTURES), f"the OOR captures in {SHARED} (shared/ beside the repository)")


needs_captures = pytest.mark.usefixtures("_captures")


def _udp(path: Path) -> list[Frame]:
    return [f for f in Reader(path) if f.proto == 17 and f.sport is not None]


def _control(path: Path) -> list[Frame]:
    return [f for f in _udp(path) if 4342 in (f.sport, f.dport)]


def _oor_mac_ok(datagram: bytes, key: bytes) -> bool:
    """OOR's check (oor/lib/hmac.c check_auth_field): HMAC-SHA-1 over the message with its
    20 authentication-data bytes zeroed, compared with all 20 bytes."""
    alen = int.from_bytes(datagram[14:16], "big")
    if alen != 20:
        return False
    zeroed = datagram[:16] + bytes(20) + datagram[36:]
    return hmac.compare_digest(hmac.new(key, zeroed, hashlib.sha1).digest(), datagram[16:36])


@needs_captures
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_every_oor_datagram_decodes(path):
    control = data = 0
    for f in _udp(path):
        if 4342 in (f.sport, f.dport):
            msg = decode_control(f.payload)
            if isinstance(msg, Ecm):
                _ip, _sport, dport, inner = ecm_unwrap(msg)
                assert dport == 4342
                assert isinstance(decode_control(inner), MapRequest)
            control += 1
        elif 4341 in (f.sport, f.dport):
            _header, inner_ip = decode_lisp_data(f.payload)
            assert inner_ip[0] >> 4 in (4, 6), "inner packet is not IP"
            data += 1
    assert control > 0, "no LISP control message in the capture"
    if "-vB" in path.name or "-oor-any" in path.name:
        assert data > 0, "the data-plane capture holds no LISP data packet"


def _tshark_control(path: Path) -> list[list[str]]:
    names = ["lisp.type", "lisp.nonce", "lisp.keyid", "lisp.authlen",
             "lisp.mnot.flags.rtr", "lisp.mreg.flags.rtr", "lisp.mreg.flags.pmr",
             "lisp.mreg.flags.wmn"]
    cmd = ["tshark", "-r", str(path), "-Y", "lisp && !icmp", "-T", "fields", "-E", "aggregator=|"]
    for n in names:
        cmd += ["-e", n]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout
    return [line.split("\t") for line in out.splitlines() if line]


@needs_captures
@pytest.mark.tool("tshark")
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_our_decode_agrees_with_tshark(path):
    """Every field tshark decodes in OOR's control messages, we decode the same (R bit included)."""
    require_tool("tshark")
    ours = []
    for f in _control(path):
        msg = decode_control(f.payload)
        if isinstance(msg, Ecm):
            continue  # tshark reports the ECM and its inner message on one line; compared above
        row = [str(msg.msg_type if isinstance(msg, MapRegister) else f.payload[0] >> 4),
               f"0x{msg.nonce:016x}"]
        if isinstance(msg, MapRegister):
            reg = msg.msg_type == LispType.MAP_REGISTER
            row += [f"0x{msg.key_id << 8 | msg.algorithm_id:04x}", str(len(msg.auth_data)),
                    "" if reg else str(int(msg.rtr)), str(int(msg.rtr)) if reg else "",
                    str(int(msg.proxy_reply)) if reg else "",
                    str(int(msg.want_map_notify)) if reg else ""]
        else:
            row += [""] * 6
        ours.append(row)
    theirs = [r for r in _tshark_control(path) if "|" not in r[0]]  # ECM lines are "8|1"
    assert ours == theirs


def _first_register(name: str) -> tuple[bytes, Frame]:
    for f in _control(SHARED / name):
        if f.dport == 4342 and f.payload[0] >> 4 == LispType.MAP_REGISTER:
            return f.payload, f
    raise AssertionError(f"no Map-Register in {name}")


@needs_captures
@pytest.mark.parametrize(("capture", "key_id"), [("a-key1.pcap", 1), ("a-key0.pcap", 0)])
def test_mapserver_answers_oor_register(capture, key_id):
    """OOR writes ``key-type = 1`` as the 16-bit Key ID of RFC 6833 (bytes 00 01: RFC 9301's
    Key ID 0, Algorithm 1) and a 20-byte HMAC-SHA-1. A site configured the natural way
    (Key ID 1) and one configured with Key ID 0 both accept it and answer with a Map-Notify
    OOR verifies."""
    data, f = _first_register(capture)
    assert data[12:14] == b"\x00\x01" and data[14:16] == b"\x00\x14"
    ms = MapServer([Site("oor", {key_id: OOR_KEY}, (OOR_PREFIX,))])
    out = ms.handle(data, (f.src, f.sport), now=1000.0)
    assert ms.counters["accepted"] == 1, ms.counters
    assert ms.counters["auth_old_style_key_id"] == (1 if key_id == 1 else 0)
    assert any(isinstance(e, RegistrationAccepted) for e in ms.events)
    assert len(out) == 1
    notify, dest = out[0]
    assert dest == (f.src, 4342)
    msg = decode_control(notify)
    assert isinstance(msg, MapRegister) and msg.msg_type == LispType.MAP_NOTIFY
    assert notify[12:14] == b"\x00\x01", "the Map-Notify carries the Key ID bytes OOR sent"
    assert _oor_mac_ok(notify, OOR_KEY), "OOR would refuse this Map-Notify"
    assert not _oor_mac_ok(notify, b"otherkey")
    assert ms.registrations(1001.0)[0]["prefix"] == str(OOR_PREFIX)


@needs_captures
def test_old_style_key_id_still_needs_the_key():
    """The Key ID fallback tries the site's key, it does not skip the check: a wrong key, a
    prefix outside the site, or a new-style Key ID that names no key are still refused."""
    data, f = _first_register("a-key1.pcap")
    wrong = MapServer([Site("oor", {1: b"not-testkey"}, (OOR_PREFIX,))])
    assert wrong.handle(data, (f.src, f.sport), 1000.0) == []
    assert wrong.counters["refused_auth"] == 1 and wrong.counters["accepted"] == 0
    elsewhere = MapServer([Site("oor", {1: OOR_KEY}, (ipaddress.ip_network("10.0.0.0/8"),))])
    assert elsewhere.handle(data, (f.src, f.sport), 1000.0) == []
    assert elsewhere.counters["refused_no_site"] == 1
    # Key ID byte 7 (a new-style sender) names no key of a site whose only key is 1: refused
    new_style = bytearray(data)
    new_style[12] = 7
    other = MapServer([Site("oor", {1: OOR_KEY}, (OOR_PREFIX,))])
    assert other.handle(bytes(new_style), (f.src, f.sport), 1000.0) == []
    assert other.counters["refused_auth"] == 1
