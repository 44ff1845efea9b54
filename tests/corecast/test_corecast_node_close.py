"""Node.close on real sockets: a task that goes on after one cancellation (what
Python 3.11's asyncio.wait_for can do to the heartbeat loop, gh-86296) is
cancelled again and close returns; a task that never stops makes close raise
after a bounded number of rounds instead of hanging; a task's own failure
surfaces; the sockets are closed in every case."""

from __future__ import annotations

import asyncio

import pytest

import corecast.aio.nodes as nodes
from corecast.aio.nodes import Node, bind


async def _node_with_socket() -> Node:
    node = Node()
    node.transports.append(await bind("127.0.0.1", 0, lambda d, a: None))
    return node


def _closed(node: Node) -> bool:
    return not node.transports and not node.tasks


async def test_a_task_that_swallows_one_cancellation_is_cancelled_again() -> None:
    swallowed = []

    async def beat() -> None:  # the shape of ClientNode's heartbeat loop
        while True:
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                if not swallowed:  # as a wait_for whose inner await completed
                    swallowed.append(True)
                    continue
                raise

    node = await _node_with_socket()
    t = asyncio.create_task(beat())
    node.tasks.append(t)
    await asyncio.sleep(0.03)
    closing = asyncio.create_task(node.close())
    # a liveness bound, not a speed figure: before the fix close() never returned
    # by itself (it awaited the task once, which went on beating)
    done, _ = await asyncio.wait({closing}, timeout=10)
    if not done:
        closing.cancel()  # cancels the beat it awaits, so the test ends cleanly
        await asyncio.gather(closing, return_exceptions=True)
    assert closing in done, "close() hung on a task that swallowed one cancellation"
    await closing
    assert swallowed and t.cancelled() and _closed(node)


async def test_a_task_that_never_stops_makes_close_raise_not_hang(monkeypatch) -> None:
    monkeypatch.setattr(nodes, "CLOSE_ROUND_S", 0.02)
    monkeypatch.setattr(nodes, "CLOSE_CANCEL_ROUNDS", 3)
    stop = asyncio.Event()
    cancels = []

    async def stubborn() -> None:
        while not stop.is_set():
            try:
                await asyncio.sleep(0.005)
            except asyncio.CancelledError:
                cancels.append(1)
    node = await _node_with_socket()
    t = asyncio.create_task(stubborn())
    node.tasks.append(t)
    with pytest.raises(RuntimeError, match="1 task.*did not stop after 3 cancellations"):
        await asyncio.wait_for(node.close(), 10)
    assert len(cancels) == 3 and _closed(node)
    stop.set()
    await asyncio.wait_for(t, 5)


async def test_a_failed_task_surfaces_and_the_sockets_still_close() -> None:
    async def broken() -> None:
        raise ValueError("the task's own failure")

    node = await _node_with_socket()
    node.tasks.append(asyncio.create_task(broken()))
    await asyncio.sleep(0)
    with pytest.raises(ValueError, match="own failure"):
        await node.close()
    assert _closed(node)
