"""Exception classes of the VMC core: one per concern, all under :class:`VMCError`."""

from __future__ import annotations


class VMCError(Exception):
    """Base class of every error raised by vmc.core."""


class RangeError(VMCError):
    """A Range or Content-Range field value is syntactically invalid (RFC 9110 sec. 14.1.1,
    14.4)."""


class UnsatisfiableRange(VMCError):
    """A valid byte-range set has no satisfiable range for this length (RFC 9110 sec. 14.1.2:
    416)."""

    def __init__(self, length: int) -> None:
        super().__init__(f"no satisfiable range for a representation of {length} bytes")
        self.length = length


class URIError(VMCError):
    """A request target cannot be turned into an absolute http URI (RFC 9112 sec. 3.2)."""


class BufferGone(VMCError):
    """The session buffer no longer holds (or never held) the bytes asked for."""
