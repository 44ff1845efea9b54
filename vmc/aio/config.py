"""Proxy settings and the transparent-interception helper (issue 6; used by
:mod:`vmc.aio.proxy` and :mod:`vmc.aio.pump`)."""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field


@dataclass
class ProxyConfig:
    """Proxy settings (all sizes in bytes, times in seconds)."""

    host: str = "127.0.0.1"
    port: int = 0
    #: Bind the listening socket with SO_REUSEPORT (``vmc proxy --workers N``: N processes
    #: share the address, the kernel spreads connections by their 4-tuple).
    reuse_port: bool = False
    #: With ``--workers N``: send each connection to the worker that owns its first request's
    #: object, so an object has one session and one origin copy (:mod:`vmc.aio.steer`); False:
    #: served where the kernel put it (up to N origin copies of one object).
    steer: bool = True
    #: Upstreams that may be contacted, as "host:port" (absolute-form or Host must name one).
    upstreams: list[str] = field(default_factory=list)
    #: Upstream for origin-form requests whose Host is not an allowed upstream (reverse-proxy mode).
    default_upstream: str | None = None
    #: Bytes of each session's stream kept for late joiners (paper: the router's buffer).
    window: int = 8 << 20
    #: Per-client live queue bound; a client that falls this far behind is detached.
    queue_limit: int = 1 << 20
    #: Global bound on the session buffers: each live session is charged what it can hold (its
    #: window, or its Content-Length if smaller; nothing while its head is awaited); a response that
    #: would pass the budget is relayed unshared, without buffering (0 = no bound).
    buffer_budget: int = 256 << 20
    #: Client connections holding a slot at once. At the limit a newcomer takes the slot of the
    #: connection that has waited longest without a complete request (slow-loris), else of the
    #: longest idle kept-alive one; if every slot is answering a request it gets 503.
    max_connections: int = 512
    #: Cap on upstream connections open at once (in use or idle; 0 = no cap). Past it a request
    #: waits up to ``upstream_queue_wait`` s for one, then gets 503 + Retry-After. Joiners of a
    #: live session need no upstream connection and are never held back by the cap.
    max_upstream: int = 0
    upstream_queue_wait: float = 10.0
    #: At most this many requests queue for an upstream slot; one more gets 503 at once.
    upstream_queue_max: int = 1024
    #: Retry-After (seconds) sent with a 503 for a full upstream cap.
    retry_after: int = 2
    max_header_bytes: int = 16384
    max_request_body: int = 1 << 20
    #: Idle time allowed while waiting for the first byte of a request (new or kept-alive
    #: connection).
    idle_timeout: float = 30.0
    #: Total time allowed for a request head from its first byte (not per read: a head trickled a
    #: line at a time still ends here, with 408).
    head_timeout: float = 10.0
    #: Total time allowed for a request body once its head is in (408 after it).
    body_timeout: float = 60.0
    upstream_timeout: float = 30.0
    #: A client whose socket takes no bytes for this long is cut off (it must not hold an upstream
    #: connection or a session forever; 0 = never).
    client_write_timeout: float = 30.0
    #: A sharer that gets no new byte of the live stream for this long fails cleanly (0 = never);
    #: longer than one origin read timeout plus the resume attempts.
    stall_timeout: float = 120.0
    #: How long a joiner waits for a pending session's response head.
    join_wait: float = 10.0
    #: Queue bound for a joiner whose prefix left the window: it takes the live stream at once
    #: while the prefix comes from the origin by Range (0: chase the live edge with the Range
    #: fetch instead, which costs the origin about the rest of the object).
    patch_budget: int = 4 << 20
    #: Bytes of disk for the bodies of shareable objects (what left the window, and finished
    #: objects kept for reuse while fresh, least recently used evicted first); 0 = no disk store.
    disk_budget: int = 1 << 30
    #: Directory of the (anonymous, unlinked) spill files; None = the system's temporary directory.
    disk_dir: str | None = None
    #: Keep upstream connections alive and reuse them (saves a handshake per request).
    upstream_keepalive: bool = True
    #: Resume a shared stream that broke off, from its live edge by Range + If-Range, for all its
    #: sharers at once (needs a strong validator; never across a changed representation).
    retry_by_range: bool = True
    #: Resume attempts per session before every sharer gets a clean (short) failure.
    resume_attempts: int = 3
    #: Wait ``resume_backoff * n`` s before the n-th resume attempt.
    resume_backoff: float = 0.1
    #: Sharing off: every request goes upstream (the "Normal" column of Table 2).
    sharing: bool = True
    #: Transparent interception (nftables/iptables REDIRECT, the paper's IP_REDIRECT): a redirected
    #: connection goes to its original destination (SO_ORIGINAL_DST), which must be allowed;
    #: the client's Host is kept for the key and sent upstream.
    transparent: bool = False
    status_path: str = "/_vmc/status"
    #: Client networks that may read the status endpoint (it lists recent URIs).
    status_allow: list[str] = field(default_factory=lambda: ["127.0.0.0/8", "::1/128"])
    #: Transport write-buffer high-water mark per client (bounds kernel-side backlog).
    write_high_water: int = 256 << 10


SO_ORIGINAL_DST = 80  # linux/netfilter_ipv4.h


def original_dst(sock) -> tuple[str, int] | None:
    """Where a REDIRECTed connection was going (None when it was not redirected).

    IPv4: ``SO_ORIGINAL_DST`` at SOL_IP (a sockaddr_in); IPv6: ``IP6T_SO_ORIGINAL_DST``
    (same number) at SOL_IPV6 (a sockaddr_in6).
    """
    if sock is None:
        return None
    try:
        if sock.family == socket.AF_INET:
            raw = sock.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
            port = struct.unpack_from("!H", raw, 2)[0]
            addr = socket.inet_ntop(socket.AF_INET, raw[4:8])
        elif sock.family == socket.AF_INET6:
            raw = sock.getsockopt(socket.IPPROTO_IPV6, SO_ORIGINAL_DST, 28)
            port = struct.unpack_from("!H", raw, 2)[0]
            addr = socket.inet_ntop(socket.AF_INET6, raw[8:24])
        else:
            return None
    except OSError:
        return None
    if (addr, port) == tuple(sock.getsockname()[:2]):
        return None
    return addr, port
