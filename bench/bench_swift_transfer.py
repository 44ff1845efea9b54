"""Loopback transfer, one seeder -> one leecher: our PPSPP peer vs libtorrent and libswift.

Our seeder runs as a ``ppspp seed`` subprocess and the leecher in this
process (one process per peer, as deployed); libtorrent runs both sessions
in this process with its own threads.  "CPU s" is both ends together.  Hashing
before the transfer is excluded for all (libtorrent seeds in seed_mode; our
seeder and libswift's hash before they print the root hash).

libswift (the C++ reference peer) runs live when ``LIBSWIFT_BIN`` names its
``swift`` binary: libswift seeder -> libswift leecher, and beside it ours as two
``ppspp seed``/``ppspp download --profile libswift --hash sha1`` processes, each
pair in a fresh temporary directory and timed alike: from the leecher's start
until its output file is complete (full size, no holes), then checked against
the source's SHA-1 (libswift's leecher exits only on its 1 s report tick, so
its exit is not the end of the transfer).  Without ``LIBSWIFT_BIN`` the
libswift figures of the issue (14-25 MB/s at 1 KiB, ~70 MB/s at 8 KiB) are
printed as reference figures with that source.  All subjects repeat
interleaved.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from bench.harness import Figure, Reference, interleaved, measured, referenced

LIBSWIFT_SOURCE = ("libswift C++ peer, seeder -> leecher on loopback, as quoted in the PPSPP "
                   "issue: 14-25 MB/s at 1 KiB chunks (top of the range), ~70 MB/s at 8 KiB")
LIBSWIFT = {1024: Reference(25.0, "MB/s", LIBSWIFT_SOURCE),
            8192: Reference(70.0, "MB/s", LIBSWIFT_SOURCE)}


def _ours(src: str, dst: str, cs: int) -> dict:
    """Seeder in a subprocess (``ppspp seed``), leecher here: one process per peer."""
    from swift.aio.node import downloader, tree_for_file
    from swift.core.peer import PeerConfig

    tree_for_file(src, chunk_size=cs)  # hash before timing, as libtorrent's seed_mode
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    seed = subprocess.Popen([sys.executable, "-m", "swift", "seed", src, "--host", "127.0.0.1",
                             "--port", "0", "--chunk-size", str(cs), "--duration", "900"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert seed.stdout is not None and seed.stderr is not None
    try:
        root = bytes.fromhex(seed.stdout.readline().strip())
        port = int(seed.stderr.readline().strip().rsplit(":", 1)[1])

        async def go() -> dict:
            async with downloader(root, dst, PeerConfig(chunk_size=cs)) as l:
                t0, c0 = time.perf_counter(), time.process_time()
                l.connect(("127.0.0.1", port))
                ok = await l.wait_complete(600)
                return {"ok": ok, "s": time.perf_counter() - t0, "cpu": time.process_time() - c0}

        r = asyncio.run(go())
    finally:
        seed.terminate()
        seed.wait(30)
        seed.stdout.close()
        seed.stderr.close()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # seeder CPU includes its start-up (loading the .mhash), a small constant
    r["cpu"] += (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return r


def _ours_fresh(src: str, work: str, cs: int) -> dict:
    """One repeat of ours into a fresh destination (a leftover file would be resumed)."""
    d = tempfile.mkdtemp(dir=work, prefix=f"ours-{cs}-")
    try:
        return _ours(src, os.path.join(d, "out.bin"), cs)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _in_memory(n: int, cs: int) -> dict:
    """CPU per chunk of each end without sockets: the sans-IO seeder and leecher
    handed each other's datagrams in one process (what the Python code costs,
    apart from system calls and the event loop)."""
    from swift.core.content import Content, MemoryStorage
    from swift.core.merkle import MerkleTree
    from swift.core.peer import Peer, PeerConfig

    data = os.urandom(n * cs)
    tree = MerkleTree.build([data[i:i + cs] for i in range(0, len(data), cs)], chunk_size=cs)
    s = Peer(Content.seeded(tree, MemoryStorage(data)), PeerConfig(chunk_size=cs, seed=1))
    l = Peer(Content(MerkleTree.for_root(tree.root_hash, chunk_size=cs), MemoryStorage()),
             PeerConfig(chunk_size=cs, seed=2))
    sa, la = ("10.0.0.1", 1), ("10.0.0.2", 2)
    now = 1000.0
    l.connect(sa, now)
    ts = tl = 0.0
    clock = time.process_time
    for step in range(100 * n):
        if l.content.complete:
            break
        now += 0.0005
        t0 = clock()
        out = s.datagrams_to_send(now, budget=64)
        t1 = clock()
        for d, _ in out:
            l.datagram_received(d, sa, now)
        back = l.datagrams_to_send(now, budget=64)
        while l.next_event() is not None:
            pass
        t2 = clock()
        for d, _ in back:
            s.datagram_received(d, la, now)
        t3 = clock()
        ts += (t1 - t0) + (t3 - t2)
        tl += t2 - t1
        if step % 100 == 0:
            s.handle_timer(now)
            l.handle_timer(now)
    ok = l.content.complete and bytes(l.content.storage.buf[:len(data)]) == data
    return {"ok": ok, "seeder_us": ts / n * 1e6, "leecher_us": tl / n * 1e6}


def _libtorrent(src: str, workdir: str, utp: bool) -> dict:
    import libtorrent as lt

    t = lt.create_torrent(lt.list_files(src), piece_size=256 * 1024)
    lt.set_piece_hashes(t, os.path.dirname(src))
    ti = lt.torrent_info(t.generate())
    base = {"listen_interfaces": "127.0.0.1:0", "enable_dht": False, "enable_lsd": False,
            "enable_upnp": False, "enable_natpmp": False, "alert_mask": 0,
            "allow_multiple_connections_per_ip": True,
            "enable_outgoing_utp": utp, "enable_incoming_utp": utp,
            "enable_outgoing_tcp": not utp, "enable_incoming_tcp": not utp}
    seed = lt.session(base)  # type: ignore[call-overload]
    leech = lt.session(base)  # type: ignore[call-overload]
    seed.add_torrent({"ti": ti, "save_path": os.path.dirname(src),
                      "flags": lt.torrent_flags.seed_mode})
    dst = tempfile.mkdtemp(dir=workdir, prefix="lt-utp-" if utp else "lt-tcp-")  # fresh each repeat
    h = leech.add_torrent({"ti": lt.torrent_info(t.generate()), "save_path": dst})
    t0, c0 = time.perf_counter(), time.process_time()
    h.connect_peer(("127.0.0.1", seed.listen_port()))
    ok = False
    while time.perf_counter() - t0 < 600:
        st = h.status()
        if st.is_seeding or st.progress >= 1.0:
            ok = True
            break
        if st.num_peers == 0 and time.perf_counter() - t0 > 2:
            h.connect_peer(("127.0.0.1", seed.listen_port()))
        time.sleep(0.01)
    el, cpu = time.perf_counter() - t0, time.process_time() - c0
    del seed, leech
    shutil.rmtree(dst, ignore_errors=True)
    return {"ok": ok, "s": el, "cpu": cpu}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


def _complete(path: Path, size: int) -> bool:
    """Full size and no holes (libswift preallocates a sparse file of the full size)."""
    try:
        if path.stat().st_size != size:
            return False
        fd = os.open(path, os.O_RDONLY)
        try:
            return os.lseek(fd, 0, os.SEEK_HOLE) >= size
        finally:
            os.close(fd)
    except OSError:
        return False


def _sha1(path: Path) -> str:
    h = hashlib.sha1()
    with path.open("rb") as f:
        while b := f.read(1 << 20):
            h.update(b)
    return h.hexdigest()


def _cli_pair(libswift: str | None, src: str, want_sha1: str, work: str, cs: int) -> dict:
    """One transfer between two processes: libswift -> libswift when ``libswift`` is its
    binary, else ppspp seed -> ppspp download with --profile libswift --hash sha1.
    Timed from the leecher's start to its file complete; then checked by SHA-1."""
    d = Path(tempfile.mkdtemp(dir=work, prefix="pair-"))
    (d / "s").mkdir()
    (d / "l").mkdir()
    os.link(src, d / "s" / "c.bin")
    size = os.path.getsize(src)
    port, lport = _free_port(), _free_port()
    ours = [sys.executable, "-m", "swift"]
    prof = ["--chunk-size", str(cs), "--profile", "libswift", "--hash", "sha1"]
    if libswift:
        scmd = [libswift, "-f", "c.bin", "-l", f"127.0.0.1:{port}", "-z", str(cs)]
        ready = re.compile(r"Root hash: ([0-9a-f]{40})")
    else:
        scmd = ours + ["seed", "c.bin", "--host", "127.0.0.1", "--port", str(port),
                       "--duration", "900"] + prof
        ready = re.compile(r"^([0-9a-f]{40})\n(?:.*\n)*seeding ", re.M)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    procs: list[subprocess.Popen] = []
    try:
        with (d / "seed.log").open("w") as log:
            procs.append(subprocess.Popen(scmd, cwd=d / "s", stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL))
        deadline = time.monotonic() + 600
        m = None
        while m is None:
            if procs[0].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"seeder {scmd[0]} did not start: "
                                   f"{(d / 'seed.log').read_text()[-300:]!r}")
            time.sleep(0.05)
            m = ready.search((d / "seed.log").read_text())
        root = m.group(1)
        if libswift:
            lcmd = [libswift, "-t", f"127.0.0.1:{port}", "-h", root, "-l",
                    f"127.0.0.1:{lport}", "-w", "0s", "-z", str(cs)]
            out = d / "l" / root
        else:
            lcmd = ours + ["download", root, "--peer", f"127.0.0.1:{port}", "-o", "out.bin",
                           "-q", "--timeout", "600", "--host", "127.0.0.1"] + prof
            out = d / "l" / "out.bin"
        t0 = time.perf_counter()
        with (d / "leech.log").open("w") as log:
            procs.append(subprocess.Popen(lcmd, cwd=d / "l", stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL))
        ok, el = False, 0.0
        while time.perf_counter() - t0 < 600:
            if _complete(out, size):
                el = time.perf_counter() - t0
                ok = _sha1(out) == want_sha1
                if ok:
                    break
            elif procs[1].poll() is not None and not _complete(out, size):
                break  # the leecher gave up with the file incomplete
            time.sleep(0.02)
        if not ok:
            raise RuntimeError(f"{lcmd[0]} leecher: transfer incomplete or wrong: "
                               f"{(d / 'leech.log').read_text()[-300:]!r}")
    finally:
        for p in reversed(procs):
            _stop(p)
        shutil.rmtree(d, ignore_errors=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"ok": ok, "s": el, "cpu": cpu}


def run(quick: bool) -> dict:
    size = (4 if quick else 200) * 1024 * 1024
    repeats = 2 if quick else 3
    libswift = os.environ.get("LIBSWIFT_BIN", "")
    if libswift and not os.access(libswift, os.X_OK):
        raise SystemExit(f"LIBSWIFT_BIN={libswift}: not an executable file")
    work = tempfile.mkdtemp(prefix="bench-swift-")
    mb = size / 1e6
    notes: list[str] = []
    subjects: dict[str, Callable[[], dict]] = {}
    try:
        src = os.path.join(work, "content.bin")
        with open(src, "wb") as f:
            for _ in range(size // (1 << 20)):
                f.write(os.urandom(1 << 20))
        want = _sha1(Path(src))
        for cs in (1024, 8192):
            subjects[f"swift/ppspp (Python, UDP) {cs // 1024} KiB chunks"] = partial(_ours_fresh, src, work, cs)
            if libswift:
                subjects[f"libswift (C++) {cs // 1024} KiB chunks"] = partial(
                    _cli_pair, libswift, src, want, work, cs)
                subjects[f"ppspp seed/download --profile libswift --hash sha1, {cs // 1024} KiB"] = partial(
                    _cli_pair, None, src, want, work, cs)
        try:
            import libtorrent  # noqa: F401
            for utp in (False, True):
                subjects[f"libtorrent {'uTP' if utp else 'TCP'} (C++)"] = partial(
                    _libtorrent, src, work, utp)
        except ImportError as exc:
            notes.append(f"libtorrent not measured: {exc}")
        samples = interleaved(subjects, repeats)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows: list[dict] = []
    mbps: dict[str, list[float]] = {}
    for name, ss in samples.items():
        mbps[name] = [mb / s["s"] for s in ss]
        rows.append({"subject": name, "MB": round(mb, 1), "ok": all(s["ok"] for s in ss),
                     "MB/s": Figure.of(mbps[name]), "CPU s": Figure.of(s["cpu"] for s in ss)})
    # peak RSS of the transfers, read before the in-memory run below (which
    # holds its 20 MB content three times)
    self_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    seeder_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    mem = interleaved({c: partial(_in_memory, 20 * 1024 * 1024 // c, c) for c in (1024, 8192)},
                      repeats)
    for cs, ss in mem.items():
        rows.append({"subject": f"swift/ppspp in memory (no sockets), 20 MB, {cs // 1024} KiB chunks",
                     "ok": all(s["ok"] for s in ss),
                     "seeder CPU us/chunk": Figure.of(s["seeder_us"] for s in ss),
                     "leecher CPU us/chunk": Figure.of(s["leecher_us"] for s in ss)})
    comps = []
    for cs in (1024, 8192):
        ours = f"swift/ppspp (Python, UDP) {cs // 1024} KiB chunks"
        for lt in ("libtorrent TCP (C++)", "libtorrent uTP (C++)"):
            if lt in mbps:
                comps.append(measured(f"ours {cs // 1024} KiB / {lt}", mbps[ours], mbps[lt],
                                      anchor=lt, unit="MB/s"))
        if libswift:
            ls = f"libswift (C++) {cs // 1024} KiB chunks"
            ours_cli = f"ppspp seed/download --profile libswift --hash sha1, {cs // 1024} KiB"
            comps.append(measured(f"ours {cs // 1024} KiB / libswift {cs // 1024} KiB",
                                  mbps[ours_cli], mbps[ls], anchor=ls, unit="MB/s",
                                  target=">= 1"))
        else:
            comps.append(referenced(f"ours {cs // 1024} KiB / libswift {cs // 1024} KiB",
                                    mbps[ours], LIBSWIFT[cs], anchor=f"libswift {cs // 1024} KiB",
                                    target=">= 1"))
    notes += [
        ("libswift measured in this run (LIBSWIFT_BIN): libswift -> libswift and ours -> ours "
         "as two processes each, timed to the leecher's file being complete (includes our "
         "leecher's interpreter start-up, ~0.3 s)") if libswift else
        ("libswift not run (set LIBSWIFT_BIN to its swift binary): its figures are the issue's, "
         "labelled reference"),
        f"max RSS: benchmark process (our leecher, libtorrent) {self_rss:.0f} MB, largest "
        f"child process (seeders) {seeder_rss:.0f} MB (content is never buffered whole)",
        "in memory: sans-IO seeder and leecher in one process, each handed the other's "
        "datagrams; CPU per chunk of each end without system calls or event loop",
    ]
    return {
        "title": f"PPSPP loopback transfer, {mb:.0f} MB, 1 seeder -> 1 leecher",
        "rows": rows,
        "comparisons": comps,
        "repeats": repeats,
        "notes": notes,
    }
