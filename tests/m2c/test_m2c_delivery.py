"""m2c.aio.delivery: the receiver's output apart from its multicast pump. Blocks go into
a temporary file; only a file whose SHA-256 matches reaches the output (renamed over a
regular file, copied into a FIFO or device); otherwise the old output stays and no
temporary file is left."""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
import threading
from pathlib import Path

from m2c.aio.delivery import Delivery, via_proc

DATA = os.urandom(5000)
SHA = hashlib.sha256(DATA).hexdigest()


def _fill(d: Delivery, data: bytes) -> None:
    d.open()
    for off in reversed(range(0, len(data), 1400)):  # out of order, as blocks are decoded
        d.write(off, data[off:off + 1400])


def test_a_verified_file_replaces_the_output_and_keeps_its_mode(tmp_path: Path) -> None:
    out = tmp_path / "out.bin"
    out.write_bytes(b"old")
    out.chmod(0o640)
    d = Delivery(str(out), len(DATA), SHA)
    _fill(d, DATA)
    assert out.read_bytes() == b"old"  # nothing reaches the output before verification
    assert d.verified()
    d.close()
    asyncio.run(d.deliver())
    d.discard()
    assert out.read_bytes() == DATA and stat.S_IMODE(out.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_a_file_that_fails_its_hash_leaves_the_old_output_and_no_temporary(tmp_path: Path) -> None:
    out = tmp_path / "out.bin"
    out.write_bytes(b"old")
    d = Delivery(str(out), len(DATA), SHA)
    _fill(d, DATA[:-1] + bytes([DATA[-1] ^ 1]))
    assert not d.verified()
    d.close()
    d.discard()
    assert out.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_a_fifo_is_written_into_from_a_temporary_file_elsewhere(tmp_path: Path,
                                                                monkeypatch) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    monkeypatch.setattr("tempfile.tempdir", None)
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    d = Delivery(str(fifo), len(DATA), SHA)
    _fill(d, DATA)
    assert d.to_stream and os.path.dirname(d.tmp) == str(tmpdir)
    assert "temporary file in" in d.io_error(OSError(28, "No space left on device"), str(fifo))
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    assert d.verified()
    d.close()
    asyncio.run(asyncio.wait_for(d.deliver(), 60))
    d.discard()
    reader.join(30)
    assert got == [DATA] and stat.S_ISFIFO(os.stat(fifo).st_mode) and os.listdir(tmpdir) == []


def test_a_unix_socket_is_refused_before_anything_is_received(tmp_path: Path) -> None:
    import socket
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        refusal = Delivery(str(path), 1, SHA).refusal()
    assert refusal is not None and "Unix socket" in refusal
    assert Delivery(str(tmp_path / "plain"), 1, SHA).refusal() is None


def test_dev_stdout_reaches_its_file_through_proc() -> None:
    assert via_proc("/dev/stdout") and not via_proc("/etc/hostname")
