"""``ppspp`` command line: seed, download, tracker, hash, live-source, live-view, demo,
experiment (also ``python -m swift``)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from typing import Any

from deliverykit import cliutil
from deliverykit.experiments import dispatch
from swift.core.config import PeerConfig
from swift.core.picker import PICKERS
from swift.wire.constants import ChunkAddressing, HashFunc, SigAlg

_HASHES = {"sha1": HashFunc.SHA1, "sha256": HashFunc.SHA256}
#: live signature algorithms (RFC 7574 7.7; all four are mandatory to implement)
_SIG_ALGS = {"ecdsa": SigAlg.ECDSAP256SHA256, "ecdsa384": SigAlg.ECDSAP384SHA384,
             "rsa": SigAlg.RSASHA256, "rsasha1": SigAlg.RSASHA1}
_CAMS = {"chunk32": ChunkAddressing.CHUNK32, "chunk64": ChunkAddressing.CHUNK64,
         "bin32": ChunkAddressing.BIN32, "bin64": ChunkAddressing.BIN64,
         "byte64": ChunkAddressing.BYTE64}


EXPERIMENTS = {
    "vod-swarm": "swift.experiments.vod_swarm",
    "flashcrowd": "swift.experiments.flashcrowd",
    "beyond": "swift.experiments.beyond",
    "tcp-share": "swift.experiments.tcp_share",
}
NO_DATA_HINT_S = 10.0  # say so when nothing has arrived from any peer after this long
#: smallest --chunk-size: below two hashes per chunk the hash tree outgrows the content
MIN_CHUNK = 64
#: a live viewer gives up after this long without a new chunk once it had some
LIVE_SILENCE_S = 15.0
_METADATA_OPTS = "--hash, --chunk-size, --addressing and --profile"


def _file(text: str) -> str:
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a directory, not a file")
    return str(cliutil.existing_file(text))


def _output(text: str) -> str:
    return str(cliutil.output_path(text))


def _input(text: str) -> str:
    return text if text == "-" else _file(text)


def _download_output(text: str) -> str:
    """A file a download can write chunks into at any offset and cut to size."""
    path = _output(text)
    if path != "-" and os.path.exists(path) and not os.path.isfile(path):
        raise argparse.ArgumentTypeError(
            f"{text} is not a regular file (a device, FIFO or socket): chunks are written at "
            "their offsets and the file cut to size; use -o - to stream to stdout "
            f"(e.g. -o - > {text})")
    return path


def _chunk_size(text: str) -> int:
    n = cliutil.positive_int(text)
    if n < MIN_CHUNK:
        raise argparse.ArgumentTypeError(
            f"chunk size {n} is too small (at least {MIN_CHUNK} bytes: below that the hash "
            "tree is larger than the content)")
    return n


def _load_key(load, path: str, what: str):
    """Read a key file; a file that is not a key is one line naming it."""
    try:
        return load(path)
    except OSError:
        raise
    except Exception as e:  # cryptography: ValueError, TypeError, UnsupportedAlgorithm
        raise ValueError(f"{path}: not a usable {what} ({type(e).__name__}; "
                         "PEM or DER expected)") from None


def _bind_host(host: str | None, peers: list[tuple[str, int]]) -> str:
    """--host as given, else the wildcard address of the peers' family."""
    if host is not None:
        return host
    import ipaddress
    import socket
    fams = set()
    for h, _ in peers:
        try:
            fams.add(ipaddress.ip_address(h).version)
        except ValueError:
            try:
                infos = socket.getaddrinfo(h, None, type=socket.SOCK_DGRAM)
            except socket.gaierror as e:
                raise ValueError(f"cannot resolve {h!r}: {e.strerror}") from None
            fams.add(6 if all(i[0] == socket.AF_INET6 for i in infos) else 4)
    return "::" if fams == {6} else "0.0.0.0"


def _hex(text: str) -> str:
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not hexadecimal") from None
    if not raw:
        raise argparse.ArgumentTypeError("empty swarm ID")
    return text


def _seconds(text: str) -> float:
    """A duration in seconds; 0 means "no limit" where the option says so."""
    return cliutil.nonnegative_float(text)


class _Help(argparse.HelpFormatter):
    """--help shows each option's default, unless it has none or says it already."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        d = action.default
        if (d is None or d is False or d is argparse.SUPPRESS or "default" in text
                or not action.option_strings or isinstance(d, list)):
            return text
        return f"{text} (default: %(default)s)" if text else "default: %(default)s"


class _SubParser(argparse.ArgumentParser):
    """A subcommand's parser, with the :class:`_Help` formatter."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["formatter_class"] = _Help
        super().__init__(*args, **kwargs)


def _ledbat_target(text: str) -> float:
    ms = cliutil.positive_float(text)
    if ms > 100:
        raise argparse.ArgumentTypeError(f"{text}: at most 100 ms (RFC 6817 3.2.2)")
    return ms


def _common(p: argparse.ArgumentParser, pex: bool = True) -> None:
    p.add_argument("--chunk-size", type=_chunk_size, default=1024, metavar="BYTES",
                   help=f"bytes per chunk (at least {MIN_CHUNK})")
    p.add_argument("--hash", choices=sorted(_HASHES), default=None,
                   help="Merkle hash (default: from the root hash's length, 40 hex digits = "
                        "sha1, 64 = sha256; a seeder serves both; sha1 with --profile libswift)")
    p.add_argument("--addressing", choices=sorted(_CAMS), default="chunk32",
                   help="chunk addressing method (RFC 7574 section 4)")
    p.add_argument("--profile", choices=["auto", "rfc", "libswift"], default="auto",
                   help="auto: each channel in the dialect its peer speaks (RFC 7574 or "
                        "libswift's); rfc: RFC 7574 only; libswift: draft-10 as the libswift "
                        "C++ peer speaks it (docs/swift-libswift-compat.md)")
    p.add_argument("--ledbat-target-ms", type=_ledbat_target, default=None, metavar="MS",
                   help="LEDBAT's TARGET queuing delay, at most 100 ms (RFC 6817 3.2.2; default: "
                        "25, as libswift's; docs/ledbat.md)")
    if pex:
        p.add_argument("--pex-ca", metavar="FILE", default=None, type=_file,
                       help="certified PEX (PEX_REScert, RFC 7574 section 8.13): accept only "
                            "peer addresses certified by the tracker CA whose public key is FILE")


def _hash_func(a: argparse.Namespace) -> HashFunc:
    """--hash, else SHA-1 for --profile libswift or a 40-hex root (a libswift
    swarm ID: it has no other hash), else SHA-256 (RFC 7574 7.6)."""
    if a.hash:
        return _HASHES[a.hash]
    root = getattr(a, "root", None)
    if a.profile == "libswift" or (root is not None and len(root) == 40):
        return HashFunc.SHA1
    return HashFunc.SHA256


def _config(a: argparse.Namespace, **kw) -> PeerConfig:
    hf = _hash_func(a)
    if getattr(a, "pex_ca", None):
        from swift.core.pexcert import load_ca_public
        kw.setdefault("pex_ca", _load_key(load_ca_public, a.pex_ca, "CA public key"))
    kw.setdefault("ledbat_target_ms", getattr(a, "ledbat_target_ms", None))
    return PeerConfig(chunk_size=a.chunk_size, hash_func=hf, addressing=_CAMS[a.addressing],
                      profile=a.profile, **kw)


#: counters named in the final line of every role (RFC 7574 terms; README "Signals")
_COUNTERS = ("verified", "rejected", "sent_data", "malformed", "refused", "unknown_channel",
             "unsolicited", "internal_error")


def _counters(peers: list) -> str:
    """The final counters, summed over the swarms of a node, the same whatever stopped it."""
    tot = {k: sum(p.stats.get(k, 0) for p in peers) for k in _COUNTERS}
    return ", ".join(f"{k} {v}" for k, v in tot.items())


def _stop_line(role: str, stopper: cliutil.Stopper, peers: list, ended: str) -> None:
    """One human line on stderr and, for the roles whose stdout is not content, every
    counter as one JSON object on stdout (README, "Signals and exit codes")."""
    import json
    why = stopper.describe() or ended
    print(f"ppspp {role}: {why}: {_counters(peers)}", file=sys.stderr, flush=True)
    stats: dict[str, int] = {}
    for p in peers:
        for k, v in p.stats.items():
            stats[k] = stats.get(k, 0) + v
    print(json.dumps({"role": role, "stopped": why, "stats": stats}), flush=True)


def _seed(a: argparse.Namespace) -> int:
    """Hash (or load) every file, then serve them until stopped.

    The hashing runs outside the event loop: there a signal interrupts it at
    once (KeyboardInterrupt / Terminated through cli_main, nothing cached
    half-written).  Inside ``asyncio.run`` a Ctrl-C only cancels the main
    task, which a synchronous hash of a large file would not see until done."""
    import dataclasses

    from swift.aio.files import deferred_tree, load_or_build_tree
    from swift.aio.storage import FileStorage
    from swift.core.content import Content
    from swift.core.peer import Peer
    cfg = _config(a)
    # no --hash: each file is also a SHA-1 swarm, the only one a libswift
    # leecher can join (it takes 40-hex roots only); docs/swift-libswift-compat.md
    sha1_too = a.hash is None and cfg.hash_func != HashFunc.SHA1
    peers = []
    storages = []
    a.sha1_roots = []
    for path in a.file:  # more swarms on the same port (RFC 7574 figure 1)
        sha1 = None
        if sha1_too:  # first, and then its hashes dropped until a SHA-1 peer asks:
            # never held beside the other tree (docs/swift-perf.md, "Peak memory")
            sha1 = deferred_tree(path, HashFunc.SHA1, cfg.chunk_size).tree
        got = load_or_build_tree(path, cfg.hash_func, cfg.chunk_size)
        if got.message:
            print(f"ppspp seed: {got.message}", file=sys.stderr, flush=True)
        storages.append(FileStorage(path))
        peers.append(Peer(Content.seeded(got.tree, storages[-1]), _config(a)))
        if sha1 is not None:
            peers.append(Peer(Content.seeded(sha1, storages[-1]),
                              dataclasses.replace(_config(a), hash_func=HashFunc.SHA1)))
            a.sha1_roots.append(sha1.root_hash.hex())
    return asyncio.run(_serve(a, peers, storages))


async def _serve(a: argparse.Namespace, peers: list, storages: list) -> int:
    from swift.aio.node import SwiftNode
    stopper = cliutil.Stopper().install()
    try:
        node = SwiftNode(peers[0], a.host, a.port)
        node.storage = storages[0]
        async with node:
            for extra in peers[1:]:
                node.add_swarm(extra)
            for t in a.tracker or []:
                node.connect(t)  # register: the tracker hands our address out by PEX
            for p in node.peers:
                if p.swarm_id.hex() not in a.sha1_roots:
                    print(p.swarm_id.hex(), flush=True)
            print(f"seeding {' '.join(a.file)} on {node.host}:{node.port}", file=sys.stderr,
                  flush=True)
            for path, r in zip(a.file, a.sha1_roots):
                print(f"also seeding {path} as SHA-1 swarm {r} (for libswift: swift -h {r})",
                      file=sys.stderr, flush=True)
            await stopper.wait(a.duration or None)
        for st in storages[1:]:
            st.close()
        _stop_line("seed", stopper, node.peers, "--duration reached")
    finally:
        stopper.remove()
    return stopper.exit_code()


async def _read_block(fd: int, n: int, stop: asyncio.Event) -> bytes | None:
    """Up to ``n`` bytes from ``fd``; b"" at end of input, None when ``stop`` was set first.
    A pipe or terminal is waited for on the event loop (no thread stuck in read() that
    would hold the exit back); a regular file is read at once."""
    import stat
    if stat.S_ISREG(os.fstat(fd).st_mode):
        return os.read(fd, n)
    loop = asyncio.get_running_loop()
    ready = asyncio.Event()
    loop.add_reader(fd, ready.set)
    try:
        while True:
            try:
                return os.read(fd, n)
            except BlockingIOError:
                pass
            ready.clear()
            waits = [asyncio.ensure_future(ready.wait()), asyncio.ensure_future(stop.wait())]
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for w in waits:
                w.cancel()
            if stop.is_set():
                return None
    finally:
        loop.remove_reader(fd)


async def _live_source(a: argparse.Namespace) -> int:
    from swift.aio.node import live_source
    node = live_source(_config(a), a.host, a.port, per_sig=a.per_sig, window=a.window,
                       method=a.live_method, sig_alg=_SIG_ALGS[a.sig_alg])
    stopper = cliutil.Stopper().install()
    src = open(a.input, "rb") if a.input != "-" else sys.stdin.buffer
    fd = src.fileno()
    was_blocking = os.get_blocking(fd)
    try:
        os.set_blocking(fd, False)
        async with node:
            print(node.peer.swarm_id.hex(), flush=True)
            print(f"live source on {node.host}:{node.port}", file=sys.stderr, flush=True)
            t0 = time.time()
            sent = 0
            while not stopper.stopped:
                block = await _read_block(fd, a.chunk_size * 8, stopper.event)
                if not block:
                    break
                node.peer.live_append(block, node.now)
                node.kick()
                sent += len(block)
                if a.rate:  # pace a file as if it were a live feed
                    await stopper.wait(max(0.0, t0 + sent / a.rate - time.time()))
                else:
                    await asyncio.sleep(0)
            if not stopper.stopped:
                await stopper.wait(a.linger)
        _stop_line("live-source", stopper, [node.peer], f"end of input, {sent} bytes")
    finally:
        stopper.remove()
        os.set_blocking(fd, was_blocking)
        if src is not sys.stdin.buffer:
            src.close()
    return stopper.exit_code()


async def _live_view(a: argparse.Namespace) -> int:
    from swift.aio.node import live_viewer
    node = live_viewer(bytes.fromhex(a.swarm), _config(a), _bind_host(a.host, a.peer), a.port,
                       per_sig=a.per_sig, window=a.window, method=a.live_method)
    # a recording goes to FILE.part and becomes FILE when the viewer stops with
    # verified bytes in it (every byte written is verified, in order); an
    # existing FILE is left alone when nothing arrived
    part = a.output + ".part" if a.output != "-" else None
    out = open(part, "wb") if part is not None else sys.stdout.buffer
    stopper = cliutil.Stopper().install()
    rc = 1
    try:
        rc = await _live_view_run(a, node, out, stopper)
        return rc
    finally:
        stopper.remove()
        if part is not None:
            kept = out.tell() > 0
            out.flush()
            if kept:
                os.fsync(out.fileno())
            out.close()
            if kept:
                os.replace(part, a.output)
            else:
                os.unlink(part)


async def _live_view_run(a: argparse.Namespace, node, out, stopper: cliutil.Stopper) -> int:
    from swift.aio.node import InOrderReader
    got = 0
    why = "--duration reached"
    async with node:
        for p in a.peer:
            node.connect(p)
        rd = InOrderReader(node)
        start = last = time.monotonic()
        end = start + a.duration
        while time.monotonic() < end and (not a.bytes or got < a.bytes) and not stopper.stopped:
            for c in rd.ready():
                if a.bytes:
                    c = c[: a.bytes - got]
                out.write(c)
                got += len(c)
                last = time.monotonic()
                if a.bytes and got >= a.bytes:
                    break
            out.flush()
            now = time.monotonic()
            if now - last > a.silence:  # a source that died never says so: stop waiting
                why = (f"no new chunk for {a.silence:g} s" if got else
                       f"nothing verified in {a.silence:g} s")
                break
            await stopper.wait(0.05)
        stats = node.peer.stats
    why = stopper.describe() or why
    start = node.peer.live_start
    print(f"ppspp live-view: {why}: {got} bytes"
          + (f" from chunk {start}" if start is not None else "")
          + f"; {_counters([node.peer])}", file=sys.stderr)
    if got or stopper.stopped:
        return stopper.exit_code()
    if stats.get("rejected") or stats.get("refused") or node.closed_reasons:
        print(
            f"live: no verified chunk ({why}); chunks or handshakes were refused: is "
            f"{a.swarm[:16]}... "
            f"the source's key, and --live-method, --per-sig, {_METADATA_OPTS} as the source's?",
            file=sys.stderr,
        )
    else:
        # a source refuses a handshake whose options differ from its own
        # without answering (RFC 7574 3.1.1 step 4 allows silence): say both
        print(f"live: nothing received from {', '.join(f'{h}:{p}' for h, p in a.peer)} ({why}): "
              f"is the live source up there, is {a.swarm[:16]}... its key, and are --live-method, "
              f"--per-sig, {_METADATA_OPTS} the source's?", file=sys.stderr)
    return 1


def _hint(a: argparse.Namespace, node, waited: float) -> str:
    """Why nothing arrived: no answer at all, or an answer but no chunk."""
    peers = ", ".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in a.peer)
    other_cs = node.peer.chunk_size_seen
    if other_cs:
        return (
            f"ppspp download: {peers} sent chunks of {other_cs} bytes in {waited:.0f} s, "
            f"this download uses --chunk-size {a.chunk_size}: give --chunk-size {other_cs} (the "
            "chunk size is swarm metadata, e.g. libswift's -z; no handshake option says it "
            "in draft-10)"
        )
    refusals = list(getattr(node, "refusals", ()))
    if refusals and not node.peer.established:
        # the peer did answer: say what of its answer we refused, and why
        seen: dict[str, int] = {}
        for addr, why in refusals:
            key = f"{addr[0]}:{addr[1]}: {why}"
            seen[key] = seen.get(key, 0) + 1
        said = "; ".join(f"{k}" + (f" ({n} times)" if n > 1 else "") for k, n in seen.items())
        return (f"ppspp download: refused in {waited:.0f} s: {said}. The swarm metadata must "
                f"match the seeder's: {_METADATA_OPTS}")
    if getattr(node, "answered", False):
        bad = node.peer.stats.get("rejected", 0)
        return (f"ppspp download: {peers} answered the handshake but sent no chunk "
                + (f"that verifies ({bad} failed the hash check) " if bad else "")
                + f"in {waited:.0f} s: does it hold {a.root[:16]}...? (a seeder whose file "
                "changed under it, or a peer still downloading)")
    return (f"ppspp download: nothing from {peers} after {waited:.0f} s: is the peer up, and "
            f"is {a.root[:16]}... its swarm ID? The swarm metadata must match the seeder's: "
            f"{_METADATA_OPTS}" + (", and --pex-ca if it hands out certified PEX" if not a.pex_ca
                                   else ""))


def _write_stdout(chunks: list[bytes]) -> None:
    for c in chunks:
        sys.stdout.buffer.write(c)
    sys.stdout.buffer.flush()


def _download(a: argparse.Namespace) -> int:
    """Download; whatever the outcome, remove what a failed run created and
    could not use (a .part with nothing verified, the temporary files behind -o -).

    The node (and the resume scan of FILE.part, which reads it whole) is made
    before the event loop runs, so a signal interrupts that scan at once."""
    import shutil
    import tempfile

    from swift.aio.files import DownloadPaths, remove_quietly
    from swift.aio.node import downloader
    try:
        root = bytes.fromhex(a.root)
    except ValueError:
        print("ROOTHASH must be hex", file=sys.stderr)
        return 2
    a.peer = list(a.peer or []) + list(a.tracker or [])
    if not a.peer:
        print("give --peer or --tracker", file=sys.stderr)
        return 2
    stream = a.output == "-"
    tmpdir = None
    if stream:  # play while downloading: verified bytes to stdout in order
        tmpdir = tempfile.mkdtemp(prefix="ppspp-")
        a.output = os.path.join(tmpdir, "stream")
    paths = DownloadPaths(a.output)
    created = not os.path.lexists(paths.part)
    state = {"verified": 0}
    rc = 1
    stopper = cliutil.Stopper()
    # the chunk size is swarm metadata libswift never sends: without
    # --chunk-size, DATA of another size (before any chunk verified) restarts
    # the download once with that size, within the same --timeout
    a.chunk_size_given = any(x == "--chunk-size" or x.startswith("--chunk-size=")
                             for x in a.argv)
    deadline = time.monotonic() + a.timeout
    try:
        for attempt in range(2):
            cfg = _config(a, picker=a.picker, pex_connect=bool(a.tracker) or a.pex)
            if stream and a.picker == "linear":
                cfg.picker = "vod"
            node = downloader(root, a.output, cfg, _bind_host(a.host, a.peer), a.port)
            state["restart"] = attempt == 0 and not a.chunk_size_given
            rc = asyncio.run(_download_to(a, node, stream, state, stopper, deadline))
            seen = node.peer.chunk_size_seen
            if rc != RESTART or seen is None:
                break
            print(f"ppspp download: the peer's chunks are {seen} bytes, not {a.chunk_size}: "
                  f"starting again with --chunk-size {seen}", file=sys.stderr, flush=True)
            if created:
                remove_quietly(paths.temporaries())
            a.chunk_size = seen
            a.argv = [*a.argv, "--chunk-size", str(seen)]  # for the resume line
            stopper.remove()  # its event belongs to the finished loop
            stopper = cliutil.Stopper()
        return rc
    except BrokenPipeError:  # `ppspp download ... -o - | head`: the reader left early
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error at the final flush
        os.close(devnull)
        print("ppspp: stdout closed before the end of the content (broken pipe)", file=sys.stderr)
        rc = 141
        return rc
    finally:
        stopper.remove()
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)
        elif created and rc != 0 and not state["verified"]:
            remove_quietly(paths.temporaries())


def _resume_line(a: argparse.Namespace, node, why: str) -> str:
    """What an incomplete download kept, and the exact command that resumes it."""
    import shlex

    from swift.aio.files import DownloadPaths
    got, total = node.progress
    part = DownloadPaths(a.output).part
    if not got:
        return f"ppspp download: {why}: no chunk verified yet, nothing kept"
    return (f"ppspp download: {why}: kept {got} of {total or '?'} verified chunks in {part} "
            f"(+ .mhash); resume with: {shlex.join(['ppspp', *a.argv])}")


#: _download_to's answer when the download should start again with the chunk
#: size the peer's DATA showed (never an exit status)
RESTART = -1


async def _download_to(a: argparse.Namespace, node, stream: bool, state: dict,
                       stopper: cliutil.Stopper, deadline: float) -> int:
    stopper.install()
    if node.resumed and not stream:
        print(f"ppspp download: resumed {node.resumed} of {node.progress[1]} verified chunks "
              f"from {a.output if node.finished else a.output + '.part'}",
              file=sys.stderr, flush=True)
    http = None
    async with node:
        try:
            if a.http is not None:
                from swift.aio.http import HttpStream
                http = HttpStream(node, "127.0.0.1", a.http)
                await http.__aenter__()
                print(f"playing at http://127.0.0.1:{http.port}/", file=sys.stderr, flush=True)
            for p in a.peer:
                node.connect(p)
            done = await _progress_loop(a, node, stream, state, stopper, deadline)
        finally:
            state["verified"] = node.progress[0]
            if http is not None:
                if node.peer.content.complete and not stopper.stopped:
                    await stopper.wait(a.http_linger)
                await http.__aexit__(None, None, None)
    if not done and state.get("restart") and node.peer.chunk_size_seen and not node.progress[0]:
        return RESTART
    if stopper.stopped:
        if stream:
            print(f"ppspp download: {stopper.describe()}: {node.progress[0]} chunks verified, "
                  "stream not complete", file=sys.stderr)
        else:
            print(_resume_line(a, node, stopper.describe()), file=sys.stderr)
        return stopper.exit_code()
    if not done:
        why = (f"download incomplete (timeout after {a.timeout:g} s, "
               f"{node.progress[0]} of {node.progress[1] or '?'} chunks)")
        print(why if stream else _resume_line(a, node, why), file=sys.stderr)
        return 1
    size = node.peer.content.tree.size
    on_disk = os.path.getsize(a.output)
    if size is None or on_disk != size or not node.finished:  # never call a wrong length verified
        print(f"ppspp: error: {a.output} is {on_disk} bytes, the content {size}", file=sys.stderr)
        return 1
    print(f"{'stdout' if stream else a.output}: {size} bytes verified", file=sys.stderr)
    return 0


class _NoProgress:
    """The progress bar when none is drawn: rich is not even imported (its ~4 MB were
    most of a non-interactive leecher's memory above an idle seeder's, bench_swift_transfer)."""

    def __enter__(self) -> _NoProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, total: float | None = None) -> int:
        return 0

    def update(self, task: int, completed: float | None = None,
               total: float | None = None) -> None:
        return None


def _progress_bar(a: argparse.Namespace):
    """A rich progress bar on stderr, drawn only when stderr is a terminal or
    --progress asks for it (never on stdout: that is the content with -o -)."""
    show = not a.quiet and (a.progress or sys.stderr.isatty())
    if not show:
        return _NoProgress()
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn
    console = Console(file=sys.stderr, force_terminal=True if a.progress else None)
    return Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                    TransferSpeedColumn(), console=console)


async def _progress_loop(a: argparse.Namespace, node, stream: bool, state: dict,
                         stopper: cliutil.Stopper, deadline: float) -> bool:
    """Show progress until complete (True), --timeout or a stop signal (False), or
    (False) the peer's DATA showed another chunk size and a restart may use it."""
    from swift.aio.node import InOrderReader
    cs = node.peer.content.chunk_size
    hint_after = min(NO_DATA_HINT_S, a.timeout / 2)
    rd = InOrderReader(node) if stream else None
    with _progress_bar(a) as prog:
        task = prog.add_task("ppspp", total=None)
        start = time.monotonic()
        end = deadline
        hinted = False
        node.answered = False
        while time.monotonic() < end and not stopper.stopped:
            if rd is not None:
                _write_stdout(rd.ready())
            got, total = node.progress
            state["verified"] = got
            # a peer answered: a channel is up, or was (peak hashes told the
            # size, or chunks came and failed the hash check)
            node.answered = (node.answered or bool(node.peer.established) or total is not None
                             or node.peer.stats.get("rejected", 0) > 0)
            prog.update(task, completed=got * cs, total=total * cs if total else None)
            waited = time.monotonic() - start
            if state.get("restart") and node.peer.chunk_size_seen and not got:
                return False
            if not got and not hinted and waited > hint_after:
                hinted = True
                print(_hint(a, node, waited), file=sys.stderr, flush=True)
            if await node.wait_complete(0.2):
                size = node.peer.content.tree.size or 0
                prog.update(task, completed=size, total=size)
                if rd is not None:
                    _write_stdout(rd.ready())
                return True
    return False


async def _tracker(a: argparse.Namespace) -> int:
    from swift.aio.node import SwiftNode
    from swift.core.content import Content, MemoryStorage
    from swift.core.merkle import MerkleTree
    from swift.core.peer import Peer
    ca = None
    if a.ca_key:
        from swift.core.pexcert import load_or_create_ca
        # also writes CA_KEY.pub for --pex-ca
        ca = _load_key(load_or_create_ca, a.ca_key, "CA private key")
    cfg = _config(a, tracker=True, max_channels=a.max_peers, pex_ca_key=ca)
    tree = MerkleTree.for_root(bytes.fromhex(a.root), cfg.hash_func, cfg.chunk_size)
    node = SwiftNode(Peer(Content(tree, MemoryStorage()), cfg), a.host, a.port)
    stopper = cliutil.Stopper().install()
    try:
        async with node:
            print(f"tracker for {a.root} on {node.host}:{node.port}", file=sys.stderr, flush=True)
            await stopper.wait(a.duration or None)
        _stop_line("tracker", stopper, [node.peer], "--duration reached")
    finally:
        stopper.remove()
    return stopper.exit_code()


def _hash(a: argparse.Namespace) -> int:
    from swift.aio.node import tree_for_file
    cfg = _config(a)
    print(tree_for_file(a.file, cfg.hash_func, cfg.chunk_size, cache=a.cache).root_hash.hex())
    return 0


@cliutil.cli_main("ppspp")
def main(argv: list[str] | None = None) -> int:
    """Entry point of ``ppspp``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["experiment"]:
        return dispatch("ppspp", EXPERIMENTS, argv[1:])
    ap = argparse.ArgumentParser(
        prog="ppspp",
        description="PPSPP (RFC 7574) peer: seed, download, track and stream content.",
        epilog="Each command has --help. Exit status: 0 done, 1 failed, 2 bad arguments, "
        "130 Ctrl-C, 143 SIGTERM (long-running roles print their final counters either "
        "way); ppspp download keeps an incomplete download in FILE.part and says how to "
        "resume it.",
    )
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=_SubParser)
    s = sub.add_parser(
        "seed", help="seed a file; prints its root hash (swarm ID)",
        description="Seed one or more files on one UDP port, one swarm per file; print each root "
                    "hash (the swarm ID) on stdout. The hash tree is cached beside FILE "
                    "(FILE.mhash) and reused only while FILE is unchanged (same inode, size, "
                    "mtime and ctime, and sampled chunks match); otherwise it is rebuilt and "
                    "stderr says so. Runs until --duration, Ctrl-C or SIGTERM, then prints its "
                    "counters.")
    s.add_argument("file", nargs="+", metavar="FILE", type=_file,
                   help="one swarm per file, all on one UDP port")
    s.add_argument("--host", default="0.0.0.0", help="address to bind (default: all)")
    s.add_argument("--port", type=cliutil.port, default=6778, help="UDP port to bind")
    s.add_argument("--duration", type=_seconds, default=0.0, metavar="SECONDS",
                   help="stop after this long (default: 0, until Ctrl-C or SIGTERM)")
    s.add_argument("--tracker", type=cliutil.hostport, action="append", metavar="HOST:PORT",
                   help="register with a tracker peer (repeatable)")
    _common(s)
    d = sub.add_parser(
        "download", help="download by root hash from peers",
        description="Download the content whose root hash is ROOTHASH, checking every chunk "
                    "against it. Chunks go to FILE.part (resume state in FILE.part.mhash); FILE "
                    "appears only when every chunk is verified and the length is right. An "
                    "interrupted or timed-out run keeps FILE.part and prints the command that "
                    "resumes it. Progress goes to stderr (a bar when stderr is a terminal).")
    d.add_argument("root", metavar="ROOTHASH", type=_hex,
                   help="the swarm ID (hex), as ppspp seed prints it")
    d.add_argument("--peer", type=cliutil.hostport, action="append", metavar="HOST:PORT",
                   help="a peer to download from: HOST:PORT or [IPv6]:PORT (repeatable)")
    d.add_argument("--tracker", type=cliutil.hostport, action="append", metavar="HOST:PORT",
                   help="a PPSPP tracker peer: peers are learnt from it by PEX (repeatable)")
    d.add_argument("--pex", action="store_true", help="also connect to peers learnt by PEX")
    d.add_argument("-o", "--output", required=True, type=_download_output, metavar="FILE",
                   help="file, or - to stream the verified bytes to stdout in order")
    d.add_argument("--host", default=None,
                   help="address to bind (default: all, :: when every --peer is IPv6)")
    d.add_argument("--port", type=cliutil.port, default=0, help="UDP port to bind (0: any free)")
    d.add_argument("--picker", choices=sorted(PICKERS), default="linear",
                   help="download algorithm: linear, rarest (first), std-vod (baseline) or "
                        "vod (the paper's three priorities, III-C)")
    d.add_argument("--http", type=cliutil.port, default=None, metavar="PORT",
                   help="also serve the content on http://127.0.0.1:PORT/ while downloading")
    d.add_argument("--http-linger", type=_seconds, default=0.0, metavar="SECONDS",
                   help="keep serving HTTP this long after completion (a player still reading)")
    d.add_argument("--timeout", type=cliutil.positive_float, default=3600.0, metavar="SECONDS",
                   help="give up after this long (FILE.part is kept for a resume)")
    d.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    d.add_argument("--progress", action="store_true",
                   help="draw the progress bar on stderr even when it is not a terminal")
    _common(d)
    t = sub.add_parser(
        "tracker", help="a tracker peer: answers PEX for one swarm (RFC 7574 section 3.10.1)",
        description="A tracker peer for one swarm: peers handshake with it and learn each other "
                    "by PEX; it holds no content. Runs until --duration, Ctrl-C or SIGTERM, then "
                    "prints its counters.")
    t.add_argument("root", metavar="ROOTHASH", type=_hex, help="the swarm ID (hex) it tracks")
    t.add_argument("--host", default="0.0.0.0", help="address to bind (default: all)")
    t.add_argument("--port", type=cliutil.port, default=6779, help="UDP port to bind")
    t.add_argument("--duration", type=_seconds, default=0.0, metavar="SECONDS",
                   help="stop after this long (default: 0, until Ctrl-C or SIGTERM)")
    t.add_argument("--max-peers", type=cliutil.positive_int, default=256, metavar="N",
                   help="channels kept (peers handed out by PEX)")
    t.add_argument(
        "--ca-key",
        metavar="PEM",
        default=None,
        help="act as certification authority: hand out PEX_REScert membership "
        "certificates signed with this key (created if missing; PEM.pub for --pex-ca)",
    )
    _common(t)
    h = sub.add_parser("hash", help="print the root hash of a file",
                       description="Print the root hash (swarm ID) of FILE for the given swarm "
                                   "metadata.")
    h.add_argument("file", metavar="FILE", type=_file, help="the file to hash")
    h.add_argument("--cache", action="store_true",
                   help="also write the hash tree beside FILE (FILE.mhash) for ppspp seed to reuse")
    h.add_argument("--no-cache", action="store_false", dest="cache",
                   help="do not write the hash tree (the default)")
    _common(h, pex=False)
    ls = sub.add_parser(
        "live-source", help="inject a live stream (stdin or a file)",
        description="Inject a live stream (RFC 7574 section 6.1): print the swarm ID (the "
                    "source's public key) on stdout, then sign and serve what is read from "
                    "--input until its end (plus --linger), Ctrl-C or SIGTERM; then print the "
                    "counters.")
    ls.add_argument("--input", default="-", type=_input, metavar="FILE",
                    help="file to stream, - for stdin")
    ls.add_argument("--rate", type=_seconds, default=0.0, metavar="BYTES_PER_S",
                    help="pace the input at this rate (0 = as fast as it is read)")
    ls.add_argument("--host", default="0.0.0.0", help="address to bind (default: all)")
    ls.add_argument("--port", type=cliutil.port, default=6778, help="UDP port to bind")
    ls.add_argument("--per-sig", type=cliutil.positive_int, default=4, metavar="N",
                    help="chunks per signed munro (NCHUNKS_PER_SIG, RFC 7574 section 6.1.2.1)")
    ls.add_argument("--window", type=cliutil.positive_int, default=4096, metavar="CHUNKS",
                    help="live discard window in chunks")
    ls.add_argument("--linger", type=_seconds, default=5.0, metavar="SECONDS",
                    help="keep serving this long after the end of the input")
    ls.add_argument("--live-method", choices=["umt", "sign-all"], default="umt",
                    help="Unified Merkle Tree (RFC 7574 section 6.1.2) or Sign All (6.1.1)")
    ls.add_argument("--sig-alg", choices=sorted(_SIG_ALGS), default="ecdsa",
                    help="live signature algorithm (section 7.7): ecdsa = ECDSAP256SHA256, "
                         "ecdsa384 = ECDSAP384SHA384, rsa = RSASHA256, rsasha1 = RSASHA1")
    _common(ls, pex=False)
    lv = sub.add_parser(
        "live-view", help="watch a live stream: in-order bytes to a file or stdout",
        description="Join a live stream and write its verified bytes in order to -o until "
                    "--duration, --bytes, --silence, Ctrl-C or SIGTERM; then print what was "
                    "received and the counters.")
    lv.add_argument("swarm", metavar="SWARMID", type=_hex, help="the source's public key (hex)")
    lv.add_argument("--peer", type=cliutil.hostport, action="append", required=True,
                    metavar="HOST:PORT",
                    help="the live source or a relay: HOST:PORT or [IPv6]:PORT (repeatable)")
    lv.add_argument("-o", "--output", default="-", type=_output, metavar="FILE",
                    help="file, or - for stdout")
    lv.add_argument("--host", default=None,
                    help="address to bind (default: all, :: when every --peer is IPv6)")
    lv.add_argument("--port", type=cliutil.port, default=0, help="UDP port to bind (0: any free)")
    lv.add_argument("--per-sig", type=cliutil.positive_int, default=4, metavar="N",
                    help="chunks per signed munro, as the source (RFC 7574 section 6.1.2.1)")
    lv.add_argument("--window", type=cliutil.positive_int, default=4096, metavar="CHUNKS",
                    help="live discard window in chunks")
    lv.add_argument("--duration", type=cliutil.positive_float, default=3600.0, metavar="SECONDS",
                    help="stop after this long")
    lv.add_argument("--bytes", type=cliutil.nonnegative_int, default=0, metavar="N",
                    help="stop after exactly this many bytes (0 = no limit)")
    lv.add_argument("--live-method", choices=["umt", "sign-all"], default="umt",
                    help="as the source (the algorithm comes from the swarm ID)")
    lv.add_argument("--silence", type=cliutil.positive_float, default=LIVE_SILENCE_S,
                    metavar="SECONDS",
                    help="stop when no new chunk arrived for this many seconds "
                         f"(a source that ended; default {LIVE_SILENCE_S:g})")
    _common(lv, pex=False)
    sub.add_parser("demo", help="seeder and leechers on loopback; one JSON object per line",
                   description="A seeder and leechers on loopback; prints one JSON object per "
                               "row of the summary table.")
    sub.add_parser("experiment", help=f"run a paper experiment: {' | '.join(EXPERIMENTS)} "
                                      "(each has --quick; ppspp experiment for the list)")
    a = ap.parse_args(argv)
    a.argv = argv
    if a.cmd == "seed":
        return _seed(a)
    if a.cmd == "download":
        return _download(a)
    if a.cmd == "hash":
        return _hash(a)
    if a.cmd == "tracker":
        return asyncio.run(_tracker(a))
    if a.cmd == "live-source":
        return asyncio.run(_live_source(a))
    if a.cmd == "live-view":
        return asyncio.run(_live_view(a))
    import json

    from swift.demo import run
    for row in run(quick=True):
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
