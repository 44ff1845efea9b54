"""Review fixes for certified PEX (RFC 7574 8.13, 12.2): robust checking,
re-issue before expiry, a bounded certificate cache, replay cost and
unsolicited PEX_RES.  Each test failed before its fix."""

import os

from cryptography.hazmat.primitives import hashes, serialization
from cryptography import x509
from cryptography.x509.oid import NameOID
import datetime as dt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swift.core.content import Content, MemoryStorage
from swift.core.merkle import MerkleTree
from swift.core.peer import Peer, PeerConfig
from swift.core.pexcert import CertError, ca_public_bytes, check, issue, new_ca_key
from swift.wire import codec as C

SEED, LEECH, TRK = ("10.3.0.1", 6778), ("10.3.0.2", 6778), ("10.3.0.9", 6778)
SWARM = bytes(range(32))
CA = new_ca_key()
CA_PUB = ca_public_bytes(CA)
NOW = 1_700_000_000.0
VALID = issue(CA, SWARM, "192.0.2.7", 6778, NOW, 600)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), min_size=1, max_size=4),
       st.integers(0, 40))
def test_mutated_valid_certificate_only_cert_error(edits, cut) -> None:
    """8.13: a mutated valid certificate is either still valid or CertError,
    never cryptography's UnsupportedAlgorithm, InvalidVersion, ..."""
    der = bytearray(VALID)
    for i, v in edits:
        der[i] = v
    der = bytes(der[:len(der) - cut])
    try:
        assert check(der, CA_PUB, SWARM, NOW + 1) == ("192.0.2.7", 6778)
    except CertError:
        pass


def test_version_byte_mutation_is_cert_error() -> None:
    der = bytearray(VALID)
    i = der.find(b"\xa0\x03\x02\x01\x02")  # [0] EXPLICIT INTEGER 2 (v3)
    assert i > 0
    der[i + 4] = 7  # an unknown X.509 version: x509.InvalidVersion before the fix
    with pytest.raises(CertError):
        check(bytes(der), CA_PUB, SWARM, NOW)


def test_only_ecdsa_with_sha256_accepted() -> None:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "x")])
    t = dt.datetime.fromtimestamp(NOW, dt.timezone.utc)
    der = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(CA.public_key())
           .serial_number(1).not_valid_before(t).not_valid_after(t + dt.timedelta(hours=1))
           .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(
               f"file://192.0.2.7:6778/{SWARM.hex()}")]), critical=True)
           .sign(CA, hashes.SHA384()).public_bytes(serialization.Encoding.DER))
    with pytest.raises(CertError, match="ECDSA-with-SHA256"):
        check(der, CA_PUB, SWARM, NOW)


def test_clock_skew_on_not_before() -> None:
    """A tracker clock a minute ahead of ours: the certificate is usable;
    ten minutes ahead is not."""
    assert check(VALID, CA_PUB, SWARM, NOW - 60) == ("192.0.2.7", 6778)
    with pytest.raises(CertError):
        check(VALID, CA_PUB, SWARM, NOW - 600)
