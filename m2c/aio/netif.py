"""Network interfaces by name: what ``--interface lo`` resolves to (Linux)."""

from __future__ import annotations

import fcntl
import ipaddress
import socket
import struct

__all__ = ["interface_address"]

SIOCGIFADDR = 0x8915
"""Linux ioctl: the IPv4 address of an interface (struct ifreq)"""


def interface_address(name: str) -> str:
    """The IPv4 address of the interface called ``name`` (``lo`` -> 127.0.0.1), or
    ``name`` itself if it is an IPv4 address: what IP_ADD_MEMBERSHIP and
    IP_MULTICAST_IF take.  ValueError, one line, for an unknown interface or one
    without an IPv4 address."""
    try:
        return str(ipaddress.IPv4Address(name))
    except ValueError:
        pass
    try:
        socket.if_nametoindex(name)
    except (OSError, ValueError):
        known = ", ".join(n for _i, n in socket.if_nameindex())
        raise ValueError(f"no network interface named {name!r} (this host has: {known})") \
            from None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            ifreq = fcntl.ioctl(s.fileno(), SIOCGIFADDR,
                                struct.pack("256s", name.encode()[:15]))
        except OSError:
            raise ValueError(f"interface {name!r} has no IPv4 address to join or send "
                             f"multicast on") from None
    return socket.inet_ntoa(ifreq[20:24])
