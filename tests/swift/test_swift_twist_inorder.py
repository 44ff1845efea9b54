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
from typing import Any

import pytest
from swift_support import full_binmap, pick_state

from deliverykit.sim import Host, Scenario, Simulation
from swift.aio.http import HttpStream
from swift.aio.node import downloader, seeder
from swift.core import events as ev
from swift.core.config import PeerConfig
from swift.core.content import Content, MemoryStorage
from swift.core.merkle import MerkleTree
from swift.core.peer import Peer
from swift.core.picker import (
    TWIST_BLOCK,
    LinearPicker,
    VodPicker,
)
from swift.sim import SwiftApp, flash_crowd

#: the first chunks an in-order reader waits for
FIRST = 32


def test_a_reader_at_position_0_gets_plain_order_even_with_the_twist() -> None:
    n = 4 * TWIST_BLOCK
    for seed in range(8):
        st = pick_state(n, seed)
        before = st.rng.getstate()
        pk = LinearPicker(twist=True)
        pk.attach_reader()
        assert pk.pick(st, full_binmap(n), 5, True) == [0, 1, 2, 3, 4]
        assert st.rng.getstate() == before  # no twist drawn: the stream of a plain picker


def test_without_a_reader_the_twist_starts_elsewhere_at_position_0() -> None:
    n = 4 * TWIST_BLOCK
    firsts = [LinearPicker(twist=True).pick(pick_state(n, seed), full_binmap(n), 5, True)[0]
              for seed in range(8)]
    assert any(f != 0 for f in firsts)


def test_a_playback_position_attaches_a_reader() -> None:
    """``set_playpos`` (the simulator's player, ``InOrderReader``) means an in-order
    reader: the linear picker keeps order from then on, at position 0 too."""
    tree = MerkleTree.for_root(bytes(32), PeerConfig().hash_func, 1024)
    peer = Peer(Content(tree, MemoryStorage()), PeerConfig(picker_twist=True, seed=3))
    assert isinstance(peer.picker, LinearPicker) and not peer.picker.reader
    peer.set_playpos(0)
    assert peer.picker.reader


def test_the_vod_pickers_never_twist() -> None:
    """What ``ppspp download -o -`` runs (cli.py: linear becomes vod for a stream)."""
    for name in ("vod", "std-vod"):
        tree = MerkleTree.for_root(bytes(32), PeerConfig().hash_func, 1024)
        peer = Peer(Content(tree, MemoryStorage()), PeerConfig(picker=name, picker_twist=True,
                                                              seed=3))
        assert isinstance(peer.picker, VodPicker)
        n = 4 * TWIST_BLOCK
        assert peer.picker.pick(pick_state(n, 3), full_binmap(n), 5, True) == [0, 1, 2, 3, 4]


CS = 1024
#: in-order byte counts whose time :class:`ReaderApp` records: 1 B, 64 KiB, 1 MiB
MARKS = (1, 64 * 1024, 1 << 20)


class ReaderApp(SwiftApp):
    """A swarm whose ``readers`` consume the content in order from position 0, as
    ``swift.aio.node.InOrderReader`` does (a cursor over ``have``, ``set_playpos``
    at every verified chunk); with ``attach`` each attaches as a reader when it
    starts, as the HTTP gateway does.  Records the order the first reader's chunks
    were verified in and, per reader, when its first byte, first 64 KiB and
    first MiB were there in order (seconds from its arrival)."""

    def __init__(self, scenario: Scenario, readers: list[str], attach: bool,
                 **kw: Any) -> None:
        super().__init__(scenario, **kw)
        self.readers = readers
        self.attach = attach
        self.cursor: dict[str, int] = {}
        #: reader -> {bytes in order: seconds from arrival}
        self.reached: dict[str, dict[int, float]] = {r: {} for r in readers}
        self.order: list[int] = []
        self.twist: int | None = None

    def on_start(self, host: Host) -> None:
        if host.name in self.readers:
            self.cursor[host.name] = 0
            if self.attach:
                host.core.download.picker.attach_reader()  # type: ignore[attr-defined]  # a Peer
        super().on_start(host)

    def on_event(self, host: Host, event: object) -> None:
        super().on_event(host, event)
        name = host.name
        if not isinstance(event, ev.ChunkVerified) or name not in self.cursor:
            return
        peer: Peer = host.core  # type: ignore[assignment]  # a swift host's core is a Peer
        if name == self.readers[0]:
            self.order.append(event.index)
            self.twist = peer.download.picker.twist  # type: ignore[attr-defined]  # the vod picker
        cur = self.cursor[name]
        while peer.content.have.has(cur):
            cur += 1
        self.cursor[name] = cur
        peer.set_playpos(cur)
        for mark in MARKS:
            if cur * CS >= mark:
                self.reached[name].setdefault(mark, host.sim.now - host.spec.arrive)


def measure(leechers: int, size_kib: int, seed: int, twist: bool, readers: str = "all",
            attach: bool = False, picker: str = "linear",
            target_ms: float = 25.0) -> dict[str, Any]:
    """One flash crowd (:func:`swift.sim.flash_crowd`) whose leechers (``readers``:
    "all", or "one": the first only) read in order: their mean and max times to the
    :data:`MARKS`, every leecher's completion, the chunks leechers sent each other."""
    sc = flash_crowd(leechers, size_kib * 1024, seed=seed)
    names = [n.name for n in sc.nodes if n.role == "leecher"]
    rd = names if readers == "all" else names[:1]
    app = ReaderApp(sc, rd, attach,
                    seeder_config=PeerConfig(ledbat_target_ms=target_ms, picker_twist=twist),
                    leecher_config=PeerConfig(ledbat_target_ms=target_ms, picker_twist=twist,
                                              pex_connect=True, picker=picker))
    sim = Simulation(sc, app, seed=seed)
    sim.run()
    out: dict[str, Any] = {"leechers": leechers, "size_kib": size_kib, "seed": seed,
                           "twist": twist, "readers": readers, "attach": attach,
                           "picker": picker, "target_ms": target_ms}
    for mark in MARKS:
        ts = [app.reached[r][mark] for r in rd]
        out[f"t{mark}_mean"], out[f"t{mark}_max"] = sum(ts) / len(ts), max(ts)
    done = [app.completed[n] for n in names]
    out["done_mean"], out["done_max"] = sum(done) / len(done), max(done)
    out["shared"] = sum(sim.hosts[n].core.stats["sent_data"]  # type: ignore[attr-defined]  # a Peer
                        for n in names)
    return out


@pytest.mark.parametrize("attach", [False, True], ids=["no-reader", "reader"])
def test_in_the_simulator_a_reader_gets_its_first_chunks_first(attach: bool) -> None:
    sc = flash_crowd(1, 512 * 1024, seed=2)
    app = ReaderApp(sc, ["l000"], attach,
                    seeder_config=PeerConfig(picker_twist=True, ledbat_target_ms=25),
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


def test_a_reader_attached_has_its_first_64_kib_sooner() -> None:
    """Virtual time: a single reader's start-up (64 KiB in order) is later with the
    twist unless it is attached; the first byte (chunk 0, asked alone while the size
    is unknown) and the first MiB are not (docs/ledbat.md)."""
    off = measure(1, 2048, 1, twist=False)
    on = measure(1, 2048, 1, twist=True)
    attached = measure(1, 2048, 1, twist=True, attach=True)
    assert on["t65536_mean"] > off["t65536_mean"] == attached["t65536_mean"]
    assert on["t1_mean"] == off["t1_mean"] == attached["t1_mean"]


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


if __name__ == "__main__":
    # the figures of docs/ledbat.md, "What the twist costs an in-order consumer":
    #   PYTHONPATH=. python tests/swift/test_swift_twist_inorder.py LEECHERS SIZE_KIB SEEDS
    #       [all|one] [attach] [PICKER]   (SEEDS: 1,2,3; both twist settings unless attach)
    import json
    import sys
    a = sys.argv[1:]
    n, kib, seeds = int(a[0]), int(a[1]), [int(x) for x in a[2].split(",")]
    who = a[3] if len(a) > 3 else "all"
    att = len(a) > 4 and a[4] == "attach"
    pk = a[5] if len(a) > 5 else "linear"
    for sd in seeds:
        for tw in ((True,) if att or pk != "linear" else (False, True)):
            print(json.dumps(measure(n, kib, sd, tw, who, att, pk)), flush=True)
