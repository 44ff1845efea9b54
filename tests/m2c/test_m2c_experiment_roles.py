"""The testbed experiments' sender and receiver roles (m2c/experiments/roles.py) give
the drivers' typed results (SendResult, ReceiveResult), which cross the testbed's fork
(pickle) unchanged, and fig5's and hetero's rows are built from their fields.

Run on loopback (no root): the very functions the experiments spawn in namespaces."""

from __future__ import annotations

import pickle

from m2c_support import roles_transfer

from m2c.aio.driver import (
    MulticastReceiver,
    MulticastSender,
    ReceiveResult,
    SendResult,
)
from m2c.experiments import fig5, hetero


def test_roles_give_typed_results_and_the_experiments_rows_come_from_their_fields(tmp_path):
    src, res, sent = roles_transfer(tmp_path, 199)
    assert isinstance(res, ReceiveResult) and res.ok, res.end
    assert (tmp_path / "out").read_bytes() == src.read_bytes()
    assert pickle.loads(pickle.dumps(res)) == res  # what Testbed.spawn hands back
    (s,) = sent
    assert isinstance(s, SendResult) and s.packets > 0 and s.closed

    (row,) = fig5.m2c_rows([res], "m2c")
    m = res.metrics
    assert row["ok"] is True and row["controller"] == "m2c" and row["receiver"] == 1
    assert [row[k] for k in fig5.METRICS] == [getattr(m, k) for k in fig5.METRICS]
    assert row["loss_events"] == res.loss_events
    assert row["trace"] == hetero.compact_trace(res.trace) and row["trace"][0][0] == 0.0

    h = hetero.receiver_row(0, res, 4_000_000, 1.0, "m2c", 1500, 1428)
    assert h["ok"] is True and h["time_s"] == round(m.time, 2)
    assert h["repeats"] == m.raw["repeats"] and h["eliminations"] == m.raw["eliminations"]
    assert h["time/ideal"] == round(m.time / 1.0, 3)


def test_the_drivers_have_one_result_shape():
    """send() and receive() are the API; the dict-returning run() is gone."""
    assert not hasattr(MulticastSender, "run") and not hasattr(MulticastReceiver, "run")
    assert not hasattr(ReceiveResult, "as_dict")
