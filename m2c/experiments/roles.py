"""The M2C roles the testbed experiments run inside a host (``Testbed.spawn``).

Each takes the session description as JSON (it crosses the fork as text) and gives
the driver's typed result, which comes back to the experiment pickled:
:class:`~m2c.aio.driver.SendResult` for a sender, :class:`~m2c.aio.driver.ReceiveResult`
for a receiver (fig5.py, hetero.py, fairness.py build their rows from its fields).
"""

from __future__ import annotations

import asyncio

from m2c.aio.driver import MulticastReceiver, MulticastSender, ReceiveResult, SendResult
from m2c.core.description import SessionDescription


def receive(sd_json: str, out: str, iface: str, timeout: float,
            controller: str = "m2c") -> ReceiveResult:
    """Join the session on ``iface`` and receive into ``out`` (verified), for at most
    ``timeout`` s."""
    sd = SessionDescription.from_json(sd_json)
    rx = MulticastReceiver(sd, out, controller=controller, interface=iface)
    return asyncio.run(rx.receive(timeout=timeout))


def send(sd_json: str, path: str, duration: float) -> SendResult:
    """Send ``path`` as the session's carousel for ``duration`` s, then close it."""
    sd = SessionDescription.from_json(sd_json)
    return asyncio.run(MulticastSender(sd, path).send(duration=duration))
