"""Channel life cycle (RFC 7574 section 3.11) as a table, after h11's ``_state.py``.

Theory of operation.  A channel is opened from one side or the other:

* we initiate: it starts in ``INIT`` (our HANDSHAKE with channel 0 as
  destination is on its way) and becomes ``EST`` when the peer's HANDSHAKE
  reply names our channel (:attr:`ChannelEvent.HANDSHAKE_REPLY`);
* the peer initiates: it starts in ``REPLY`` (we answered its HANDSHAKE) and
  becomes ``EST`` on the first datagram the peer sends to our channel after
  that (:attr:`ChannelEvent.PEER_DATAGRAM`, 3.1.1 step 5).

From any open state a channel is ``CLOSED`` (:attr:`ChannelEvent.CLOSE`): a
closing HANDSHAKE either way, a dead peer (3.12), corrupt data (12.7), a
refused reply, or the peer's replacement.  ``CLOSED`` is final.  Heavy
payload (DATA) flows only on ``EST`` channels.

Every transition is in :data:`TRANSITIONS`; anything else is a bug in the
caller and raises :class:`~deliverykit.errors.LocalProtocolError` (the peer
cannot cause one: the Peer checks the state before it feeds an event).
"""

from __future__ import annotations

from enum import Enum

from deliverykit.errors import LocalProtocolError

__all__ = ["TRANSITIONS", "ChannelEvent", "ChannelState", "next_state"]


class ChannelState(str, Enum):
    """Where a channel is in its life cycle; the values are the old strings."""

    #: we sent a HANDSHAKE and wait for the reply
    INIT = "init"
    #: we answered the peer's HANDSHAKE and wait to hear from it again
    REPLY = "reply"
    #: established: every message may flow
    EST = "est"
    #: closed: nothing flows any more (final)
    CLOSED = "closed"

    def __str__(self) -> str:
        return self.value


class ChannelEvent(Enum):
    """What moves a channel from one state to another."""

    #: the peer's HANDSHAKE reply with its channel ID (we initiated)
    HANDSHAKE_REPLY = "handshake reply"
    #: any datagram from the peer on our channel after our reply
    PEER_DATAGRAM = "peer datagram"
    #: the channel ends (closing HANDSHAKE, dead, corrupt, refused, replaced)
    CLOSE = "close"


_S = ChannelState
_E = ChannelEvent

#: (state, event) -> next state; every legal transition and nothing else
TRANSITIONS: dict[tuple[ChannelState, ChannelEvent], ChannelState] = {
    (_S.INIT, _E.HANDSHAKE_REPLY): _S.EST,
    (_S.REPLY, _E.PEER_DATAGRAM): _S.EST,
    (_S.INIT, _E.CLOSE): _S.CLOSED,
    (_S.REPLY, _E.CLOSE): _S.CLOSED,
    (_S.EST, _E.CLOSE): _S.CLOSED,
}


def next_state(state: ChannelState, event: ChannelEvent) -> ChannelState:
    """The state ``event`` moves a channel in ``state`` to (the table's
    entry), or :class:`LocalProtocolError` when the table has none."""
    try:
        return TRANSITIONS[state, event]
    except KeyError:
        raise LocalProtocolError(
            f"channel cannot handle {event.value!r} in state {state.value!r}") from None
