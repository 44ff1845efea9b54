"""PEX_REScert (RFC 7574 8.13, 12.2.2): membership certificates issued by a
tracker CA, checked before an address is used; invalid ones are rejected."""

import datetime as dt
import os

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID
from hypothesis import given, settings, strategies as st
from swift_support import leecher, pump, seeder

from swift.core.peer import PeerConfig
from swift.core.pexcert import CertError, ca_public_bytes, check, issue, new_ca_key
from swift.wire import codec as C

SEED, LEECH, TRK = ("10.0.0.1", 6778), ("10.0.0.2", 6778), ("10.0.0.9", 6778)
SWARM = bytes(range(32))
CA = new_ca_key()
CA_PUB = ca_public_bytes(CA)
NOW = 1_700_000_000.0


def _pump(nodes: dict, steps: int, until=None, t0: float = 0.0, dt_: float = 0.01) -> float:
    return pump(nodes, steps, until, t0=t0, dt=dt_)


def test_certificate_round_trip_and_format() -> None:
    der = issue(CA, SWARM, "192.0.2.7", 6778, NOW, 600)
    assert check(der, CA_PUB, SWARM, NOW + 1) == ("192.0.2.7", 6778)
    cert = x509.load_der_x509_certificate(der)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert san.critical  # 8.13: MUST be critical, type URI
    assert san.value.get_values_for_type(x509.UniformResourceIdentifier) == [
        "file://192.0.2.7:6778/" + SWARM.hex()]
    assert cert.not_valid_before_utc.timestamp() == NOW  # notBefore = T
    assert (check(issue(CA, SWARM, "2001:db8::1", 7000, NOW), CA_PUB, SWARM, NOW)
            == ("2001:db8::1", 7000))


def _custom(critical: bool = True, uri: str | None = None, key=CA) -> bytes:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "x")])
    t = dt.datetime.fromtimestamp(NOW, dt.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
         .serial_number(1).not_valid_before(t).not_valid_after(t + dt.timedelta(hours=1)))
    if uri is not None:
        b = b.add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(uri)]),
                            critical=critical)
    return b.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.DER)


@pytest.mark.parametrize("why,der,when", [
    ("other CA", issue(new_ca_key(), SWARM, "192.0.2.7", 6778, NOW), NOW),
    ("other swarm", issue(CA, bytes(32), "192.0.2.7", 6778, NOW), NOW),
    ("expired", issue(CA, SWARM, "192.0.2.7", 6778, NOW, 60), NOW + 61),
    ("not yet valid", issue(CA, SWARM, "192.0.2.7", 6778, NOW), NOW - 600),  # beyond the skew
    ("SAN not critical", _custom(False, f"file://192.0.2.7:6778/{SWARM.hex()}"), NOW),
    ("no SAN", _custom(uri=None), NOW),
    ("http scheme", _custom(True, f"http://192.0.2.7:6778/{SWARM.hex()}"), NOW),
    ("no port", _custom(True, f"file://192.0.2.7/{SWARM.hex()}"), NOW),
    ("DNS host", _custom(True, f"file://peer.example:6778/{SWARM.hex()}"), NOW),
    ("garbage", b"\x30\x03\x02\x01\x00", NOW),
])
def test_invalid_certificates_rejected(why, der, when) -> None:
    with pytest.raises(CertError):
        check(der, CA_PUB, SWARM, when)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=600))
def test_check_fuzz_only_cert_error(der: bytes) -> None:
    with pytest.raises(CertError):
        check(der, CA_PUB, SWARM, NOW)


def test_certificate_tampering_breaks_signature() -> None:
    der = bytearray(issue(CA, SWARM, "192.0.2.7", 6778, NOW))
    i = der.find(b"192.0.2.7:6778")  # the subject CN, inside the signed part
    der[i] = ord("9")
    with pytest.raises(CertError):
        check(bytes(der), CA_PUB, SWARM, NOW)


def test_tracker_certifies_and_leecher_joins_through_certified_pex() -> None:
    data = os.urandom(20 * 1024)
    s = seeder(data, PeerConfig(seed=1, pex_ca=CA_PUB))
    trk = leecher(s.swarm_id, PeerConfig(seed=5, tracker=True, pex_ca_key=CA))
    leech = leecher(s.swarm_id, PeerConfig(seed=2, pex_connect=True, pex_ca=CA_PUB))
    s.connect(TRK, NOW)  # the seeder registers with the tracker (handshake = routability)
    _pump({SEED: s, TRK: trk}, 20, t0=NOW)
    leech.connect(TRK, NOW + 0.3)
    _pump({SEED: s, TRK: trk, LEECH: leech}, 3000, until=lambda: leech.content.complete,
          t0=NOW + 0.3)
    assert leech.content.complete and bytes(leech.content.storage.buf[:len(data)]) == data
    assert leech.stats.get("good_cert", 0) >= 1 and leech.stats.get("bad_cert", 0) == 0
    assert check(leech.certs[SEED], CA_PUB, s.swarm_id, NOW + 1) == SEED
    # the leecher passes the certificate on (gossip) in its own PEX answers
    lch = next(c for c in leech.channels.values() if c.addr == TRK)
    lch.pex.requested = True
    out = leech._pex_msgs(lch, NOW + 2)
    assert out and all(isinstance(m, C.PexResCert) for m in out)


def test_invalid_certificates_never_contacted() -> None:
    """A tracker signing with a key that is not the swarm's CA: every
    certificate fails, the leecher connects to nobody it names, and plain
    PEX_RESv4 answers are ignored in a certified swarm."""
    data = os.urandom(8 * 1024)
    s = seeder(data, PeerConfig(seed=1))
    rogue = leecher(s.swarm_id, PeerConfig(seed=5, tracker=True, pex_ca_key=new_ca_key()))
    plain = leecher(s.swarm_id, PeerConfig(seed=6, tracker=True))
    leech = leecher(s.swarm_id, PeerConfig(seed=2, pex_connect=True, pex_ca=CA_PUB))
    PLAIN = ("10.0.0.8", 6778)
    s.connect(TRK, NOW)
    s.connect(PLAIN, NOW)
    nodes = {SEED: s, TRK: rogue, PLAIN: plain}
    _pump(nodes, 20, t0=NOW)
    leech.connect(TRK, NOW + 0.3)
    leech.connect(PLAIN, NOW + 0.3)
    nodes[LEECH] = leech
    _pump(nodes, 800, t0=NOW + 0.3)  # > 5 s: several PEX rounds
    assert leech.stats.get("bad_cert", 0) >= 1 and leech.stats.get("good_cert", 0) == 0
    assert leech.stats.get("pex_uncertified", 0) >= 1
    assert all(c.addr != SEED for c in leech.channels.values())
    assert SEED not in leech.certs and leech.content.have.count() == 0
