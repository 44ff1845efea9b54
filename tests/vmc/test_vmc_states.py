"""Session states (issue 16 item 5): one enum, one transition table, one place that changes state;
reasons are typed counter keys."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from vmc.core import policy
from vmc.core.reasons import NotShared, Refused, by_name
from vmc.core.session import SharedObject
from vmc.core.states import TRANSITIONS, IllegalTransition, SessionState, check_transition
from vmc.core.stats import Stats

S = SessionState


@pytest.mark.parametrize("old, new", list(itertools.product(S, S)))
def test_every_pair_is_allowed_only_by_the_table(old: SessionState, new: SessionState) -> None:
    if new in TRANSITIONS[old]:
        assert check_transition(old, new) is new
    else:
        with pytest.raises(IllegalTransition, match=f"from {old.value} to {new.value}"):
            check_transition(old, new)


def test_final_states_are_final_and_all_reachable() -> None:
    assert TRANSITIONS[S.DONE] == TRANSITIONS[S.FAILED] == frozenset()
    reach, todo = {S.PENDING}, [S.PENDING]
    while todo:
        for nxt in TRANSITIONS[todo.pop()]:
            if nxt not in reach:
                reach.add(nxt)
                todo.append(nxt)
    assert reach == set(S)


def test_session_moves_through_the_table_only() -> None:
    s = SharedObject("k", "http://a/", ("127.0.0.1", 9), b"", [(b"host", b"a")], window=16)
    with pytest.raises(IllegalTransition):
        s.move(S.DONE)  # a pending session has no body to have finished
    s.move(S.STREAMING)
    s.move(S.FAILED, "origin went away")
    assert s.error == "origin went away" and not s.live
    with pytest.raises(IllegalTransition):
        s.move(S.STREAMING)  # never back to life


def test_state_is_assigned_in_one_place_only() -> None:
    root = Path(__file__).resolve().parents[2] / "vmc"
    hits = [f"{p.name}:{n}" for p in root.rglob("*.py")
            for n, line in enumerate(p.read_text().splitlines(), 1)
            if re.search(r"\.state\s*(:[^=]*)?=[^=]", line)]
    # SharedObject.__init__ (PENDING) and SharedObject.move: nowhere else
    assert len(hits) == 2 and all(h.startswith("session.py:") for h in hits), hits


def test_reasons_are_typed_counter_keys() -> None:
    v = policy.response_verdict(206, [(b"content-length", b"1")])
    assert v.reason is NotShared.STATUS_NOT_200
    st = Stats()
    st.not_shared[v.reason] += 1
    st.refused[Refused.HEAD_TIMEOUT] += 2
    snap = st.snapshot()
    assert snap["not_shared"] == {"status-not-200": 1} and snap["refused"] == {"head-timeout": 2}
    assert by_name({NotShared.STALE: 3}) == {"stale": 3}
    assert all(type(k) is str for k in snap["refused"])  # plain names in the JSON
