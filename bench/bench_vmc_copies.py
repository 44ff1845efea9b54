"""VMC at its default settings: origin copies, peak RSS and disk use against Varnish and Squid
(issue 19 item 1).

N curl clients fetch one object, client i starting at ``i * stagger`` s, from our
origin paced 5 MB/s per connection (a subprocess). Arms, interleaved in one run,
each repeat with a fresh proxy/cache and a new object:

- ``vmc defaults``: ``vmc proxy`` as a user runs it (8 MiB window, disk store
  with its default 1 GiB budget): a late joiner's prefix that left the window
  is read from the disk store;
- ``vmc, no disk store``: ``--disk-budget 0``, the behaviour before the store
  (late joiners past the window fetch their prefix from the origin by Range);
- Varnish with file storage (``-s file``): the storage file's blocks on disk
  are its disk use;
- Squid (``collapsed_forwarding``, memory cache: no ``cache_dir``, no disk);
- on a machine with several cores, ``vmc --workers N`` (one per core: each connection is
  handed to the worker that owns its object) and ``vmc --workers N --no-steer`` (served where
  the kernel put it: a late client on another worker cannot join, and fetches again).

Per arm: origin copies (origin body bytes / object size), origin GETs and Range
GETs, completion and first byte, the process family's peak RSS and its growth,
and the disk used: ours is the store's peak reservation as the proxy reported
it (``/_vmc/status`` -> ``disk``), Varnish's the storage file's allocated blocks.

``--quick``: 4 clients x 4 MiB with ``--window 1MiB`` for both vmc arms (the
default window would hold a 4 MiB object whole and the disk store would never be
read); it proves the benchmark runs, its figures are not quoted.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import urllib.request
from collections.abc import Callable
from functools import partial
from pathlib import Path

from bench.bench_vmc import PY, _clients, _merge, _Proc, _row, cache_usable
from bench.harness import Figure, interleaved, measured
from vmc.caches import Squid, Varnish

REQUIRES = {"tools": ["curl"]}

DEFAULT_WINDOW = 8 << 20  # vmc.aio.config.ProxyConfig.window


def _arm_vmc(origin: str, n: int, stagger: float, size: int, extra: list[str], path: str) -> dict:
    """One repeat through a fresh ``vmc proxy`` whose final status JSON gives its disk figures."""
    with tempfile.TemporaryDirectory(prefix="vmc-bench-copies-") as d:
        stats = Path(d) / "status.json"
        spill = Path(d) / "spill"
        spill.mkdir()
        px = _Proc(
            PY
            + [
                "proxy",
                "--listen",
                "127.0.0.1:0",
                "--upstream",
                origin,
                "--stats-out",
                str(stats),
                "--disk-dir",
                str(spill),
                *extra,
            ]
        )
        try:
            url = f"http://{origin}{path}"
            row = _row(
                "",
                origin,
                size,
                lambda: _clients(url, px.authority, n, stagger, False, path, size),
                px.pid,
                n,
            )
        finally:
            px.stop()  # SIGTERM: the proxy writes its status file and closes the store
        # one status file, or with --workers one per worker (STATS.w0, STATS.w1, ...)
        files = [stats] if stats.exists() else sorted(Path(d).glob("status.json.w*"))
        disks = [json.loads(f.read_text()).get("disk") or {} for f in files]
        row["disk MB"] = round(sum(k.get("peak_reserved", 0) for k in disks) / 1e6, 2)
        row["disk read MB"] = round(sum(k.get("read_bytes", 0) for k in disks) / 1e6, 2)
        row["files left after exit"] = len(os.listdir(spill))
        return row


def _arm_varnish_file(origin: str, n: int, stagger: float, size: int, path: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="vmc-bench-varnish-") as d:
        os.chmod(d, 0o755)
        store = Path(d) / "storage.bin"
        cache = Varnish.accelerator(origin, storage=f"file,{store},{max(4 * size, 256 << 20)}")
        cache.start()
        try:
            url = f"http://{cache.authority}{path}"
            row = _row(
                "",
                origin,
                size,
                lambda: _clients(url, None, n, stagger, False, path, size),
                cache.pid,
                n,
            )
            row["disk MB"] = (
                round(store.stat().st_blocks * 512 / 1e6, 2) if store.exists() else None
            )
        finally:
            cache.stop()
        row["disk read MB"] = None
        row["files left after exit"] = None
        return row


def _arm_squid(origin: str, n: int, stagger: float, size: int, path: str) -> dict:
    cache = Squid.accelerator(origin, mem_mb=max(256, 2 * size >> 20))
    cache.start()
    try:
        url = f"http://{cache.authority}{path}"
        row = _row(
            "",
            origin,
            size,
            lambda: _clients(url, None, n, stagger, False, path, size),
            cache.pid,
            n,
        )
    finally:
        cache.stop()
    row["disk MB"] = 0.0  # memory cache only (no cache_dir)
    row["disk read MB"] = None
    row["files left after exit"] = None
    return row


def run(quick: bool) -> dict:
    n = 4 if quick else 20
    size = (4 << 20) if quick else (50 << 20)
    stagger = 0.2 if quick else 0.5
    repeats = 2 if quick else 3
    rate = 5e6
    cores = os.cpu_count() or 1  # with several: the --workers arms
    window_args = ["--window", "1MiB"] if quick else []
    window = (1 << 20) if quick else DEFAULT_WINDOW
    notes: list[str] = []
    origin = _Proc(PY + ["origin", "--listen", "127.0.0.1:0", "--rate", str(rate)])
    paths = iter(f"/copies-{i}.bin?size={size}" for i in range(10_000))
    try:
        o = origin.authority
        arms: dict[str, Callable[[str], dict]] = {
            "vmc defaults": partial(_arm_vmc, o, n, stagger, size, window_args),
            "vmc, no disk store": partial(
                _arm_vmc, o, n, stagger, size, [*window_args, "--disk-budget", "0"]
            ),
        }
        if cores > 1:
            arms[f"vmc --workers {cores}"] = partial(
                _arm_vmc, o, n, stagger, size, [*window_args, "--workers", str(cores)])
            arms[f"vmc --workers {cores} --no-steer"] = partial(
                _arm_vmc, o, n, stagger, size,
                [*window_args, "--workers", str(cores), "--no-steer"])
        if shutil.which("varnishd") and cache_usable(
            "varnish", partial(Varnish.accelerator, o), notes
        ):
            arms["varnish (file storage)"] = partial(_arm_varnish_file, o, n, stagger, size)
        if shutil.which("squid") and cache_usable("squid", partial(Squid.accelerator, o), notes):
            arms["squid collapsed_forwarding"] = partial(_arm_squid, o, n, stagger, size)

        def fresh(arm: Callable[[str], dict]) -> Callable[[], dict]:
            def go() -> dict:  # a new object each time: no cache can serve a repeat warm
                path = next(paths)
                urllib.request.urlopen(urllib.request.Request(f"http://{o}{path}", method="HEAD"),
                                       timeout=60).close()
                return arm(path)
            return go

        samples = interleaved({name: fresh(arm) for name, arm in arms.items()}, repeats)
    finally:
        origin.stop()
    rows = [_merge(name, runs) for name, runs in samples.items()]
    ours = samples["vmc defaults"]
    comps = []
    ratios: dict[str, Figure] = {
        "vmc defaults: origin copies": Figure.of(r["copies"] for r in ours)
    }
    if all(r["proxy RSS growth MB"] is not None for r in ours):
        ratios["vmc defaults: RSS growth / window"] = Figure.of(
            r["proxy RSS growth MB"] / (window / 1e6) for r in ours)
    if cores > 1:  # the workers against one process: steering keeps one origin copy
        for arm, target in ((f"vmc --workers {cores}", "= 1 (one worker per object)"),
                            (f"vmc --workers {cores} --no-steer", "up to the workers (no target)")):
            comps.append(measured(f"{arm}/vmc defaults origin copies",
                                  [r["copies"] for r in samples[arm]],
                                  [r["copies"] for r in ours], anchor="vmc defaults",
                                  unit="copies", target=target))
    for anchor, target in (("varnish (file storage)", "1.00 +- 0.02 (issue 19: equal within 2%)"),
                           ("squid collapsed_forwarding", "about 1"),
                           ("vmc, no disk store", "< 1 (the store saves origin copies)")):
        a = samples.get(anchor)
        if not a:
            continue
        comps.append(
            measured(
                f"vmc defaults/{anchor} origin copies",
                [r["copies"] for r in ours],
                [r["copies"] for r in a],
                anchor=anchor,
                unit="copies",
                target=target,
            )
        )
        o_v, a_v = [r["proxy RSS growth MB"] for r in ours], [r["proxy RSS growth MB"] for r in a]
        if all(v is not None for v in o_v) and all(a_v):
            comps.append(
                measured(f"vmc defaults/{anchor} RSS growth", o_v, a_v, anchor=anchor, unit="MB")
            )
    notes += [
        (
            f"{n} curl clients, one {size / 2**20:.0f} MiB object, client i starts at {stagger} * "
            "i s, origin "
            f"paced {rate / 1e6:g} MB/s per connection (our origin, subprocess); loopback, 2 "
            "shared cores; every "
            f"arm {repeats} times interleaved, each time a fresh proxy/cache and a new object."
        ),
        f"vmc window {window >> 20} MiB"
        + (
            " (--quick: smaller than the default 8 MiB so the disk store is read)"
            if quick
            else " (the default)"
        )
        + "; disk budget 1 GiB (default).",
        (
            "disk MB: vmc = the store's peak reservation (Content-Length per object, /_vmc/status "
            "disk.peak_reserved); Varnish = allocated blocks of its -s file storage after the run "
            "(varnishd "
            "allocates the whole file, sized here at 4x the object or 256 MiB, up front); Squid "
            "runs a memory "
            "cache (0)."
        ),
        "files left after exit: names in the vmc store's directory after SIGTERM (its files are "
        "anonymous).",
        "Peak RSS includes the interpreter; 'RSS growth' is peak minus the RSS when the arm "
        "started.",
    ]
    return {
        "title": "VMC defaults: origin copies, memory and disk vs Varnish (file) and Squid",
        "rows": rows,
        "comparisons": comps,
        "ratios": ratios,
        "targets": {
            "vmc defaults: origin copies": "= Varnish's within 2% (about 1.0)",
            "vmc defaults: RSS growth / window": "bounded (about 1-3: the window plus queues)",
        },
        "repeats": repeats,
        "notes": notes,
    }
