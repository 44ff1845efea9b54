"""Live secure tune-in for :class:`swift.core.peer.Peer` (RFC 7574 6.1.2.4).

With the Unified Merkle Tree a live peer pushes its rightmost signed munro
to each new channel until the peer shows it knows that munro or a later
one; :class:`TuneIn` decides what each datagram to a channel carries.  The
per-channel progress lives on the channel (``Channel.tunein``:
:class:`~swift.core.channel.TuneInState`).
"""

from __future__ import annotations

from swift.core import bins as B
from swift.core.channel import Channel
from swift.core.live import LiveContent
from swift.core.requests import Specs
from swift.wire import codec as C
from swift.wire.constants import IntegrityMethod


class TuneIn:
    """The munro push of one live swarm (nothing for static content)."""

    def __init__(self, content: LiveContent | None, method: IntegrityMethod,
                 specs: Specs) -> None:
        #: the live content (None: a static swarm, which pushes nothing)
        self.content = content
        #: the swarm's live integrity method (6.1.1 Sign All pushes nothing)
        self.method = method
        self._specs = specs

    def munro_push(self, ch: Channel, now: float, alone: bool = False) -> list[C.Message]:
        """Secure tune-in (6.1.2.4): with the Unified Merkle Tree our rightmost
        signed munro (INTEGRITY + SIGNED_INTEGRITY) goes in every datagram to
        ``ch`` from the third (initiator) or fourth (responder) on -- control
        and DATA datagrams alike -- until the peer's HAVE or ACK shows a
        chunk under the first munro we pushed or a later one; then this
        channel's tune-in is over (later munros go with the DATA under them,
        6.1.2.3).  ``alone``: the datagram would carry nothing else; then it
        is sent only as the first push or as a repeat after 1 s of silence,
        in case the datagrams that carried it were lost."""
        content = self.content
        if ch.tunein.done or content is None or self.method != IntegrityMethod.UNIFIED_MERKLE:
            return []
        m = content.rightmost_munro()
        if m is None:
            return []
        lo, hi = B.base_range(m)
        if not ch.tunein.due(lo, ch.remote.top, now, alone):
            return []
        h, ts, sig = content.tree.signed[m]
        s, t = self._specs(lo, hi, clip=False)[0]
        return [C.Integrity(s, t, h), C.SignedIntegrity(s, t, ts, sig)]
