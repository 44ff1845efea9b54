"""Beyond the paper (issue 14 item 4): churn, heterogeneous access and availability
under churn, as scenario data (deliverykit.sim.scenario) that the swift peers run in
the simulator, and the testbed where it can hold them."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from deliverykit.sim import (
    DistKind,
    Distribution,
    LinkClass,
    LinkSpec,
    NodeSpec,
    Scenario,
    assign_classes,
    draw_stays,
)
from swift.experiments.beyond import (
    MIX,
    availability_scenario,
    churn_scenario,
    hetero_scenario,
    main,
)
from swift.experiments.flashcrowd import configs
from swift.experiments.swarm import Backend, run
from swift.sim import FlashCrowdResult, run as sim_run

#: the Figs. 7-11 sweep's peer configurations (start-up over 8 KiB)
SEEDER_CFG, LEECHER_CFG = configs(8 * 1024)


def _sim(sc: Scenario) -> FlashCrowdResult:
    return sim_run(sc, seeder_config=SEEDER_CFG, leecher_config=LEECHER_CFG)


def _nodes(n: int) -> tuple[NodeSpec, ...]:
    return (NodeSpec("s", role="seeder"),
            *(NodeSpec(f"l{i:03d}", role="leecher") for i in range(n)))


def test_distributions_parse_draw_and_refuse() -> None:
    assert Distribution.parse("exp:30") == Distribution(DistKind.EXPONENTIAL, 30.0)
    assert Distribution.parse("uniform:5,10") == Distribution(DistKind.UNIFORM, 5.0, 10.0)
    assert Distribution.parse("7") == Distribution(DistKind.FIXED, 7.0)
    for bad in ("exp", "exp:-1", "uniform:10,5", "pareto:0,1", "normal:1", "exp:1,2", "exp:x"):
        with pytest.raises(ValueError):
            Distribution.parse(bad)
    rng = random.Random(5)
    for d in (Distribution.parse("exp:30"), Distribution.parse("uniform:10,50"),
              Distribution.parse("pareto:5,3")):
        xs = [d.draw(rng) for _ in range(4000)]
        assert min(xs) >= 0 and abs(sum(xs) / len(xs) - d.mean) < 0.1 * d.mean, d
    assert Distribution.parse("uniform:10,50").draw(rng) >= 10


def test_stays_are_drawn_per_node_into_the_scenario() -> None:
    """Churn is data: each leecher's stay comes from its own stream, so a node added
    later changes no other node's draw; the stays travel in the JSON."""
    d = Distribution.parse("exp:30")
    small = draw_stays(Scenario("c", _nodes(5), seed=4), d, "leecher")
    big = draw_stays(Scenario("c", _nodes(9), seed=4), d, "leecher")
    stays = [n.stay for n in small.nodes]
    assert stays[0] is None and all(s is not None and s >= 0 for s in stays[1:])
    assert stays == [n.stay for n in big.nodes][:6]
    assert len(set(stays[1:])) == 5  # drawn, not one value
    other = draw_stays(Scenario("c", _nodes(5), seed=5), d, "leecher")
    assert [n.stay for n in other.nodes] != stays  # the run seed matters
    assert Scenario.from_json(small.to_json()) == small
    with pytest.raises(ValueError):
        NodeSpec("x", stay=-1.0)


def test_link_classes_interleave_in_proportion() -> None:
    classes = tuple(LinkClass(name, share, LinkSpec(rate=up), LinkSpec(rate=down))
                    for name, share, up, down in MIX)
    sc = assign_classes(Scenario("h", _nodes(10)), classes, "leecher")
    groups = [n.group for n in sc.nodes if n.role == "leecher"]
    assert [groups.count(c) for c in ("adsl", "cable", "fibre")] == [4, 4, 2]
    # every prefix as near the mix as it can be: no class runs ahead by a whole node
    for k in range(1, 11):
        for name, share, _, _ in MIX:
            assert abs(groups[:k].count(name) - share * k) < 1.0, (k, name)
    for n in sc.nodes[1:]:
        up, down = next((u, d) for c, _, u, d in MIX if c == n.group)
        assert n.up.rate == up and n.down.rate == down
    assert sc.nodes[0].up.rate is None  # the seeder keeps its link
    assert assign_classes(Scenario("h", _nodes(10)), classes, "leecher") == sc  # no draw


def test_churned_leechers_leave_their_stay_after_completing() -> None:
    sc = churn_scenario(5, 32 * 1024, Distribution.parse("uniform:1,4"), seed=2)
    res = _sim(sc)
    spec = {n.name: n for n in sc.nodes}
    for x in res.leechers:
        assert x.verified and x.completion_s is not None and x.left is not None
        assert x.left == pytest.approx(x.arrive + x.completion_s + (spec[x.name].stay or 0),
                                       abs=1e-6)
    no_stay = _sim(churn_scenario(5, 32 * 1024, None, seed=2))
    for x in no_stay.leechers:
        assert x.completion_s is not None
        assert x.left == pytest.approx(x.arrive + x.completion_s, abs=1e-6)


def test_heterogeneous_access_orders_completion_by_class() -> None:
    # a seeder fast enough that each class's downlink is what binds (at the default
    # 20 Mb/s the seeder's share, ~4 Mb/s a leecher, binds them all alike)
    size = 256 * 1024
    sc = hetero_scenario(5, size, seed=1, seeder_bps=200e6)
    res = _sim(sc)
    assert res.all_verified
    by = {n.name: n for n in sc.nodes}
    done = {g: [x.completion_s or 0.0 for x in res.leechers if by[x.name].group == g]
            for g in ("adsl", "cable", "fibre")}
    assert all(x.completion_s is not None for x in res.leechers)
    assert all(done.values())
    # an 8 Mb/s downlink cannot take 256 KiB as fast as a 30 or 100 Mb/s one
    assert min(done["adsl"]) > max(done["cable"]) > min(done["fibre"])
    for x in res.leechers:  # nor faster than its downlink's rate, less the bucket
        down = by[x.name].down
        assert down.rate is not None and down.burst is not None
        assert (x.completion_s or 0.0) >= (size - down.burst) * 8 / down.rate


def test_availability_when_the_seeder_leaves() -> None:
    """Leechers that stay keep every chunk available after the seeder leaves, and
    newcomers a tracker introduces to them complete; with the paper's discovery
    (PEX through the seeder only) the same newcomers find nobody; when nobody
    stays, the chunks are lost and later leechers are stranded."""
    kw: dict[str, Any] = dict(leechers=6, size=32 * 1024, seed=3, seeder_leaves=2.5,
                              every=0.5, limit=20.0)
    stay = _sim(availability_scenario(stay=Distribution.parse("fixed:100"), **kw))
    pex_only = _sim(availability_scenario(stay=Distribution.parse("fixed:100"), tracker=0,
                                          **kw))
    gone = _sim(availability_scenario(stay=Distribution.parse("fixed:0"), **kw))
    for res in (stay, pex_only, gone):
        ts = [s.t for s in res.availability]
        assert ts[0] == 0 and ts == sorted(ts) and len(ts) >= 5
        assert all(len(s.holders) == 32 for s in res.availability)
        before = [s for s in res.availability if 0 < s.t < 2.5]
        assert all(s.rarest >= 1 and s.seeds >= 1 for s in before)  # the seeder is there
    for res in (stay, pex_only):
        after = [s for s in res.availability if s.t > 2.5]
        assert after and all(s.rarest >= 1 and s.lost == 0 for s in after)
    late = [x.name for x in stay.leechers if x.arrive > 2.5]
    assert late
    assert all(x.completion_s is not None and x.verified for x in stay.leechers)
    assert all(x.completion_s is None for x in pex_only.leechers if x.name in late)
    assert all(x.completion_s is None for x in gone.leechers if x.name in late)
    assert any(s.lost == 32 and s.present >= 1 for s in gone.availability if s.t > 2.5)


def test_beyond_command_writes_its_files(tmp_path, capsys) -> None:
    assert main(["hetero", "--leechers", "3", "--size-kib", "16", "--out", str(tmp_path)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["all"]["completed"] == 3 and set(summary) == {"all", "adsl", "cable", "fibre"}
    assert main(["availability", "--leechers", "3", "--size-kib", "16", "--seeder-leaves", "1",
                 "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    with open(tmp_path / "beyond-availability-samples.csv") as f:
        head = f.readline().strip().split(",")
    assert head == ["t", "present", "seeds", "rarest", "mean_holders", "lost_chunks"]
    for name in ("hetero", "availability"):
        assert (tmp_path / f"beyond-{name}.png").read_bytes()[:4] == b"\x89PNG"
        meta = json.loads((tmp_path / f"beyond-{name}.json").read_text())
        assert meta["scenarios"] and meta["git_commit"]
    assert not list(tmp_path.glob("*.tmp"))
    with pytest.raises(SystemExit) as e:
        main(["availability", "--backend", "netns"])
    assert e.value.code == 2 and "--backend sim only" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["churn", "--stay", "normal:3"])
    assert e.value.code == 2 and "--stay" in capsys.readouterr().err


@pytest.mark.root
@pytest.mark.timeout(300)
def test_testbed_holds_heterogeneous_links_and_stays() -> None:
    """The same scenario data on the namespace testbed: tbf on both ends of each
    veth (class rates), leechers seeding for their stay before they leave."""
    sc = draw_stays(hetero_scenario(3, 64 * 1024, seed=1), Distribution.parse("fixed:1"),
                    "leecher")
    r = run(sc, Backend.NETNS, SEEDER_CFG, LEECHER_CFG, prefix="swbt")
    assert all(x.verified and x.completion_s is not None for x in r.leechers)
    assert r.wall_s > 1.0  # every leecher stayed 1 s after completing
