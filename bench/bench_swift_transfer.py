"""Loopback transfer, one seeder -> one leecher: our PPSPP peer vs libtorrent and libswift.

Our seeder runs as a ``ppspp seed`` subprocess and the leecher in this
process (one process per peer, as deployed); libtorrent runs both sessions
in this process with its own threads.  "CPU s" is both ends together.  Hashing
before the transfer is excluded for all (libtorrent seeds in seed_mode; our
seeder and libswift's hash before they print the root hash).

libswift (the C++ reference peer) runs live when ``LIBSWIFT_BIN`` names its
``swift`` binary: libswift seeder -> libswift leecher, **our seeder (``ppspp
seed --profile libswift --hash sha1``) -> libswift leecher** (issue 15: the
target is >= 0.8x libswift -> libswift at 1 KiB and 8 KiB, no stall over
0.5 s), and ours -> ours as two ``ppspp seed``/``ppspp download`` processes,
each pair in a fresh temporary directory and timed alike: from the leecher's
start until its output file is complete (full size, no holes), then checked
against the source's SHA-1 (libswift's leecher exits only on its 1 s report
tick, so its exit is not the end of the transfer).  A libswift leecher
writes each chunk into its preallocated sparse file as it arrives, so "max
stall s" is the longest time the file's allocated size did not grow (polled
every 20 ms; 4 KiB blocks: at 1 KiB chunks it moves every fourth chunk).  Without ``LIBSWIFT_BIN``
the libswift figures of the issues are printed as reference figures with
their source.  All subjects repeat interleaved.

``BENCH_SWIFT_MB`` sets the size (MiB; default 200, quick 4) and
``BENCH_SWIFT_ARMS`` a comma list of the arms to run (``ours``: in-process
leecher, ``libswift``: the process pairs above, ``libtorrent``, ``memory``;
default all), e.g. ``LIBSWIFT_BIN=... BENCH_SWIFT_MB=50 BENCH_SWIFT_ARMS=libswift
python -m bench.harness swift_transfer`` for the libswift arms alone.
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
#: issue 15 (100 MiB on loopback, interleaved, medians; MiB/s as quoted there)
ISSUE15 = ("issue 15, 100 MiB loopback, interleaved medians: libswift -> libswift 26.0 MiB/s "
           "at 1 KiB, 51.8 at 8 KiB; our seeder -> libswift leecher 7.3 at 1 KiB, 54 at 8 KiB "
           "(runs as low as 8.7)")


#: subject names ({} = "1 KiB" / "8 KiB")
_OURS = "swift/ppspp (Python, UDP) {} chunks"
_LS = "libswift (C++) {} chunks"
_OURS_LS = "ppspp seed --profile libswift -> libswift leecher, {}"
_OURS_CLI = "ppspp seed/download --profile libswift --hash sha1, {}"
#: what BENCH_SWIFT_ARMS may name
ARMS = {"ours", "libswift", "libtorrent", "memory"}


def _ours(src: str, dst: str, cs: int) -> dict:
    """Seeder in a subprocess (``ppspp seed``), leecher here: one process per peer."""
    from swift.aio.node import downloader, tree_for_file
    from swift.core.config import PeerConfig

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
            async with downloader(root, dst, PeerConfig(chunk_size=cs)) as leech:
                t0, c0 = time.perf_counter(), time.process_time()
                leech.connect(("127.0.0.1", port))
                ok = await leech.wait_complete(600)
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
    from swift.core.config import PeerConfig
    from swift.core.content import Content, MemoryStorage
    from swift.core.merkle import MerkleTree
    from swift.core.peer import Peer

    data = os.urandom(n * cs)
    tree = MerkleTree.build([data[i:i + cs] for i in range(0, len(data), cs)], chunk_size=cs)
    s = Peer(Content.seeded(tree, MemoryStorage(data)), PeerConfig(chunk_size=cs, seed=1))
    leech = Peer(Content(MerkleTree.for_root(tree.root_hash, chunk_size=cs), MemoryStorage()),
                 PeerConfig(chunk_size=cs, seed=2))
    sa, la = ("10.0.0.1", 1), ("10.0.0.2", 2)
    now = 1000.0
    leech.connect(sa, now)
    ts = tl = 0.0
    clock = time.process_time
    for step in range(100 * n):
        if leech.content.complete:
            break
        now += 0.0005
        t0 = clock()
        out = s.datagrams_to_send(now, budget=64)
        t1 = clock()
        for d, _ in out:
            leech.datagram_received(d, sa, now)
        back = leech.datagrams_to_send(now, budget=64)
        while leech.next_event() is not None:
            pass
        t2 = clock()
        for d, _ in back:
            s.datagram_received(d, la, now)
        t3 = clock()
        ts += (t1 - t0) + (t3 - t2)
        tl += t2 - t1
        if step % 100 == 0:
            s.handle_timer(now)
            leech.handle_timer(now)
    got = leech.content
    assert isinstance(got, Content) and isinstance(got.storage, MemoryStorage)
    ok = got.complete and bytes(got.storage.buf[:len(data)]) == data
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
    seed = lt.session(base)  # type: ignore[call-overload]  # libtorrent's stubs lack dict settings
    leech = lt.session(base)  # type: ignore[call-overload]  # libtorrent's stubs lack dict settings
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
    return _first_hole(path, size) >= size


def _first_hole(path: Path, size: int) -> int:
    """Offset of the file's first hole (its size if none; -1 while it is not
    there or not yet of full size)."""
    try:
        if path.stat().st_size != size:
            return -1
        fd = os.open(path, os.O_RDONLY)
        try:
            return os.lseek(fd, 0, os.SEEK_HOLE)
        finally:
            os.close(fd)
    except OSError:
        return -1


def _allocated(path: Path) -> int:
    """Bytes the file holds on disk (-1 while it is not there): a sparse
    file's grow as chunks are written, wherever they land."""
    try:
        return path.stat().st_blocks * 512
    except OSError:
        return -1


def _sha1(path: Path) -> str:
    h = hashlib.sha1()
    with path.open("rb") as f:
        while b := f.read(1 << 20):
            h.update(b)
    return h.hexdigest()


def _cli_pair(seeder: str | None, leecher: str | None, src: str, want_sha1: str, work: str,
              cs: int) -> dict:
    """One transfer between two processes; each end is libswift when given its binary,
    else ours (ppspp seed / ppspp download with --profile libswift --hash sha1).
    Timed from the leecher's start to its file complete; then checked by SHA-1."""
    d = Path(tempfile.mkdtemp(dir=work, prefix="pair-"))
    (d / "s").mkdir()
    (d / "l").mkdir()
    os.link(src, d / "s" / "c.bin")
    size = os.path.getsize(src)
    port, lport = _free_port(), _free_port()
    ours = [sys.executable, "-m", "swift"]
    prof = ["--chunk-size", str(cs), "--profile", "libswift", "--hash", "sha1"]
    if seeder:
        scmd = [seeder, "-f", "c.bin", "-l", f"127.0.0.1:{port}", "-z", str(cs)]
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
        if leecher:
            lcmd = [leecher, "-t", f"127.0.0.1:{port}", "-h", root, "-l",
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
        held, moved, stall = -1, t0, 0.0
        while time.perf_counter() - t0 < 600:
            h = _first_hole(out, size)
            now = time.perf_counter()
            b = _allocated(out)  # grows with every chunk written, in any order
            if b != held:
                stall = max(stall, now - moved) if held > 0 else stall
                held, moved = b, now
            if h >= size:
                el = now - t0
                ok = _sha1(out) == want_sha1
                if ok:
                    break
            elif procs[1].poll() is not None and _first_hole(out, size) < size:
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
    # stalls are seen only where the file is preallocated (a libswift leecher)
    return {"ok": ok, "s": el, "cpu": cpu, "stall": stall if leecher else None}


def run(quick: bool) -> dict:
    try:
        size = int(os.environ.get("BENCH_SWIFT_MB") or (4 if quick else 200)) * 1024 * 1024
    except ValueError:
        raise SystemExit("BENCH_SWIFT_MB: a whole number of MiB") from None
    arms = set((os.environ.get("BENCH_SWIFT_ARMS") or "ours,libswift,libtorrent,memory")
               .replace(" ", "").split(","))
    if arms - ARMS or size <= 0:
        raise SystemExit(f"BENCH_SWIFT_ARMS: a comma list of {', '.join(sorted(ARMS))}; "
                         "BENCH_SWIFT_MB > 0")
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
            k = f"{cs // 1024} KiB"
            if "ours" in arms:
                subjects[_OURS.format(k)] = partial(_ours_fresh, src, work, cs)
            if libswift and "libswift" in arms:
                subjects[_LS.format(k)] = partial(_cli_pair, libswift, libswift, src, want, work,
                                                  cs)
                subjects[_OURS_LS.format(k)] = partial(_cli_pair, None, libswift, src, want, work,
                                                       cs)
                subjects[_OURS_CLI.format(k)] = partial(_cli_pair, None, None, src, want, work, cs)
        if "libtorrent" in arms:
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
        row = {"subject": name, "MB": round(mb, 1), "ok": all(s["ok"] for s in ss),
               "MB/s": Figure.of(mbps[name]), "CPU s": Figure.of(s["cpu"] for s in ss)}
        if ss and ss[0].get("stall") is not None:
            row["max stall s"] = Figure.of(s["stall"] for s in ss)
        rows.append(row)
    # peak RSS of the transfers, read before the in-memory run below (which
    # holds its 20 MB content three times)
    self_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    seeder_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if "memory" in arms:
        mem = interleaved({c: partial(_in_memory, 20 * 1024 * 1024 // c, c) for c in (1024, 8192)},
                          repeats)
        for cs, ss in mem.items():
            what = f"swift/ppspp in memory (no sockets), 20 MB, {cs // 1024} KiB chunks"
            rows.append({"subject": what,
                         "ok": all(s["ok"] for s in ss),
                         "seeder CPU us/chunk": Figure.of(s["seeder_us"] for s in ss),
                         "leecher CPU us/chunk": Figure.of(s["leecher_us"] for s in ss)})
    comps = []
    for cs in (1024, 8192):
        k = f"{cs // 1024} KiB"
        ours = _OURS.format(k)
        for lt in ("libtorrent TCP (C++)", "libtorrent uTP (C++)"):
            if lt in mbps and ours in mbps:
                comps.append(measured(f"ours {k} / {lt}", mbps[ours], mbps[lt],
                                      anchor=lt, unit="MB/s"))
        if _LS.format(k) in mbps:
            ls = _LS.format(k)
            comps.append(measured(f"our seeder -> libswift leecher / libswift -> libswift, {k}",
                                  mbps[_OURS_LS.format(k)], mbps[ls], anchor=ls, unit="MB/s",
                                  target=">= 0.8"))
            comps.append(measured(f"ours -> ours / libswift -> libswift, {k}",
                                  mbps[_OURS_CLI.format(k)], mbps[ls], anchor=ls, unit="MB/s",
                                  target=">= 1"))
        elif ours in mbps:
            comps.append(referenced(f"ours {k} / libswift {k}", mbps[ours], LIBSWIFT[cs],
                                    anchor=f"libswift {k}", target=">= 1"))
    notes += [
        ("libswift measured in this run (LIBSWIFT_BIN): libswift -> libswift, our seeder -> "
         "libswift leecher and ours -> ours as two processes each, timed to the leecher's file "
         "being complete (includes our leecher's interpreter start-up, ~0.3 s); max stall: "
         "the longest time the libswift leecher's file did not grow on disk "
         "(polled every 20 ms)") if libswift else
        ("libswift not run (set LIBSWIFT_BIN to its swift binary): its figures are the issue's, "
         f"labelled reference; the arm our seeder -> libswift leecher needs it ({ISSUE15})"),
        f"max RSS: benchmark process (our leecher, libtorrent) {self_rss:.0f} MB, largest "
        f"child process (seeders) {seeder_rss:.0f} MB (content is never buffered whole)",
    ]
    if "memory" in arms:
        notes.append("in memory: sans-IO seeder and leecher in one process, each handed the "
                     "other's datagrams; CPU per chunk of each end without system calls or "
                     "event loop")
    return {
        "title": f"PPSPP loopback transfer, {mb:.0f} MB, 1 seeder -> 1 leecher",
        "rows": rows,
        "comparisons": comps,
        "repeats": repeats,
        "notes": notes,
    }
