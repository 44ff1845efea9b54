"""VMC: virtual multicasting as a stream-sharing HTTP/1.1 proxy.

Reproduces Machanick & Andrew, "Latency Improvement in Virtual Multicasting"
(seed 003): a request for a URI that is already flowing through the proxy joins
the live stream instead of going to the origin; the missed prefix is patched in
by HTTP Range requests (RFC 9110 sec. 14).

Public names (imports stay cheap; the asyncio drivers load on demand):

- :func:`vmc.core.key.request_key` - MD5 of the normalised absolute URI (paper sec. 3.2)
- :mod:`vmc.core.ranges` - Range / Content-Range per RFC 9110 sec. 14
- :mod:`vmc.core.policy` - when sharing is safe (RFC 9110 sec. 8.8, 12.5.5; RFC 9111 sec. 5.2)
- :class:`vmc.core.buffer.SessionBuffer` - the bounded per-session window
- ``vmc.aio.proxy.Proxy``, ``vmc.aio.origin.Origin``, ``vmc.client.fetch``
"""

from vmc.core.key import normalise_uri, request_key

__all__ = ["normalise_uri", "request_key"]
