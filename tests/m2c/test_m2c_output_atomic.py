"""The receiver's output file is replaced only by a verified file (issue 5
review, item 2): blocks go to a temporary file next to the output, the SHA-256
of the session description is checked, then os.replace; on a mismatch or a
timeout the temporary file is removed and an existing output is untouched."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets

from m2c.aio.driver import MulticastReceiver, MulticastSender, make_session


def fresh_net() -> tuple[str, int]:
    return f"239.195.{1 + secrets.randbelow(250)}.1", 30000 + 100 * secrets.randbelow(300)


def session(tmp_path, size=200_000):
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(size))
    group, port = fresh_net()
    sd = make_session(str(src), group=group, port=port, min_rate=30.0, max_rate=3000.0,
                      tsd=0.5, k=2)
    return str(src), sd


def leftovers(tmp_path):
    return sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".part"))


async def receive(sd, src, out, with_sender=True, timeout=15.0):
    stop = asyncio.Event()
    snd = (asyncio.create_task(MulticastSender(sd, src).send(duration=timeout + 5, stop=stop))
           if with_sender else None)
    try:
        return await MulticastReceiver(sd, out).receive(timeout=timeout)
    finally:
        stop.set()
        if snd is not None:
            await snd


async def test_timeout_keeps_the_existing_file_and_leaves_no_temp(tmp_path):
    src, sd = session(tmp_path)
    out = tmp_path / "out.bin"
    out.write_bytes(b"an older, good file")
    res = await receive(sd, src, str(out), with_sender=False, timeout=0.5)
    assert not res.ok
    assert out.read_bytes() == b"an older, good file"  # was truncated and zero-filled
    assert leftovers(tmp_path) == []


async def test_hash_mismatch_keeps_the_existing_file_and_leaves_no_temp(tmp_path):
    src, sd = session(tmp_path)
    bad = dataclasses.replace(sd, sha256="0" * 64)
    out = tmp_path / "out.bin"
    out.write_bytes(b"keep me")
    res = await receive(bad, src, str(out))
    assert res.complete and not res.ok  # decoded all, but not the announced file
    assert out.read_bytes() == b"keep me"
    assert leftovers(tmp_path) == []


async def test_verified_file_replaces_the_output(tmp_path):
    src, sd = session(tmp_path)
    out = tmp_path / "out.bin"
    out.write_bytes(b"old")
    os.chmod(out, 0o600)
    res = await receive(sd, src, str(out))
    assert res.ok
    assert out.read_bytes() == open(src, "rb").read()
    assert os.stat(out).st_mode & 0o777 == 0o600
    assert leftovers(tmp_path) == []
