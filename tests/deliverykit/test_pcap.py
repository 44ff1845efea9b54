"""The streaming pcap/pcapng reader against scapy's decode, on real and built captures."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from scapy.layers.inet import IP, UDP, fragment
from scapy.layers.inet6 import IPv6, IPv6ExtHdrDestOpt
from scapy.layers.l2 import CookedLinux, Dot1Q, Ether
from scapy.utils import PcapNgWriter, rdpcap, wrpcap

from deliverykit.pcap import LINKTYPE_ETHERNET, PCAPNG_SHB, PcapError, Reader


def _scapy_udp(path):
    out = []
    for p in rdpcap(str(path)):
        ip = p.getlayer(IP) or p.getlayer(IPv6)
        udp = p.getlayer(UDP)
        if ip is not None and udp is not None:
            out.append((ip.src, ip.dst, udp.sport, udp.dport, bytes(udp.payload)))
    return out


def _ours_udp(path):
    return [(f.src, f.dst, f.sport, f.dport, f.payload)
            for f in Reader(path) if f.sport is not None]


def _packets():
    rng = random.Random(7)
    pk = []
    for i in range(30):
        data = rng.randbytes(rng.randrange(0, 1400))
        pk.append(Ether() / IP(src=f"10.0.0.{i % 250 + 1}", dst="239.1.2.3")
                  / UDP(sport=1000 + i, dport=4341) / data)
        pk.append(Ether() / Dot1Q(vlan=5) / IP(src="10.9.9.9", dst="10.0.0.1")
                  / UDP(sport=5, dport=6) / data)
        pk.append(Ether() / IPv6(src="2001:db8::1", dst="ff0e::1") / IPv6ExtHdrDestOpt()
                  / UDP(sport=7, dport=8) / data)
        pk.append(CookedLinux() / IP(src="127.0.0.1", dst="127.0.0.2")
                  / UDP(sport=9, dport=10) / data)
    return pk


def test_pcap_and_pcapng_match_scapy(tmp_path):
    pk = [p for p in _packets() if not p.haslayer(CookedLinux)]
    a = tmp_path / "a.pcap"
    wrpcap(str(a), pk)
    assert _ours_udp(a) == _scapy_udp(a) and len(_ours_udp(a)) == len(pk)
    b = tmp_path / "b.pcapng"
    with PcapNgWriter(str(b)) as w:
        for p in pk:
            w.write(p)
    assert _ours_udp(b) == _scapy_udp(a)
    sll = tmp_path / "sll.pcap"
    wrpcap(str(sll), [p for p in _packets() if p.haslayer(CookedLinux)])
    assert _ours_udp(sll) == _scapy_udp(sll)


def test_fragments_and_other_protocols(tmp_path):
    big = IP(src="1.1.1.1", dst="2.2.2.2", id=7) / UDP(sport=1, dport=2) / (b"x" * 3000)
    frags = fragment(big, fragsize=1000)
    raw253 = IP(src="1.1.1.1", dst="2.2.2.2", proto=253) / b"corecast-ish"
    path = tmp_path / "f.pcap"
    wrpcap(str(path), [Ether() / f for f in frags] + [Ether() / raw253])
    r = Reader(path)
    frames = list(r)
    n = len(frags)
    assert n >= 3
    assert [f.sport for f in frames] == [1] + [None] * n  # later fragments carry no UDP header
    assert frames[-1].proto == 253 and frames[-1].payload == b"corecast-ish"
    assert r.stats["fragments"] == n and r.stats["frames"] == n + 1


def _truncations(data: bytes):
    return sorted({0, 1, 3, 4, 23, 24, 25, 39, 40, len(data) // 2, len(data) - 1, len(data)})


def test_truncated_files_never_raise_beyond_pcaperror(tmp_path):
    src = tmp_path / "full.pcap"
    wrpcap(str(src), _packets()[:8])
    data = src.read_bytes()
    for n in _truncations(data):
        p = tmp_path / f"t{n}.pcap"
        p.write_bytes(data[:n])
        try:
            r = Reader(p)
            frames = list(r)
        except PcapError:
            assert n < 24
            continue
        assert len(frames) <= 32
        if 24 < n < len(data):
            assert r.stats["file_truncated"] == 1 or len(frames) < 32


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefix=st.sampled_from([
           b"",
           bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000"),
           bytes.fromhex("0a0d0d0a1c0000004d3c2b1a01000000ffffffffffffffff1c000000")]),
       body=st.binary(max_size=600))
def test_fuzzed_captures_give_frames_or_pcaperror(tmp_path, prefix, body):
    p = tmp_path / "fuzz.cap"
    p.write_bytes(prefix + body)
    try:
        for f in Reader(p):
            assert isinstance(f.payload, bytes)
    except PcapError:
        pass


def _send_udp(family, host, port, payloads):
    s = socket.socket(family, socket.SOCK_DGRAM)
    for d in payloads:
        s.sendto(d, (host, port))
        time.sleep(0.001)
    s.close()


@pytest.mark.root
@pytest.mark.tool("tcpdump", "tshark")
@pytest.mark.parametrize("tool", ["tcpdump-lo", "tcpdump-any", "tshark-pcapng"])
def test_real_loopback_capture(tmp_path, tool):
    port = 40000 + os.getpid() % 20000
    path = tmp_path / "cap"
    if tool == "tshark-pcapng":
        argv = ["tshark", "-q", "-i", "lo", "-w", str(path), "-f", f"udp port {port}"]
        ready = "File:"  # "Capturing on" comes before dumpcap really captures
    else:
        iface = "lo" if tool == "tcpdump-lo" else "any"
        argv = ["tcpdump", "-U", "--immediate-mode", "-Z", "root", "-i", iface, "-w", str(path),
                f"udp port {port}"]
        ready = "listening on"
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 15
        line = ""
        while ready not in line and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                pytest.fail(f"{argv[0]} exited: {proc.returncode}")
        payloads = [os.urandom(n) for n in (0, 1, 100, 1200, 1472)]
        _send_udp(socket.AF_INET, "127.0.0.1", port, payloads)
        _send_udp(socket.AF_INET6, "::1", port, payloads)
        time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
    ours = [(s, d, dp, pl) for s, d, _sp, dp, pl in _ours_udp(path)]
    assert ours == [("127.0.0.1", "127.0.0.1", port, p) for p in payloads] + \
                  [("::1", "::1", port, p) for p in payloads]
    if tool != "tshark-pcapng":  # scapy reads both; compare where it is simple
        assert _ours_udp(path) == _scapy_udp(path)


def test_analyse_cli_json_and_csv(tmp_path):
    cap = tmp_path / "a.pcap"
    wrpcap(str(cap), [p for p in _packets() if not p.haslayer(CookedLinux)])
    out = subprocess.run(
        [sys.executable, "-m", "deliverykit", "analyse", str(cap), "--only", "flows",
         "--json", str(tmp_path / "r.json"), "--csv", str(tmp_path / "csv"), "--no-progress"],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    res = json.loads((tmp_path / "r.json").read_text())
    flows = res["results"]["flows"]["flows"]
    assert sum(f["packets"] for f in flows) == 90 and res["capture"]["frames"] == 90
    assert (tmp_path / "csv" / "flows-flows.csv").read_text().startswith("src,sport,dst,dport")
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"not a capture at all")
    out = subprocess.run([sys.executable, "-m", "deliverykit", "analyse", str(bad)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "not a pcap" in out.stderr


# --- snap length: frames captured shorter than they were on the wire (issue 13 item 13) ---

def _pcapng_block(btype: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    n = 12 + len(body)
    return struct.pack("<II", btype, n) + body + struct.pack("<I", n)


def _pcapng(records: list[tuple[bytes, int]], simple: bool = False) -> bytes:
    """A pcapng file (Ethernet) with EPBs (or SPBs) of (captured bytes, original length)."""
    out = _pcapng_block(PCAPNG_SHB, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    out += _pcapng_block(1, struct.pack("<HHI", LINKTYPE_ETHERNET, 0, 0))
    for i, (data, orig) in enumerate(records):
        if simple:
            out += _pcapng_block(3, struct.pack("<I", orig) + data)
        else:
            out += _pcapng_block(6, struct.pack("<IIIII", 0, 0, i, len(data), orig) + data)
    return out


def _udp_frame(n: int) -> bytes:
    return bytes(Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=1, dport=2) / (b"u" * n))


@pytest.mark.parametrize("simple", [False, True], ids=["epb", "spb"])
def test_pcapng_captured_below_original_length_is_counted_and_flagged(tmp_path, simple):
    full, big = _udp_frame(100), _udp_frame(3000)
    cut = big[:200]  # snap length 200: the IP and UDP length fields still say 3000 bytes of data
    header_cut = big[:30]  # cut inside the IP header: counted, cannot be delivered
    p = tmp_path / "snap.pcapng"
    p.write_bytes(_pcapng([(full, len(full)), (cut, len(big)), (header_cut, len(big))], simple))
    r = Reader(p)
    frames = list(r)
    assert [f.truncated for f in frames] == [False, True]
    assert frames[1].length == 20 + 8 + 3000 and len(frames[1].payload) == 200 - 14 - 28
    assert r.stats["truncated"] == 2 and r.stats["truncated_headers"] == 1
    assert r.stats["records"] == 3 and r.stats["frames"] == 2


def test_pcap_incl_below_orig_is_counted_even_when_ip_lengths_agree(tmp_path):
    """The record header says more was on the wire (e.g. trailing bytes past the IP packet)."""
    frame = _udp_frame(50)
    p = tmp_path / "s.pcap"
    hdr = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, LINKTYPE_ETHERNET)
    p.write_bytes(hdr + struct.pack("<IIII", 1, 0, len(frame), len(frame) + 4) + frame)
    r = Reader(p)
    (f,) = list(r)
    assert f.truncated and r.stats["truncated"] == 1


def _tcp_bulk(port: int, total: int) -> None:
    """A loopback TCP stream written in 64 KiB writes: the kernel hands tcpdump frames of
    up to 65,549 bytes (GSO), more than a 65535-byte snap length keeps."""
    import threading

    got = [0]
    with socket.create_server(("127.0.0.1", port)) as srv:
        srv.settimeout(10)

        def drain() -> None:
            conn, _ = srv.accept()
            with conn:
                conn.settimeout(10)
                while d := conn.recv(1 << 20):
                    got[0] += len(d)

        t = threading.Thread(target=drain)
        t.start()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as cli:
            block = os.urandom(65536)
            for _ in range(total // len(block)):
                cli.sendall(block)
        t.join(30)
    assert got[0] == total


def _capture(path, argv_tail: list[str], bpf: str):
    argv = ["tcpdump", "-U", "--immediate-mode", "-Z", "root", *argv_tail, "-i", "lo", "-w",
            str(path), bpf]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 15
    line = ""
    while "listening on" not in line and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            pytest.fail(f"tcpdump exited: {proc.returncode}")
    return proc


@pytest.mark.root
@pytest.mark.tool("tcpdump")
def test_real_snaplen_65535_loopback_capture_is_flagged(tmp_path):
    """tcpdump -s 65535 on lo of a 64 KiB-write TCP stream: the reader counts the cut frames
    (it used to say 'truncated 0'), and with -s 0 the same transfer has none."""
    results = {}
    for snap in ("65535", "0"):
        port = free_port()
        path = tmp_path / f"s{snap}.pcap"
        proc = _capture(path, ["-s", snap, "-B", "65536"], f"tcp port {port}")
        try:
            _tcp_bulk(port, 4 << 20)
            time.sleep(0.5)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=10)
        r = Reader(path)
        frames = list(r)
        results[snap] = (r.stats, frames)
    stats, frames = results["65535"]
    cut = [f for f in frames if f.truncated]
    assert stats["truncated"] == len(cut) > 0
    assert all(f.length > 65535 - 14 for f in cut)  # only the frames longer than the snap length
    stats0, frames0 = results["0"]
    assert stats0["truncated"] == 0 and not any(f.truncated for f in frames0)
    assert max(f.length for f in frames0) > 65535 - 14  # the same large frames, kept whole


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_pcapng_interface_statistics_drops_are_reported(tmp_path):
    """dumpcap/tshark end a pcapng with an Interface Statistics Block: packets the kernel
    or the interface dropped (isb_ifdrop, isb_osdrop) are not in the file; say so."""
    frame = _udp_frame(10)
    data = _pcapng([(frame, len(frame))])
    opts = struct.pack("<HHQ", 5, 8, 3) + struct.pack("<HHQ", 7, 8, 4) + struct.pack("<HH", 0, 0)
    data += _pcapng_block(5, struct.pack("<III", 0, 0, 0) + opts)
    p = tmp_path / "isb.pcapng"
    p.write_bytes(data)
    r = Reader(p)
    assert len(list(r)) == 1
    assert r.stats["dropped_by_capture"] == 7


@pytest.mark.root
@pytest.mark.tool("tshark")
def test_tshark_pcapng_without_drops_says_zero(tmp_path):
    """A real dumpcap capture carries its statistics block; with no drop, 0 (not absent)."""
    path = tmp_path / "t.pcapng"
    port = free_port()
    proc = subprocess.Popen(["tshark", "-q", "-i", "lo", "-w", str(path), "-f", f"udp port {port}"],
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 15
        line = ""
        while "File:" not in line and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                pytest.fail(f"tshark exited: {proc.returncode}")
        _send_udp(socket.AF_INET, "127.0.0.1", port, [b"x" * 10] * 5)
        time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
    r = Reader(path)
    assert len(list(r)) == 5
    assert r.stats["dropped_by_capture"] == 0
