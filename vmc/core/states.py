"""Session states and the one table of transitions between them (the model: h11's ``_state.py``).

Theory of operation. A :class:`~vmc.core.session.SharedObject` is created PENDING
when the first request for a key goes to the origin. When the origin's head
arrives and is shareable, the session becomes STREAMING (joiners may attach);
when it is not shareable, or the origin could not be reached, it becomes FAILED
without ever streaming. A STREAMING session ends DONE when the whole body has
been read (possibly after resumes by Range), or FAILED when the origin broke off
for good or nobody reads it any more. DONE and FAILED are final: a new request
after them starts a new session.

::

    PENDING ──> STREAMING ──> DONE
       │            │
       └────────────┴───────> FAILED

Every state change goes through :func:`check_transition`; anything not in
:data:`TRANSITIONS` raises :class:`IllegalTransition`, a bug in the proxy
(h11's ``LocalProtocolError``), never the peer's fault.
"""

from __future__ import annotations

from enum import Enum

from vmc.core.errors import VMCError


class SessionState(Enum):
    """Where one shared origin fetch is."""

    PENDING = "pending"
    """Origin asked; its response head not yet seen (joiners wait up to ``join_wait``)."""
    STREAMING = "streaming"
    """The origin body is flowing into the buffer; joiners attach."""
    DONE = "done"
    """The whole body was read."""
    FAILED = "failed"
    """Not shareable, unreachable, broken off for good, or abandoned."""

    def __str__(self) -> str:
        return self.value


#: Allowed transitions: state -> states it may move to.
TRANSITIONS: dict[SessionState, frozenset[SessionState]] = {
    SessionState.PENDING: frozenset({SessionState.STREAMING, SessionState.FAILED}),
    SessionState.STREAMING: frozenset({SessionState.DONE, SessionState.FAILED}),
    SessionState.DONE: frozenset(),
    SessionState.FAILED: frozenset(),
}

#: States in which the session can still change (the pump, or the head, is awaited).
ACTIVE = frozenset({SessionState.PENDING, SessionState.STREAMING})


class IllegalTransition(VMCError):
    """The proxy tried a state change the table does not allow (our bug, not the peer's)."""


def check_transition(old: SessionState, new: SessionState) -> SessionState:
    """``new`` if ``old -> new`` is in :data:`TRANSITIONS`, else :class:`IllegalTransition`."""
    if new not in TRANSITIONS[old]:
        raise IllegalTransition(f"session cannot go from {old.value} to {new.value}")
    return new
