"""The channel life cycle is a transition table (swift/core/chanstate.py).

The table drives the test: every (state, event) pair either is in
``TRANSITIONS`` and moves the channel there, or raises LocalProtocolError
and leaves the channel where it was.  Then two Peers on a loopback pair
walk the documented paths (initiator INIT -> EST, responder REPLY -> EST,
both -> CLOSED) through real datagrams.
"""

from __future__ import annotations

import itertools
import random

import pytest

from deliverykit.errors import LocalProtocolError
from swift.core.channel import Channel
from swift.core.chanstate import TRANSITIONS, ChannelEvent, ChannelState, next_state
from swift.core.config import PeerConfig
from swift.core.content import Content, MemoryStorage
from swift.core.merkle import MerkleTree
from swift.core.peer import Peer
from swift.wire.constants import HashFunc

CS = 1024


def _channel(state: ChannelState) -> Channel:
    ch = Channel(1, ("127.0.0.1", 1), state is ChannelState.INIT, 0.0, CS + 64, 64, False)
    ch.state = state  # the starting point of this row of the table
    return ch


@pytest.mark.parametrize(("state", "event"),
                         list(itertools.product(ChannelState, ChannelEvent)))
def test_every_pair_follows_the_table(state: ChannelState, event: ChannelEvent) -> None:
    ch = _channel(state)
    if (state, event) in TRANSITIONS:
        assert ch.handle(event) is TRANSITIONS[state, event]
        assert ch.state is TRANSITIONS[state, event]
    else:
        with pytest.raises(LocalProtocolError, match=event.value):
            ch.handle(event)
        assert ch.state is state


def test_closed_is_final_and_every_open_state_can_close() -> None:
    assert not [e for (s, e) in TRANSITIONS if s is ChannelState.CLOSED]
    for s in ChannelState:
        if s is not ChannelState.CLOSED:
            assert next_state(s, ChannelEvent.CLOSE) is ChannelState.CLOSED


def test_states_compare_equal_to_the_old_strings() -> None:
    # callers that still compare with "est" etc. keep working
    assert [s.value for s in ChannelState] == ["init", "reply", "est", "closed"]
    assert ChannelState.EST == "est" and str(ChannelState.CLOSED) == "closed"


def _pair() -> tuple[Peer, Peer]:
    data = random.Random(3).randbytes(8 * CS)
    tree = MerkleTree.build([data[i:i + CS] for i in range(0, len(data), CS)], HashFunc.SHA256, CS)
    cfg = PeerConfig(chunk_size=CS, seed=1)
    seeder = Peer(Content(tree, MemoryStorage(data)), cfg)
    empty = MerkleTree.for_root(tree.root_hash, HashFunc.SHA256, CS)
    leecher = Peer(Content(empty, MemoryStorage()), PeerConfig(chunk_size=CS, seed=2))
    return seeder, leecher


def _pump(a: Peer, a_addr: tuple[str, int], b: Peer, b_addr: tuple[str, int],
          now: float) -> None:
    for d, to in a.datagrams_to_send(now):
        assert to == b_addr
        b.datagram_received(d, a_addr, now)


def test_handshake_walks_the_documented_paths() -> None:
    seeder, leecher = _pair()
    s_addr, l_addr = ("127.0.0.1", 1), ("127.0.0.1", 2)
    cid = leecher.connect(s_addr, 0.0)
    lch = leecher.channels[cid]
    assert lch.state is ChannelState.INIT
    _pump(leecher, l_addr, seeder, s_addr, 0.0)
    (sch,) = seeder.channels.values()
    assert sch.state is ChannelState.REPLY
    _pump(seeder, s_addr, leecher, l_addr, 0.01)
    assert lch.state is ChannelState.EST
    _pump(leecher, l_addr, seeder, s_addr, 0.02)
    assert sch.state is ChannelState.EST
    for d, _to in leecher.close(0.03):
        seeder.datagram_received(d, l_addr, 0.03)
    assert lch.state is ChannelState.CLOSED and sch.state is ChannelState.CLOSED
    assert not seeder.channels and not leecher.channels
    with pytest.raises(LocalProtocolError):
        lch.handle(ChannelEvent.PEER_DATAGRAM)
