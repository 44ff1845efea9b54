"""The M2C roles the testbed experiments run inside a host (``Testbed.spawn``).

Each takes the session description as JSON (it crosses the fork as text) and gives
the driver's typed result, which comes back to the experiment pickled:
:class:`~m2c.aio.driver.SendResult` for a sender, :class:`~m2c.aio.driver.ReceiveResult`
for a receiver (fig5.py, hetero.py, fairness.py build their rows from its fields).
"""

from __future__ import annotations

import asyncio
import json
import os

from m2c.aio.driver import MulticastReceiver, MulticastSender, ReceiveResult, SendResult
from m2c.core.controllers import M2CWindowController
from m2c.core.description import SessionDescription
from m2c.core.receiver_cc import ReceiverCC

CC_TRACE_ENV = "M2C_CC_TRACE"
"""a file: each receiver role appends its controller's loss and epoch logs to it"""
TRACE_LEN = 8192
"""loss and epoch log entries kept per receiver when tracing"""
TRACED_SWITCHES = ("PAIR_ONE", "PAIR_ONE_GUARD", "HOLE_OWN", "LOSS_EVENTS")


def receive(sd_json: str, out: str, iface: str, timeout: float,
            controller: str = "m2c") -> ReceiveResult:
    """Join the session on ``iface`` and receive into ``out`` (verified), for at most
    ``timeout`` s."""
    sd = SessionDescription.from_json(sd_json)
    trace_to = os.environ.get(CC_TRACE_ENV)
    kept = ReceiverCC.LOSS_LOG
    if trace_to:
        ReceiverCC.LOSS_LOG = TRACE_LEN
    try:
        rx = MulticastReceiver(sd, out, controller=controller, interface=iface)
    finally:
        ReceiverCC.LOSS_LOG = kept
    res = asyncio.run(rx.receive(timeout=timeout))
    if trace_to:  # a trace hook: the controller's loss and epoch logs, one JSON line
        cc = rx.cc
        win = cc.ctl if isinstance(cc.ctl, M2CWindowController) else None
        with open(trace_to, "a") as f:
            f.write(json.dumps({"pid": os.getpid(), "iface": iface, "ok": res.ok,
                                "time": res.metrics.time,
                                "switches": {k: getattr(cc, k) for k in TRACED_SWITCHES},
                                "loss_events": cc.loss_events,
                                "episode_losses": cc.episode_losses,
                                "queue_drains": cc.queue_drains,
                                "reductions": win.reductions if win else None,
                                "ignored_events": win.ignored_events if win else None,
                                "losses": list(cc.loss_log), "epochs": list(cc.epoch_log)},
                               allow_nan=True) + "\n")
    return res


def send(sd_json: str, path: str, duration: float) -> SendResult:
    """Send ``path`` as the session's carousel for ``duration`` s, then close it."""
    sd = SessionDescription.from_json(sd_json)
    return asyncio.run(MulticastSender(sd, path).send(duration=duration))
