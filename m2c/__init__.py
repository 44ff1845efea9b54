"""M2C: dynamic-layer multicast congestion control, the sequencer, FEC and
carousel file transfer over IP multicast (Lucas, Pansiot, Grad, Hilt 2010).

Importing stays cheap: the subpackages, and the names below, are loaded on
first use.

- ``m2c.fec``: LDPC-Staircase (RFC 5170, bit-exact), Reed-Solomon (zfec),
  FEC Payload IDs and block partitioning (RFC 5052).
- File transfer (docs/m2c.md, "Python API"): ``make_session`` (a
  ``SessionDescription`` of ``FecParams`` and a ``RateLadder``; rates in packets
  per second), ``MulticastSender.send`` (a ``SendResult``),
  ``MulticastReceiver.receive`` (a ``ReceiveResult``); ``make_schedule`` builds a
  rate schedule (``wave``, ``step``); ``Sequencer`` / ``SequencerReceiver`` are
  the paper's section 5 API.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "make_session": "m2c.aio.driver",
    "MulticastSender": "m2c.aio.driver",
    "MulticastReceiver": "m2c.aio.driver",
    "SessionDescription": "m2c.core.description",
    "FecParams": "m2c.core.description",
    "FecScheme": "m2c.core.description",
    "RateLadder": "m2c.core.description",
    "SendResult": "m2c.aio.driver",
    "ReceiveResult": "m2c.aio.driver",
    "make_schedule": "m2c.core.groups",
    "SCHEDULES": "m2c.core.groups",
    "Sequencer": "m2c.core.sequencer",
    "SequencerReceiver": "m2c.core.sequencer",
}

__all__ = ["fec", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name == "fec":
        return importlib.import_module("m2c.fec")
    raise AttributeError(f"module 'm2c' has no attribute {name!r}")
