"""Addresses, batches and results are typed on the paths between drivers and cores
(issue 16 items 3, 5, 6): mypy rejects a wrong address kind or batch crossing from a
driver into a core, which it could not while those paths were typed ``Any``.

Each case is a small module checked by mypy (the project's configuration, the real
packages): the good one passes, each bad line is reported at its own line number.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from deliverykit.testing import in_ci

ROOT = Path(__file__).resolve().parent.parent

GOOD = """
from corecast.core.client import Client
from corecast.core.events import CorecastEvent
from corecast.core.itr import Itr
from corecast.core.mapcache import MapCache, MapEntry
from corecast.core.maptrie import PrefixTrie
from deliverykit.aio import BatchedUDPEndpoint, CoreDriver
from deliverykit.protocol import Address, SockAddr
from deliverykit.sim.network import Network
from deliverykit.sim.scenario import Scenario
from deliverykit.sim.scheduler import Scheduler
from m2c.core.stream import StreamReceiverCore


def good(ep: BatchedUDPEndpoint, drv: CoreDriver, net: Network, sched: Scheduler,
         itr: Itr, rx: StreamReceiverCore, mc: MapCache, entry: MapEntry,
         sc: Scenario, cl: Client) -> None:
    v6: SockAddr = ("::1", 4341, 0, 0)
    ep.sendto(b"x", ("127.0.0.1", 4341))
    ep.sendto(b"x", v6)
    here: Address = ep.local_addr
    drv.on_batch([(b"x", here), (b"y", here, None)], 0.0)
    net.send("a", b"x", ("10.0.0.1", 4341))
    sched.at(1.0, net.send, "a", b"x", ("10.0.0.1", 4341))
    itr.handle_batch([b"packet"], 0.0)
    itr.handle_batch([(b"packet", ("127.0.0.1", 1))], 0.0, l2=14)
    rx.datagram_received(b"x", ("239.1.1.1", 5000), 0.0)
    trie: PrefixTrie[int] = PrefixTrie()
    trie.insert(b"\\x0a\\x00\\x00\\x00", 8, 1)
    hit = trie.lookup(b"\\x0a\\x00\\x00\\x01")
    plen_value: tuple[int, int] | None = hit
    mc.update(entry, down=frozenset({b"\\x0a\\x00\\x00\\x01"}), lisp_header=None)
    sc = sc.replace(duration=60.0, name="short")
    lost: int = cl.stats()["lost"]
    jitter: float = cl.stats()["jitter_ms"]
    event: CorecastEvent | None = itr.next_event()
"""

#: (a line that must be refused, what mypy's message says about it)
BAD = [
    ('ep.sendto(b"x", "127.0.0.1:4341")', "sendto"),
    ('ep.sendto(b"x", ("127.0.0.1", "4341"))', "sendto"),
    ('net.send("a", b"x", "10.0.0.1")', "send"),
    ('sched.at(1.0, net.send, "a", "10.0.0.1", b"x")', '"at" of "Scheduler"'),
    ('drv.on_batch([(b"x", "127.0.0.1")], 0.0)', "tuple[bytes, str]"),
    ('itr.handle_batch(["packet"], 0.0)', "handle_batch"),
    ('rx.datagram_received(b"x", "239.1.1.1", 0.0)', "datagram_received"),
    ('trie.insert(b"\\x0a\\x00\\x00\\x00", 8, "one")', "insert"),
    ('wrong: tuple[int, str] | None = trie.lookup(b"\\x0a\\x00\\x00\\x01")', "assignment"),
    ('mc.update(entry, down={b"\\x0a\\x00\\x00\\x01"})', "update"),
    ('mc.update(entry, lisp_hdr=b"")', "lisp_hdr"),
    ('sc.replace(duration="60")', "replace"),
    ('name: str = cl.stats()["lost"]', "assignment"),
    ('cl.stats()["lots"]', "lots"),
]


def _mypy(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec("mypy") is None:
        missing = "mypy is not installed (`make lint` installs it)"
        if in_ci():
            pytest.fail(missing)
        pytest.skip(missing)
    src = tmp_path / "typed_case.py"
    src.write_text(body)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(tmp_path / "cache"), "--no-error-summary", "--hide-error-context",
         str(src)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )


def _errors(out: str) -> dict[int, str]:
    found: dict[int, str] = {}
    for m in re.finditer(r"typed_case\.py:(\d+): error: (.*)", out):
        found.setdefault(int(m.group(1)), m.group(2))
    return found


def test_addresses_batches_and_results_are_checked(tmp_path: Path) -> None:
    """The good module passes; each bad line (appended to it) is reported, at its line."""
    good = textwrap.dedent(GOOD)
    first = len(good.splitlines()) + 1
    bad = "".join(f"    {line}\n" for line, _ in BAD)
    res = _mypy(tmp_path, good + bad)
    errors = _errors(res.stdout)
    assert not [n for n in errors if n < first], res.stdout  # the good part passes
    missed = [line for k, (line, _) in enumerate(BAD) if first + k not in errors]
    assert missed == [], f"mypy let these through:\n{res.stdout}"
    for k, (_, word) in enumerate(BAD):
        assert word in errors[first + k], errors[first + k]
