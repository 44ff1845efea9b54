"""The libswift C++ peer under the PPSPP conformance contract (registry name ``libswift``).

    python -m swift.conformance.libswift_wrapper seed FILE --port P [--addressing A]
                                                      [--chunk-size C]
    python -m swift.conformance.libswift_wrapper leech ROOTHASH HOST:PORT -o FILE [--addressing A]
                                                       [--chunk-size C] [--timeout T]

Users build libswift themselves (github.com/libswift/libswift, ``make``; needs
libevent); nothing here fetches or builds it. The binary is ``$LIBSWIFT_BIN``
and nothing else (a ``swift`` on PATH is as likely the Swift compiler or the
OpenStack client); without it every case is *unsupported* (exit 127).

How libswift is driven (its command line as of commit dda307f, ``swift --help``):

seed
    FILE is copied into a fresh scratch directory (libswift writes
    ``FILE.mhash`` and ``FILE.mbinmap`` beside the file it seeds), then
    ``$LIBSWIFT_BIN -f COPY -l 127.0.0.1:P -z C`` runs there. ``READY <root>``
    is printed once libswift has printed ``Root hash: <root>`` and its UDP
    port is bound (read from /proc/net/udp). On SIGTERM libswift is stopped
    and the scratch directory removed.
leech
    ``$LIBSWIFT_BIN -t HOST:PORT -h ROOT -l 127.0.0.1:P2 -z C -w 0s`` runs in a
    fresh empty directory beside FILE. libswift has no output-file option
    (``-o`` is ``--destdir``, and a failed chdir to it is ignored): it saves
    ``./ROOT`` (preallocated, sparse) and ``./ROOT.mhash`` in its working
    directory, and with ``-w 0s`` exits 0 on its first 1-s report tick after
    the download is complete. Only then is ``./ROOT`` renamed to FILE (same
    file system, atomic); the directory and everything else in it is removed
    whatever happens, so no case sees what an earlier one left.

Addressing (sec. 7.8): chunk32 only, both roles; the others exit 127. libswift
has bin32 code, but in PPSPP version 1 its command line always runs chunk32
swarms (``Handshake()`` in swift.h); bin32 is its legacy pre-RFC protocol
(``ResetToLegacy``) or an HTTP-gateway URL parameter (``ca=0``, httpgw.cpp).
Measured at dda307f: a seeder asked for bin32 answers with an accepting
HANDSHAKE naming chunk32 and then sends chunk32 ranges, so "seed a bin32
swarm" is not something this wrapper can make it do (that acceptance itself is
checked by ``test_refuses_another_chunk_addressing_method``). The live roles
exit 127 too.

libswift speaks draft-10 with SHA-1 trees, so its registry entry sets
``PPSPP_PROFILE=libswift`` (the cases then use SHA-1 and run our peer in its
libswift profile).
"""

from __future__ import annotations

import argparse
import os
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from deliverykit.cliutil import cli_main

UNSUPPORTED = 127
ADDRESSING = ("chunk32",)
START_TIMEOUT = 15.0
"""Seconds libswift gets to hash the content, print its root hash and bind its port."""


class WrapperError(RuntimeError):
    """libswift did not do what the contract asks (did not start, did not complete, no file)."""


@dataclass(frozen=True)
class Command:
    """One libswift invocation: the argv and the directory it runs in."""

    argv: tuple[str, ...]
    cwd: str


def libswift_binary(env: dict[str, str] | os._Environ[str] = os.environ) -> str | None:
    """``$LIBSWIFT_BIN`` if it names an executable (a path, or a name on PATH), else None."""
    value = env.get("LIBSWIFT_BIN", "")
    return shutil.which(value) if value else None


def seed_command(binary: str, content: str, port: int, chunk_size: int) -> Command:
    """Seed ``content`` (already the scratch copy) from the directory that holds it."""
    return Command(
        (binary, "-f", os.path.basename(content), "-l", f"127.0.0.1:{port}", "-z", str(chunk_size)),
        os.path.dirname(os.path.abspath(content)),
    )


def leech_command(
    binary: str, root: str, peer: str, port: int, chunk_size: int, workdir: str
) -> Command:
    """Download ``root`` from ``peer`` into ``workdir/ROOT``; libswift exits 0 once it is
    complete."""
    return Command(
        (
            binary,
            "-t",
            peer,
            "-h",
            root,
            "-l",
            f"127.0.0.1:{port}",
            "-z",
            str(chunk_size),
            "-w",
            "0s",
        ),
        workdir,
    )


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _udp_bound(port: int) -> bool:
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    local = line.split()[1]
                    if int(local.rsplit(":", 1)[1], 16) == port:
                        return True
        except (OSError, StopIteration, ValueError, IndexError):
            continue
    return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    if proc.stdout is not None:
        proc.stdout.close()


def _read_root(proc: subprocess.Popen[bytes], deadline: float) -> str:
    """libswift's ``Root hash: <hex>`` line from its stdout (the rest of its stdout goes to our
    stderr)."""
    assert proc.stdout is not None
    fd, pending = proc.stdout.fileno(), b""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not sel.select(max(0.0, deadline - time.monotonic())):
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                raise WrapperError(
                    f"libswift exited with {proc.wait(5)} before printing its root hash"
                )
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                text = line.decode(errors="replace").strip()
                if text.startswith("Root hash:"):
                    return text.split(":", 1)[1].strip()
                print(text, file=sys.stderr)
    raise WrapperError(f"libswift printed no root hash within {START_TIMEOUT:g} s")


def _drain(stream: Iterable[bytes]) -> None:
    """Copy what is left of libswift's stdout to our stderr (so it can never block on a
    full pipe)."""
    try:
        for line in stream:
            sys.stderr.write(line.decode(errors="replace"))
    except (OSError, ValueError):
        pass


def seed(binary: str, file: str, port: int, chunk_size: int) -> int:
    scratch = tempfile.mkdtemp(prefix="libswift-seed-")
    proc: subprocess.Popen[bytes] | None = None
    try:
        copy = shutil.copy(file, os.path.join(scratch, os.path.basename(file)))
        cmd = seed_command(binary, copy, port, chunk_size)
        proc = subprocess.Popen(
            cmd.argv, cwd=cmd.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
        )
        deadline = time.monotonic() + START_TIMEOUT
        root = _read_root(proc, deadline)
        threading.Thread(target=_drain, args=(proc.stdout,), daemon=True).start()
        while proc.poll() is None and not _udp_bound(port) and time.monotonic() < deadline:
            time.sleep(0.05)
        if proc.poll() is not None or not _udp_bound(port):
            raise WrapperError(f"libswift did not bind 127.0.0.1:{port} (exit {proc.poll()})")
        print(f"READY {root}", flush=True)
        code = proc.wait()
        raise WrapperError(f"libswift seeder exited by itself with {code}")
    finally:
        if proc is not None:
            _stop(proc)
        shutil.rmtree(scratch, ignore_errors=True)


def leech(binary: str, root: str, peer: str, output: str, chunk_size: int, timeout: float) -> int:
    out_dir = os.path.dirname(os.path.abspath(output))
    workdir = tempfile.mkdtemp(
        prefix=".libswift-leech-", dir=out_dir
    )  # same file system: rename is atomic
    proc: subprocess.Popen[bytes] | None = None
    try:
        cmd = leech_command(binary, root, peer, _free_udp_port(), chunk_size, workdir)
        proc = subprocess.Popen(cmd.argv, cwd=cmd.cwd, stdin=subprocess.DEVNULL, stdout=sys.stderr)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise WrapperError(
                f"libswift did not complete the download within {timeout:g} s"
            ) from None
        if code != 0:
            raise WrapperError(f"libswift exited with {code}")
        saved = os.path.join(workdir, root.lower())
        if not os.path.isfile(saved):
            raise WrapperError(f"libswift exited 0 but saved no ./{root.lower()}")
        os.replace(saved, output)
        return 0
    finally:
        if proc is not None:
            _stop(proc)
        shutil.rmtree(workdir, ignore_errors=True)


def _parse(role: str, args: Sequence[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=f"libswift_wrapper {role}")
    if role == "seed":
        ap.add_argument("file")
        ap.add_argument("--port", type=int, required=True)
    else:
        ap.add_argument("root")
        ap.add_argument("peer")
        ap.add_argument("-o", "--output", required=True)
        ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--addressing", default="chunk32")
    ap.add_argument("--chunk-size", type=int, default=1024)
    return ap.parse_args(list(args))


@cli_main("libswift_wrapper", expected=(WrapperError,))
def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in ("seed", "leech"):
        return UNSUPPORTED
    binary = libswift_binary()
    if binary is None:
        print(
            "libswift_wrapper: LIBSWIFT_BIN does not name an executable libswift binary: "
            "unsupported",
            file=sys.stderr,
        )
        return UNSUPPORTED
    role = args[0]
    a = _parse(role, args[1:])
    if a.addressing not in ADDRESSING:
        return UNSUPPORTED
    if role == "seed":
        return seed(binary, a.file, a.port, a.chunk_size)
    return leech(binary, a.root, a.peer, a.output, a.chunk_size, a.timeout)


if __name__ == "__main__":
    sys.exit(main())
