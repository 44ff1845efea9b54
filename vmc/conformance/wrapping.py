"""The common half of a proxy wrapper under the http-proxy contract (see :mod:`vmc.conformance`).

A wrapper writes the proxy's configuration into its own temporary directory,
then calls :func:`serve`: start the proxy in the foreground, wait until the
listen port accepts connections, print ``READY``, wait for the proxy (or
SIGTERM), and always stop it, reap it and remove the directory.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

UNSUPPORTED = 127


def parse(prog: str, argv: Sequence[str] | None,
          flags: Sequence[tuple[str, str]] = ()) -> argparse.Namespace:
    """``[FLAGS] proxy --listen HOST:PORT --upstream HOST:PORT``: the contract's arguments."""
    ap = argparse.ArgumentParser(prog=prog)
    for flag, help_ in flags:
        ap.add_argument(flag, action="store_true", help=help_)
    ap.add_argument("role")
    ap.add_argument("--listen", required=True)
    ap.add_argument("--upstream", required=True)
    return ap.parse_args(sys.argv[1:] if argv is None else list(argv))


def split(authority: str) -> tuple[str, int]:
    host, _, port = authority.rpartition(":")
    return host, int(port)


def serve(argv: list[str], listen: str, workdir: Path, ready_timeout: float = 20.0,
          log: Path | None = None) -> int:
    """Run ``argv`` (a proxy in the foreground) until it exits or we get SIGTERM (module doc).

    With ``log``, the tail of that file goes to stderr if the proxy exits
    before it is ready (so a failing configuration explains itself).
    """
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sys.stderr)
    signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
    try:
        host, port = split(listen)
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection((host, port), timeout=0.2).close()
            except OSError:
                time.sleep(0.05)
                continue
            print("READY", flush=True)
            break
        else:
            if log is not None and log.exists():
                sys.stderr.write(log.read_text(errors="replace")[-3000:])
            if proc.poll() is None:
                return 1  # never became ready: the finally below stops it
        return proc.wait()
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)
