"""The linear picker's twist and in-order consumers (docs/ledbat.md, "What the twist
costs an in-order consumer").

A twisted picker starts each block of 256 chunks at a per-peer offset, so a reader
that plays from position 0 would get chunk 0 (asked alone while the size is unknown)
and then wait for the whole first block.  The twist therefore applies only while no
in-order consumer is attached: the HTTP gateway attaches one, the VoD pickers (what
``ppspp download -o -`` uses) never twist."""

from __future__ import annotations

import asyncio
import os
import random
from typing import Any

import pytest

from deliverykit.sim import Host, Scenario, Simulation
from swift.aio.http import HttpStream
from swift.aio.node import downloader, seeder
from swift.core import events as ev
from swift.core.binmap import Binmap
from swift.core.config import PeerConfig
from swift.core.content import Content, MemoryStorage
from swift.core.merkle import MerkleTree
from swift.core.peer import Peer
from swift.core.picker import (
    TWIST_BLOCK,
    Availability,
    LinearPicker,
    PickState,
    VodPicker,
)
from swift.sim import SwiftApp, flash_crowd

#: the first chunks an in-order reader waits for
FIRST = 32


def _state(n: int, seed: int) -> PickState:
    return PickState(Binmap(), Binmap(), Availability(), n, 0, random.Random(seed))


def _full(n: int) -> Binmap:
    b = Binmap()
    b.set_range(0, n)
    return b


def test_a_reader_at_position_0_gets_plain_order_even_with_the_twist() -> None:
    n = 4 * TWIST_BLOCK
    for seed in range(8):
        st = _state(n, seed)
        before = st.rng.getstate()
        pk = LinearPicker(twist=True)
        pk.attach_reader()
        assert pk.pick(st, _full(n), 5, True) == [0, 1, 2, 3, 4]
        assert st.rng.getstate() == before  # no twist drawn: the stream of a plain picker


def test_without_a_reader_the_twist_starts_elsewhere_at_position_0() -> None:
    n = 4 * TWIST_BLOCK
    firsts = [LinearPicker(twist=True).pick(_state(n, seed), _full(n), 5, True)[0]
              for seed in range(8)]
    assert any(f != 0 for f in firsts)


def test_the_vod_pickers_never_twist() -> None:
    """What ``ppspp download -o -`` runs (cli.py: linear becomes vod for a stream)."""
    for name in ("vod", "std-vod"):
        tree = MerkleTree.for_root(bytes(32), PeerConfig().hash_func, 1024)
        peer = Peer(Content(tree, MemoryStorage()), PeerConfig(picker=name, picker_twist=True,
                                                              seed=3))
        assert isinstance(peer.picker, VodPicker)
        n = 4 * TWIST_BLOCK
        assert peer.picker.pick(_state(n, 3), _full(n), 5, True) == [0, 1, 2, 3, 4]


class _Readers(SwiftApp):
    """A swarm whose leechers record the order their chunks were verified in; with
    ``attach`` each is an in-order reader from its start (as the HTTP gateway)."""

    def __init__(self, scenario: Scenario, attach: bool, **kw: Any) -> None:
        super().__init__(scenario, **kw)
        self.attach = attach
        self.order: list[int] = []
        self.twist: int | None = None

    def on_start(self, host: Host) -> None:
        if host.spec.role == "leecher" and self.attach:
            host.core.download.picker.attach_reader()  # type: ignore[attr-defined]
        super().on_start(host)

    def on_event(self, host: Host, event: object) -> None:
        super().on_event(host, event)
        if isinstance(event, ev.ChunkVerified) and host.spec.role == "leecher":
            self.order.append(event.index)
            self.twist = host.core.download.picker.twist  # type: ignore[attr-defined]


@pytest.mark.parametrize("attach", [False, True], ids=["no-reader", "reader"])
def test_in_the_simulator_a_reader_gets_its_first_chunks_first(attach: bool) -> None:
    sc = flash_crowd(1, 512 * 1024, seed=2)
    app = _Readers(sc, attach, seeder_config=PeerConfig(picker_twist=True, ledbat_target_ms=25),
                   leecher_config=PeerConfig(picker_twist=True, ledbat_target_ms=25,
                                             pex_connect=True))
    Simulation(sc, app, seed=2).run()
    assert sorted(app.order) == list(range(512))
    if attach:
        assert sorted(app.order[:FIRST]) == list(range(FIRST))
        assert app.twist == 0 or app.twist is None  # never drawn
    else:  # the twist this seed draws puts chunks FIRST.. ahead of 1..FIRST-1
        assert app.twist is not None and app.twist >= FIRST
        assert app.order[0] == 0 and sorted(app.order[:FIRST]) != list(range(FIRST))


@pytest.mark.timeout(60)
async def test_the_http_gateway_attaches_a_reader(tmp_path) -> None:
    """On loopback: a leecher with the twist on and the gateway open verifies its
    first chunks in order, and the player gets the content byte for byte."""
    src = str(tmp_path / "src.bin")
    data = os.urandom(600 * 1024 + 3)
    with open(src, "wb") as f:
        f.write(data)
    order: list[int] = []

    def note(e: object) -> None:
        if isinstance(e, ev.ChunkVerified):
            order.append(e.index)

    async with seeder(src, PeerConfig(upload_rate=2e6)) as s:
        async with downloader(s.peer.swarm_id, str(tmp_path / "o.bin"),
                              PeerConfig(picker_twist=True, seed=5)) as leech:
            leech.on_event = note
            async with HttpStream(leech) as http:
                leech.connect(s.addr)
                r, w = await asyncio.open_connection("127.0.0.1", http.port)
                w.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                await w.drain()
                raw = await asyncio.wait_for(r.read(), 40)
                w.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert body == data
    assert sorted(order[:FIRST]) == list(range(FIRST))
