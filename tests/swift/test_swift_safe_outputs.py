"""Issue 13 items 11 and 12: a download appears under its final name only when
every chunk is verified and the length is right (FILE.part + its resume state
until then; Ctrl-C/SIGTERM say what was kept and how to resume), and a seeder
never trusts a cached hash tree for a file that changed under the same size and
mtime (cache keyed by device, inode, size, mtime and ctime; a sample of chunks
checked against the tree on load)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest
from swift_support import SwiftProcess

from swift.aio import files as F, node as N
from swift.aio.node import downloader, seeder, tree_for_file
from swift.core.peer import PeerConfig

pytestmark = pytest.mark.timeout(120)

SEEDER = """
import asyncio, sys
from swift.aio.node import seeder
from swift.core.peer import PeerConfig
async def main():
    async with seeder(sys.argv[1], PeerConfig(upload_rate=float(sys.argv[2])), "127.0.0.1", 0) as n:
        print(n.peer.swarm_id.hex(), n.port, flush=True)
        await asyncio.sleep(120)
asyncio.run(main())
"""


def _sha(path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _slow_seeder(path, rate: float) -> tuple[subprocess.Popen, str, int]:
    p = subprocess.Popen([sys.executable, "-c", SEEDER, str(path), str(rate)],
                         stdout=subprocess.PIPE, text=True)
    root, port = p.stdout.readline().split()
    return p, root, int(port)


def _reap(p: subprocess.Popen | None) -> None:
    if p is not None and p.poll() is None:
        p.kill()
    if p is not None:
        p.wait(10)


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_download_keeps_a_part_file_and_says_how_to_resume(tmp_path, sig, code):
    src = tmp_path / "v.bin"
    src.write_bytes(os.urandom(1_500_000))
    out = tmp_path / "r.bin"
    part = tmp_path / "r.bin.part"
    seed, root, port = _slow_seeder(src, 300_000)
    dl = None
    try:
        argv = ["download", root, "--peer", f"127.0.0.1:{port}", "-o", str(out), "--picker", "vod",
                "--timeout", "60"]
        # SIGINT at its default even when pytest runs as a background job (it would be ignored)
        dl = subprocess.Popen([sys.executable, "-m", "swift", *argv], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT,
                                                               signal.default_int_handler))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (not part.exists() or part.stat().st_size < 200_000):
            assert not out.exists(), "the final name appeared before the download completed"
            time.sleep(0.05)
        assert part.exists() and part.stat().st_size >= 200_000, "no progress"
        assert not out.exists()
        dl.send_signal(sig)
        stdout, err = dl.communicate(timeout=30)
        assert dl.returncode == code, err
        assert stdout == "" and "Traceback" not in err
        assert not out.exists(), "a holey file under the final name"
        assert part.exists() and os.path.exists(f"{part}.mhash.json")
        line = [ln for ln in err.splitlines() if "resume" in ln]
        assert len(line) == 1, err
        assert str(part) in line[0]
        cmd = line[0].split("resume with: ", 1)[1]
        args = shlex.split(cmd)
        assert args[0] == "ppspp" and args[1:] == argv
        r = subprocess.run([sys.executable, "-m", "swift", *args[1:], "-q"], capture_output=True,
                           text=True, timeout=90)
        assert r.returncode == 0, r.stderr
        assert "resumed" in r.stderr  # it picked the .part up
        assert _sha(out) == _sha(src)
        assert not part.exists() and not os.path.exists(f"{part}.mhash.json")
        assert os.path.exists(f"{out}.mhash.json")  # a later run verifies instead of fetching
    finally:
        _reap(dl)
        _reap(seed)


async def test_the_api_renames_only_a_complete_verified_download(tmp_path):
    src = tmp_path / "v.bin"
    src.write_bytes(os.urandom(600_000))
    out = str(tmp_path / "r.bin")
    async with seeder(str(src), PeerConfig(upload_rate=400_000)) as s:
        async with downloader(s.peer.swarm_id, out) as d:
            d.connect(s.addr)
            for _ in range(200):
                await asyncio.sleep(0.02)
                assert d.peer.content.complete or not os.path.exists(out)
                if d.progress[0] > 50:
                    break
            assert not os.path.exists(out) and os.path.exists(out + ".part")
            assert await d.wait_complete(30)
            assert _sha(out) == _sha(src)
            assert not os.path.exists(out + ".part")
    assert sorted(os.listdir(tmp_path)) == ["r.bin", "r.bin.mhash", "r.bin.mhash.json", "v.bin",
                                            "v.bin.mhash", "v.bin.mhash.json", "v.bin.mhash.stamp"]
    assert _sha(out) == _sha(src)


async def test_an_existing_unrelated_file_stays_until_replaced(tmp_path):
    """-o onto a file that is not an earlier download of this root: it stays
    untouched while downloading and is replaced in one rename at the end."""
    src = tmp_path / "v.bin"
    src.write_bytes(os.urandom(300_000))
    out = tmp_path / "r.bin"
    out.write_bytes(b"precious" * 1000)
    async with seeder(str(src), PeerConfig(upload_rate=300_000)) as s:
        async with downloader(s.peer.swarm_id, str(out)) as d:
            d.connect(s.addr)
            await asyncio.sleep(0.3)
            assert out.read_bytes() == b"precious" * 1000
            assert await d.wait_complete(30)
    assert _sha(out) == _sha(src)


def _same_size_and_mtime(path, data: bytes) -> None:
    st = os.stat(path)
    with open(path, "r+b") as f:
        f.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_size == st.st_size and os.stat(path).st_mtime_ns == st.st_mtime_ns


def test_changed_content_with_the_same_size_and_mtime_is_rehashed(tmp_path):
    f = tmp_path / "v.bin"
    f.write_bytes(os.urandom(100_000))
    old = tree_for_file(str(f)).root_hash
    _same_size_and_mtime(f, os.urandom(100_000))
    r = N.load_or_build_tree(str(f))
    assert r.status is N.CacheStatus.STALE
    assert "changed" in r.message
    assert r.tree.root_hash != old
    assert r.tree.root_hash == tree_for_file(str(f), cache=False).root_hash


def test_a_forged_stamp_is_caught_by_the_chunk_sample(tmp_path):
    """Even with a stamp that matches (a file system whose ctime is coarse, a
    restored cache), chunks sampled on load must match the tree."""
    f = tmp_path / "v.bin"
    f.write_bytes(os.urandom(200_000))
    old = tree_for_file(str(f)).root_hash
    stamp_file = f"{f}.mhash.stamp"
    with open(f, "r+b") as fh:  # one byte in one chunk in the middle
        fh.seek(100_000)
        b = fh.read(1)
        fh.seek(100_000)
        fh.write(bytes([b[0] ^ 1]))
    with open(stamp_file, "w") as fh:
        fh.write(F._stamp(os.stat(f)))
    r = N.load_or_build_tree(str(f))
    assert r.status is N.CacheStatus.MISMATCH, r
    assert "rebuilt" in r.message
    assert r.tree.root_hash != old
    assert r.tree.root_hash == tree_for_file(str(f), cache=False).root_hash
    assert N.load_or_build_tree(str(f)).status is N.CacheStatus.HIT


def test_a_copy_with_its_cache_on_another_inode(tmp_path):
    f = tmp_path / "v.bin"
    f.write_bytes(os.urandom(100_000))
    root = tree_for_file(str(f)).root_hash
    d = tmp_path / "copy"
    d.mkdir()
    subprocess.run(["cp", "-p", *[str(p) for p in tmp_path.glob("v.bin*")], str(d)], check=True)
    r = N.load_or_build_tree(str(d / "v.bin"))
    assert r.status is N.CacheStatus.STALE and r.tree.root_hash == root
    # and a different file copied over it with cp -p: same size, its own mtime
    other = tmp_path / "w.bin"
    other.write_bytes(os.urandom(100_000))
    st = os.stat(d / "v.bin")
    os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
    subprocess.run(["cp", "-p", str(other), str(d / "v.bin")], check=True)
    assert (tree_for_file(str(d / "v.bin")).root_hash
            == tree_for_file(str(other), cache=False).root_hash)


def test_seed_says_when_it_rehashes(tmp_path):
    f = tmp_path / "v.bin"
    f.write_bytes(os.urandom(50_000))
    old = tree_for_file(str(f)).root_hash
    _same_size_and_mtime(f, os.urandom(50_000))
    r = subprocess.run([sys.executable, "-m", "swift", "seed", str(f), "--host", "127.0.0.1",
                        "--port", "0", "--duration", "0.5"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] != old.hex()
    assert "hash tree" in r.stderr and "rehash" in r.stderr, r.stderr


def test_a_live_view_that_gets_nothing_leaves_an_existing_file_alone(tmp_path):
    """live-view -o FILE records into FILE.part; FILE is replaced only by a
    recording that has verified bytes (before: FILE was truncated at start)."""
    out = tmp_path / "rec.ts"
    out.write_bytes(b"last night's recording")
    feed = tmp_path / "feed"
    feed.write_bytes(os.urandom(100_000))
    src = SwiftProcess(["live-source", "--input", str(feed), "--host", "127.0.0.1", "--port", "0",
                        "--rate", "50000", "--linger", "20"], marker="live source on")
    try:  # the wrong method: every chunk is refused, nothing verifies
        r = subprocess.run([sys.executable, "-m", "swift", "live-view", src.id, "--peer", src.peer,
                            "--live-method", "sign-all", "-o", str(out), "--silence", "2"],
                           capture_output=True, text=True, timeout=60)
    finally:
        src.stop()
    assert r.returncode == 1, r.stderr
    assert out.read_bytes() == b"last night's recording"
    assert sorted(os.listdir(tmp_path)) == ["feed", "rec.ts"]
