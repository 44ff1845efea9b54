"""``ppspp live-source`` / ``live-view`` as a user meets them (user test 19): the
input is checked before anything is printed; a viewer with the wrong method or
key says what to check; a viewer whose source died stops after --silence."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from swift_support import SwiftProcess


def ppspp(*args, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "swift", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)


class Source(SwiftProcess):
    def __init__(self, path, *extra: str) -> None:
        super().__init__(["live-source", "--input", str(path), "--host", "127.0.0.1", "--port", "0",
                          *extra], marker="live source on")
        self.swarm = self.id


@pytest.fixture
def feed(tmp_path):
    f = tmp_path / "feed.ts"
    f.write_bytes(os.urandom(200_000))
    return f


def test_live_source_checks_its_input_first(tmp_path):
    r = ppspp("live-source", "--input", tmp_path / "nope.ts", "--port", "0")
    assert r.returncode == 2 and "no such file" in r.stderr
    assert r.stdout == "" and "live source on" not in r.stderr


def test_wrong_live_method_gets_a_hint(feed):
    src = Source(feed, "--rate", "50000", "--linger", "20")
    try:
        r = ppspp("live-view", src.swarm, "--peer", src.peer, "--live-method", "sign-all",
                  "--silence", "3", "-o", os.devnull)
    finally:
        src.stop()
    assert r.returncode == 1
    assert "--live-method" in r.stderr and "key" in r.stderr, r.stderr
    assert "chunk None" not in r.stderr


def test_a_viewer_whose_source_died_ends(tmp_path, feed):
    src = Source(feed, "--rate", "100000", "--linger", "30")
    out = tmp_path / "view.bin"
    try:
        viewer = subprocess.Popen([sys.executable, "-m", "swift", "live-view", src.swarm, "--peer",
                                   src.peer, "-o", str(out), "--silence", "3"],
                                  stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 20
        part = tmp_path / "view.bin.part"  # the recording until the viewer stops
        while time.monotonic() < deadline and (not part.exists() or part.stat().st_size < 5000):
            time.sleep(0.1)
        assert part.exists() and part.stat().st_size >= 5000
        src.stop()  # the source dies without a word
        err = viewer.stderr.read()
        rc = viewer.wait(30)
    finally:
        src.stop()
        if viewer.poll() is None:
            viewer.kill()
            viewer.wait()
    assert rc == 0, err
    assert "no new chunk for 3 s" in err
    assert out.stat().st_size >= 5000 and not (tmp_path / "view.bin.part").exists()
