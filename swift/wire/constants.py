"""PPSPP wire constants (RFC 7574), each IntEnum with the section that defines it."""

from __future__ import annotations

from enum import IntEnum


class MsgType(IntEnum):
    """Message types, RFC 7574 section 8.2 table 7 (registry: section 10.1)."""

    HANDSHAKE = 0
    DATA = 1
    ACK = 2
    HAVE = 3
    INTEGRITY = 4
    PEX_RESv4 = 5
    PEX_REQ = 6
    SIGNED_INTEGRITY = 7
    REQUEST = 8
    CANCEL = 9
    CHOKE = 10
    UNCHOKE = 11
    PEX_RESv6 = 12
    PEX_REScert = 13


class Option(IntEnum):
    """HANDSHAKE protocol options, RFC 7574 section 7 table 2."""

    VERSION = 0  # 7.2
    MIN_VERSION = 1  # 7.3
    SWARM_ID = 2  # 7.4
    CONTENT_INTEGRITY = 3  # 7.5
    MERKLE_HASH_FUNC = 4  # 7.6
    LIVE_SIGNATURE_ALG = 5  # 7.7
    CHUNK_ADDRESSING = 6  # 7.8
    LIVE_DISCARD_WINDOW = 7  # 7.9
    SUPPORTED_MESSAGES = 8  # 7.10
    CHUNK_SIZE = 9  # 7.11 (not in draft-10: libswift rejects it)
    END = 255  # 7.1


class Version(IntEnum):
    """Protocol versions, RFC 7574 section 7.2 table 3."""

    RESERVED = 0
    V1 = 1


class IntegrityMethod(IntEnum):
    """Content integrity protection methods, RFC 7574 section 7.5 table 4."""

    NONE = 0
    MERKLE = 1
    SIGN_ALL = 2
    UNIFIED_MERKLE = 3


class HashFunc(IntEnum):
    """Merkle hash tree functions, RFC 7574 section 7.6 table 5."""

    SHA1 = 0
    SHA224 = 1
    SHA256 = 2
    SHA384 = 3
    SHA512 = 4


#: hashlib names and digest sizes per HashFunc (FIPS 180-4)
HASH_NAMES = {
    HashFunc.SHA1: "sha1",
    HashFunc.SHA224: "sha224",
    HashFunc.SHA256: "sha256",
    HashFunc.SHA384: "sha384",
    HashFunc.SHA512: "sha512",
}
HASH_SIZES = {
    HashFunc.SHA1: 20,
    HashFunc.SHA224: 28,
    HashFunc.SHA256: 32,
    HashFunc.SHA384: 48,
    HashFunc.SHA512: 64,
}


class SigAlg(IntEnum):
    """Live signature algorithms: DNSSEC algorithm numbers, RFC 7574 section 7.7."""

    RSASHA1 = 5
    RSASHA256 = 8
    ECDSAP256SHA256 = 13
    ECDSAP384SHA384 = 14


#: signature lengths in bytes (RFC 7574 section 8.9; RSA depends on the key)
SIG_SIZES = {SigAlg.ECDSAP256SHA256: 64, SigAlg.ECDSAP384SHA384: 96}


class ChunkAddressing(IntEnum):
    """Chunk addressing methods, RFC 7574 section 7.8 table 6."""

    BIN32 = 0
    BYTE64 = 1
    CHUNK32 = 2
    BIN64 = 3
    CHUNK64 = 4


#: bytes of one chunk specification on the wire per method (sections 4.1, 4.2)
SPEC_SIZES = {
    ChunkAddressing.BIN32: 4,
    ChunkAddressing.BYTE64: 16,
    ChunkAddressing.CHUNK32: 8,
    ChunkAddressing.BIN64: 8,
    ChunkAddressing.CHUNK64: 16,
}

#: "empty interval" special values (section 4.2) and "does not discard" (7.9)
NONE32 = 0xFFFFFFFF
NONE64 = 0xFFFFFFFFFFFFFFFF
#: Chunk Size option value for variable-size chunks (section 7.11)
VARIABLE_CHUNK_SIZE = 0xFFFFFFFF
#: recommended chunk size (section 8.1)
DEFAULT_CHUNK_SIZE = 1024
