"""dissectors/m2c.lua against m2c.wire (docs/wire-m2c.md).

* A real run: m2c.aio.driver's MulticastSender (the carousel of m2c/demo.py)
  on loopback multicast is captured; Wireshark's built-in ALC/LCT/FEC show the
  LCT header and every EXT_M2C / EXT_M2C_CRC field of our subtree equals
  scapy's decode (m2c.wire.layers.LCT.ext).
* Hypothesis packets (both FEC codepoints, EXT_FTI, data-less) over real UDP,
  decoded through the port preference and through the postdissector path
  (``-d udp.port==N,alc``, heuristic off): the same fields both ways.
* Malformed packets: an error-severity expert item whenever m2c.wire.codec
  rejects the datagram for a reason in our extensions, and no Lua error.
"""

from __future__ import annotations

import asyncio
import os
import random
import struct
import zlib

import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st
from wslua_support import (
    UdpPair,
    as_list,
    capture,
    compare_scapy,
    experts,
    jint,
    scratch,
    tshark_json,
    wait_packets,
)

from deliverykit.pcap import Reader
from m2c.fec.payload_id import LDPCOTI
from m2c.wire import codec, layers

LUA = ["m2c.lua"]
#: expert severity PI_ERROR (epan/proto.h) as tshark writes it in JSON
PI_ERROR = 0x00800000
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)


def ours(pkt) -> list:
    """EXT_FTI (LDPC OTI), EXT_M2C, EXT_M2C_CRC of a scapy LCT packet, in order."""
    return [x for x in pkt[layers.LCT].ext
            if isinstance(x, (layers.ExtFTI, layers.ExtM2C, layers.ExtM2CCRC))]


def check_frame(node: dict, payload: bytes, where: str) -> None:
    """Our subtree equals scapy's extensions and carries no error."""
    pkt = layers.LCT(payload)
    exts = ours(pkt)
    items = as_list(node.get("m2c.ext"))
    assert len(items) == len(exts) >= 2, f"{where}: {node}"
    for i, (x, j) in enumerate(zip(exts, items)):
        compare_scapy(x, j, "m2c", f"{where} ext {i}")
    crc = items[-1]
    assert jint(crc["m2c.crc_computed"]) == jint(crc["m2c.crc"]), where
    assert not [x for x in experts(node) if jint(x["_ws.expert.severity"]) >= PI_ERROR], where


# ---------------------------------------------------------------------------
# a real run


@pytest.mark.root
@pytest.mark.tool("tshark", "tcpdump")
@pytest.mark.slow
def test_real_carousel_run_matches_scapy():
    from m2c.aio.driver import MulticastSender, make_session

    third = random.Random().randint(64, 191)
    port = 43000 + 16 * (third - 64)
    with scratch() as tmp:
        src = tmp / "file.bin"
        src.write_bytes(os.urandom(30_000))
        sd = make_session(str(src), group=f"239.194.{third}.1", port=port,
                          min_rate=50.0, max_rate=400.0, tsd=0.5, k=2)
        pcap = tmp / "m2c.pcap"
        with capture(pcap, f"udp and dst net 239.194.{third}.0/24"):
            sent = asyncio.run(MulticastSender(sd, str(src)).send(duration=1.5))
            wait_packets(pcap, sent.packets)
        # heuristic only (no port preference): every datagram is claimed
        # our heuristic before port-registered dissectors: the group ports are
        # random and may be one Wireshark knows (e.g. 44818)
        frames = tshark_json(pcap, LUA, "-o", "m2c.udp_ports:",
                             "-o", "udp.try_heuristic_first:TRUE", proto="alc m2c")
        caught = list(Reader(pcap))
    assert sent.packets > 20
    assert len(frames) == len(caught) == sent.packets
    groups = set()
    for k, (fr, f) in enumerate(zip(frames, caught)):
        assert "alc" in fr, f"frame {k + 1}: the built-in ALC dissector did not run"
        lct = fr["alc"]["rmt-lct"]
        assert jint(lct["rmt-lct.tsi"]) == sd.session
        check_frame(fr["m2c"], f.payload, f"frame {k + 1}")
        groups.add(jint(as_list(fr["m2c"]["m2c.ext"])[-2]["m2c.group"]))
    assert 0 in groups  # the base group is always sent


# ---------------------------------------------------------------------------
# generated packets

packets = st.builds(
    lambda cp, sess, toi, slot, group, psn, buf, off, sbn, esi, payload, sbl, fti, dl, cs, co:
        codec.AlcPacket(sess, toi, cp, slot, group, psn, buf, off,
                        0 if dl else (sbn % (1 << 12) if cp == 3 else sbn),
                        0 if dl else (esi % (1 << 20) if cp == 3 else esi % (1 << 16)),
                        b"" if dl else payload, 0 if (dl or cp == 3) else sbl,
                        fti if cp == 3 else None, cs, co, dl),
    st.sampled_from([3, 129]), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1),
    st.integers(0, 2**32 - 1), st.integers(0, 2**16 - 1), st.integers(0, 2**32 - 1),
    st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1),
    st.integers(0, 2**20 - 1), st.binary(max_size=200), st.integers(0, 2**16 - 1),
    st.one_of(st.none(), st.just(LDPCOTI(10**6, 1024, 1000, 2000, 0, 1, 77))),
    st.booleans(), st.booleans(), st.booleans(),
)


@pytest.mark.root
@pytest.mark.tool("tshark", "tcpdump")
@settings(max_examples=2, deadline=None, phases=NO_SHRINK,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(pkts=st.lists(packets, min_size=10, max_size=30))
def test_generated_packets_by_port_and_by_postdissector(pkts):
    wire = [codec.encode(p) for p in pkts]
    with scratch() as tmp:
        pair = UdpPair()
        pcap = tmp / "gen.pcap"
        try:
            with capture(pcap, f"udp and host 127.0.0.1 and port {pair.port_b}"):
                for w in wire:
                    pair.send(True, w)
                wait_packets(pcap, len(wire))
        finally:
            pair.close()
        by_port = tshark_json(pcap, LUA, "-o", f"m2c.udp_ports:{pair.port_b}",
                              "--disable-heuristic", "m2c_udp", proto="alc m2c")
        by_post = tshark_json(pcap, LUA, "-o", "m2c.udp_ports:", "--disable-heuristic",
                              "m2c_udp", "-d", f"udp.port=={pair.port_b},alc",
                              proto="alc m2c")
    assert len(by_port) == len(by_post) == len(wire)
    for k, (a, b, w) in enumerate(zip(by_port, by_post, wire)):
        check_frame(a["m2c"], w, f"port frame {k + 1}")
        check_frame(b["m2c"], w, f"postdissector frame {k + 1}")
        assert "alc" in a and "alc" in b


# ---------------------------------------------------------------------------
# malformed


def _mutations(w: bytes, rng: random.Random) -> list[tuple[str, bytes]]:
    """Damage in our extensions; codec.decode rejects each one."""
    p = layers.LCT(w)
    base = 16  # word0, CCI, TSI, TOI of our header shape
    off = base
    pos = {}
    for x in p[layers.LCT].ext:
        pos[type(x).__name__] = off
        off += len(bytes(x))
    m2c_at, crc_at = pos["ExtM2C"], pos["ExtM2CCRC"]
    out = []
    b = bytearray(w)
    b[crc_at + 4 + rng.randrange(4)] ^= 1 << rng.randrange(8)
    out.append(("crc field", bytes(b)))
    b = bytearray(w)
    if len(b) > off:
        b[rng.randrange(off, len(b))] ^= 0x55
        out.append(("payload bit flip", bytes(b)))
    b = bytearray(w)
    b[m2c_at + 2 + rng.randrange(18)] ^= 0x80
    out.append(("EXT_M2C content (CRC now wrong)", bytes(b)))
    out.append(("cut", w[: rng.randrange(off, len(w))] if len(w) > off else w[:-1]))
    # CCI mismatch with a recomputed (valid) CRC
    b = bytearray(w)
    b[4] ^= 0xFF
    struct.pack_into("!I", b, crc_at + 4, 0)
    struct.pack_into("!I", b, crc_at + 4, zlib.crc32(bytes(b)))
    out.append(("CCI mismatch", bytes(b)))
    # EXT_M2C with a wrong HEL (header length kept): the walk no longer lines up
    b = bytearray(w)
    b[m2c_at + 1] = 4
    out.append(("EXT_M2C HEL 4", bytes(b)))
    # EXT_M2C_CRC replaced by a NOP extension (HET 0) of the same length
    b = bytearray(w)
    b[crc_at] = 0
    out.append(("no EXT_M2C_CRC", bytes(b)))
    return out


@pytest.mark.root
@pytest.mark.tool("tshark", "tcpdump")
@settings(max_examples=2, deadline=None, phases=NO_SHRINK,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(pkts=st.lists(packets, min_size=4, max_size=8), seed=st.integers(0, 2**16))
def test_malformed_gives_error_expert_not_lua_error(pkts, seed):
    rng = random.Random(seed)
    samples: list[tuple[str, bytes]] = []
    for p in pkts:
        samples += _mutations(codec.encode(p), rng)
    samples += [("random", rng.randbytes(rng.randint(1, 60))) for _ in range(10)]
    with scratch() as tmp:
        pair = UdpPair()
        pcap = tmp / "bad.pcap"
        try:
            with capture(pcap, f"udp and host 127.0.0.1 and port {pair.port_b}"):
                for _, s in samples:
                    pair.send(True, s)
                wait_packets(pcap, len(samples))
        finally:
            pair.close()
        frames = tshark_json(pcap, LUA, "-o", f"m2c.udp_ports:{pair.port_b}",
                             "--disable-heuristic", "m2c_udp", proto="alc m2c")
    assert len(frames) == len(samples)
    for k, ((why, s), fr) in enumerate(zip(samples, frames)):
        try:
            codec.decode(s)
            rejected = False
        except codec.DecodeError:
            rejected = True
        errors = [x for x in experts(fr) if jint(x["_ws.expert.severity"]) >= PI_ERROR]
        if why == "random" and not rejected:  # (practically never)
            continue
        assert rejected, f"sample {k} ({why}) accepted by the codec"
        assert errors, f"sample {k} ({why}) {s.hex()}: no error expert in {fr}"
