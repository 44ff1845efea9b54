"""Events the sans-IO cores report to their drivers (frozen, slotted dataclasses)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MappingInstalled:
    """A Map-Reply (or static entry) was put in the map-cache."""

    prefix: str  #: EID prefix, e.g. '10.1.0.0/16'
    rlocs: tuple[str, ...]  #: locators in preference order (empty: negative entry)
    ttl: float  #: seconds the entry stays valid
    action: int  #: RFC 9301 ACT for negative entries, 0 otherwise


@dataclass(frozen=True, slots=True)
class RegistrationAccepted:
    """The map-server accepted an authenticated Map-Register."""

    site: str  #: configured site name
    prefixes: tuple[str, ...]  #: EID prefixes registered
    rlocs: tuple[str, ...]  #: locators registered
    source: str  #: address the Map-Register came from


@dataclass(frozen=True, slots=True)
class RegistrationRefused:
    """The map-server dropped a Map-Register."""

    reason: str  #: 'auth', 'no_site', 'replay', 'algorithm', 'malformed'
    source: str  #: address the Map-Register came from


@dataclass(frozen=True, slots=True)
class OldStyleKeyId:
    """The map-server accepted a Map-Register whose Key ID/Algorithm bytes are RFC 6833's
    16-bit Key ID (e.g. Open Overlay Router's ``00 01``) with the site's key for that value."""

    site: str  #: configured site name
    old_key_id: int  #: the 16-bit Key ID as the sender meant it (= RFC 9301 Algorithm ID)
    source: str  #: address the Map-Register came from


@dataclass(frozen=True, slots=True)
class Registered:
    """An ETR's registration was acknowledged by an authenticated Map-Notify."""

    map_server: str  #: map-server address
    nonce: int  #: nonce of the acknowledged Map-Register


@dataclass(frozen=True, slots=True)
class ClientJoined:
    """A client joined a channel on the source."""

    channel: str  #: channel EID
    eid: str  #: client EID
    port: int  #: client UDP port
    corecast: bool  #: True when the client's domain has a CoreCast ETR


@dataclass(frozen=True, slots=True)
class ChannelFinished:
    """A channel's media ended: the source sends nothing more on it."""

    channel: str  #: channel EID
    chunks: int  #: chunks sent on it


@dataclass(frozen=True, slots=True)
class SenderRejected:
    """A client got a datagram from a host it did not join through (reported once per host)."""

    host: str  #: the sender's address


@dataclass(frozen=True, slots=True)
class ClientLeft:
    """A client left a channel (explicitly or by missing heartbeats)."""

    channel: str  #: channel EID
    eid: str  #: client EID
    port: int  #: client UDP port
    reason: str  #: 'leave' or 'timeout'


@dataclass(frozen=True, slots=True)
class EchoNonceVerified:
    """RFC 9300 section 10.1: the nonce we asked an RLOC to echo came back (path up)."""

    rloc: str  #: the remote xTR's locator
    nonce: int  #: the 24-bit nonce
    rtt: float  #: seconds from the first request packet to the echo


@dataclass(frozen=True, slots=True)
class RlocUnreachable:
    """RFC 9300 section 10.1: packets kept arriving from an RLOC in the Echo-Nonce-request
    state, but the nonce was not echoed before the timeout."""

    rloc: str
    nonce: int


@dataclass(frozen=True, slots=True)
class LocatorStatusChanged:
    """RFC 9300 sections 5.3 and 10: Locator-Status-Bits from a site changed."""

    prefix: str  #: the map-cache entry of the inner source EID
    down: tuple[str, ...]  #: its locators now marked down


#: every event a corecast core hands its driver (``next_event()``)
CorecastEvent = (
    MappingInstalled
    | RegistrationAccepted
    | RegistrationRefused
    | OldStyleKeyId
    | Registered
    | ClientJoined
    | ChannelFinished
    | SenderRejected
    | ClientLeft
    | EchoNonceVerified
    | RlocUnreachable
    | LocatorStatusChanged
)
