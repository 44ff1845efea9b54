"""A receiver whose packet handling raises (a bug: any input should become a counted
drop) keeps running, as the batched endpoint guarantees, and says so in its result:
``handler_errors`` counts the batches lost that way, so such a bug is never a
silent loss of datagrams (the live fuzz test asserts it stays 0)."""

from __future__ import annotations

import asyncio
import os
import secrets

from m2c.aio.driver import MulticastReceiver, MulticastSender, make_session


class FailsOnce(MulticastReceiver):
    """A receiver with a bug that strikes on its third batch."""

    calls = 0

    def _on_batch(self, ch, batch, now):
        self.calls += 1
        if self.calls == 3:
            raise RuntimeError("a bug in packet handling")
        super()._on_batch(ch, batch, now)


async def test_a_failing_batch_is_counted_not_silent(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(100_000))
    sd = make_session(str(src), group=f"239.185.{1 + secrets.randbelow(250)}.1",
                      port=30000 + 100 * secrets.randbelow(300), min_rate=30.0,
                      max_rate=3000.0, tsd=0.5, k=2)
    stop = asyncio.Event()
    snd = asyncio.create_task(MulticastSender(sd, str(src)).send(duration=30, stop=stop))
    try:
        res = await FailsOnce(sd, str(tmp_path / "out")).receive(timeout=25)
    finally:
        stop.set()
        await snd
    assert res.ok, res.end  # the carousel brings the lost symbols again
    assert res.handler_errors == 1
