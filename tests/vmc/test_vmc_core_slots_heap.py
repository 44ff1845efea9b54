"""ConnectionSlots keeps its deadlines in a heap (issue 17: ``deadline()`` ran a walk over
every connection after every input): after any sequence of opens, bytes, heads, answers,
keep-alives and closes, ``deadline()`` is the earliest deadline held and ``expired(now)``
gives exactly the connections whose deadline passed, with why, as the walk did."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from vmc.core.slots import ConnectionSlots, SlotLimits

OPS = st.lists(
    st.tuples(st.sampled_from(["open", "bytes", "head", "busy", "kept", "closed", "expire"]),
              st.integers(0, 7), st.floats(0, 5, allow_nan=False)),
    max_size=300,
)


@settings(max_examples=150, deadline=None)
@given(OPS, st.sampled_from([0.0, 1.0, 2.5]), st.sampled_from([0.0, 0.5]))
def test_heap_deadlines_match_a_walk(ops, idle: float, head: float) -> None:
    slots = ConnectionSlots(SlotLimits(idle_timeout=idle, head_timeout=head, body_timeout=3.0))
    now = 0.0
    for op, conn, dt in ops:
        now += dt
        if op == "open":
            slots.opened(conn, now)
        elif op == "bytes":
            slots.bytes_in(conn, now)
        elif op == "head":
            slots.head_in(conn, now)
        elif op == "busy":
            slots.busy(conn, now)
        elif op == "kept":
            slots.kept(conn, now)
        elif op == "closed":
            slots.closed(conn)
        else:
            due = dict(slots._due)
            want = sorted((c, why) for c, (t, why) in due.items() if t <= now)
            got = slots.expired(now)
            assert sorted(got) == want
            assert {c for c, _ in got}.isdisjoint(slots._due)
        walk = min((t for t, _ in slots._due.values()), default=None)
        assert slots.deadline() == walk
        assert len(slots._heap) <= 2 * len(slots._due) + 65
