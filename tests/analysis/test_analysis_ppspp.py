"""``deliverykit analyse --only ppspp`` on a captured seed + download on loopback.

The numbers are checked against what the run itself produced: the file the
downloader verified has ceil(size / chunk size) chunks, each chunk received
once more than the duplicates, all of them ACKed (the downloader verified
them), and the conversation's addressing method is the one the CLI asked for
(remembered from the handshake: bins and byte ranges would be miscounted
otherwise).
"""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess

import pytest
from analysis_support import PY, analyse, free_udp_port, tcpdump
from hypothesis import given, settings, strategies as st

from deliverykit.pcap import Frame, Reader
from swift.analysis import Analyser


def victim_index_floor(datas: list[int], victim: int) -> int:
    """Chunks before the corrupted one still verify."""
    return datas.index(victim)


def _peer(rows: list[dict], ep: str) -> dict:
    return next(r for r in rows if r["peer"] == ep)


@pytest.mark.root
@pytest.mark.tool("tcpdump")
@pytest.mark.parametrize("addressing", ["chunk32", "bin32", "byte64"])
def test_seed_download_capture(tmp_path, procs, addressing):
    size = 200 * 1024 + 123
    src = tmp_path / "content.bin"
    src.write_bytes(os.urandom(size))
    port = free_udp_port()
    cap = tmp_path / "ppspp.pcap"
    common = ["--addressing", addressing, "--chunk-size", "1024"]
    with tcpdump(cap, f"udp and port {port}"):
        seed = subprocess.Popen([PY, "-m", "swift", "seed", str(src), "--host", "127.0.0.1",
                                 "--port", str(port), "--duration", "60", *common],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(seed)
        root = seed.stdout.readline().strip()
        assert len(root) == 64, root
        out = tmp_path / "out.bin"
        dl = subprocess.run([PY, "-m", "swift", "download", root, "--peer", f"127.0.0.1:{port}",
                             "-o", str(out), "-q", "--host", "127.0.0.1", "--timeout", "30",
                             *common], capture_output=True, text=True, timeout=60)
        assert dl.returncode == 0, dl.stderr
        seed.terminate()
        seed.wait(5)
    assert out.read_bytes() == src.read_bytes()

    out = analyse(cap, tmp_path, "--only", "ppspp", "--opt", f"ppspp-port={port}")
    res = out["results"]["ppspp"]
    seeder = f"127.0.0.1:{port}"
    convs = res["ppspp_conversations"]
    assert len(convs) == 1 and convs[0]["addressing"] == addressing
    assert convs[0]["swarm"] == root
    leecher = convs[0]["a"] if convs[0]["b"] == seeder else convs[0]["b"]
    lrow, srow = dict(_peer(res["ppspp_peers"], leecher)), dict(_peer(res["ppspp_peers"], seeder))
    for row in (lrow, srow):  # message counts by type, from the long table
        for m in res["ppspp_messages"]:
            if m["peer"] == row["peer"]:
                row["sent_" + m["type"]] = m["sent"]
                row["received_" + m["type"]] = m["received"]
    chunks = math.ceil(size / 1024)
    assert lrow["chunks_received"] == chunks
    assert srow["sent_data"] == lrow["chunks_received"] + lrow["duplicate_chunks"]
    assert lrow["data_payload_bytes"] == size + 1024 * lrow["duplicate_chunks"] or \
        lrow["duplicate_chunks"] > 0
    assert lrow["unacked_chunks"] == 0
    # every DATA checked against the root hash with the INTEGRITY hashes sent before it
    assert lrow["verified_chunks"] == srow["sent_data"]
    assert lrow["rejected_chunks"] == lrow["unverifiable_chunks"] == 0
    assert lrow["sent_request"] > 0 and srow["sent_handshake"] >= 1 and lrow["sent_handshake"] >= 1
    assert lrow["received_data"] == srow["sent_data"] and srow["received_ack"] == lrow["sent_ack"]
    assert srow["chunks_received"] == 0
    kinds = {r["what"]: r for r in res["ppspp_latency"] if r["receiver"] == leecher}
    assert kinds["request_to_data"]["observed"] > 0
    assert kinds["data_to_ack_rtt"]["observed"] >= chunks - lrow["duplicate_chunks"] - 1
    assert kinds["request_to_data"]["min_ms"] >= 0
    tput = [r for r in res["ppspp_throughput"] if r["receiver"] == leecher]
    assert sum(r["bytes"] for r in tput) == lrow["data_payload_bytes"]
    if addressing == "chunk32":  # every analyser on the same capture: the others find nothing
        every = analyse(cap, tmp_path, "--csv", str(tmp_path / "csv"))["results"]
        assert every["ppspp"]["ppspp_peers"] == res["ppspp_peers"]
        assert not every["corecast"]["corecast_channels"] and not every["m2c"]["m2c_groups"]
        assert not every["vmc"]["vmc_requests"]
        assert (tmp_path / "csv" / "ppspp-ppspp_peers.csv").read_text().count("\n") == 3


@pytest.mark.root
@pytest.mark.tool("tcpdump")
def test_plots_written_and_corrupt_chunk_rejected(tmp_path, procs):
    """--plots writes the throughput and latency figures (a real run, chunk32)."""
    size = 64 * 1024
    src = tmp_path / "c.bin"
    src.write_bytes(os.urandom(size))
    port = free_udp_port()
    cap = tmp_path / "p.pcap"
    with tcpdump(cap, f"udp and port {port}"):
        seed = subprocess.Popen([PY, "-m", "swift", "seed", str(src), "--host", "127.0.0.1",
                                 "--port", str(port), "--duration", "60"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(seed)
        root = seed.stdout.readline().strip()
        dl = subprocess.run([PY, "-m", "swift", "download", root, "--peer", f"127.0.0.1:{port}",
                             "-o", str(tmp_path / "o.bin"), "-q", "--host", "127.0.0.1",
                             "--timeout", "30"], capture_output=True, text=True, timeout=60)
        assert dl.returncode == 0, dl.stderr
    r = subprocess.run([PY, "-m", "deliverykit", "analyse", str(cap), "--no-progress", "--only",
                        "ppspp", "--opt", f"ppspp-port={port}", "--plots", str(tmp_path / "plots")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for name in ("ppspp-throughput.png", "ppspp-latency.png"):
        p = tmp_path / "plots" / name
        assert p.stat().st_size > 1000 and p.read_bytes()[:4] == b"\x89PNG"

    # the same capture with one byte of one chunk flipped: exactly that DATA is rejected
    frames = list(Reader(cap))
    datas = [i for i, f in enumerate(frames) if f.sport == port and len(f.payload) > 1024]
    victim = datas[len(datas) // 2]
    bad = bytearray(frames[victim].payload)
    bad[-10] ^= 0xFF
    frames[victim] = dataclasses.replace(frames[victim], payload=bytes(bad))
    a = Analyser({"ppspp-port": str(port)})
    for f in frames:
        if a.accepts(f):
            a.feed(f)
    (row,) = [r for r in a.tables()["ppspp_peers"] if r["chunks_received"]]
    assert row["rejected_chunks"] == 1
    # the real receiver did accept that chunk, so later DATA omit the uncles below it: those
    # chunks now lack a hash here (unverifiable), none is wrong
    assert row["verified_chunks"] + row["unverifiable_chunks"] == len(datas) - 1
    assert row["verified_chunks"] >= victim_index_floor(datas, victim)


_frames = st.builds(
    Frame, ts=st.floats(0, 1e6), src=st.sampled_from(["10.0.0.1", "10.0.0.2", "::1"]),
    dst=st.sampled_from(["10.0.0.1", "10.0.0.2"]), proto=st.just(17),
    sport=st.sampled_from([6778, 5000]), dport=st.sampled_from([6778, 5000]),
    payload=st.one_of(st.binary(max_size=200),
                      st.binary(max_size=100).map(lambda b: b"\0\0\0\0\0" + b),
                      st.binary(max_size=100).map(lambda b: b"\0\0\0\1" + b)),
    length=st.integers(0, 70000))


@settings(max_examples=300, deadline=None)
@given(st.lists(_frames, max_size=30), st.sampled_from(["chunk32", "bin64", "byte64"]))
def test_fuzz_feed_never_raises(frames, addressing):
    a = Analyser({"addressing": addressing, "max-state": "50", "max-chunks": "4096"})
    for f in frames:
        if a.accepts(f):
            a.feed(f)
    tables = a.tables()
    assert set(tables) >= {"ppspp_peers", "ppspp_latency", "ppspp_errors"}
    assert a.state <= 50


@st.composite
def _conversation(draw):
    """A handshake with real options, then messages under that context, some damaged."""
    from swift.wire.codec import (
        Data,
        Handshake,
        HandshakeOptions,
        Integrity,
        Request,
        WireContext,
        encode_datagram,
    )
    from swift.wire.constants import ChunkAddressing, HashFunc
    cam = draw(st.sampled_from(list(ChunkAddressing)))
    hf = draw(st.sampled_from([HashFunc.SHA1, HashFunc.SHA256]))
    cs = draw(st.sampled_from([16, 1024]))
    ctx = WireContext.make(cam, hf, chunk_size=cs)
    swarm = draw(st.binary(min_size=ctx.hash_size, max_size=ctx.hash_size))
    hs = Handshake(9, HandshakeOptions(version=1, swarm_id=swarm, integrity=1, hash_func=hf,
                                       addressing=cam, chunk_size=cs))
    out = [Frame(0.0, "10.0.0.2", "10.0.0.1", 17, 5000, 6778, encode_datagram(ctx, 0, [hs]), 100)]
    for i in range(draw(st.integers(0, 8))):
        c = draw(st.integers(0, 40))
        spec = (2 * c, 2 * c) if ctx.is_bin else ((c * cs, c * cs + cs - 1)
                                                   if cam == ChunkAddressing.BYTE64 else (c, c))
        msgs = [Integrity(*spec, draw(st.binary(min_size=ctx.hash_size, max_size=ctx.hash_size))),
                Data(*spec, 0, draw(st.binary(min_size=cs, max_size=cs)))]
        if draw(st.booleans()):
            msgs.insert(0, Request(*spec))
        raw = encode_datagram(ctx, 9, msgs)
        cut = draw(st.integers(4, len(raw)))
        src, dst = ("10.0.0.1", "10.0.0.2") if i % 3 else ("10.0.0.2", "10.0.0.1")
        out.append(Frame(float(i), src, dst, 17, 6778 if src == "10.0.0.1" else 5000,
                         5000 if src == "10.0.0.1" else 6778, raw[:cut], 100))
    return out


@settings(max_examples=200, deadline=None)
@given(_conversation())
def test_fuzz_conversations_never_raise(frames):
    a = Analyser({})
    for f in frames:
        if a.accepts(f):
            a.feed(f)
    t = a.tables()
    for r in t["ppspp_peers"]:
        assert r["verified_chunks"] + r["rejected_chunks"] + r["unverifiable_chunks"] <= \
            r["chunks_received"] + r["duplicate_chunks"]


def test_bounded_state():
    """Peers over max-peers and pending state over max-state are dropped and counted."""
    from swift.wire.codec import (
        Data,
        Handshake,
        HandshakeOptions,
        Request,
        WireContext,
        encode_datagram,
    )
    ctx = WireContext()
    a = Analyser({"max-peers": "4", "max-state": "100"})
    for i in range(20):
        leech = f"10.0.1.{i + 1}"
        hs = Handshake(i + 1, HandshakeOptions(version=1, swarm_id=bytes(32)))
        a.feed(Frame(0.0, leech, "10.0.0.1", 17, 5000, 6778, encode_datagram(ctx, 0, [hs]), 60))
        a.feed(Frame(0.1, leech, "10.0.0.1", 17, 5000, 6778,
                     encode_datagram(ctx, 7, [Request(0, 999)]), 40))
        a.feed(Frame(0.2, "10.0.0.1", leech, 17, 6778, 5000,
                     encode_datagram(ctx, i + 1, [Data(0, 0, 0, bytes(1024))]), 1100))
    t = a.tables()
    errs = {r["what"]: r["count"] for r in t["ppspp_errors"]}
    assert len(t["ppspp_peers"]) <= 4 and len(a.convs) <= 4
    assert errs["dropped: peers"] > 0 and errs["dropped: state"] > 0
    assert a.state <= 100


@pytest.mark.root
@pytest.mark.tool("tcpdump")
def test_two_seeders_one_swarm(tmp_path, procs):
    """One leecher, two seeders of the same file: chunks are counted per swarm (a chunk from
    the second seeder that the first already gave is a duplicate), DATA per sender adds up."""
    size = 150 * 1024
    src = tmp_path / "c.bin"
    src.write_bytes(os.urandom(size))
    ports = [free_udp_port(), free_udp_port()]
    cap = tmp_path / "two.pcap"
    with tcpdump(cap, f"udp and (port {ports[0]} or port {ports[1]})"):
        roots = set()
        for p in ports:
            seed = subprocess.Popen([PY, "-m", "swift", "seed", str(src), "--host", "127.0.0.1",
                                     "--port", str(p), "--duration", "60"],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            procs.append(seed)
            roots.add(seed.stdout.readline().strip())
        (root,) = roots
        dl = subprocess.run([PY, "-m", "swift", "download", root, "-o", str(tmp_path / "o.bin"),
                             "-q", "--host", "127.0.0.1", "--timeout", "30",
                             *[a for p in ports for a in ("--peer", f"127.0.0.1:{p}")]],
                            capture_output=True, text=True, timeout=60)
        assert dl.returncode == 0, dl.stderr
    assert (tmp_path / "o.bin").read_bytes() == src.read_bytes()
    res = analyse(cap, tmp_path, "--only", "ppspp", "--opt",
                  f"ppspp-port={ports[0]},{ports[1]}")["results"]["ppspp"]
    assert len(res["ppspp_conversations"]) == 2
    assert {c["swarm"] for c in res["ppspp_conversations"]} == {root}
    seeders = {f"127.0.0.1:{p}" for p in ports}
    (leech,) = [r for r in res["ppspp_peers"] if r["peer"] not in seeders]
    sent = sum(m["sent"] for m in res["ppspp_messages"]
               if m["peer"] in seeders and m["type"] == "data")
    assert leech["chunks_received"] == math.ceil(size / 1024)
    assert sent == leech["chunks_received"] + leech["duplicate_chunks"]
    assert leech["verified_chunks"] == sent and leech["rejected_chunks"] == 0
    senders = {r["sender"] for r in res["ppspp_latency"] if r["what"] == "request_to_data"}
    assert senders <= seeders and senders
