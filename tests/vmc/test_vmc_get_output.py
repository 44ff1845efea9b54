"""``vmc get -o FILE``: FILE appears only complete and verified (issue 13 item 10).

Every failure (Ctrl-C, SIGTERM, the origin killed mid-body, a full disk) leaves either no new
file or ``FILE.part`` with one line saying how to resume; running the same command again
continues with Range + If-Range, and restarts when the object changed meanwhile. ``-o -``,
devices and FIFOs are written into, never replaced. Real ``vmc`` processes on loopback.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from vmc.aio.origin import expected

PY = [sys.executable, "-m", "vmc"]
SIZE = 3_000_000


def _as_foreground() -> None:
    """A Ctrl-C target starts with SIGINT at its default (a CI job in the background would
    otherwise hand it down ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Origin:
    """``vmc origin`` as a process on a fixed port (so it can be killed and started again)."""

    def __init__(self, port: int, rate: str = "0") -> None:
        self.port = port
        self.p = subprocess.Popen(PY + ["origin", "--listen", f"127.0.0.1:{port}", "--rate", rate,
                                        "--loop", "asyncio"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.p.stdout.readline() if self.p.stdout else ""
        if "http://" not in line:
            self.kill()
            raise AssertionError(f"origin did not start: {line!r}")

    def stats(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/_origin/stats", timeout=10) as r:
            return json.loads(r.read())

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(10)
        for f in (self.p.stdout, self.p.stderr):
            if f:
                f.close()


@pytest.fixture
def origin():
    started: list[_Origin] = []

    def start(port: int | None = None, rate: str = "0") -> _Origin:
        o = _Origin(port or _free_port(), rate)
        started.append(o)
        return o

    yield start
    for o in started:
        o.kill()


def _get(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(PY + ["get", *args], capture_output=True, text=True, timeout=timeout)


def _wait_for_bytes(o: _Origin, path: str, at_least: int, p: subprocess.Popen) -> None:
    for _ in range(400):  # bounded: 400 x 25 ms
        if o.stats()["per_path"].get(path, 0) >= at_least:
            return
        assert p.poll() is None, p.communicate()
        time.sleep(0.025)
    raise AssertionError("the origin never sent the first bytes")


def _resume_line(stderr: str, part: Path) -> None:
    lines = [ln for ln in stderr.splitlines() if str(part) in ln]
    assert len(lines) == 1 and "resume" in lines[0], stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_keeps_part_and_the_same_command_resumes(origin, tmp_path: Path, sig, code) -> None:
    o = origin(rate="2e6")
    url = f"http://127.0.0.1:{o.port}/sig.bin?size={SIZE}"
    out = tmp_path / "sig.bin"
    p = subprocess.Popen(PY + ["get", url, "-o", str(out)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=_as_foreground)
    try:
        _wait_for_bytes(o, "/sig.bin", 200_000, p)
        p.send_signal(sig)
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
    assert p.returncode == code, err
    assert not out.exists()
    part = Path(str(out) + ".part")
    assert part.exists()
    _resume_line(err, part)
    sent_before = o.stats()["per_path"]["/sig.bin"]
    assert sent_before < SIZE
    r = _get(url, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == expected("/sig.bin", SIZE)
    assert not part.exists() and not list(tmp_path.glob("*.json"))
    st = o.stats()
    assert st["range_requests"] >= 1
    # the second run fetched only what the first had not kept (plus what was in flight)
    assert st["per_path"]["/sig.bin"] - sent_before < SIZE


def test_origin_killed_mid_body_keeps_part_then_resumes(origin, tmp_path: Path) -> None:
    o = origin(rate="2e6")
    url = f"http://127.0.0.1:{o.port}/dead.bin?size={SIZE}"
    out = tmp_path / "dead.bin"
    p = subprocess.Popen(PY + ["get", url, "-o", str(out), "--timeout", "20"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_bytes(o, "/dead.bin", 300_000, p)
        o.kill()
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
    assert p.returncode == 1, err
    assert not out.exists()
    part = Path(str(out) + ".part")
    _resume_line(err, part)
    o2 = origin(port=o.port)
    r = _get(url, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == expected("/dead.bin", SIZE)
    assert not part.exists()
    st = o2.stats()
    assert st["range_requests"] >= 1 and st["per_path"]["/dead.bin"] < SIZE


def test_changed_object_restarts_instead_of_splicing(origin, tmp_path: Path) -> None:
    """The first answer breaks at 1 MB and the origin then publishes a new version (new ETag and
    Last-Modified): the resume's If-Range fails, the whole object comes again."""
    o = origin()
    url = f"http://127.0.0.1:{o.port}/chg.bin?size={SIZE}&fail_at=1000000&fail_once=1&change=1"
    out = tmp_path / "chg.bin"
    r = _get(url, "-o", str(out))
    assert r.returncode == 1
    part = Path(str(out) + ".part")
    _resume_line(r.stderr, part)
    r = _get(url, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == expected("/chg.bin", SIZE)
    st = o.stats()
    assert st["per_path"]["/chg.bin"] == 1_000_000 + SIZE  # all of it again, nothing spliced
    info = json.loads(r.stdout)
    assert info["parts"] == [[0, SIZE, 200]]


def test_failed_get_leaves_an_existing_file_alone(origin, tmp_path: Path) -> None:
    o = origin()
    out = tmp_path / "keep.bin"
    out.write_bytes(b"old contents")
    r = _get(f"http://127.0.0.1:{o.port}/keep.bin?size={SIZE}&fail_at=500000&noetag=1&nolm=1",
             "-o", str(out))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert out.read_bytes() == b"old contents"
    # no strong validator: a part could not be resumed safely, so none is kept
    assert not Path(str(out) + ".part").exists()
    assert "no validator" in r.stderr


def test_dash_writes_stdout_not_a_file_named_dash(origin, tmp_path: Path) -> None:
    o = origin()
    r = subprocess.run(PY + ["get", f"http://127.0.0.1:{o.port}/s.bin?size=200000", "-o", "-"],
                       capture_output=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == expected("/s.bin", 200000)
    assert not (tmp_path / "-").exists()


def test_fifo_is_written_into_not_replaced(origin, tmp_path: Path) -> None:
    o = origin()
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    r = _get(f"http://127.0.0.1:{o.port}/f.bin?size=500000", "-o", str(fifo))
    reader.join(30)
    assert r.returncode == 0, r.stderr
    assert got == [expected("/f.bin", 500000)]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["pipe"]


def test_dev_full_is_one_line(origin) -> None:
    o = origin()
    r = _get(f"http://127.0.0.1:{o.port}/full.bin?size=200000", "-o", "/dev/full")
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "no space left" in r.stderr.lower(), r.stderr


@pytest.mark.root
def test_full_disk_leaves_no_file(origin, tmp_path: Path) -> None:
    from deliverykit.testing import require_root

    require_root()
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], check=True)
    try:
        o = origin()
        out = mnt / "big.bin"
        r = _get(f"http://127.0.0.1:{o.port}/big.bin?size={SIZE}", "-o", str(out))
        assert r.returncode == 1
        assert "no space left" in r.stderr.lower() and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.count("\n") == 1, r.stderr
        assert list(mnt.iterdir()) == []
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_progress_is_on_stderr_only(origin, tmp_path: Path) -> None:
    o = origin()
    out = tmp_path / "p.bin"
    r = _get(f"http://127.0.0.1:{o.port}/p.bin?size=400000", "-o", str(out))
    assert r.returncode == 0, r.stderr
    json.loads(r.stdout)  # stdout is exactly the promised JSON
    summary = r.stderr.strip().splitlines()
    assert len(summary) == 1 and re.search(r"400000 bytes .* -> .*p\.bin", summary[0]), r.stderr


def test_progress_bar_only_on_a_terminal(origin, tmp_path: Path) -> None:
    """stderr on a pseudo-terminal: a bytes/rate bar is drawn there (and the summary line after)."""
    import pty

    o = origin(rate="2e6")
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(PY + ["get", f"http://127.0.0.1:{o.port}/t.bin?size=1500000", "-o",
                                   str(tmp_path / "t.bin")], stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        seen = b""
        while True:  # until the child closes the terminal (bounded by its own run)
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the pty
                break
            if not chunk:
                break
            seen += chunk
        out, _ = p.communicate(timeout=60)
    finally:
        os.close(master)
        if p.poll() is None:
            p.kill()
            p.wait(10)
    assert p.returncode == 0
    json.loads(out)  # the bar never reaches stdout
    text = seen.decode("utf-8", "replace")
    # bytes done / total: a bar was drawn
    assert re.search(r"\d+(\.\d+)?/1\.5 MB", text), text[-500:]
    assert "1500000 bytes" in text


async def test_digest_mismatch_keeps_nothing(tmp_path: Path) -> None:
    """Bytes that fail the offered Repr-Digest are never kept: no FILE, no FILE.part to resume
    from."""
    import asyncio
    import base64
    import hashlib

    from vmc.client import FetchError, fetch

    body = b"x" * 100_000
    wrong = base64.b64encode(hashlib.sha256(b"something else").digest())

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nETag: \"v1\"\r\n"
                     b"Repr-Digest: sha-256=:%s:\r\n"
                     b"Connection: close\r\n\r\n" % (len(body), wrong) + body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    out = tmp_path / "d.bin"
    try:
        with pytest.raises(FetchError, match="digest mismatch"):
            await fetch(f"http://127.0.0.1:{port}/d", out=out, timeout=10)
    finally:
        server.close()
        await server.wait_closed()
    assert list(tmp_path.iterdir()) == []


def test_closed_stdout_is_quiet(origin) -> None:
    """``vmc get URL | head -c 10``: the reader leaving is not an error (exit 141, as cat does)."""
    o = origin()
    p = subprocess.Popen(PY + ["get", f"http://127.0.0.1:{o.port}/h.bin?size=3000000"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None
    head = p.stdout.read(10)
    p.stdout.close()
    _, err = p.communicate(timeout=60)
    assert head == expected("/h.bin", 10)
    assert p.returncode == 141 and err == b"", err


def test_second_download_to_the_same_file_is_refused(origin, tmp_path: Path) -> None:
    """Two runs for one output would interleave their bytes in one part: the second is refused
    (one line, exit 1) and the first completes untouched."""
    o = origin(rate="2e6")
    url = f"http://127.0.0.1:{o.port}/two.bin?size={SIZE}"
    out = tmp_path / "two.bin"
    first = subprocess.Popen(PY + ["get", url, "-o", str(out)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_bytes(o, "/two.bin", 100_000, first)
        second = _get(url, "-o", str(out))
        _, err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(10)
    assert second.returncode == 1, second.stderr
    assert "being written by another download" in second.stderr, second.stderr
    assert second.stderr.count("\n") == 1
    assert first.returncode == 0, err
    assert out.read_bytes() == expected("/two.bin", SIZE)


def test_refused_connection_is_said_in_words(tmp_path: Path) -> None:
    port = _free_port()  # nothing listens there
    r = _get(f"http://127.0.0.1:{port}/x", "-o", str(tmp_path / "x"))
    assert r.returncode == 1
    assert r.stderr == f"vmc get: cannot connect to 127.0.0.1:{port}: connection refused; " \
                       f"{tmp_path / 'x'} not written\n"
    assert list(tmp_path.iterdir()) == []
