"""Fuzz every live CoreCast role with mutated and random datagrams (issue 13, "Done when").

One namespace with no route out (``IsolatedNamespace``) holds the whole deployment on its
``lo``: map-server, ETR, ITR (or the source as its own ITR), source and a verified client.
The forwarding roles start only through ``start_forwarding_role``, which refuses any
namespace with a way out. While the source streams to the client through ITR and ETR, a
fuzzer sends mutations of valid packets (bit flips, truncation, splices, random bytes,
scapy field mutation) to every UDP port of every role, from a stranger's address and from
spoofed addresses of the roles, and garbage HTTP to the source's subscription port.

Asserted, for a bounded time (``FUZZ_SECONDS`` per role, default 3):

* every role is still running, then stops on SIGTERM with exit 143 and its counters;
* the drops are counted (ETR, ITR, map-server, client, source);
* nothing was emitted outside the configured addresses: the namespace's kernel counter
  ``OutNoRoutes`` did not move (any send to an address outside 127.0.0.0/8 fails there
  with ENETUNREACH and counts), and every UDP packet a role sent on ``lo`` (tcpdump) went
  to a role, a fuzzer address, or an EID of the ETR's own site;
* the transfer beside the fuzzer completed: every chunk arrived once, with its content
  checked against the source's deterministic media.
"""

from __future__ import annotations

import ipaddress
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from corecast.wire import codec as c
from deliverykit.testbed.capture import Capture
from deliverykit.testbed.isolated import IsolatedNamespace, start_forwarding_role

from .conftest import Target, bounded, emitted_udp, fuzz_udp

pytestmark = [pytest.mark.root, pytest.mark.tool("tcpdump"), pytest.mark.slow]

PY = [sys.executable, "-m", "corecast"]
MS, ITR, SRC, ETR = "127.90.0.3", "127.90.0.2", "127.90.0.1", "127.90.1.1"
CLIENT, CLIENT_PORT = "127.90.11.1", 5000
SITE, CC_RANGE = "127.90.11.0/24", "127.90.255.0/24"
CHAN = "127.90.255.1"   # the real stream
DECOY = "127.90.255.2"  # the channel the fuzzer's seeds use, so spoofed seeds do not replace ours
STRANGER = "127.90.9.9"
HTTP_PORT, INSIDE_PORT = 8000, 9341
A = ipaddress.ip_address


def _ready(p: subprocess.Popen, what: str) -> dict:
    assert p.stderr is not None
    line = p.stderr.readline()
    head, sep, info = line.partition(": ready ")
    assert sep, f"{what} did not start: {line}{p.stderr.read() if p.poll() is not None else ''}"
    return json.loads(info)


# ------------------------------------------------------------------ seeds (valid packets)


def _inner_seeds() -> list[bytes]:
    """Inner IP packets as a source hands them to an ITR: CoreCast PDUs for the decoy channel
    (payload, then headers for site EIDs that are not our client), plain UDP to the site."""
    media = b"\x00decoy media " * 20
    h = c.digest(1, media)
    chan, src = A(DECOY).packed, A(SRC).packed
    out = [c.build_ip(src, chan, 17, c.build_udp(54341, 54341, c.encode_cc_payload(7, media))),
           c.build_ip(src, chan, 253, c.encode_cc_payload(7, media))]
    for eid in ("127.90.11.50", "127.90.11.51"):
        hdr = c.encode_cc_header(7, h, A(eid).packed, 6000)
        out += [c.build_ip(src, chan, 17, c.build_udp(54341, 54341, hdr)),
                c.build_ip(src, chan, 253, hdr)]
    out.append(c.build_ip(src, A("127.90.11.60").packed, 17, c.build_udp(4000, 6001, b"plain")))
    return out


def _lisp_seeds() -> list:
    from corecast.wire.layers import LISPData

    inner = _inner_seeds()
    # plain headers, and one with the N and I bits (nonce, Instance ID 0)
    raw = [b"\x00" * 8 + p for p in inner] + [b"\x88\x00\x00\x01\x00\x00\x00\x00" + inner[0]]
    return raw + [LISPData(r) for r in raw]


def _control_seeds() -> list:
    from corecast.wire.layers import LISPControl

    req = c.encode_map_request(c.MapRequest(
        99, (A(ITR),), (ipaddress.ip_network("127.90.11.5/32"),), source_eid=A(SRC)))
    req_stranger = c.encode_map_request(c.MapRequest(
        98, (A("8.8.8.8"), A(STRANGER)), (ipaddress.ip_network("127.90.11.0/24"),)))
    rec = c.EidRecord(ipaddress.ip_network(SITE), (c.LocatorRecord(A(ETR)),), 10)
    reply = c.encode_map_reply(c.MapReply(12345, (rec,)))
    register = c.MapRegister(5, (rec,), 1, 2, want_map_notify=True, proxy_reply=True)
    reg = c.sign(register, b"not-the-key")
    ecm = c.ecm_wrap(req, A(ITR).packed, A("127.90.11.5").packed, 4342)
    raw = [req, req_stranger, reply, reg, ecm]
    return raw + [LISPControl(r) for r in raw]


def _rtp_seeds() -> list[bytes]:
    from corecast.core.source import rtp_packet

    return [rtp_packet(s, s * 3000, 0xC0FFEE, bytes(100)) for s in (0, 1, 40000, 65535)]


# ------------------------------------------------------------------ in the namespace


def _http_garbage(seconds: float, seed: int) -> int:
    """Mutated HTTP requests to the source's subscription service; returns connections made."""
    from .conftest import Mutator

    join = {"channel": CHAN, "eid": "127.90.11.99", "port": 9, "corecast": False}
    body = json.dumps(join).encode()
    good = (b"POST /join HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)
    m = Mutator([good, b"GET /channels HTTP/1.1\r\nhost: x\r\n\r\n"], random.Random(seed))
    n = 0
    for data in bounded(m, seconds, 2000):
        try:
            with socket.create_connection((SRC, HTTP_PORT), timeout=1,
                                          source_address=(STRANGER, 0)) as s:
                s.sendall(data)
                s.shutdown(socket.SHUT_WR)
                s.settimeout(1)
                while s.recv(4096):
                    pass
        except OSError:
            pass
        n += 1
        time.sleep(0.005)
    return n


def _fuzz_all(targets: list[Target], seconds: float, seed: int) -> dict[str, int]:
    t = threading.Thread(target=lambda: sent.__setitem__("http", _http_garbage(seconds, seed)))
    sent: dict[str, int] = {}
    t.start()
    try:
        sent.update(fuzz_udp(targets, seconds, seed))
    finally:
        t.join()
    return sent


async def _verified_client(chunks: int, timeout: float) -> dict:
    """Join the real channel through the ETR and check every chunk's content."""
    import asyncio

    from corecast.aio.nodes import ClientNode
    from corecast.core.source import RTP_HEADER_LEN, pattern_media

    got: dict[int, bytes] = {}

    class Verifying(ClientNode):
        def _on(self, items: list, now: float) -> None:  # one batch: keep what the core took
            for item in items:
                before = self.client.received
                super()._on([item], now)
                if self.client.received > before:
                    data = item[0]
                    got.setdefault(int.from_bytes(data[2:4], "big"), bytes(data[RTP_HEADER_LEN:]))

    node = Verifying(CLIENT, CLIENT_PORT, accept=[ETR])
    await node.start()
    try:
        await node.join((SRC, HTTP_PORT), CHAN, True)
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while node.client.received < chunks and loop.time() < end:
            await asyncio.sleep(0.05)
    finally:
        await node.close()
    expect = pattern_media(CHAN)
    bad = [s for s in range(chunks) if not got.get(s) or got[s] != expect(s, len(got[s]))]
    extra = sorted(set(got) - set(range(chunks)))
    return {"stats": node.client.stats(), "bad": bad, "extra": extra}


# ------------------------------------------------------------------ the test


@pytest.mark.parametrize("mode", ["itr", "source-as-itr"])
def test_fuzz_every_corecast_role_while_a_transfer_completes(
    mode, tmp_path: Path, fuzz_seconds, fuzz_rng
):
    as_itr = mode == "source-as-itr"
    seconds = max(1.0, fuzz_seconds) * 2  # every target shares the rounds: ~ FUZZ_SECONDS each
    chunks = max(40, int(seconds / 0.02) + 20)  # streams for longer than the fuzzing
    trusted = SRC if as_itr else ITR
    with IsolatedNamespace(prefix="fzcc") as ns:
        mapcache = tmp_path / "map-cache"
        mapcache.write_text(f"{SITE} {ETR}\n")
        cap = Capture(ns.name, "lo", tmp_path / "lo.pcap", filter="udp", snaplen=128)
        cap.start()
        procs: dict[str, subprocess.Popen] = {}
        try:
            def popen(name: str, argv: list[str], forwarding: bool) -> None:
                kw = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                procs[name] = (start_forwarding_role(ns, PY + argv, **kw) if forwarding
                               else ns.popen(PY + argv, **kw))
                _ready(procs[name], name)

            popen("mapserver", ["mapserver", "--addr", MS, "--site", f"as1:{SITE}:1:secret"], False)
            popen("etr", ["etr", "--rloc", ETR, "--prefix", SITE, "--cc-range", CC_RANGE,
                          "--trust-rloc", trusted, "--map-server", MS,
                          "--key-id", "1", "--psk", "secret"],
                  True)
            src_argv = ["source", "--eid", SRC, "--channel", CHAN, "--chunks", str(chunks),
                        "--bitrate", str(1200 * 8 / 0.02), "--http-port", str(HTTP_PORT),
                        "--wait-subscribers", "1", "--linger", "600"]
            if as_itr:
                popen("source", src_argv + ["--as-itr", "--cc-range", CC_RANGE, "--map-cache",
                                            str(mapcache)], True)
            else:
                popen("itr", ["itr", "--rloc", ITR, "--inside", f"{ITR}:{INSIDE_PORT}",
                              "--cc-range", CC_RANGE, "--map-resolver", MS], True)
                popen("source", src_argv + ["--itr", f"{ITR}:{INSIDE_PORT}"], False)
            base = ns.ip_counters()["OutNoRoutes"]

            lisp, ctl = _lisp_seeds(), _control_seeds()
            targets = [
                Target("etr-data", (ETR, 4341), lisp, [STRANGER, trusted]),
                Target("etr-control", (ETR, 4342), ctl, [STRANGER, MS]),
                Target("mapserver", (MS, 4342), ctl, [STRANGER, ETR]),
                Target("client", (CLIENT, CLIENT_PORT), _rtp_seeds(), [STRANGER]),
            ]
            if as_itr:
                targets.append(Target("source-control", (SRC, 4342), ctl, [STRANGER, MS]))
            else:
                targets += [Target("itr-inside", (ITR, INSIDE_PORT), _inner_seeds(),
                                   [STRANGER, SRC]),
                            Target("itr-control", (ITR, 4342), ctl, [STRANGER, MS])]
            only = os.environ.get("FUZZ_TARGETS")  # e.g. "etr-data,itr-inside" to narrow a finding
            if only:
                targets = [t for t in targets if t.name in only.split(",")]
            client = ns.spawn(_verified_client, chunks, seconds + 60)
            fuzz = ns.spawn(_fuzz_all, targets, seconds, fuzz_rng.getrandbits(32))
            sent = fuzz.result(timeout=seconds + 120)
            verdict = client.result(timeout=seconds + 120)

            for name, p in procs.items():
                assert p.poll() is None, f"{name} died: {p.communicate(timeout=10)[1]}"
            finals = {}
            for name, p in procs.items():
                p.send_signal(signal.SIGTERM)
                out, err = p.communicate(timeout=30)
                assert p.returncode == 143, f"{name}: {err}"
                finals[name] = json.loads(out)
            no_routes = ns.ip_counters()["OutNoRoutes"] - base
        finally:
            cap.stop()
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
                    p.communicate(timeout=5)

    assert all(sent[t.name] > 0 for t in targets) and sent["http"] > 0, sent
    # the transfer beside the fuzzer: every chunk once, content checked
    st = verdict["stats"]
    assert verdict["bad"] == [] and verdict["extra"] == [], verdict
    assert st["received"] == chunks and st["lost"] == 0 and st["duplicates"] == 0, st
    fuzzed = {t.name for t in targets}
    if "client" in fuzzed:
        assert st["rejected"] > 0  # the stranger's datagrams, counted and dropped
    # drops counted by every role
    etr = finals["etr"]["counters"]
    assert etr["unicast_out"] >= chunks
    if "etr-data" in fuzzed:
        assert sum(v for k, v in etr.items() if k.startswith("drop_")) > 0, etr
        assert etr["drop_untrusted_rloc"] > 0
    if "etr-control" in fuzzed:
        reg = finals["etr"]["registrar"]
        assert reg["bad_notify"] + reg["requests_refused"] + reg["requests_not_ours"] > 0, reg
    ms = finals["mapserver"]["counters"]
    if "mapserver" in fuzzed:
        refused = ms["refused_auth"] + ms["refused_itr_rloc"]
        assert ms["malformed"] + ms["unexpected"] + refused > 0, ms
    assert finals["source"]["counters"]["chunks"] == chunks
    if as_itr and "source-control" in fuzzed:
        assert finals["source"]["itr"]["drop_malformed"] > 0, finals["source"]["itr"]
    if not as_itr and {"itr-inside", "itr-control"} & fuzzed:
        assert sum(finals["itr"]["drops"].values()) > 0, finals["itr"]
    # nothing emitted outside the configured addresses
    assert no_routes == 0, (
        f"{no_routes} sends to addresses outside the namespace: {json.dumps(finals)}")
    roles = {MS, ETR, SRC, CLIENT} | ({ITR} if not as_itr else set())
    site = ipaddress.ip_network(SITE)
    allowed = roles | {STRANGER, ITR, MS, ETR, SRC}
    emitted = emitted_udp(tmp_path / "lo.pcap", roles)
    assert len(emitted) >= 2 * chunks  # the capture saw the roles' traffic (not a vacuous check)
    stray = [(s, d, p) for s, d, p in emitted if d not in allowed and A(d) not in site]
    assert stray == [], stray[:10]
