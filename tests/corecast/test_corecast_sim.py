"""CoreCast's real roles in the packet-level simulator (corecast/sim.py) against the
paper's analytical model: eq. 3 (transit bytes per payload) and eq. 5 (local bytes).

The model is computed here from the bytes our codec produces and the IPv4/UDP
header lengths, independently of corecast.plan (which the simulator's printout uses)."""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys

from corecast.core.client import Client
from corecast.core.etr import Etr
from corecast.core.itr import Itr
from corecast.core.source import Source, rtp_packet
from corecast.sim import CoreCastApp, run, scenario, sweep_task
from corecast.wire import codec as c
from deliverykit.sim import Simulation

IPV4, UDP, LISP = 20, 8, 8


def model(ases: int, clients: int, d: int) -> tuple[int, int]:
    """(eq. 3, eq. 5) per payload, by hand: TT = (H_L + P_CC) j + (H_L + H_CC) k and
    LT = (H_I + D) k, with j = ases, k = all clients."""
    chunk = rtp_packet(0, 0, 1, bytes(d - 12))
    h = c.digest(1, chunk)
    payload_pdu = c.encode_cc_payload(0, chunk, 1, h)
    header_pdu = c.encode_cc_header(0, h, ipaddress.ip_address("10.1.0.1").packed, 7000)
    h_l = IPV4 + UDP + LISP  # outer IPv4 + UDP + LISP data header
    p_cc = IPV4 + UDP + len(payload_pdu)  # inner IPv4 + UDP (no-root transport) + PDU
    h_cc = IPV4 + UDP + len(header_pdu)
    h_i = IPV4 + UDP
    k = ases * clients
    return (h_l + p_cc) * ases + (h_l + h_cc) * k, (h_i + d) * k


def test_transit_and_local_bytes_are_eqs_3_and_5():
    res = run(scenario(ases=3, clients=4, seconds=1.0, seed=1))
    assert res.chunks == 40  # 1 s of 384 kb/s in 1,200-byte chunks
    assert res.received == 40 * 12 and res.lost == 0
    tt, lt = model(3, 4, 1200)
    assert res.transit_bytes == 40 * tt
    assert res.local_bytes == 40 * lt
    # and corecast.plan's equations (what the CLI prints beside) agree
    assert (res.model_transit_bytes, res.model_local_bytes) == (40 * tt, 40 * lt)


def test_the_model_holds_for_other_shapes():
    for ases, clients, d in ((1, 1, 400), (4, 2, 1000)):
        res = run(scenario(ases=ases, clients=clients, seconds=0.5, chunk_size=d, seed=2))
        tt, lt = model(ases, clients, d)
        assert res.chunks > 0 and res.lost == 0
        assert (res.transit_bytes, res.local_bytes) == (res.chunks * tt, res.chunks * lt)


def test_same_seed_same_run_and_the_seed_matters():
    a = run(scenario(ases=3, clients=3, seconds=1.0, seed=7, loss=0.05), trace=True)
    b = run(scenario(ases=3, clients=3, seconds=1.0, seed=7, loss=0.05), trace=True)
    other = run(scenario(ases=3, clients=3, seconds=1.0, seed=8, loss=0.05), trace=True)
    assert a.trace == b.trace and a.trace is not None
    sa, sb = a.summary(), b.summary()
    sa.pop("cpu_s"), sb.pop("cpu_s")
    assert sa == sb
    assert a.received < 40 * 9  # the transit loss cost some clients some chunks
    assert other.trace != a.trace


def test_the_simulated_nodes_are_the_socket_roles():
    sc = scenario(ases=2, clients=1, seconds=0.1)
    app = CoreCastApp(sc)
    sim = Simulation(sc, app)
    sim.run()
    cores = {h.name: type(h.core) for h in sim.hosts.values()}
    assert cores == {"source": Source, "itr": Itr, "etr0": Etr, "etr1": Etr,
                     "c0.0": Client, "c1.0": Client}


def test_cli_prints_transit_and_local_bytes():
    out = subprocess.run([sys.executable, "-m", "corecast.sim", "--ases", "2", "--clients", "3",
                          "--seconds", "0.5", "--seed", "4", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    tt, lt = model(2, 3, 1200)
    assert s["transit_bytes"] == s["chunks"] * tt and s["local_bytes"] == s["chunks"] * lt
    bad = subprocess.run([sys.executable, "-m", "corecast.sim", "--ases", "0"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines()[-1].startswith("python -m corecast.sim: error:")


def test_sweep_task_is_one_run_of_a_point():
    """What deliverykit.sweep runs on Dask for each point x seed (here called directly)."""
    r = sweep_task({"ases": 2, "clients": 2, "seconds": 0.25, "loss": 0.0}, 3)
    tt, lt = model(2, 2, 1200)
    assert r["chunks"] == 10 and r["received"] == 40 and r["lost"] == 0
    assert (r["transit_bytes"], r["local_bytes"]) == (10 * tt, 10 * lt)
    assert r["model_transit_bytes"] == r["transit_bytes"]
