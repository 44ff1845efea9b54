"""Live interop with the real libswift binary (issue 15 item 1): no profile and no
--hash on our side; a download gives only the root, peer and output (the chunk
size is learnt), a seeder the file, port and, for an 8 KiB swarm, its chunk size.

Opt-in, outside CI: libswift is a C++ program users build themselves; set
``LIBSWIFT_BIN`` to it (e.g. ``LIBSWIFT_BIN=/path/to/libswift/swift``).  Without
it these tests are deselected (opt-in, outside CI).  Traffic stays on 127.0.0.1.
The CI tests of the same exchanges replay real captures:
tests/swift/test_swift_capture_replay.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

LIBSWIFT = os.environ.get("LIBSWIFT_BIN", "")
pytestmark = [
    # opt-in: deselected without $LIBSWIFT_BIN (tests/conftest.py)
    pytest.mark.live_peer("LIBSWIFT_BIN"),
    pytest.mark.slow,
]
PPSPP = [sys.executable, "-m", "swift"]
SIZE = 1_049_353  # as the shared captures' content: a last chunk that is not full
WAIT = 90.0  # safety bound only


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _content(tmp_path: Path) -> tuple[Path, str]:
    data = os.urandom(SIZE)
    path = tmp_path / "seed" / "content.bin"
    path.parent.mkdir()
    path.write_bytes(data)
    return path, hashlib.sha1(data).hexdigest()


def _wait_for(path: Path, pattern: str, proc: subprocess.Popen) -> re.Match:
    end = time.monotonic() + WAIT
    while time.monotonic() < end:
        m = (re.search(pattern, path.read_text(errors="replace"), re.MULTILINE)
             if path.exists() else None)
        if m:
            return m
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError(
        f"{pattern!r} never appeared in {path}: {path.read_text(errors='replace')}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("cs", [1024, 8192])
def test_libswift_seeds_we_download(tmp_path: Path, cs: int) -> None:
    src, want = _content(tmp_path)
    port = _free_port()
    log = tmp_path / "libswift-seed.log"
    with log.open("w") as fh:
        seed = subprocess.Popen(
            [LIBSWIFT, "-f", src.name, "-l", f"127.0.0.1:{port}", "-z", str(cs)],
            cwd=src.parent, stdout=fh, stderr=subprocess.STDOUT)
    try:
        root = _wait_for(log, r"Root hash: ([0-9a-f]{40})", seed).group(1)
        out = tmp_path / "out.bin"
        # no --chunk-size even at 8 KiB: learnt from libswift's DATA (one restart)
        args = ["download", root, "--peer", f"127.0.0.1:{port}", "-o", str(out), "-q",
                "--timeout", "60"]
        r = subprocess.run(PPSPP + args, capture_output=True, text=True, timeout=WAIT, check=False)
    finally:
        _stop(seed)
    assert r.returncode == 0, r.stderr
    assert f"{SIZE} bytes verified" in r.stderr
    assert ("starting again with --chunk-size 8192" in r.stderr) == (cs == 8192), r.stderr
    assert hashlib.sha1(out.read_bytes()).hexdigest() == want


@pytest.mark.parametrize("cs", [1024, 8192])
def test_we_seed_libswift_downloads(tmp_path: Path, cs: int) -> None:
    src, want = _content(tmp_path)
    log = tmp_path / "ppspp-seed.err"
    with log.open("w") as fh:
        seed = subprocess.Popen(PPSPP + ["seed", str(src), "--host", "127.0.0.1", "--port", "0"]
                                + (["--chunk-size", str(cs)] if cs != 1024 else []),
                                stdout=subprocess.DEVNULL, stderr=fh)
    leech_dir = tmp_path / "leech"
    leech_dir.mkdir()
    try:
        root = _wait_for(log, r"as SHA-1 swarm ([0-9a-f]{40})", seed).group(1)
        port = int(_wait_for(log, r"^seeding .* on [0-9.]+:(\d+)$", seed).group(1))
        r = subprocess.run([LIBSWIFT, "-t", f"127.0.0.1:{port}", "-h", root,
                            "-l", f"127.0.0.1:{_free_port()}", "-z", str(cs), "-w", "0s"],
                           cwd=leech_dir, capture_output=True, text=True, timeout=WAIT, check=False)
    finally:
        _stop(seed)
        err = log.read_text()
    assert r.returncode == 0, (r.stdout[-2000:], err)
    got = leech_dir / root
    assert got.stat().st_size == SIZE
    assert hashlib.sha1(got.read_bytes()).hexdigest() == want
    shutil.rmtree(leech_dir)


def test_one_swarm_both_dialects(tmp_path: Path) -> None:
    """One SHA-1 swarm holding both kinds of peer at once: libswift seeds, our seeder seeds
    the same file (same 40-hex root: identical trees), our leecher downloads from both
    seeders, and a libswift leecher downloads from our seeder meanwhile."""
    src, want = _content(tmp_path)
    lport = _free_port()
    llog = tmp_path / "libswift-seed.log"
    with llog.open("w") as fh:
        ls_seed = subprocess.Popen([LIBSWIFT, "-f", src.name, "-l", f"127.0.0.1:{lport}"],
                                   cwd=src.parent, stdout=fh, stderr=subprocess.STDOUT)
    ours_src = tmp_path / "ours.bin"
    shutil.copy(src, ours_src)
    olog = tmp_path / "ppspp-seed.err"
    with olog.open("w") as fh:
        our_seed = subprocess.Popen(PPSPP + ["seed", str(ours_src), "--host", "127.0.0.1",
                                             "--port", "0"],
                                    stdout=subprocess.PIPE, stderr=fh, text=True)
    leech_dir = tmp_path / "leech"
    leech_dir.mkdir()
    ls_leech = None
    try:
        root = _wait_for(llog, r"Root hash: ([0-9a-f]{40})", ls_seed).group(1)
        assert _wait_for(olog, r"as SHA-1 swarm ([0-9a-f]{40})", our_seed).group(1) == root
        oport = int(_wait_for(olog, r"^seeding .* on [0-9.]+:(\d+)$", our_seed).group(1))
        ls_leech = subprocess.Popen([LIBSWIFT, "-t", f"127.0.0.1:{oport}", "-h", root,
                                     "-l", f"127.0.0.1:{_free_port()}", "-w", "0s"],
                                    cwd=leech_dir, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
        out = tmp_path / "out.bin"
        r = subprocess.run(PPSPP + ["download", root, "--peer", f"127.0.0.1:{lport}",
                                    "--peer", f"127.0.0.1:{oport}", "-o", str(out), "-q",
                                    "--timeout", "60"],
                           capture_output=True, text=True, timeout=WAIT, check=False)
        ls_rc = ls_leech.wait(WAIT)
    finally:
        for p in (ls_leech, ls_seed):
            if p is not None:
                _stop(p)
        _stop(our_seed)
        seed_out = our_seed.stdout.read()
        our_seed.stdout.close()
    assert r.returncode == 0, r.stderr
    assert hashlib.sha1(out.read_bytes()).hexdigest() == want
    assert ls_rc == 0
    assert hashlib.sha1((leech_dir / root).read_bytes()).hexdigest() == want
    stats = json.loads(seed_out.strip().splitlines()[-1])["stats"]
    assert stats["sent_data"] > 0 and stats["refused"] == 0, stats
