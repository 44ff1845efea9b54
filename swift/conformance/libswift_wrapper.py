"""The libswift C++ peer under the PPSPP conformance contract (registry name ``libswift``). UNTESTED here.

    python -m swift.conformance.libswift_wrapper seed FILE --port P [--addressing A] [--chunk-size C]
    python -m swift.conformance.libswift_wrapper leech ROOTHASH HOST:PORT -o FILE [--chunk-size C] [--timeout T]

Users build libswift themselves (github.com/libswift/libswift, ``make``; needs
libevent); nothing here fetches it. The binary is ``$LIBSWIFT_BIN`` (default
``swift`` on PATH); without it every case is *unsupported* (exit 127). The
command templates are the ones in docs/swift-libswift-compat.md::

    seed:  $LIBSWIFT_BIN -f FILE -l 127.0.0.1:P -z C
    leech: $LIBSWIFT_BIN -t HOST:PORT -h ROOTHASH -o FILE -z C

libswift speaks draft-10 with SHA-1 trees and 32-bit chunk ranges, so its
registry entry sets ``PPSPP_PROFILE=libswift`` (the cases then use SHA-1 and
run our peer in its libswift profile) and other addressing methods exit 127.
READY is printed once the UDP port is bound (read from /proc/net/udp); the
cases recompute the root hash themselves. A leech that has not exited by
itself within the timeout is stopped and reported as a failure (exit 1).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time

UNSUPPORTED = 127


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


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    binary = shutil.which(os.environ.get("LIBSWIFT_BIN", "swift"))
    if not args or args[0] not in ("seed", "leech") or binary is None:
        return UNSUPPORTED
    role = args[0]
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
    a = ap.parse_args(args[1:])
    if a.addressing != "chunk32":
        return UNSUPPORTED  # libswift sends 32-bit chunk ranges only
    if role == "seed":
        proc = subprocess.Popen([binary, "-f", a.file, "-l", f"127.0.0.1:{a.port}", "-z", str(a.chunk_size)],
                                stdin=subprocess.DEVNULL, stdout=sys.stderr)
        signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
        try:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and proc.poll() is None and not _udp_bound(a.port):
                time.sleep(0.05)
            if proc.poll() is not None or not _udp_bound(a.port):
                return 1
            print("READY", flush=True)
            return proc.wait()
        finally:
            _stop(proc)
    proc = subprocess.Popen([binary, "-t", a.peer, "-h", a.root, "-o", a.output, "-z", str(a.chunk_size)],
                            stdin=subprocess.DEVNULL, stdout=sys.stderr)
    try:
        return 0 if proc.wait(a.timeout) == 0 else 1
    except subprocess.TimeoutExpired:
        return 1
    finally:
        _stop(proc)


if __name__ == "__main__":
    sys.exit(main())
