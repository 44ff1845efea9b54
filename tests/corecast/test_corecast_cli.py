"""The `corecast` CLI as real subprocesses on loopback, and `plan`'s figures."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from corecast.cli import main

PY = [sys.executable, "-m", "corecast"]


def _spawn(args):
    return subprocess.Popen(PY + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _first_json(p) -> dict:
    """The role's ready line on stderr: ``corecast ROLE: ready {json}``."""
    line = p.stderr.readline()
    head, sep, info = line.partition(": ready ")
    assert sep and head.startswith("corecast "), line
    return json.loads(info)


def _final(p, timeout=30, code=0) -> dict:
    """The role's counters: stdout is one JSON document; ``code`` 143 after our SIGTERM."""
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == code, err
    return json.loads(out)


@pytest.mark.slow
@pytest.mark.parametrize("as_itr", [False, True])
def test_roles_as_processes_stream_to_clients(tmp_path, as_itr):
    b = random.randint(100, 250)
    pre = f"127.{b}"
    cc = f"{pre}.255.0/24"
    procs = []
    try:
        ms = _spawn(["mapserver", "--addr", f"{pre}.0.3", "--duration", "25",
                     "--site", f"as1:{pre}.11.0/24:1:k1", "--site", f"as2:{pre}.12.0/24:1:k2"])
        procs.append(ms)
        assert _first_json(ms)["sites"] == 2
        etrs = []
        for i in (1, 2):
            e = _spawn(["etr", "--rloc", f"{pre}.1.{i}", "--prefix", f"{pre}.1{i}.0/24",
                        "--map-server", f"{pre}.0.3", "--key-id", "1", "--psk", f"k{i}",
                        "--trust-rloc", f"{pre}.0.0/24", "--cc-range", cc, "--duration", "25"])
            procs.append(e)
            etrs.append(e)
        src_args = ["source", "--eid", f"{pre}.0.1", "--channel", f"{pre}.255.1", "--chunks",
                    "20", "--wait-subscribers", "3", "--duration", "25", "--cc-range", cc]
        if as_itr:
            mc = tmp_path / "map-cache"
            mc.write_text(f"{pre}.11.0/24 {pre}.1.1\n{pre}.12.0/24 {pre}.1.2\n")
            src_args += ["--as-itr", "--map-cache", str(mc), "--control-port", "0"]
        else:
            itr = _spawn(["itr", "--rloc", f"{pre}.0.2", "--inside", f"{pre}.0.2:9341",
                          "--cc-range", cc, "--map-resolver", f"{pre}.0.3", "--duration", "25"])
            procs.append(itr)
            src_args += ["--itr", f"{pre}.0.2:9341"]
            assert _first_json(itr)["rloc"] == f"{pre}.0.2"
        for e in etrs:  # each ETR prints a line once its Map-Notify arrived
            assert _first_json(e)["registered"]
        src = _spawn(src_args)
        procs.append(src)
        port = _first_json(src)["http_port"]
        clients = []
        for eid, cc_flag in ((f"{pre}.11.1", ["--etr", f"{pre}.1.1"]),
                             (f"{pre}.12.1", ["--etr", f"{pre}.1.2"]),
                             (f"{pre}.13.1", ["--no-corecast"])):
            c = _spawn(["client", "--eid", eid, "--join", f"{pre}.0.1:{port}", "--channel",
                        f"{pre}.255.1", "--chunks", "20", "--duration", "20"] + cc_flag)
            procs.append(c)
            clients.append(c)
        for c in clients:
            _first_json(c)
        stats = [_final(c) for c in clients]
        for s in stats:
            assert s["received"] == 20 and s["lost"] == 0 and s["rejected"] == 0, s
        s = _final(src)
        assert s["counters"]["chunks"] == 20 and s["counters"]["unicast_packets"] == 20
        for p in procs:
            if p.poll() is None:
                p.terminate()
        e1 = _final(etrs[0], code=143)
        assert e1["registered"] and e1["counters"]["cc_payloads"] == 20
        assert e1["counters"]["unicast_out"] == 20
        m = _final(ms, code=143)
        assert m["counters"]["accepted"] >= 2 and m["counters"]["refused_auth"] == 0
        if not as_itr:
            i = _final(itr, code=143)
            assert i["counters"]["payload_copies"] == 40 and i["drops"]["unknown_hash"] == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate(timeout=5)


def test_plan_prints_paper_and_our_figures(capsys):
    assert main(["plan"]) == 0
    out = capsys.readouterr().out
    assert "397,135" in out and "26,041" in out and "337,500" in out
    assert "0.0656" in out and "0.1905" in out and "0.16" in out
    for extra in (["--transport", "raw"], ["--ipv6-eid", "--ipv6-rloc"], ["--measure"]):
        assert main(["plan"] + extra) == 0
        assert "Table 1 CoreCast row" in capsys.readouterr().out
    assert main(["plan", "--json", "--transport", "raw"]) == 0
    r = json.loads(capsys.readouterr().out)
    paper, ours = r["rows"]
    assert paper["eq1_max_clients_cc"] == 397_135  # the README's check on eq. 1
    assert ours["sizes"]["h_cc"] == 56 and ours["sizes"]["h_l"] == 36


def test_deploy_command_exit_code(capsys):
    assert main(["deploy", "--chunks", "5"]) == 0
    assert "checks: all pass" in capsys.readouterr().out


def test_experiment_dispatch(capsys):
    assert main(["experiment", "trace", "--synthetic", "--quick"]) == 0
    assert "peers in" in capsys.readouterr().out
    assert main(["experiment", "nope"]) == 2


def test_source_streams_a_file_in_chunks(tmp_path):
    from corecast.cli import _file_media
    from corecast.core.source import RTP_HEADER_LEN, Source

    data = bytes(range(256)) * 20  # 5,120 bytes
    f = tmp_path / "media.bin"
    f.write_bytes(data)
    s = Source("10.0.0.1", ("192.0.2.1", 9))
    ch = s.add_channel("10.255.0.1", chunk_size=1200, media=_file_media(str(f)))
    s.join("10.255.0.1", "10.1.0.1", 5000, False, 0)
    got = b""
    t = 0.0
    while not ch.finished and t < 10:
        for pkt, _ in s.tick(t):
            got += pkt[RTP_HEADER_LEN:]
        t += 0.025
    assert got == data and ch.finished


def _free_on(hosts: list[str], ports: list[int]) -> bool:
    """Are these UDP ports free on every one of ``hosts`` right now?"""
    import socket

    socks = []
    try:
        for h in hosts:
            for port in ports:
                o = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                socks.append(o)
                o.bind((h, port))
        return True
    except OSError:
        return False
    finally:
        for o in socks:
            o.close()


@pytest.mark.slow
def test_two_xtrs_as_processes_echo_nonces_both_ways(tmp_path):
    """`corecast itr --data-port D --echo-nonce`: ITR + ETR in one process (RFC 9300
    sec. 10.1 needs both), instance 7.  Two such xTRs (each told by its static
    map-cache line that the other does echo-noncing, as a Map-Reply E-bit would)
    with traffic both ways verify each other's echoed nonces, and every inner packet
    sent is delivered by the other side.  Ports are picked free; the processes run
    until we stop them (SIGTERM), so a loaded machine only makes it slower."""
    import signal
    import socket
    import time

    from corecast.wire.codec import build_ip, build_udp

    # the xTRs encapsulate to the LISP data port 4341: pick a 127.b net where it
    # (and the inside port) are free on both RLOCs
    data_port, inside_port = 4341, 9341
    for _ in range(50):
        b = random.randint(100, 250)
        ra, rb = f"127.{b}.0.1", f"127.{b}.0.2"
        if _free_on([ra, rb], [data_port, inside_port]):
            break
    else:
        pytest.fail("no 127.b.0.0/16 with ports 4341 and 9341 free")
    eid_a, eid_b = f"127.{b}.1.9", f"127.{b}.2.9"  # a host behind each xTR
    (tmp_path / "a").write_text(f"127.{b}.2.0/24 {rb} inf echo\n")
    (tmp_path / "b").write_text(f"127.{b}.1.0/24 {ra} inf echo\n")
    hosts = []
    procs = []
    sent = 0
    got = [0, 0]
    try:
        for me, mc, eid in ((ra, "a", eid_a), (rb, "b", eid_b)):
            p = _spawn(["itr", "--rloc", me, "--inside", f"{me}:{inside_port}",
                        "--cc-range", "10.255.0.0/16",
                        "--map-cache", str(tmp_path / mc), "--control-port", "0",
                        "--data-port", str(data_port), "--echo-nonce", "--instance-id", "7",
                        "--prefix", f"{eid.rsplit('.', 1)[0]}.0/24",
                        "--trust-rloc", f"127.{b}.0.0/24",
                        "--duration", "120"])
            procs.append(p)
            assert _first_json(p)["xtr"]
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((eid, 0))
            s.setblocking(False)
            hosts.append(s)

        def drain() -> None:
            for j, h in enumerate(hosts):
                while True:
                    try:
                        h.recv(100)
                    except BlockingIOError:
                        break
                    got[j] += 1

        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        t0 = time.monotonic()
        while sent < 40 or (time.monotonic() - t0 < 3.0 and sent < 200):
            for inside, src, dst in ((ra, hosts[0], hosts[1]), (rb, hosts[1], hosts[0])):
                sa, da = src.getsockname(), dst.getsockname()
                inner = build_ip(socket.inet_aton(sa[0]), socket.inet_aton(da[0]), 17,
                                 build_udp(sa[1], da[1], b"x%d" % sent))
                tx.sendto(inner, (inside, inside_port))
            sent += 1
            time.sleep(0.05)
            drain()
        tx.close()
        deadline = time.monotonic() + 20.0
        while got != [sent, sent] and time.monotonic() < deadline:
            time.sleep(0.05)
            drain()
        for p in procs:
            p.send_signal(signal.SIGTERM)
        finals = [_final(p, 30, code=143) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate(timeout=5)
        for s in hosts:
            s.close()
    assert got == [sent, sent]
    for f in finals:
        assert f["xtr"]["echo_requests_started"] >= 1, f["xtr"]
        assert f["xtr"]["echoes_verified"] >= 1, f["xtr"]
        assert f["xtr"]["echoes_sent"] >= 1
        assert f["xtr"]["unreachable"] == 0
        assert f["etr"]["plain_delivered"] == sent and f["etr"]["drop_wrong_instance"] == 0
        assert f["counters"]["plain_encap"] == sent
