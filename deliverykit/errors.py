"""One error hierarchy for every protocol package.

Modelled on h11's ``LocalProtocolError`` / ``RemoteProtocolError``: the class
says *whose* fault a protocol error is, so a driver knows what to do with it.

- :class:`RemoteProtocolError`: the peer sent something wrong. Count it and
  drop it; never let it stop the role.
- :class:`LocalProtocolError`: our own caller asked for something the protocol
  cannot express (a bug or a bad option here, not on the wire).
- :class:`DecodeError`: bytes from the network that do not parse; the common
  case of a remote error. Each protocol package's ``DecodeError``
  (``corecast.wire.codec``, ``m2c.fec.errors``, ``swift.wire.codec``) subclasses it.

All are ``ValueError`` so existing ``except ValueError`` handlers still catch them.
"""

from __future__ import annotations

__all__ = ["DecodeError", "LocalProtocolError", "ProtocolError", "RemoteProtocolError"]


class ProtocolError(ValueError):
    """Something violates a protocol; see the two subclasses for whose fault."""


class RemoteProtocolError(ProtocolError):
    """The remote peer sent something wrong: count it and drop it."""


class LocalProtocolError(ProtocolError):
    """Our caller asked for something the protocol cannot do."""


class DecodeError(RemoteProtocolError):
    """Bytes from the network that are malformed, truncated or unsupported."""
