"""Two M2C sessions through one shared bottleneck in the simulator (paper 7.3)."""

from __future__ import annotations

import json

import pytest

from m2c.experiments import fairness


def test_jain_index() -> None:
    assert fairness.jain([1.0, 1.0]) == 1.0
    assert fairness.jain([1.0, 0.0]) == 0.5
    assert fairness.jain([3.0, 1.0]) == pytest.approx(16 / 20)


def test_two_sessions_share_the_bottleneck_and_both_recover_their_files() -> None:
    row = fairness.run_one(4e6, 512 << 10, 0.0, seed=1)
    assert row["a_verified"] and row["b_verified"]
    assert row["a_share"] + row["b_share"] == pytest.approx(1.0)
    assert 0.5 <= row["jain"] <= 1.0
    # both sessions' packets crossed the one 4 Mb/s queue: together they cannot
    # have had more than it carries
    assert 0.3 < row["link_use"] <= 1.01
    assert row["a_kbps"] > 400 and row["b_kbps"] > 400  # neither was shut out


def test_sessions_have_their_own_groups_and_sender_addresses() -> None:
    sc = fairness.scenario(4e6, 1 << 20)
    a = fairness.FairnessApp(sc, 0)
    sda, sdb = a.apps["a"].sd, a.apps["b"].sd
    assert sda.source != sdb.source and sda.session != sdb.session
    assert not {g[0] for g in sda.groups} & {g[0] for g in sdb.groups}


def test_quick_cli_writes_json(tmp_path, capsys) -> None:
    assert fairness.main(["--quick", "--size", "300000", "--seeds", "1",
                          "--out", str(tmp_path)]) == 0
    assert "jain" in capsys.readouterr().out
    data = json.load(open(tmp_path / "fairness.json"))
    assert len(data["rows"]) == 1 and "jain" in data["summary"]


def test_sessions_start_with_a_seeded_jitter_so_their_packets_do_not_coincide() -> None:
    a, b = (fairness.scenario(4e6, 1 << 20, offset=10.0, seed=s) for s in (0, 1))
    starts = [[n.arrive for n in sc.nodes] for sc in (a, b)]
    assert starts[0] != starts[1]
    for st in starts:
        assert st[0] != st[1] - 10.0  # the two senders' phases differ
        assert 10.0 <= st[1] <= 10.0 + fairness.START_JITTER and st[2:] == st[:2]
