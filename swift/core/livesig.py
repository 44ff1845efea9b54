"""Live signature algorithms (RFC 7574 sections 6.1, 7.7, 8.9).

The swarm ID of a live stream is the injector's public key encoded as a
DNSSEC DNSKEY without Base64: one algorithm octet, then the key (6.1).
All four algorithms the RFC names are implemented (7.7: RSASHA1,
RSASHA256, ECDSAP256SHA256, ECDSAP384SHA384):

* ECDSAP256SHA256 (13, the default) and ECDSAP384SHA384 (14): X||Y, 64 or
  96 bytes (RFC 6605 section 4), so a 65- or 97-byte swarm ID; signatures
  r||s, 64 or 96 bytes, over SHA-256 or SHA-384 of the text.
* RSASHA1 (5) and RSASHA256 (8): RFC 3110 section 2: exponent length (one
  octet, or zero and two octets when the exponent is longer than 255
  bytes), exponent, modulus; PKCS #1 v1.5 signatures with SHA-1 (RFC 3110)
  or SHA-256 (RFC 5702), as long as the modulus (8.9: the receiver derives
  the length from the swarm ID).
"""

from __future__ import annotations

from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)

from swift.wire.constants import SigAlg

#: algorithms a live swarm can use here (7.7: all of them)
SUPPORTED = (SigAlg.RSASHA1, SigAlg.RSASHA256, SigAlg.ECDSAP256SHA256, SigAlg.ECDSAP384SHA384)
_RSA = (SigAlg.RSASHA1, SigAlg.RSASHA256)
#: ECDSA: algorithm -> (curve, coordinate size in bytes, hash)
_EC = {SigAlg.ECDSAP256SHA256: (ec.SECP256R1, 32, hashes.SHA256),
       SigAlg.ECDSAP384SHA384: (ec.SECP384R1, 48, hashes.SHA384)}
_RSA_HASH = {SigAlg.RSASHA1: hashes.SHA1, SigAlg.RSASHA256: hashes.SHA256}


def _int_bytes(v: int) -> bytes:
    return v.to_bytes(max(1, (v.bit_length() + 7) // 8), "big")


class LiveSigner:
    """One live signature algorithm and key; ``key`` only at the injector."""

    # ``pub`` and ``key``: cryptography's RSA or EC key objects, told apart by ``alg``
    def __init__(self, alg: SigAlg, pub: Any, key: Any = None) -> None:
        self.alg = SigAlg(alg)
        if self.alg not in SUPPORTED:
            raise ValueError(f"live signature algorithm {self.alg.name} not supported")
        self.pub = pub
        self.key = key

    @property
    def is_rsa(self) -> bool:
        return self.alg in _RSA

    @classmethod
    def generate(cls, alg: SigAlg = SigAlg.ECDSAP256SHA256, rsa_bits: int = 2048) -> LiveSigner:
        """A fresh injector key."""
        alg = SigAlg(alg)
        key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
        if alg in _RSA:
            key = rsa.generate_private_key(public_exponent=65537, key_size=rsa_bits)
        elif alg in _EC:
            key = ec.generate_private_key(_EC[alg][0]())
        else:
            raise ValueError(f"live signature algorithm {alg.name} not supported")
        return cls(alg, key.public_key(), key)

    @classmethod
    def from_key(cls, key: object, alg: SigAlg | None = None) -> LiveSigner:
        """An injector from an existing private key: EC P-256 / P-384 (the
        curve names the algorithm) or RSA (RSASHA256 unless ``alg`` says
        RSASHA1)."""
        if isinstance(key, rsa.RSAPrivateKey):
            a = SigAlg.RSASHA256 if alg is None else SigAlg(alg)
            if a not in _RSA:
                raise ValueError(f"an RSA key cannot sign with {a.name}")
            return cls(a, key.public_key(), key)
        if isinstance(key, ec.EllipticCurvePrivateKey):
            for a, (curve, _, _) in _EC.items():
                if key.curve.name == curve().name and alg in (None, a):
                    return cls(a, key.public_key(), key)
        raise ValueError("need an ECDSA P-256/P-384 or RSA private key matching the algorithm")

    @classmethod
    def from_swarm_id(cls, sid: bytes) -> LiveSigner:
        """Receiver side: the public key in a swarm ID (ValueError if malformed)."""
        if not sid:
            raise ValueError("empty swarm ID")
        alg = sid[0]
        if alg in _EC:
            curve, n, _ = _EC[SigAlg(alg)]
            if len(sid) != 1 + 2 * n:
                raise ValueError(f"{SigAlg(alg).name} swarm ID must be {1 + 2 * n} bytes")
            x = int.from_bytes(sid[1:1 + n], "big")
            y = int.from_bytes(sid[1 + n:], "big")
            return cls(SigAlg(alg), ec.EllipticCurvePublicNumbers(x, y, curve()).public_key())
        if alg in _RSA:
            body = sid[1:]
            if len(body) < 3:
                raise ValueError("RSA swarm ID too short")
            if body[0]:
                elen, p = body[0], 1
            else:
                elen, p = int.from_bytes(body[1:3], "big"), 3
            e = int.from_bytes(body[p:p + elen], "big")
            n = int.from_bytes(body[p + elen:], "big")
            if elen == 0 or p + elen >= len(body) or n.bit_length() < 1024 or e < 3:
                raise ValueError("malformed RSA swarm ID")
            return cls(SigAlg(alg), rsa.RSAPublicNumbers(e, n).public_key())
        raise ValueError(f"swarm ID algorithm {alg} not supported")

    @property
    def swarm_id(self) -> bytes:
        """DNSKEY-style swarm ID (6.1)."""
        if self.is_rsa:
            nums: rsa.RSAPublicNumbers = self.pub.public_numbers()
            e = _int_bytes(nums.e)
            head = bytes([len(e)]) if len(e) <= 255 else b"\x00" + len(e).to_bytes(2, "big")
            return bytes([self.alg]) + head + e + nums.n.to_bytes(self.sig_size, "big")
        n = _EC[self.alg][1]
        p: ec.EllipticCurvePublicNumbers = self.pub.public_numbers()
        return bytes([self.alg]) + p.x.to_bytes(n, "big") + p.y.to_bytes(n, "big")

    @property
    def sig_size(self) -> int:
        """Signature length on the wire (8.9): the modulus, or 2 x the coordinate."""
        if self.is_rsa:
            bits: int = self.pub.key_size
            return (bits + 7) // 8
        return 2 * _EC[self.alg][1]

    def sign(self, text: bytes) -> bytes:
        if self.key is None:
            raise ValueError("only the injector signs")
        if self.is_rsa:
            sig: bytes = self.key.sign(text, padding.PKCS1v15(), _RSA_HASH[self.alg]())
            return sig
        _, n, h = _EC[self.alg]
        r, s = decode_dss_signature(self.key.sign(text, ec.ECDSA(h())))
        return r.to_bytes(n, "big") + s.to_bytes(n, "big")

    def verify(self, sig: bytes, text: bytes) -> bool:
        if len(sig) != self.sig_size:
            return False
        try:
            if self.is_rsa:
                self.pub.verify(sig, text, padding.PKCS1v15(), _RSA_HASH[self.alg]())
            else:
                _, n, h = _EC[self.alg]
                der = encode_dss_signature(int.from_bytes(sig[:n], "big"),
                                           int.from_bytes(sig[n:], "big"))
                self.pub.verify(der, text, ec.ECDSA(h()))
        except InvalidSignature:
            return False
        return True
