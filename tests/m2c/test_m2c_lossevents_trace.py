"""The trace hook session 17 used (m2c/experiments/roles.py, ``M2C_CC_TRACE``): a receiver
role appends its controller's epoch and loss logs as one JSON line, and tracing leaves
``ReceiverCC.LOSS_LOG`` (no log by default) as it was.  On loopback, no root."""

from __future__ import annotations

import json
import os
import secrets
import threading

from m2c.aio.driver import SendResult, make_session
from m2c.core.receiver_cc import ReceiverCC
from m2c.experiments import roles


def test_receive_appends_its_controller_logs_when_asked(tmp_path, monkeypatch):
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(150_000))
    sd = make_session(str(src), group=f"239.198.{1 + secrets.randbelow(250)}.1",
                      port=30000 + 100 * secrets.randbelow(300), interface="127.0.0.1",
                      min_rate=100.0, max_rate=2000.0, tsd=0.5, k=2)
    sdj = sd.to_json()
    log = tmp_path / "trace.jsonl"
    monkeypatch.setenv(roles.CC_TRACE_ENV, str(log))
    sent: list[SendResult] = []
    snd = threading.Thread(target=lambda: sent.append(roles.send(sdj, str(src), 4.0)))
    snd.start()
    try:
        res = roles.receive(sdj, str(tmp_path / "out"), "127.0.0.1", 30.0, "m2c")
    finally:
        snd.join(30)
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

