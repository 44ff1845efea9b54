"""The trace hook session 17 used (m2c/experiments/roles.py, ``M2C_CC_TRACE``): a receiver
role appends its controller's epoch and loss logs as one JSON line, and tracing leaves
``ReceiverCC.LOSS_LOG`` (no log by default) as it was.  On loopback, no root."""

from __future__ import annotations

import json

from m2c_support import roles_transfer

from m2c.core.receiver_cc import ReceiverCC
from m2c.experiments import roles


def test_receive_appends_its_controller_logs_when_asked(tmp_path, monkeypatch):
    log = tmp_path / "trace.jsonl"
    monkeypatch.setenv(roles.CC_TRACE_ENV, str(log))
    _src, res, _sent = roles_transfer(tmp_path, 198)
    assert res.ok, res.end
    assert ReceiverCC.LOSS_LOG == 0  # restored: only the traced receiver kept logs
    (line,) = log.read_text().splitlines()
    tr = json.loads(line)
    assert tr["ok"] is True and tr["switches"]["LOSS_EVENTS"] is False
    assert tr["loss_events"] == res.loss_events
    assert tr["reductions"] is not None and tr["ignored_events"] is not None  # m2c window
    assert len(tr["epochs"]) >= 5  # (time, least queueing delay, rx rate, target, RTT)
    times = [e[0] for e in tr["epochs"]]
    assert all(len(e) == 5 for e in tr["epochs"]) and times == sorted(times)
    assert all(len(x) == 6 for x in tr["losses"])

