"""The simulator's event heap in C (deliverykit/csrc/sim.c) and its twin
(deliverykit.sim.scheduler.PyEventHeap) hand events out in the same order as the
heapq of (when, seq, callback, args) tuples the scheduler used before, and the C heap
takes part in the cyclic garbage collector."""

from __future__ import annotations

import gc
import heapq
import math
import random
import weakref

import pytest

from deliverykit import fastpath
from deliverykit.sim.scheduler import PyEventHeap, Scheduler, py_sim_heap
from deliverykit.testing import in_ci
from tests.sim.sim_support import App, Recorder, Sender


def _impls():
    impls = [pytest.param(py_sim_heap, id="twin")]
    c = getattr(fastpath.speedups, "sim_heap", None) if fastpath.speedups else None
    if c is not None:
        impls.append(pytest.param(c, id="C"))
    elif in_ci():
        pytest.fail("the C sim_heap is not built")
    return impls


def _cb(*a):
    return None


@pytest.mark.parametrize("make", _impls())
def test_the_same_order_as_heapq_with_ties_ints_and_infinity(make):
    rnd = random.Random(3)
    heap, ref = make(), []
    seq = 0
    out, want = [], []
    for step in range(20_000):
        if rnd.random() < 0.55 or not ref:
            seq += 1
            # ties on purpose (a few distinct times), ints, and an event at infinity
            when = rnd.choice([rnd.random(), round(rnd.random(), 2), rnd.randrange(3),
                               math.inf if step % 997 == 0 else 0.5])
            args = (step,)
            heap.push(when, seq, _cb, args)
            heapq.heappush(ref, (when, seq, _cb, args))
        else:
            until = rnd.choice([0.3, 0.7, 2.0, math.inf])
            got = heap.pop_until(until)
            if ref[0][0] > until:
                assert got is None
                want.append(None)
                out.append(None)
                continue
            w, _, cb, args = heapq.heappop(ref)
            assert got is not None
            assert got[0] is w and got[1] is cb and got[2] is args
        assert len(heap) == len(ref)
        assert heap.peek() == (ref[0][0] if ref else None)
    while ref:
        w, _, _, args = heapq.heappop(ref)
        got = heap.pop_until(math.inf)
        assert got is not None and got[0] is w and got[2] is args
    assert heap.pop_until(math.inf) is None and heap.peek() is None and len(heap) == 0


@pytest.mark.parametrize("make", _impls())
def test_bad_times_are_refused(make):
    heap = make()
    with pytest.raises(TypeError):
        heap.push("soon", 1, _cb, ())
    assert len(heap) == 0


class _Owner:
    """Owns a heap that holds one of its own bound methods: a reference cycle."""

    def __init__(self, make) -> None:
        self.heap = make()
        self.heap.push(1.0, 1, self.fire, ())

    def fire(self) -> None:
        pass


@pytest.mark.parametrize("make", _impls())
def test_a_cycle_through_the_heap_is_collected(make):
    owner = _Owner(make)
    ref = weakref.ref(owner)
    del owner
    gc.collect()
    assert ref() is None


class _Pusher:
    """Pushes ``n`` events onto ``heap`` when it is destroyed, each holding a token."""

    def __init__(self, heap, n, tokens):
        self.heap, self.n, self.tokens = heap, n, tokens

    def __del__(self):
        for i in range(self.n):
            t = _Token()
            self.tokens.append(weakref.ref(t))
            self.heap.push(float(i), i, _cb, (t,))


class _Token:
    pass


def test_a_destructor_pushing_while_the_heap_is_collected():
    """The collector clears a C heap whose entry's destructor pushes onto that very
    heap, more than its array holds (so it grows while the old entries are released):
    the run does not crash and what the destructor pushed is released too.  (Whether
    the old array is read after it moved is not visible from Python: the clear takes
    the entries out of the heap first so that it cannot be.  The twin is a Python
    object whose attributes the collector clears first, so a push from such a
    destructor fails there and is ignored.)"""
    make = getattr(fastpath.speedups, "sim_heap", None) if fastpath.speedups else None
    if make is None:
        if in_ci():
            pytest.fail("the C sim_heap is not built")
        pytest.skip("the C extension is not built")
    heap, tokens = make(), []
    heap.push(0.0, 0, _cb, (_Pusher(heap, 3000, tokens),))
    del heap
    gc.collect()
    gc.collect()
    assert len(tokens) == 3000
    assert all(r() is None for r in tokens)


def test_the_scheduler_runs_the_same_events_with_either_heap(monkeypatch):
    """The same simulated run (a sender's bursts through a queue to a recorder, with
    timers and ties) on the C heap and on the twin: every arrival equal."""
    from deliverykit.sim import (
        LinkSpec,
        NodeSpec,
        Scenario,
        Simulation,
        node_address,
        scheduler as sched_mod,
    )

    runs = []
    for make in [p.values[0] for p in _impls()]:
        monkeypatch.setattr(sched_mod, "sim_heap", make)
        nodes = (NodeSpec("s", up=LinkSpec(rate=2e6, queue=20_000)), NodeSpec("r"))
        app = App({"s": lambda: Sender(node_address(1, 7000), 400, 500, every=0.01,
                                       burst=25),
                   "r": Recorder})
        sim = Simulation(Scenario("heap", nodes, duration=5.0), app, trace=True)
        stats = sim.run()
        runs.append((sim.network.trace_hash(), app.cores["r"].got, stats.events,
                     stats.virtual_s, stats.fates))
        assert isinstance(sim.sched._heap, PyEventHeap) == (make is py_sim_heap)
    assert all(r == runs[0] for r in runs)


def test_run_until_moves_the_clock_as_before():
    """Past ``until`` with events left, the clock is ``until``; with none left, it only
    moves forward."""
    s = Scheduler()
    s.at(5.0, _cb)
    assert s.run(until=2.0) == 2.0 and len(s) == 1
    assert s.run(until=1.0) == 1.0  # back to it: the next event lies beyond
    assert s.run() == 5.0 and len(s) == 0
    assert s.run(until=3.0) == 5.0
    assert s.run(until=7.0) == 7.0
