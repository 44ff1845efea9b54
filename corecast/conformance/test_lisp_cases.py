"""LISP conformance cases: map-server/map-resolver and ETR control plane (RFC 9301), ETR data plane
(RFC 9300) and CoreCast's ETR (Algorithm 2), black box.

The cases play the xTR (against a map-server) or the map-server (against an
ETR) with raw UDP sockets on 127.0.0.1 and :mod:`corecast.wire.codec`.
"""

from __future__ import annotations

import ipaddress
import random
import socket
import time

import pytest

from corecast.wire.codec import (
    DecodeError, EidRecord, LocatorRecord, MapRegister, MapReply, MapRequest, build_ip, build_udp, decode_control,
    digest, encode_cc_header, encode_cc_payload, encode_lisp_data, encode_map_register, encode_map_request,
    make_lisp_data, sign, verify_auth,
)
from corecast.wire.constants import IPPROTO_CORECAST, AlgorithmId, HashId, LispType

SITE_PREFIX = "10.0.0.0/8"
KEY_ID, PSK = 7, "conformance-psk"
RLOC = ipaddress.ip_address("127.0.0.2")


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def mapserver(impl):
    port = _free_udp_port()
    with impl.start("mapserver", "--addr", "127.0.0.1", "--port", port,
                    "--site", f"site1:{SITE_PREFIX}:{KEY_ID}:{PSK}", ready_line="READY"):
        yield ("127.0.0.1", port)


class Xtr:
    """Our side: a UDP socket that registers and requests."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.rng = random.Random(9301)

    def close(self) -> None:
        self.sock.close()

    def register(self, ms, prefix: str, psk: str = PSK, key_id: int = KEY_ID, tamper: bool = False,
                 nonce: int | None = None, algorithm: int = AlgorithmId.HMAC_SHA_256_128) -> int:
        nonce = nonce if nonce is not None else self.rng.getrandbits(64)
        rec = EidRecord(ipaddress.ip_network(prefix), (LocatorRecord(RLOC, 1, 100, 255, 0, True, False, True),), 3)
        m = MapRegister(nonce, (rec,), key_id, algorithm, b"", LispType.MAP_REGISTER, proxy_reply=True,
                        want_map_notify=False)
        data = bytearray(sign(m, psk.encode()))
        if tamper:
            data[16] ^= 0x01  # first octet of the authentication data (after 16 header octets)
        self.sock.sendto(bytes(data), ms)
        return nonce

    def request(self, ms, eid: str, timeout: float = 2.0) -> tuple[int, MapReply | None]:
        nonce = self.rng.getrandbits(64)
        m = MapRequest(nonce, (ipaddress.ip_address("127.0.0.1"),), (ipaddress.ip_network(f"{eid}/32"),),
                       source_eid=ipaddress.ip_address("10.255.0.1"))
        self.sock.sendto(encode_map_request(m), ms)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                data, _ = self.sock.recvfrom(65536)
            except (TimeoutError, socket.timeout):
                break
            try:
                msg = decode_control(data)
            except DecodeError:
                continue
            if isinstance(msg, MapReply) and msg.nonce == nonce:
                return nonce, msg
        return nonce, None


@pytest.fixture
def xtr():
    x = Xtr()
    yield x
    x.close()


def _maps_to_rloc(reply: MapReply | None, eid: str) -> bool:
    if reply is None:
        return False
    a = ipaddress.ip_address(eid)
    return any(a in r.prefix and any(loc.locator == RLOC for loc in r.locators) for r in reply.records)


def _wait_registered(xtr: Xtr, ms, eid: str, tries: int = 10) -> MapReply | None:
    for _ in range(tries):
        _, rep = xtr.request(ms, eid, timeout=0.5)
        if _maps_to_rloc(rep, eid):
            return rep
    return None


@pytest.mark.conformance(protocol="lisp", section="RFC 9301 sec. 5.6, 8.2, 5.2, 5.4", role="mapserver")
def test_authenticated_register_then_map_reply(impl, mapserver, xtr):
    """A Map-Register signed with the site key (P-bit set) is accepted: a Map-Request for an EID inside
    gets a Map-Reply with the same nonce and a record covering the EID with our RLOC."""
    xtr.register(mapserver, "10.1.0.0/16")
    rep = _wait_registered(xtr, mapserver, "10.1.2.3")
    assert rep is not None, "no Map-Reply mapping 10.1.2.3 to the registered RLOC"
    rec = next(r for r in rep.records if ipaddress.ip_address("10.1.2.3") in r.prefix)
    assert rec.prefix == ipaddress.ip_network("10.1.0.0/16")
    assert rec.ttl > 0


@pytest.mark.conformance(protocol="lisp", section="RFC 9301 sec. 5.6, 8.2", role="mapserver")
@pytest.mark.parametrize("how", ["bad-hmac", "wrong-psk", "unknown-key-id", "outside-site", "no-auth"])
def test_unauthenticated_register_is_refused(impl, mapserver, xtr, how):
    """A Map-Register whose MAC does not verify with the site key, or claims a prefix outside the site,
    or is unauthenticated (algorithm 0), registers nothing: the EID never maps to its RLOC."""
    prefix, eid = ("192.168.0.0/16", "192.168.1.1") if how == "outside-site" else ("10.2.0.0/16", "10.2.3.4")
    kw = {"bad-hmac": dict(tamper=True), "wrong-psk": dict(psk="not-the-key"),
          "unknown-key-id": dict(key_id=KEY_ID + 1), "outside-site": {},
          "no-auth": dict(algorithm=AlgorithmId.NONE)}[how]
    for _ in range(3):
        xtr.register(mapserver, prefix, **kw)
    time.sleep(0.3)
    _, rep = xtr.request(mapserver, eid)
    assert not _maps_to_rloc(rep, eid), f"{how}: the refused registration is served"
    # and a good registration right after still works (the map-server did not stop)
    xtr.register(mapserver, "10.3.0.0/16")
    assert _wait_registered(xtr, mapserver, "10.3.0.1") is not None


@pytest.mark.conformance(protocol="lisp", section="RFC 9301 sec. 8.3, 8.4, 5.4", role="mapserver")
def test_negative_map_reply_for_unregistered_eids(impl, mapserver, xtr):
    """A Map-Request for an EID with no registration gets a Negative Map-Reply: same nonce, a record
    covering the EID with no locators."""
    for eid in ("10.77.0.1", "198.51.100.9"):
        nonce, rep = xtr.request(mapserver, eid)
        assert rep is not None, f"no Map-Reply for unregistered {eid}"
        assert rep.nonce == nonce
        recs = [r for r in rep.records if ipaddress.ip_address(eid) in r.prefix]
        assert recs and all(not r.locators for r in recs), f"{eid}: {rep.records}"


# ------------------------------------------------------------------ ETR role: our side is the map-server

@pytest.mark.conformance(protocol="lisp", section="RFC 9301 sec. 5.6, 8.2", role="etr")
def test_etr_map_register_is_authenticated(impl, record_property):
    """The ETR's Map-Registers verify with the PSK (HMAC over the message with zeroed auth data) and
    with no other key, carry the configured key ID, its EID prefix and RLOC. Whether an unacknowledged
    Map-Register is retransmitted with the same nonce is recorded (finding ``retransmit_nonce``)."""
    ms = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    ms.bind(("127.0.0.1", 0))
    try:
        cport, dport = _free_udp_port(), _free_udp_port()
        with impl.start("etr", "--rloc", "127.0.0.1", "--prefix", "10.5.0.0/16",
                        "--map-server", f"127.0.0.1:{ms.getsockname()[1]}", "--key-id", KEY_ID, "--psk", PSK,
                        "--control-port", cport, "--data-port", dport, ready_line="READY"):
            regs = []
            deadline = time.monotonic() + 6
            while len(regs) < 2 and time.monotonic() < deadline:
                ms.settimeout(max(0.05, deadline - time.monotonic()))
                try:
                    data, _src = ms.recvfrom(65536)
                except (TimeoutError, socket.timeout):
                    break
                try:
                    msg = decode_control(data)
                except DecodeError:
                    continue
                if isinstance(msg, MapRegister) and msg.msg_type == LispType.MAP_REGISTER:
                    regs.append((msg, data))
        assert regs, "no Map-Register within 6 s"
        for msg, data in regs:
            assert verify_auth(msg, PSK.encode()), "authentication data does not verify with the PSK"
            assert not verify_auth(msg, b"other"), "verifies with any key?"
            assert msg.key_id == KEY_ID
            assert encode_map_register(msg) == data, "re-encoding differs (field layout)"
            assert any(r.prefix == ipaddress.ip_network("10.5.0.0/16")
                       and any(str(loc.locator) == "127.0.0.1" for loc in r.locators) for r in msg.records)
        record_property("want_map_notify", str(regs[0][0].want_map_notify))
        if len(regs) >= 2:
            record_property("retransmit_nonce", "same" if regs[0][0].nonce == regs[1][0].nonce else "fresh")
    finally:
        ms.close()


# ------------------------------------------------------------------ ETR data plane (RFC 9300) and Algorithm 2

CC_RANGE = "232.0.0.0/8"


class EtrRig:
    """The implementation's ETR with a silent map-server socket, a sender and a client socket."""

    def __init__(self, impl, cc: bool) -> None:
        self.impl = impl
        self.ms = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.ms.bind(("127.0.0.1", 0))
        self.tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.tx.bind(("127.0.0.1", 0))
        self.client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.client.bind(("127.0.0.1", 0))
        self.client_port = self.client.getsockname()[1]
        self.data_port = _free_udp_port()
        args = ["--rloc", "127.0.0.1", "--prefix", "10.5.0.0/16", "--map-server",
                f"127.0.0.1:{self.ms.getsockname()[1]}", "--key-id", KEY_ID, "--psk", PSK,
                "--control-port", _free_udp_port(), "--data-port", self.data_port]
        if cc:
            args += ["--cc-range", CC_RANGE]
        self.cm = impl.start("etr", *args, ready_line="READY")

    def __enter__(self) -> EtrRig:
        self.cm.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.cm.__exit__(*exc)
        for s in (self.ms, self.tx, self.client):
            s.close()

    def send(self, lisp_header: bytes, inner: bytes) -> None:
        self.tx.sendto(lisp_header + inner, ("127.0.0.1", self.data_port))

    def received(self, timeout: float = 1.0, want: int = 1) -> list[bytes]:
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < want:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.client.settimeout(left)
            try:
                out.append(self.client.recvfrom(65536)[0])
            except (TimeoutError, socket.timeout):
                break
        return out

    def plain(self, payload: bytes) -> bytes:
        """An inner IPv4/UDP packet from an EID to our client socket."""
        return build_ip(ipaddress.ip_address("10.9.0.1").packed, ipaddress.ip_address("127.0.0.1").packed, 17,
                        build_udp(40000, self.client_port, payload))


HEADERS = {
    "nonce": dict(nonce=0xABCDEF),
    "nonce-echo": dict(nonce=0x123456, echo=True),
    "lsb": dict(lsb=0x00000001),
    "instance-id-0": dict(instance_id=0, lsb=1),
    "map-versions": dict(map_versions=(5, 7)),
    "no-flags": {},
}


@pytest.mark.conformance(protocol="lisp", section="RFC 9300 sec. 5.3", role="etr")
def test_etr_decapsulates_every_header_variant(impl):
    """LISP data packets with each flag combination (N, N+E, L, I with IID 0, V, none) are decapsulated
    and the inner UDP payload delivered intact, once each."""
    with EtrRig(impl, cc=False) as rig:
        for name, kw in HEADERS.items():
            payload = f"inner payload via {name}".encode() * 3
            rig.send(encode_lisp_data(make_lisp_data(**kw)), rig.plain(payload))
            got = rig.received(2.0)
            assert got == [payload], f"{name}: delivered {got!r}"


@pytest.mark.conformance(protocol="lisp", section="RFC 9300 sec. 5.3", role="etr")
def test_etr_survives_malformed_packets(impl):
    """Truncated headers, inner packets that are not IP, and garbage are dropped without delivering
    anything; a good packet afterwards is still delivered."""
    with EtrRig(impl, cc=False) as rig:
        hdr = encode_lisp_data(make_lisp_data(nonce=1))
        for junk in (b"", b"\x80\x00", hdr, hdr + b"\x00" * 10, hdr + b"\x45" + b"\xff" * 40,
                     hdr + rig.plain(b"x")[:25], bytes(random.Random(5).randbytes(200))):
            rig.tx.sendto(junk, ("127.0.0.1", rig.data_port))
        assert rig.received(0.5) == [], "something was delivered from malformed input"
        rig.send(hdr, rig.plain(b"still alive"))
        assert rig.received(2.0) == [b"still alive"]


def _cc(rig: EtrRig, chan: str, pdu: bytes) -> None:
    inner = build_ip(ipaddress.ip_address("10.9.0.1").packed, ipaddress.ip_address(chan).packed,
                     IPPROTO_CORECAST, pdu)
    rig.send(encode_lisp_data(make_lisp_data(nonce=0x42)), inner)


@pytest.mark.conformance(protocol="lisp", section="CoreCast paper sec. 3.5, Algorithm 2", role="corecast-etr")
def test_corecast_etr_algorithm_2(impl):
    """Payload PDU then header PDUs: one unicast copy per header to the named client EID and port; a
    header for an unknown hash, and a payload whose hash does not match, deliver nothing."""
    with EtrRig(impl, cc=True) as rig:
        eid = ipaddress.ip_address("127.0.0.1").packed
        data = b"chunk-1 " * 50
        h = digest(HashId.SHA1, data)
        _cc(rig, "232.1.1.1", encode_cc_payload(1, data))
        time.sleep(0.1)
        _cc(rig, "232.1.1.1", encode_cc_header(1, h, eid, rig.client_port))
        _cc(rig, "232.1.1.1", encode_cc_header(1, h, eid, rig.client_port))
        assert rig.received(2.0, want=2) == [data, data], "a stored payload must go out once per header"
        _cc(rig, "232.1.1.1", encode_cc_header(2, digest(HashId.SHA1, b"never sent"), eid, rig.client_port))
        bad = b"chunk-2 " * 50
        _cc(rig, "232.1.1.2", encode_cc_payload(2, bad, hash_=digest(HashId.SHA1, b"something else")))
        time.sleep(0.1)
        _cc(rig, "232.1.1.2", encode_cc_header(2, digest(HashId.SHA1, b"something else"), eid, rig.client_port))
        _cc(rig, "232.1.1.2", encode_cc_header(2, digest(HashId.SHA1, bad), eid, rig.client_port))
        assert rig.received(0.7) == [], "delivered for an unknown hash or an unverified payload"
        # a newer payload replaces the channel's stored one (one payload per channel)
        newer = b"chunk-3 " * 50
        _cc(rig, "232.1.1.1", encode_cc_payload(3, newer))
        time.sleep(0.1)
        _cc(rig, "232.1.1.1", encode_cc_header(3, digest(HashId.SHA1, newer), eid, rig.client_port))
        assert rig.received(2.0) == [newer]
