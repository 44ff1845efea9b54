"""Peer exchange for :class:`swift.core.peer.Peer` (RFC 7574 3.10, 8.13, 12.2).

:class:`Pex` answers a peer's PEX_REQ with the peers we talk to (no private
addresses to public peers; certified addresses only when the swarm has a
CA, issuing them when we are the CA), and takes the PEX_RES* we asked for:
a new address becomes a ``PeerDiscovered`` event and, with
``pex_connect``, a channel.  It owns the membership certificates
(``certs``); channels, counters, events and the blacklist are the Peer's,
handed in through the constructor; each channel's PEX state is its
``Channel.pex`` (:class:`~swift.core.channel.PexState`).
"""

from __future__ import annotations

import functools
import ipaddress
from collections import deque
from collections.abc import Callable

from deliverykit.protocol import Address
from swift.core import events as ev
from swift.core.certcache import CertCache
from swift.core.channel import Channel
from swift.core.chanstate import ChannelState
from swift.core.config import PeerConfig
from swift.wire import codec as C

_EST = ChannelState.EST


@functools.lru_cache(maxsize=4096)
def _host_kind(host: str) -> tuple[int, bool] | None:
    """(IP version, private) of a literal address, None for anything else.
    Cached (bounded, least recently used out): a swarm's PEX answers name
    the same peers again and again, and parsing each address per entry was
    a hot spot at swarm scale (docs/sim.md, "Profile ...")."""
    try:
        a = ipaddress.ip_address(host)
    except ValueError:
        return None
    return a.version, a.is_private or a.is_link_local or a.is_multicast or a.is_loopback


def _is_private(host: str) -> bool:
    kind = _host_kind(host)
    return kind is not None and kind[1]


class Pex:
    """PEX answers and discovered peers, with their certificates."""

    def __init__(self, config: PeerConfig, swarm_id: bytes, channels: dict[int, Channel],
                 stats: dict[str, int], events: deque[ev.SwiftEvent],
                 blacklist: set[Address], connect: Callable[[Address, float], int]) -> None:
        self.config = config
        self.swarm_id = swarm_id
        #: the Peer's channels, counters, events and blacklist (owned there)
        self.channels = channels
        self.stats = stats
        self.events = events
        self.blacklist = blacklist
        #: opens a channel to a discovered address (``Peer.connect``)
        self.connect = connect
        #: address -> membership certificate that passed the check or that we
        #: issued (bounded, purged on close, expires with the certificate)
        self.certs = CertCache(256)

    def answer(self, ch: Channel, now: float) -> list[C.Message]:
        if not ch.pex.requested:
            return []
        ch.pex.requested = False
        cfg = self.config
        out: list[C.Message] = []
        private_ok = _is_private(str(ch.addr[0])) if isinstance(ch.addr, tuple) else True
        seen = {ch.addr}
        for c in self.channels.values():
            if (c.addr in seen or c.state is not _EST or now - c.liveness.last_recv > 60
                    or not isinstance(c.addr, tuple)):
                continue
            seen.add(c.addr)
            host, port = c.addr[0], c.addr[1]
            kind = _host_kind(host)
            if kind is not None and kind[1] and not private_ok:
                continue  # 8.13: no private addresses to public peers
            if kind is None:
                continue
            if cfg.pex_ca is not None:  # certified PEX only (8.13, 12.2.2)
                # never relay an expired certificate (None once notAfter passed)
                cert = self.certs.get(c.addr, now)
                if cfg.pex_ca_key is not None and (
                        cert is None or not self.certs.fresh(c.addr, now)):
                    # we are the CA: (re-)issue when < 10 % of the lifetime is left
                    from swift.core.pexcert import issue
                    cert = issue(cfg.pex_ca_key, self.swarm_id, host, port, now,
                                 cfg.pex_cert_lifetime)
                    self.certs.put(c.addr, cert, float(int(now)),
                                   float(int(now + cfg.pex_cert_lifetime)))
                if cert is not None:
                    out.append(C.PexResCert(cert))
                    if len(out) >= 8:
                        break
                continue
            out.append(C.PexResV4(host, port) if kind[0] == 4 else C.PexResV6(host, port))
            if len(out) >= 8:
                break
        return out

    def discovered(self, ch: Channel, addr: tuple[str, int], now: float) -> None:
        self.events.append(ev.PeerDiscovered(addr))
        if self.config.pex_connect and addr not in self.blacklist and not any(
                c.addr == addr for c in self.channels.values()):
            if len(self.channels) < self.config.max_channels:
                self.connect(addr, now)

    def on_cert(self, ch: Channel, der: bytes, now: float) -> None:
        """PEX_REScert (8.13, 12.2.1): check the membership certificate
        (CA signature, swarm, validity, SAN URI) before using its address;
        a sender of defective certificates gets the rest of its ignored
        ("check a few ... and discard the rest if they are defective")."""
        from swift.core.pexcert import CertError, CertExpired, check_cert
        if self.config.pex_ca is None or ch.pex.bad_certs >= 2:
            self.stats["pex_cert_ignored"] = self.stats.get("pex_cert_ignored", 0) + 1
            return
        if self.certs.known(der, now) is not None:
            # a replay of a certificate we checked: no parse, no ECDSA verify
            self.stats["cert_cached"] = self.stats.get("cert_cached", 0) + 1
            return
        try:
            host, port, nb, na = check_cert(der, self.config.pex_ca, self.swarm_id, now)
        except CertExpired:
            # genuine but out of date: unusable, yet not the sender's defect
            self.stats["expired_cert"] = self.stats.get("expired_cert", 0) + 1
            return
        except CertError:
            ch.pex.bad_certs += 1
            self.stats["bad_cert"] = self.stats.get("bad_cert", 0) + 1
            return
        self.stats["good_cert"] = self.stats.get("good_cert", 0) + 1
        addr = (host, port)
        self.certs.put(addr, der, nb, na)
        self.discovered(ch, addr, now)
