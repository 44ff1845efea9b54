"""CoreCast command line: one subcommand per role, plus plan and deploy.

    corecast mapserver --addr A --site NAME:PREFIX[,PREFIX]:KEYID:PSK ...
    corecast etr       --rloc A --prefix P --cc-range R (--trust-rloc PREFIX ... | --trust-any-rloc)
                       [--map-server A[:PORT] --key-id N --psk S]
    corecast itr       --rloc A --inside A:PORT --cc-range R
                       (--map-resolver A[:PORT] | --map-cache F)
                       [--instance-id N] [--data-port D --prefix P (--trust-rloc PREFIX ... |
                       --trust-any-rloc) [--echo-nonce] [--local-rloc R ...] [--map-version V]]
    corecast source    --eid A --channel EID [--bitrate B --chunk-size D] (--itr A:PORT | --as-itr)
    corecast client    --eid A --port N --join A:PORT --channel EID --etr RLOC [--chunks N]
    corecast plan      [--C 10e9 --BW 384e3 --D 1200 --j 3 --k 7 ...] [--measure] [--json]
    corecast deploy    [--chunks 40] [--transport udp|raw] [--json]
    corecast experiment fig2-testbed|overhead|trace|multidomain [...]   (see each --help)

Every role prints "corecast ROLE: ready {...}" on stderr once it serves, and runs
until --duration seconds pass, its work is done (--chunks), or SIGINT/SIGTERM;
then it prints its counters as one JSON document on stdout and exits 0 (130
after SIGINT, 143 after SIGTERM, 1 when a required step kept failing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any

from corecast.roles import ROLES, Outcome, _file_media, _hostport, _jsonable  # noqa: F401 (re-export)
from corecast.wire.constants import LISP_CONTROL_PORT
from deliverykit import cliutil
from deliverykit.experiments import dispatch


def _file(text: str) -> str:
    return str(cliutil.existing_file(text))


def _site(text: str) -> str:
    """``NAME:PREFIX[,PREFIX]:KEYID:PSK``, checked while parsing.  The fields are split on the
    first three colons, so prefixes here are IPv4 and the PSK may itself contain colons."""
    parts = text.split(":", 3)
    if len(parts) != 4 or not parts[0] or not parts[3]:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME:PREFIX[,PREFIX]:KEYID:PSK")
    for prefix in parts[1].split(","):
        cliutil.ip_network(prefix)
    if not parts[2].isdigit() or int(parts[2]) > 0xFFFF:
        raise argparse.ArgumentTypeError(f"{text!r}: KEYID must be 0-65535")
    return text


def _print_json(obj: Any) -> None:
    print(json.dumps(_jsonable(obj), indent=2, sort_keys=True))
    sys.stdout.flush()


# A Map-Version on the command line: 1..4095 (RFC 9302 sec. 5; 0 is the Null Map-Version,
# which means no versioning, and 4096 would wrap to it).
map_version = cliutil.int_in(1, 4095, "Map-Version")


# ------------------------------------------------------------------- plan/deploy


def _plan(a: argparse.Namespace) -> int:
    from corecast import plan as model

    r = model.plan(a.C, a.BW, a.D, a.j, a.k, a.i, a.transport, a.ipv6_eid, a.ipv6_rloc,
                   a.channels, a.ases)
    if a.measure:
        r["measured_itr_state"] = model.measure_itr_state(a.measure_channels, a.measure_ases,
                                                          a.D)
    if a.json:
        _print_json(r)
        return 0
    paper, ours = r["rows"]
    txt = {k: "-" if v is None else v for k, v in r["paper_text"].items()}
    print(f"CoreCast plan: C={a.C:g} b/s, BW={a.BW:g} b/s, D={a.D} B, j={a.j} ASes, k={a.k} "
          f"clients, T={paper['T_s'] * 1000:g} ms\n")
    print(f"{'quantity':44} {'paper sizes':>14} {'our sizes':>14} {'paper text':>12}")
    lines = [
        ("H_L (LISP encapsulation) [B]", paper["sizes"]["h_l"], ours["sizes"]["h_l"], txt["h_l"]),
        ("H_CC (header packet) [B]", paper["sizes"]["h_cc"], ours["sizes"]["h_cc"],
         txt["h_cc"]),
        ("P_CC (payload packet) [B]", paper["P_CC"], ours["P_CC"], txt["p_cc"]),
        ("P = H_L + P_CC [B]", paper["P"], ours["P"], txt["P"]),
        ("H = H_L + H_CC [B]", paper["H"], ours["H"], txt["H"]),
        ("payload packet overhead [% of D]", f"{paper['payload_overhead_pct']:.2f}",
         f"{ours['payload_overhead_pct']:.2f}", "-"),
        ("eq.1 max clients CC = (C/BW)(P/H)", f"{paper['eq1_max_clients_cc']:,}",
         f"{ours['eq1_max_clients_cc']:,}", txt["eq1"]),
        ("eq.1 left form C*T/(8H)", f"{paper['eq1_time_form']:,}",
         f"{ours['eq1_time_form']:,}", "-"),
        ("eq.1 exact (C*T/8 - P)/H", f"{paper['eq1_exact']:,}", f"{ours['eq1_exact']:,}", "-"),
        ("eq.2 max clients unicast C/BW", f"{paper['eq2_max_clients_uc']:,}",
         f"{ours['eq2_max_clients_uc']:,}", txt["eq2"]),
        ("eq.3 TT_CC per payload [B]", paper["eq3_transit_bytes"], ours["eq3_transit_bytes"], "-"),
        ("eq.4 BW_transit [kb/s]", f"{paper['eq4_bw_transit_bps'] / 1e3:.1f}",
         f"{ours['eq4_bw_transit_bps'] / 1e3:.1f}", "-"),
        ("eq.5 LT_CC per payload [B]", paper["eq5_local_bytes"], ours["eq5_local_bytes"], "-"),
        ("eq.6 BW_local [kb/s]", f"{paper['eq6_bw_local_bps'] / 1e3:.1f}",
         f"{ours['eq6_bw_local_bps'] / 1e3:.1f}", "-"),
        (f"eq.7 TT_P2P, i={a.i if a.i is not None else a.k} arcs [B]",
         paper["eq7_transit_p2p_bytes"], ours["eq7_transit_p2p_bytes"], "-"),
        ("eq.8 CoreCast transit <= P2P", paper["eq8_corecast_wins"], ours["eq8_corecast_wins"],
         "-"),
        (f"eq.9 alpha threshold, P_CC from D={a.D}", f"{paper['eq9_alpha']:.4f}",
         f"{ours['eq9_alpha']:.4f}", txt["alpha"]),
        ("eq.9 alpha threshold, D=400", f"{paper['eq9_alpha_400']:.4f}",
         f"{ours['eq9_alpha_400']:.4f}", txt["alpha_400"]),
    ]
    for name, p, o, t in lines:
        print(f"{name:44} {p!s:>14} {o!s:>14} {t!s:>12}")
    print("(paper text: the paper's published figure, shown only where this run's C, BW and D "
          "are the ones it was computed with: 10 Gb/s, 384 kb/s, 1,200 B)")
    m = r["memory"]
    print(f"\nMemory model, {a.channels:,} channels x {a.ases:,} ASes (paper section 3.5):")
    print(f"  ETR payloadBuffer     paper {m['paper_etr']:>12,} B   ours {m['ours_etr']:>12,} B"
          + (f"   (paper text: '{txt['etr_memory']}')" if txt["etr_memory"] != "-" else ""))
    print(f"  ITR servedRLOC IPv6   paper {m['paper_itr']['served_rloc']:>12,} B   ours "
          f"{m['ours_itr_v6']['served_rloc']:>12,} B"
          + (f"   (paper text: '{txt['itr_served_v6']}')" if txt["itr_served_v6"] != "-" else ""))
    print(f"  ITR servedRLOC IPv4                          ours "
          f"{m['ours_itr_v4']['served_rloc']:>12,} B")
    print(f"  ITR total IPv6        paper {m['paper_itr']['total']:>12,} B   ours "
          f"{m['ours_itr_v6']['total']:>12,} B")
    if "measured_itr_state" in r:
        s = r["measured_itr_state"]
        model_b = model.itr_memory(a.measure_channels, a.measure_ases, ours["P_CC"], 4)
        print(f"\nRunning ITR core, {a.measure_channels} channels x {a.measure_ases} ETRs: "
              f"state {s['total_bytes']:,} B (model {model_b['total']:,} B); "
              f"Python heap {s['python_heap_bytes']:,} B "
              f"({s['python_heap_bytes'] / max(1, model_b['total']):.1f}x the model); "
              f"RSS growth {s['rss_bytes']:,} B")
    t1 = model.table1_corecast_row(ours=model.our_sizes(a.transport, a.ipv6_rloc, a.ipv6_eid))
    print(f"\nTable 1 CoreCast row from the paper's counts (k=1,853, j=202, 2:45 h, "
          f"N={t1['payloads']:,.0f} payloads):")
    for key in ("paper", ours["sizes"]["name"]):
        print(
            f"  {key + ' sizes':18} TT {t1[key]['TT_GB']:8.1f} GB   LT {t1[key]['LT_GB']:8.1f} GB"
        )
    print(f"  {'paper text':18} TT {t1['paper_text']['TT_GB']:8.1f} GB   "
          f"LT {t1['paper_text']['LT_GB']:8.1f} GB")
    print("\nWhere the paper's text and formulas disagree:")
    for line in model.explain():
        print("  - " + line)
    return 0


def _deploy(a: argparse.Namespace) -> int:
    from corecast.deploy import check, run_fig2

    r = run_fig2(10 if a.quick else a.chunks, transport=a.transport,
                 extra_payload_every=a.extra_payload_every)
    bad = check(r)
    if a.json:
        r["failed_checks"] = bad
        _print_json(r)
    else:
        lay = r["layout"]
        print(f"Fig. 2 on loopback: source {lay['source']}, ITR {lay['itr']}, map-server "
              f"{lay['ms']}, ETRs {', '.join(lay['etrs'])}, {r['clients']} clients, "
              f"{r['chunks']} chunks in {r['elapsed_s']:.2f} s")
        for eid, s in r["client_stats"].items():
            print(f"  client {eid:16} received {s['received']:4} lost {s['lost']} dup "
                  f"{s['duplicates']} reordered {s['reordered']} jitter {s['jitter_ms']} ms")
        print(f"  transit ITR->ETRs  {r['transit_bytes']:>10} B   eq. 3: {r['eq3_bytes']:>10} B")
        for h, v in r["transit_per_link"].items():
            print(f"    link to {h:14} {v:>10} B   eq. 3: {r['eq3_per_link'][h]:>10} B")
        print(f"  local ETRs->clients {r['local_bytes']:>9} B   eq. 5: {r['eq5_bytes']:>10} B")
        print("  checks: " + ("all pass" if not bad else "; ".join(bad)))
    return 0 if not bad else 1


# ------------------------------------------------------------------- parser


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--duration", type=cliutil.positive_float, default=None,
                   help="seconds to run (default: forever)")


def _itr_args(p: argparse.ArgumentParser, embedded: bool = False) -> None:
    """The ITR's options: for `corecast itr`, or for a source that is its own ITR
    (``embedded``: they then apply with --as-itr, which makes --cc-range needed)."""
    when = " (with --as-itr)" if embedded else ""
    p.add_argument("--cc-range", action="append", required=not embedded, default=[],
                   help=f"reserved CoreCast EID range, repeatable{when}")
    p.add_argument("--map-resolver", help=f"HOST[:PORT] for Map-Requests{when}")
    p.add_argument("--map-cache", type=_file,
                   help=f"static map-cache file: 'prefix rloc[,rloc] [ttl]' lines{when}")
    p.add_argument("--control-port", type=cliutil.port, default=LISP_CONTROL_PORT,
                   help=f"UDP port for LISP control messages (Map-Request/Reply){when}")
    p.add_argument("--extra-payload-every", type=cliutil.nonnegative_int, default=0,
                   help=f"an extra payload copy after every N headers to the same ETR "
                        f"(Algorithm 1; 0 = off){when}")
    p.add_argument("--max-channels", type=cliutil.positive_int, default=1024,
                   help=f"payloadBuffer entries at most (one per channel){when}")


def _trust_args(p: argparse.ArgumentParser, when: str = "") -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--trust-rloc", action="append", default=[], type=cliutil.ip_network,
                   metavar="ADDR|PREFIX",
                   help=f"accept LISP data only from these RLOCs: an address or prefix of the "
                        f"ITRs (repeatable){when}")
    g.add_argument("--trust-any-rloc", action="store_true",
                   help=f"accept LISP data from any RLOC (unsafe on a reachable address){when}")


instance_id = cliutil.int_in(0, 0xFFFFFF, "Instance ID")
key_id = cliutil.int_in(0, 0xFFFF, "key ID")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="corecast", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="CoreCast over LISP: each role as its own process, the paper's model (plan) "
                    "and Fig. 2 on loopback (deploy).",
        epilog="Every role prints 'corecast ROLE: ready {...}' on stderr once it serves and its "
               "counters as JSON on stdout when it stops;\nexit status 0, 1 (a required step "
               "kept failing), 130 (SIGINT) or 143 (SIGTERM). See README.md, 'The roles by hand'.")
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("mapserver", help="LISP map-server / map-resolver",
                       description="LISP map-server and map-resolver: authenticates Map-Registers "
                                   "of the configured sites and answers Map-Requests.")
    p.add_argument(
        "--addr", required=True, help="address to serve on (map-server and map-resolver)"
    )
    p.add_argument("--port", type=cliutil.port, default=LISP_CONTROL_PORT,
                   help="UDP port (LISP control, 4342)")
    p.add_argument("--site", action="append", required=True, type=_site,
                   help="NAME:PREFIX[,PREFIX]:KEYID:PSK (repeatable)")
    p.add_argument("--instance-id", type=instance_id, action="append", default=[],
                   help="an Instance ID the sites may register besides 0 (repeatable)")
    _common(p)

    p = sub.add_parser("etr", help="CoreCast ETR (Algorithm 2)",
                       description="CoreCast egress tunnel router: decapsulates LISP data from "
                                   "trusted RLOCs for this site's EIDs only, and turns CoreCast "
                                   "header packets into unicast copies to the site's clients.")
    p.add_argument("--rloc", required=True, help="this ETR's locator (RLOC) address")
    p.add_argument(
        "--prefix",
        action="append",
        required=True,
        type=cliutil.ip_network,
        metavar="PREFIX",
        help="this site's EID prefix (repeatable): registered, and the only "
        "destinations the ETR delivers to",
    )
    _trust_args(p)
    p.add_argument("--map-server", help="HOST[:PORT] of the map-server to register with")
    p.add_argument("--key-id", type=key_id, default=0, help="Map-Register key ID (0-65535)")
    p.add_argument("--algorithm-id", type=int, choices=[1, 2], default=2,
                   help="Map-Register algorithm ID: 1 HMAC-SHA-1-96, 2 HMAC-SHA-256-128")
    p.add_argument("--psk", default="", help="Map-Register pre-shared key")
    p.add_argument("--profile", choices=["rfc9301", "oor"], default="rfc9301",
                   help="Map-Register authentication as the map-server expects it: rfc9301 (the "
                        "--key-id/--algorithm-id given, truncated MACs) or oor (Open Overlay "
                        "Router's map-server: Key ID bytes 00 01 as RFC 6833's 16-bit Key ID 1, "
                        "the whole 20-byte HMAC-SHA-1; overrides --key-id/--algorithm-id)")
    p.add_argument(
        "--register-interval",
        type=cliutil.positive_float,
        default=60.0,
        metavar="SECONDS",
        help="seconds between Map-Registers once registered (RFC 9301 sec. 8.2: 60)",
    )
    p.add_argument("--register-retries", type=cliutil.nonnegative_int, default=3,
                   help="Map-Register retransmissions (1 s, 2 s, 4 s ... apart) before giving up "
                        "with an error (default 3)")
    p.add_argument("--cc-range", action="append", required=True,
                   help="reserved CoreCast EID range (repeatable)")
    p.add_argument("--multicast", action="append", help="CHANNEL=GROUP:PORT")
    p.add_argument("--multicast-if", help="local address of the intra-domain interface")
    p.add_argument(
        "--data-port", type=cliutil.port, default=4341, help="UDP port for LISP data (4341)"
    )
    p.add_argument("--control-port", type=cliutil.port, default=LISP_CONTROL_PORT,
                   help="UDP port for LISP control (Map-Notify)")
    p.add_argument("--instance-id", type=instance_id, default=None,
                   help="decapsulate and register only this instance (RFC 9300 sec. 8)")
    p.add_argument("--map-version", type=map_version, default=None,
                   help="Map-Version 1..4095 carried in the Map-Register records (RFC 9302 sec. 5)")
    _common(p)

    p = sub.add_parser("itr", help="CoreCast ITR (Algorithm 1)",
                       description="CoreCast ingress tunnel router: encapsulates the inner packets "
                                   "it receives on --inside towards the RLOCs its map-cache names; "
                                   "with --data-port also an ETR (an xTR).")
    p.add_argument("--rloc", required=True, help="this ITR's locator (RLOC) address")
    p.add_argument("--inside", required=True, help="HOST:PORT receiving inner IP packets")
    _itr_args(p)
    p.add_argument("--instance-id", type=instance_id, default=None,
                   help="I-bit + IID in every header; map-cache and Map-Requests of this instance")
    p.add_argument("--data-port", type=cliutil.port, default=None,
                   help="also an ETR on RLOC:PORT (an xTR: reverse traffic, echo-nonce)")
    p.add_argument(
        "--prefix",
        action="append",
        default=[],
        type=cliutil.ip_network,
        metavar="PREFIX",
        help="this site's EID prefix (repeatable; xTR): the only destinations its ETR "
        "half delivers to",
    )
    _trust_args(p, " (xTR)")
    p.add_argument(
        "--echo-nonce", action="store_true", help="RFC 9300 sec. 10.1 (needs --data-port)"
    )
    p.add_argument("--local-rloc", action="append", default=[],
                   help="this site's locators in mapping order: Locator-Status-Bits (xTR)")
    p.add_argument("--map-version", type=map_version, default=None,
                   help="this site's Map-Version 1..4095: map-versioning on (RFC 9302; xTR)")
    _common(p)

    p = sub.add_parser(
        "source",
        help="CoreCast source",
        description="CoreCast source: streams each channel as RTP chunks through an "
        "ITR (or is its own ITR) and serves join/leave/heartbeat over HTTP.",
    )
    p.add_argument("--eid", required=True, help="the source's EID (its address)")
    p.add_argument("--channel", action="append", required=True, help="channel EID (repeatable)")
    p.add_argument(
        "--bitrate", type=cliutil.positive_float, default=384_000.0, help="b/s per channel"
    )
    p.add_argument("--chunk-size", type=cliutil.positive_int, default=1200, help="chunk D in bytes")
    p.add_argument("--itr", help="HOST:PORT of the ITR's inside interface")
    p.add_argument("--as-itr", action="store_true", help="perform the ITR function (sec. 3.4)")
    _itr_args(p, embedded=True)
    p.add_argument("--transport", choices=["udp", "raw"], default="udp")
    p.add_argument("--http-port", type=cliutil.port, default=0,
                   help="port of the HTTP subscription service (0 = any free one)")
    p.add_argument("--heartbeat-timeout", type=cliutil.positive_float, default=300.0,
                   help="seconds without a heartbeat before a client is removed")
    p.add_argument("--mtu", type=cliutil.positive_int, default=1500,
                   help="path MTU: the chunk size is cut to fit it")
    p.add_argument("--chunks", type=cliutil.positive_int, help="stop after this many chunks")
    p.add_argument("--input", type=_file, help="media file to stream instead of a test pattern")
    p.add_argument("--wait-subscribers", type=cliutil.nonnegative_int, default=0,
                   help="start streaming once this many clients joined")
    p.add_argument("--linger", type=cliutil.nonnegative_float, default=0.2,
                   help="seconds to keep running after the last chunk")
    _common(p)

    p = sub.add_parser("client", help="CoreCast client",
                       description="CoreCast client: joins a channel at the source and counts the "
                                   "chunks it receives (loss, order, jitter), accepting them only "
                                   "from the source and this domain's ETRs.")
    p.add_argument("--eid", required=True, help="the client's EID (its address)")
    p.add_argument("--port", type=cliutil.port, default=0,
                   help="UDP port to receive the stream on (0 = any free one)")
    p.add_argument("--join", help="HOST:PORT of the source's subscription service")
    p.add_argument("--channel", help="channel EID to join")
    p.add_argument("--no-corecast", action="store_true", help="my domain has no CoreCast ETR")
    p.add_argument("--etr", action="append", default=[], type=cliutil.ip_address, metavar="RLOC",
                   help="RLOC of this domain's ETR (repeatable): the stream is accepted only from "
                        "the ETRs and the source; other senders are counted in 'rejected'")
    p.add_argument("--accept-any", action="store_true",
                   help="accept the stream from any sender (unsafe: anyone can inject chunks)")
    p.add_argument("--join-timeout", type=cliutil.positive_float, default=30.0,
                   help="seconds to keep retrying the join while the source is not up (default 30)")
    p.add_argument("--heartbeat", type=cliutil.positive_float, default=None,
                   help="seconds between heartbeats (default: none)")
    p.add_argument("--leave", action="store_true", help="send leave before exiting")
    p.add_argument(
        "--chunks", type=cliutil.positive_int, help="exit after receiving this many chunks"
    )
    p.add_argument(
        "--stall-warning",
        type=cliutil.nonnegative_float,
        default=10.0,
        metavar="SECONDS",
        help="warn once when nothing arrived this long after joining (0 = never; default 10)",
    )
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="a status line on stderr (default: when stderr is a terminal)")
    _common(p)

    p = sub.add_parser("plan", help="equations 1-9 and the memory model",
                       description="The paper's analytical model: equations 1-9 and the memory "
                                   "model, with the paper's sizes and ours.")
    p.add_argument("--C", type=cliutil.positive_float, default=10e9, help="line rate, b/s")
    p.add_argument("--BW", type=cliutil.positive_float, default=384e3, help="stream rate, b/s")
    p.add_argument("--D", type=cliutil.positive_int, default=1200, help="chunk size, bytes")
    p.add_argument("--j", type=cliutil.positive_int, default=3, help="ASes with clients (RLOCs)")
    p.add_argument("--k", type=cliutil.positive_int, default=7, help="clients")
    p.add_argument("--i", type=int, default=None, help="P2P inter-domain arcs (eq. 7)")
    p.add_argument("--transport", choices=["udp", "raw"], default="udp")
    p.add_argument("--ipv6-eid", action="store_true")
    p.add_argument("--ipv6-rloc", action="store_true")
    p.add_argument("--channels", type=cliutil.positive_int, default=1000,
                   help="channels N in the memory model")
    p.add_argument(
        "--ases", type=cliutil.positive_int, default=1000, help="ASes M in the memory model"
    )
    p.add_argument("--measure", action="store_true", help="also measure our ITR core's state")
    p.add_argument("--measure-channels", type=cliutil.positive_int, default=20,
                   help="channels in the measured ITR (with --measure)")
    p.add_argument("--measure-ases", type=cliutil.positive_int, default=100,
                   help="ASes in the measured ITR (with --measure)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")

    sub.add_parser("experiment",
                   help="fig2-testbed | overhead | trace | multidomain (see each --help)")

    p = sub.add_parser("deploy", help="the paper's Fig. 2 on loopback, in one command",
                       description="Runs the paper's Fig. 2 (source, ITR, map-server, 3 ETRs, "
                                   "7 clients) on loopback and checks equations 3 and 5.")
    p.add_argument("--chunks", type=cliutil.positive_int, default=40, help="chunks to stream")
    p.add_argument("--quick", action="store_true", help="10 chunks")
    p.add_argument("--transport", choices=["udp", "raw"], default="udp")
    p.add_argument("--extra-payload-every", type=cliutil.nonnegative_int, default=0,
                   help="an extra payload copy after every N headers to the same ETR (0 = off)")
    p.add_argument("--json", action="store_true", help="print the whole result as JSON")
    return ap


EXPERIMENTS = {
    "fig2-testbed": "corecast.experiments.fig2_testbed",
    "overhead": "corecast.experiments.overhead",
    "trace": "corecast.experiments.trace",
    "multidomain": "corecast.experiments.multidomain",
}



@cliutil.cli_main("corecast", expected=(argparse.ArgumentTypeError,))
def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["experiment"]:
        return dispatch("corecast", EXPERIMENTS, argv[1:])
    a = build_parser().parse_args(argv)
    if a.cmd == "plan":
        return _plan(a)
    if a.cmd == "deploy":
        return _deploy(a)
    if a.cmd == "source" and not a.as_itr and not a.itr:
        build_parser().error("source needs --itr HOST:PORT or --as-itr")
    if a.cmd == "source" and a.as_itr and not a.cc_range:
        build_parser().error("--as-itr needs --cc-range")
    _check_role_args(a)
    outcome = asyncio.run(_role(a))
    _print_json(outcome.result)
    return outcome.code


def _check_role_args(a: argparse.Namespace) -> None:
    """Cross-option rules argparse cannot express: usage errors (exit 2)."""
    ap = build_parser()
    if a.cmd == "etr" and not (a.trust_rloc or a.trust_any_rloc):
        ap.error("etr: name the ITRs it accepts LISP data from: --trust-rloc ADDR|PREFIX "
                 "(repeatable), or --trust-any-rloc")
    if a.cmd == "itr":
        if a.data_port is None and (a.echo_nonce or a.local_rloc or a.map_version is not None
                                    or a.prefix or a.trust_rloc or a.trust_any_rloc):
            ap.error("--echo-nonce, --local-rloc, --map-version, --prefix and --trust-rloc "
                     "need --data-port (an xTR)")
        if a.data_port is not None and not a.prefix:
            ap.error("an xTR (--data-port) needs --prefix: this site's EID prefixes")
        if a.data_port is not None and not (a.trust_rloc or a.trust_any_rloc):
            ap.error("an xTR (--data-port) needs --trust-rloc ADDR|PREFIX (repeatable) "
                     "or --trust-any-rloc")
    if a.cmd == "client" and not (a.join or a.etr or a.accept_any):
        ap.error("client: --join HOST:PORT (the source), --etr RLOC or --accept-any: "
                 "whom to accept the stream from")
    if a.cmd == "client" and a.join and not a.channel:
        ap.error("client: --join needs --channel")


async def _role(a: argparse.Namespace) -> Outcome:
    """Run one role under the signal contract (deliverykit.cliutil.Stopper)."""
    stopper = cliutil.Stopper().install()
    try:
        return await ROLES[a.cmd](a, stopper)
    finally:
        stopper.remove()


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
