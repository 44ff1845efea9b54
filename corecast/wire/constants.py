"""Wire constants for LISP (RFC 9300/9301) and CoreCast (the paper, section 3.2).

Every value cites the section of the specification it comes from.  CoreCast
values that the paper leaves open (version, type codes, hash ids, ports, the
experimental IP protocol number) are ours and are marked as such.
"""

from __future__ import annotations

from enum import IntEnum

#: RFC 9300 section 19.1 / RFC 9301 section 12.1: LISP UDP ports.
LISP_DATA_PORT = 4341
LISP_CONTROL_PORT = 4342

#: RFC 3692 section 2.1: IP protocol numbers 253 and 254 are for experimentation.
#: CoreCast over raw IP uses 253 (our choice; the paper does not say).
IPPROTO_CORECAST = 253

#: UDP port for CoreCast PDUs in the no-root embedded default (our choice,
#: dynamic range so it collides with nothing IANA assigned: "5" + 4341).
CORECAST_UDP_PORT = 54341

#: Version of our CoreCast PDU format.
CORECAST_VERSION = 1

#: Sizes in bytes.
LISP_DATA_HEADER_LEN = 8  # RFC 9300 section 5.1, the 'L I S P' rows
IPV4_HEADER_LEN = 20
IPV6_HEADER_LEN = 40
UDP_HEADER_LEN = 8


class CoreCastType(IntEnum):
    """CoreCast PDU types (paper section 3.2; code points ours)."""

    PAYLOAD = 1
    HEADER = 2


class HashId(IntEnum):
    """Hash function that names a payload (paper section 3.2 uses SHA-1).

    The id travels in every PDU so the function can change without a new
    format; the length of the digest travels too, so a receiver that does not
    know an id can still skip the PDU cleanly.
    """

    SHA1 = 1  # FIPS 180-4, 20 bytes: the paper's choice
    SHA256 = 2  # FIPS 180-4, 32 bytes


HASH_LEN = {HashId.SHA1: 20, HashId.SHA256: 32}


class LispType(IntEnum):
    """RFC 9301 section 5.1, Table 1: LISP control message types."""

    MAP_REQUEST = 1
    MAP_REPLY = 2
    MAP_REGISTER = 3
    MAP_NOTIFY = 4
    MAP_NOTIFY_ACK = 5
    MAP_REFERRAL = 6
    ECM = 8
    SHARED_EXTENSION = 15


class Afi(IntEnum):
    """Address Family Numbers used by LISP (RFC 9301 section 5.1, [AFN])."""

    NONE = 0
    IPV4 = 1
    IPV6 = 2
    LCAF = 16387


AFI_ADDR_LEN = {Afi.NONE: 0, Afi.IPV4: 4, Afi.IPV6: 16}

#: LISP Canonical Address Format (RFC 8060 section 3): AFI 16387; type 2 = Instance ID
#: (section 4.1): an EID qualified by a 32-bit Instance ID (24 bits go in the data header)
AFI_LCAF = int(Afi.LCAF)
LCAF_INSTANCE_ID = 2


class Action(IntEnum):
    """RFC 9301 section 5.4 / 12.3: Negative Map-Reply actions (ACT)."""

    NO_ACTION = 0
    NATIVELY_FORWARD = 1
    SEND_MAP_REQUEST = 2
    DROP_NO_REASON = 3
    DROP_POLICY_DENIED = 4
    DROP_AUTH_FAILURE = 5


class AlgorithmId(IntEnum):
    """RFC 9301 section 12.5, Table 5: Map-Register authentication algorithms.

    RFC 6833 (which the paper built on) called this a 16-bit 'Key ID' with the
    same values, so an RFC 6833 sender's Key ID 1 reads here as Key ID 0,
    Algorithm ID 1: the encodings are wire compatible.
    """

    NONE = 0
    HMAC_SHA_1_96 = 1
    HMAC_SHA_256_128 = 2
    HMAC_SHA_256_128_HKDF_SHA256 = 3


#: RFC 9301 section 5.6: salts for the per-message key derivation.
KDF_SALT = {
    LispType.MAP_REGISTER: b"Map-Register Authentication",
    LispType.MAP_NOTIFY: b"Map-Notify Authentication",
    LispType.MAP_NOTIFY_ACK: b"Map-Notify-Ack Authentication",
}

#: RFC 9301 section 8.2: ETRs send Map-Register every 60 s; Map-Servers
#: time out a registration after 3 periods (180 s) without a refresh.
MAP_REGISTER_INTERVAL = 60.0
REGISTRATION_TIMEOUT = 180.0
