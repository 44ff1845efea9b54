"""End-to-end demo: the paper's Fig. 2 on loopback, as an ordinary user.

``run(quick=True)`` starts the one-process deployment of :mod:`corecast.deploy`
(source, ITR, map-server, 3 ETRs, 7 clients in 3 ASes), streams 384 kb/s in
1,200-byte chunks and returns summary rows: delivery, the byte counters on the
inter-domain (ITR->ETR) and local (ETR->client) links against equations 3 and 5
computed from our header sizes, and the paper's analytical figures for context.
"""

from __future__ import annotations

from corecast import plan
from corecast.deploy import check, run_fig2


def run(quick: bool = True) -> list[dict]:
    chunks = 40 if quick else 400  # 1 s or 10 s of stream at 25 ms per chunk
    r = run_fig2(chunks)
    bad = check(r)
    s = r["sizes"]
    rows = [
        {"system": "corecast", "what": "Fig. 2 on loopback: clients x chunks intact",
         "result": f"{sum(c['received'] for c in r['client_stats'].values())}/"
                   f"{r['clients'] * r['chunks']} ({'ok' if r['intact'] else 'CORRUPT'})"},
        {"system": "corecast", "what": "payload copies per inter-domain link",
         "result": ", ".join(f"{h}: {n}" for h, n in r["payloads_per_etr"].items())
                   + f" (= chunks {r['chunks']})"},
        {"system": "corecast", "what": "transit bytes ITR->ETRs vs eq. 3",
         "result": f"{r['transit_bytes']} measured, {r['eq3_bytes']} eq.3 "
                   f"(H_L={s.h_l}, P_CC=D+{s.p_over}, H_CC={s.h_cc}; "
                   f"j={r['ases']}, k={r['clients']})"},
        {"system": "corecast", "what": "local bytes ETRs->clients vs eq. 5",
         "result": f"{r['local_bytes']} measured, {r['eq5_bytes']} eq.5 (H_I={s.h_i})"},
        {"system": "corecast", "what": "checks",
         "result": "all pass" if not bad else "; ".join(bad)},
    ]
    p = plan.plan()
    paper, ours = p["rows"]
    rows.append({"system": "corecast", "what": "eq.1 max clients, 10 Gb/s, 384 kb/s",
                 "result": f"ours {ours['eq1_max_clients_cc']:,} (H_CC={ours['sizes']['h_cc']}), "
                           f"paper sizes {paper['eq1_max_clients_cc']:,}, paper text 397,135"})
    return rows
