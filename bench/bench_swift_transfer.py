"""Loopback transfer, one seeder -> one leecher: our PPSPP peer vs libtorrent and libswift.

Our seeder runs as a ``ppspp seed`` subprocess and the leecher in this
process (arm ``ours``: one process per peer, as deployed); libtorrent runs
both sessions in this process with its own threads.  "CPU s" is both ends
together.  Hashing before the transfer is excluded for all (libtorrent seeds
in seed_mode; our seeder and libswift's hash before they print the root).

libswift (the C++ reference peer) runs live when ``LIBSWIFT_BIN`` names its
``swift`` binary (arm ``libswift``), as four process pairs per chunk size,
**our side with no flags**, as a user runs it (``ppspp seed FILE``, plus
``--chunk-size 8192`` for an 8 KiB swarm, which is swarm metadata libswift
never sends; ``ppspp download ROOT --peer ADDR -o FILE``; a free loopback
port to serve on is the only other argument):

* libswift seeder -> libswift leecher (the anchor of every ratio);
* our seeder -> libswift leecher (given the SHA-1 root our seeder prints for
  libswift): issue 15 wants >= 0.8x libswift -> libswift and no stall over
  0.5 s, issue 17 >= 2x;
* libswift seeder -> our leecher (given libswift's 40-hex root; at 8 KiB it
  learns the chunk size from the first DATA and starts again once, inside
  the timing): issue 17 >= 2x;
* ours -> ours (the SHA-256 root ``ppspp seed`` prints first): issue 17 >= 2x;

and the peak RSS of each process against libswift's own pair (issue 17: <= 2x).
Each pair runs in a fresh temporary directory and is timed alike: from the
leecher's start until its output file is complete (full size, no holes; our
leecher renames ``out.bin.part`` to ``out.bin`` only then), then checked
against the source's SHA-1 (libswift's leecher exits only on its 1 s report
tick, so its exit is not the end of the transfer).  Each process's CPU is
its own (``os.wait4``; the seeder's counted from the leecher's start), its
peak RSS its ``VmHWM`` (a child's ``ru_maxrss`` starts at the forking
parent's).  "max stall s" is the longest time the leecher's file did not
grow on disk (polled every 20 ms; a libswift leecher writes each chunk
into a preallocated sparse file as it arrives; 4 KiB blocks: at 1 KiB chunks
it moves every fourth chunk).  Arm ``profile`` adds ours -> ours with
``--profile libswift --hash sha1`` on both sides (SHA-1, single-chunk ACKs:
our two peers speaking libswift's dialect), which says what the dialect
costs against the no-flag pair.  Without ``LIBSWIFT_BIN`` the libswift
figures of the issues are printed as reference figures with their source.
All subjects repeat interleaved.

``BENCH_SWIFT_MB`` sets the size (MiB; default 200, quick 4),
``BENCH_SWIFT_REPEATS`` the interleaved repeats (default 3, quick 2) and
``BENCH_SWIFT_ARMS`` a comma list of the arms to run (``ours``, ``libswift``,
``profile``, ``libtorrent``, ``memory``; default all but ``profile``), e.g.
``LIBSWIFT_BIN=... BENCH_SWIFT_MB=100 BENCH_SWIFT_ARMS=libswift python -m
bench.harness swift_transfer`` for the libswift pairs alone.
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
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
_LS = "libswift -> libswift, {}"
_OURS_LS = "our seeder (ppspp seed) -> libswift leecher, {}"
_LS_OURS = "libswift seeder -> our leecher (ppspp download), {}"
_OURS_OURS = "ours -> ours (ppspp seed / ppspp download), {}"
_PROFILE = "ours -> ours, --profile libswift --hash sha1, {}"
_FLOOR = "idle seeder of a 1 KiB file (the process floor), {}"
#: what BENCH_SWIFT_ARMS may name
ARMS = {"ours", "libswift", "profile", "libtorrent", "memory"}


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


class Impl(enum.Enum):
    """Who runs one end of a process pair."""

    LIBSWIFT = "libswift"
    OURS = "ours"


_IMPL_NAME = {Impl.OURS: "ppspp seed", Impl.LIBSWIFT: "libswift"}

@dataclass(frozen=True)
class Pair:
    """One arm of the process pairs: who seeds, who leeches, and our side's flags
    (none, as a user runs it; ``profile``: ``--profile libswift --hash sha1``)."""

    seeder: Impl
    leecher: Impl
    profile: bool = False


_L, _O = Impl.LIBSWIFT, Impl.OURS
#: the process pairs by subject name (BENCH_SWIFT_ARMS "libswift": the first four)
PAIRS = {_LS: Pair(_L, _L), _OURS_LS: Pair(_O, _L), _LS_OURS: Pair(_L, _O),
         _OURS_OURS: Pair(_O, _O), _PROFILE: Pair(_O, _O, profile=True)}


@dataclass
class Child:
    """A child process and what was learnt of it: its own CPU (``os.wait4``) and
    peak RSS (``VmHWM``, polled: a child's ``ru_maxrss`` starts at this
    process's own, which the fork copied, so it says nothing below ~26 MB)."""

    proc: subprocess.Popen
    #: CPU seconds it had used when the transfer started (start-up, hashing)
    cpu_before: float = 0.0
    cpu: float = 0.0
    rss_mb: float = 0.0
    reaped: bool = False

    def poll_rss(self) -> None:
        """Read the peak RSS of its program so far (VmHWM: since its exec)."""
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        self.rss_mb = max(self.rss_mb, int(line.split()[1]) / 1024)
                        return
        except (OSError, ValueError):
            pass


_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_so_far(pid: int) -> float:
    """User + system CPU seconds of a running process (/proc/PID/stat)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK
    except (OSError, IndexError, ValueError):
        return 0.0


def _reap(c: Child, grace: float = 10.0) -> None:
    """Let the child end by itself for up to ``grace`` s, then stop it (SIGTERM,
    SIGKILL 10 s later), and collect its own rusage with ``os.wait4``."""
    if c.reaped:
        return
    p = c.proc
    c.poll_rss()
    deadline = time.monotonic() + grace
    signals = [p.terminate, p.kill]
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        c.poll_rss()
        if time.monotonic() >= deadline:
            if not signals:
                raise RuntimeError(f"process {p.pid} did not stop")
            signals.pop(0)()
            deadline = time.monotonic() + 10
        time.sleep(0.02)
    p.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait for it again
    c.reaped = True
    c.cpu = ru.ru_utime + ru.ru_stime


def _wait_ready(p: subprocess.Popen, log: Path, ready: re.Pattern[str], what: str) -> re.Match:
    deadline = time.monotonic() + 600
    while True:
        m = ready.search(log.read_text())
        if m is not None:
            return m
        if p.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start: {log.read_text()[-300:]!r}")
        time.sleep(0.05)


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


def _allocated(paths: list[Path]) -> int:
    """Bytes the files hold on disk (-1 while none is there): a sparse file's
    grow as chunks are written, wherever they land; our leecher writes
    ``out.bin.part`` and renames it ``out.bin`` when complete."""
    got = -1
    for path in paths:
        try:
            got = max(got, path.stat().st_blocks * 512)
        except OSError:
            pass
    return got


def _sha1(path: Path) -> str:
    h = hashlib.sha1()
    with path.open("rb") as f:
        while b := f.read(1 << 20):
            h.update(b)
    return h.hexdigest()


#: our seeder with no flags prints the SHA-256 root on stdout, then "seeding ..." and the
#: SHA-1 swarm of the same file (the one a libswift leecher can join) on stderr; with
#: --hash sha1 only the SHA-1 root
_OUR_READY = re.compile(r"^([0-9a-f]{64})\n(?:.*\n)*also seeding .* as SHA-1 swarm ([0-9a-f]{40})",
                        re.M)
_OUR_READY_SHA1 = re.compile(r"^([0-9a-f]{40})\n(?:.*\n)*seeding ", re.M)
_LS_READY = re.compile(r"Root hash: ([0-9a-f]{40})")


def _cli_pair(pair: Pair, libswift: str, src: str, want_sha1: str, work: str, cs: int) -> dict:
    """One transfer between two processes, each end libswift or ours, our side
    with no flags beyond the chunk size of an 8 KiB swarm (``pair.profile``:
    ``--profile libswift --hash sha1`` besides).  Timed from the leecher's
    start to its file complete; then checked by SHA-1.  Each process's CPU
    (the seeder's from the leecher's start: its hashing excluded) and peak RSS
    come from its own rusage and /proc (``Child``)."""
    d = Path(tempfile.mkdtemp(dir=work, prefix="pair-"))
    (d / "s").mkdir()
    (d / "l").mkdir()
    os.link(src, d / "s" / "c.bin")
    size = os.path.getsize(src)
    port = _free_port()
    ours = [sys.executable, "-m", "swift"]
    flags = ["--chunk-size", str(cs)] if cs != 1024 else []
    if pair.profile:
        flags = ["--chunk-size", str(cs), "--profile", "libswift", "--hash", "sha1"]
    if pair.seeder is Impl.LIBSWIFT:
        scmd = [libswift, "-f", "c.bin", "-l", f"127.0.0.1:{port}", "-z", str(cs)]
    else:  # the address to serve on is not protocol: a free loopback port
        scmd = ours + ["seed", "c.bin", "--host", "127.0.0.1", "--port", str(port),
                       "--duration", "900"] + flags
    children: list[Child] = []
    try:
        log = d / "seed.log"
        with log.open("w") as fh:
            seed = subprocess.Popen(scmd, cwd=d / "s", stdout=fh, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
        children.append(Child(seed))
        if pair.seeder is Impl.LIBSWIFT:
            root = root40 = _wait_ready(seed, log, _LS_READY, "libswift seeder").group(1)
        elif pair.profile:
            root = root40 = _wait_ready(seed, log, _OUR_READY_SHA1, "ppspp seed").group(1)
        else:
            root, root40 = _wait_ready(seed, log, _OUR_READY, "ppspp seed").groups()
        if pair.leecher is Impl.LIBSWIFT:
            lcmd = [libswift, "-t", f"127.0.0.1:{port}", "-h", root40, "-l",
                    f"127.0.0.1:{_free_port()}", "-w", "0s", "-z", str(cs)]
            out = d / "l" / root40
            files = [out]
        else:  # as a user runs it: the root and the peer, nothing else
            lroot = root40 if pair.seeder is Impl.LIBSWIFT else root
            lcmd = ours + ["download", lroot, "--peer", f"127.0.0.1:{port}", "-o", "out.bin"]
            if pair.profile:
                lcmd += flags
            out = d / "l" / "out.bin"
            files = [out, d / "l" / "out.bin.part"]
        t0 = time.perf_counter()
        children[0].cpu_before = _cpu_so_far(seed.pid)
        with (d / "leech.log").open("w") as fh:
            leech = subprocess.Popen(lcmd, cwd=d / "l", stdout=fh, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        children.append(Child(leech))
        ok, el = False, 0.0
        held, moved, stall = -1, t0, 0.0
        while time.perf_counter() - t0 < 600:
            h = _first_hole(out, size)
            now = time.perf_counter()
            b = _allocated(files)  # grows with every chunk written, in any order
            for c in children:
                c.poll_rss()
            if b != held:
                stall = max(stall, now - moved) if held > 0 else stall
                held, moved = b, now
            if h >= size:
                el = now - t0
                ok = _sha1(out) == want_sha1
                if ok:
                    break
            elif leech.poll() is not None and _first_hole(out, size) < size:
                break  # the leecher gave up with the file incomplete
            time.sleep(0.02)
        if not ok:
            raise RuntimeError(f"{lcmd[0]} leecher: transfer incomplete or wrong: "
                               f"{(d / 'leech.log').read_text()[-300:]!r}")
        _reap(children[1])  # both leechers exit by themselves once complete
    finally:
        for c in reversed(children):
            _reap(c, 0.0 if c is children[0] else 10.0)  # the seeder: stopped now
        shutil.rmtree(d, ignore_errors=True)
    s, lch = children
    return {"ok": ok, "s": el, "cpu": (s.cpu - s.cpu_before) + lch.cpu, "stall": stall,
            "seeder_cpu": s.cpu - s.cpu_before, "leecher_cpu": lch.cpu,
            "seeder_rss": s.rss_mb, "leecher_rss": lch.rss_mb}


def _idle_floor(impl: Impl, libswift: str, work: str) -> dict:
    """Peak RSS (MB) of a seeder of a one-chunk file once it is ready: the process's
    floor (interpreter and imports for ours, the binary and its libraries for libswift),
    which no per-transfer state is in. Measured beside the transfers so the peak RSS
    of a 100 MiB transfer can be read as floor + what the transfer holds."""
    d = Path(tempfile.mkdtemp(prefix="floor-", dir=work))
    (d / "one.bin").write_bytes(os.urandom(1024))
    port = _free_port()
    if impl is Impl.LIBSWIFT:
        cmd, ready = [libswift, "-f", "one.bin", "-l", f"127.0.0.1:{port}"], _LS_READY
    else:
        cmd = [sys.executable, "-m", "swift", "seed", "one.bin", "--host", "127.0.0.1",
               "--port", str(port), "--duration", "60"]
        ready = _OUR_READY
    log = d / "seed.log"
    with log.open("w") as fh:
        c = Child(subprocess.Popen(cmd, cwd=d, stdout=fh, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL))
    try:
        _wait_ready(c.proc, log, ready, f"idle {impl.value} seeder")
        time.sleep(0.3)  # its first timers have run
        c.poll_rss()
    finally:
        _reap(c, grace=0.0)
        shutil.rmtree(d, ignore_errors=True)
    return {"rss": c.rss_mb}


def run(quick: bool) -> dict:
    try:
        size = int(os.environ.get("BENCH_SWIFT_MB") or (4 if quick else 200)) * 1024 * 1024
        repeats = int(os.environ.get("BENCH_SWIFT_REPEATS") or (2 if quick else 3))
    except ValueError:
        raise SystemExit("BENCH_SWIFT_MB, BENCH_SWIFT_REPEATS: whole numbers") from None
    arms = set((os.environ.get("BENCH_SWIFT_ARMS") or "ours,libswift,libtorrent,memory")
               .replace(" ", "").split(","))
    if arms - ARMS or size <= 0 or repeats < 1:
        raise SystemExit(f"BENCH_SWIFT_ARMS: a comma list of {', '.join(sorted(ARMS))}; "
                         "BENCH_SWIFT_MB > 0; BENCH_SWIFT_REPEATS >= 1")
    libswift = os.environ.get("LIBSWIFT_BIN", "")
    if libswift and not os.access(libswift, os.X_OK):
        raise SystemExit(f"LIBSWIFT_BIN={libswift}: not an executable file")
    work = tempfile.mkdtemp(prefix="bench-swift-")
    mb = size / 1e6
    notes: list[str] = []
    subjects: dict[str, Callable[[], dict]] = {}
    pairs = {name: pair for name, pair in PAIRS.items()
             if libswift and ("profile" in arms if pair.profile else "libswift" in arms)}
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
            for name, pair in pairs.items():
                subjects[name.format(k)] = partial(_cli_pair, pair, libswift, src, want, work, cs)
        if libswift and "libswift" in arms:  # the processes' floors, in the same rounds
            for impl in (Impl.OURS, Impl.LIBSWIFT):
                subjects[_FLOOR.format(_IMPL_NAME[impl])] = partial(_idle_floor, impl, libswift,
                                                                    work)
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
    got: dict[str, list[dict]] = {}
    for name, ss in samples.items():
        if name.startswith(_FLOOR.format("")):
            got[name] = ss
            rows.append({"subject": name, "peak RSS MB": Figure.of(s["rss"] for s in ss)})
            continue
        mbps[name] = [mb / s["s"] for s in ss]
        got[name] = ss
        row = {"subject": name, "MB": round(mb, 1), "ok": all(s["ok"] for s in ss),
               "MB/s": Figure.of(mbps[name]), "CPU s": Figure.of(s["cpu"] for s in ss)}
        if ss and "seeder_rss" in ss[0]:
            row.update({
                "seeder CPU s": Figure.of(s["seeder_cpu"] for s in ss),
                "leecher CPU s": Figure.of(s["leecher_cpu"] for s in ss),
                "seeder peak RSS MB": Figure.of(s["seeder_rss"] for s in ss),
                "leecher peak RSS MB": Figure.of(s["leecher_rss"] for s in ss),
                "max stall s": Figure.of(s["stall"] for s in ss)})
        rows.append(row)
    # peak RSS of the in-process arms, read before the in-memory run below (which
    # holds its 20 MB content three times)
    self_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
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
    ratios: dict[str, Figure] = {}
    targets: dict[str, str] = {}
    for cs in (1024, 8192):
        k = f"{cs // 1024} KiB"
        ours = _OURS.format(k)
        for lt in ("libtorrent TCP (C++)", "libtorrent uTP (C++)"):
            if lt in mbps and ours in mbps:
                comps.append(measured(f"ours {k} / {lt}", mbps[ours], mbps[lt],
                                      anchor=lt, unit="MB/s"))
        ls = _LS.format(k)
        if ls in mbps:
            for name, target in ((_OURS_LS, ">= 0.8 (issue 15); >= 2 (issue 17)"),
                                 (_LS_OURS, ">= 2 (issue 17)"), (_OURS_OURS, ">= 2 (issue 17)"),
                                 (_PROFILE, "")):
                if name.format(k) in mbps:
                    comps.append(measured(f"{name.format(k)} / {ls}", mbps[name.format(k)],
                                          mbps[ls], anchor=ls, unit="MB/s", target=target))
            for end, of in (("seeder", _OURS_OURS), ("leecher", _OURS_OURS)):
                if of.format(k) in got:
                    comps.append(measured(
                        f"peak RSS per process, our {end} / libswift's ({of.format(k)})",
                        [s[f"{end}_rss"] for s in got[of.format(k)]],
                        [s[f"{end}_rss"] for s in got[ls]], anchor=ls, unit="MB",
                        target="<= 2 (issue 17)"))
            fo, fl = _FLOOR.format(_IMPL_NAME[Impl.OURS]), _FLOOR.format(_IMPL_NAME[Impl.LIBSWIFT])
            if fo in got and fl in got and _OURS_OURS.format(k) in got:
                # what the transfer itself holds: each repeat's peak over the median floor
                our0 = statistics.median(s["rss"] for s in got[fo])
                ls0 = statistics.median(s["rss"] for s in got[fl])
                for end in ("seeder", "leecher"):
                    comps.append(measured(
                        f"peak RSS above the idle floor, our {end} / libswift's ({k})",
                        [s[f"{end}_rss"] - our0 for s in got[_OURS_OURS.format(k)]],
                        [s[f"{end}_rss"] - ls0 for s in got[ls]], anchor=ls, unit="MB"))
            if _OURS_LS.format(k) in got:
                key = f"max stall of the libswift leecher fed by our seeder, {k} (s)"
                ratios[key] = Figure.of(s["stall"] for s in got[_OURS_LS.format(k)])
                targets[key] = "<= 0.5 (issue 15)"
        elif ours in mbps:
            comps.append(referenced(f"ours {k} / libswift {k}", mbps[ours], LIBSWIFT[cs],
                                    anchor=f"libswift {k}", target=">= 2 (issue 17)"))
    notes += [
        ("libswift measured in this run (LIBSWIFT_BIN): each process pair timed from the "
         "leecher's start (our leecher's interpreter start-up, ~0.3 s, and at 8 KiB its restart "
         "once it learnt libswift's chunk size, included) to its file complete; CPU s = the "
         "seeder's from that moment (its hashing left out) + the leecher's; peak RSS of each "
         "process: its VmHWM (/proc/PID/status, polled every 20 ms and before it is stopped); "
         "max stall: the longest time the leecher's file did not grow on disk (polled every "
         "20 ms)") if libswift else
        ("libswift not run (set LIBSWIFT_BIN to its swift binary): its figures are the issue's, "
         f"labelled reference; the process pairs need it ({ISSUE15})"),
        f"max RSS of this process (the in-process leecher of 'ours', libtorrent): "
        f"{self_rss:.0f} MB (content is never buffered whole)",
    ]
    if "memory" in arms:
        notes.append("in memory: sans-IO seeder and leecher in one process, each handed the "
                     "other's datagrams; CPU per chunk of each end without system calls or "
                     "event loop")
    return {
        "title": f"PPSPP loopback transfer, {mb:.0f} MB, 1 seeder -> 1 leecher",
        "rows": rows,
        "comparisons": comps,
        "ratios": ratios,
        "targets": targets,
        "repeats": repeats,
        "notes": notes,
    }
