"""dissectors/ppspp.lua against swift.wire (RFC 7574 sections 7-8).

Hypothesis generates conversations, one per chunk addressing method (7.8), each
starting with a HANDSHAKE exchange and continuing with random multi-message
datagrams in both directions.  They are sent over real UDP sockets on loopback
while tcpdump captures; tshark decodes the capture with our Lua dissector and
every field (``ppspp.<scapy field name>``) is compared with scapy's decode of
the same bytes under the conversation's context.  The conversations are
interleaved in one capture, so the per-conversation memory of the handshake is
what makes the sizes come out right.
"""

from __future__ import annotations

import random
import socket

import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st
from scapy.layers.inet import UDP
from scapy.packet import Raw
from scapy.utils import wrpcap
from wslua_support import (
    UdpPair,
    as_list,
    bind_free,
    capture,
    compare_scapy,
    jbytes,
    jint,
    malformed,
    scratch,
    tshark_json,
    tshark_text,
    wait_packets,
)

from deliverykit.pcap import Reader
from swift.core import bins
from swift.wire import codec, layers
from swift.wire.codec import (
    Ack,
    Cancel,
    Choke,
    Data,
    Handshake,
    HandshakeOptions,
    Have,
    Integrity,
    PexReq,
    PexResCert,
    PexResV4,
    PexResV6,
    Request,
    SignedIntegrity,
    Unchoke,
    WireContext,
)
from swift.wire.constants import (
    HASH_SIZES,
    SIG_SIZES,
    VARIABLE_CHUNK_SIZE,
    ChunkAddressing,
    HashFunc,
    SigAlg,
)

LUA = ["ppspp.lua"]
SPEC_TYPES = {1, 2, 3, 4, 7, 8, 9}

#: every example is a real capture and tshark runs: report the failing
#: example as generated instead of shrinking it through dozens of captures
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)

# ---------------------------------------------------------------------------
# strategies


@st.composite
def handshake_options(draw, cam: int) -> HandshakeOptions:
    """Every option of section 7, addressing always present (7.8: MUST)."""
    wide = cam in (1, 3, 4)
    opt = lambda s: draw(st.one_of(st.none(), s))  # noqa: E731
    return HandshakeOptions(
        version=opt(st.just(1)),
        min_version=opt(st.just(1)),
        swarm_id=opt(st.binary(max_size=40)),
        integrity=opt(st.integers(0, 3)),
        hash_func=opt(st.sampled_from(list(HashFunc))),
        sig_alg=opt(st.sampled_from(list(SigAlg))),
        addressing=cam,
        discard_window=opt(st.integers(0, 2**64 - 1 if wide else 2**32 - 1)),
        supported=opt(st.sets(st.integers(0, 13), min_size=1).map(codec.supported_bitmap)),
        chunk_size=opt(st.sampled_from([1, 16, 1024, VARIABLE_CHUNK_SIZE])),
    )


def context_of(opts: HandshakeOptions) -> WireContext:
    """The wire context a peer derives from the handshake (defaults otherwise)."""
    return WireContext(
        ChunkAddressing(opts.addressing),
        HASH_SIZES[HashFunc(opts.hash_func if opts.hash_func is not None else 2)],
        SIG_SIZES.get(opts.sig_alg, 64) if opts.sig_alg is not None else 64,
        opts.chunk_size if opts.chunk_size is not None else 1024,
    )


@st.composite
def message_list(draw, ctx: WireContext, opts: HandshakeOptions) -> list:
    """0..6 messages valid in ``ctx`` (a variable-size or short DATA goes last)."""
    top = 2**64 - 1 if ctx.wide else 2**32 - 1
    out: list = []
    for _ in range(draw(st.integers(0, 6))):
        t = draw(st.integers(0, 13))
        if t in SPEC_TYPES:
            if ctx.is_bin:
                s = e = draw(st.integers(0, top))
            else:
                s, e = draw(st.integers(0, top)), draw(st.integers(0, top))
        if t == 0:
            chan = draw(st.sampled_from([0, draw(st.integers(1, 2**32 - 1))]))
            if chan == 0:  # closing handshake: no options or the version (8.4)
                o = draw(st.sampled_from([HandshakeOptions(), HandshakeOptions(version=1)]))
            else:
                o = opts
            out.append(Handshake(chan, o))
        elif t == 1:
            last = False
            if ctx.addressing == ChunkAddressing.BYTE64:
                payload = draw(st.binary(min_size=1, max_size=48))
                s = draw(st.integers(0, top - len(payload)))
                e = s + len(payload) - 1
            elif ctx.chunk_size == VARIABLE_CHUNK_SIZE:
                payload, last = draw(st.binary(max_size=48)), True
            elif draw(st.booleans()) and ctx.chunk_size > 1:  # short last chunk
                payload = draw(st.binary(max_size=min(ctx.chunk_size - 1, 48)))
                last = True
            else:
                payload = bytes([draw(st.integers(0, 255))]) * ctx.chunk_size
            out.append(Data(s, e, draw(st.integers(0, 2**64 - 1)), payload))
            if last:
                break
        elif t == 2:
            out.append(Ack(s, e, draw(st.integers(0, 2**64 - 1))))
        elif t == 3:
            out.append(Have(s, e))
        elif t == 4:
            out.append(Integrity(s, e, draw(st.binary(min_size=ctx.hash_size,
                                                      max_size=ctx.hash_size))))
        elif t == 5:
            out.append(PexResV4(str(draw(st.ip_addresses(v=4))), draw(st.integers(0, 65535))))
        elif t == 6:
            out.append(PexReq())
        elif t == 7:
            out.append(SignedIntegrity(s, e, draw(st.integers(0, 2**64 - 1)),
                                       draw(st.binary(min_size=ctx.sig_size,
                                                      max_size=ctx.sig_size))))
        elif t == 8:
            out.append(Request(s, e))
        elif t == 9:
            out.append(Cancel(s, e))
        elif t == 10:
            out.append(Choke())
        elif t == 11:
            out.append(Unchoke())
        elif t == 12:
            out.append(PexResV6(str(draw(st.ip_addresses(v=6))), draw(st.integers(0, 65535))))
        else:
            out.append(PexResCert(draw(st.binary(max_size=60))))
    return out


@st.composite
def conversation(draw, cam: int):
    """(ctx, [(a_to_b, channel, messages)]) starting with the handshake exchange."""
    opts = draw(handshake_options(cam))
    ctx = context_of(opts)
    ca, cb = draw(st.integers(1, 2**32 - 1)), draw(st.integers(1, 2**32 - 1))
    dgrams = [(True, 0, [Handshake(ca, opts)] + draw(message_list(ctx, opts))),
              (False, ca, [Handshake(cb, opts)] + draw(message_list(ctx, opts)))]
    for _ in range(draw(st.integers(1, 8))):
        a_to_b = draw(st.booleans())
        dgrams.append((a_to_b, cb if a_to_b else ca, draw(message_list(ctx, opts))))
    return ctx, dgrams


# ---------------------------------------------------------------------------
# comparison: scapy's decode vs the dissector's JSON, field by field


def compare(pkt, node: dict, where: str) -> None:
    """Every scapy field of ``pkt`` equals ``node['ppspp.<name>']``."""
    compare_scapy(pkt, node, "ppspp", where)


def check_bins(ctx: WireContext, msgs: list, node: dict, where: str) -> None:
    """Bins are shown as chunk ranges (generated ppspp.first_chunk / last_chunk)."""
    none = codec.none_value(ctx)
    for i, (m, j) in enumerate(zip(msgs, as_list(node.get("ppspp.messages")))):
        if m.type not in SPEC_TYPES:
            continue
        if not ctx.is_bin or m.start == none:
            assert "ppspp.first_chunk" not in j, where
            continue
        first, end = bins.base_range(m.start)
        assert jint(j["ppspp.first_chunk"]) == first, f"{where}[{i}]"
        assert jint(j["ppspp.last_chunk"]) == end - 1, f"{where}[{i}]"


_OPT_ALIAS = ["version", "min_version", "swarm_id", "integrity", "hash_func", "sig_alg",
              "addressing", "discard_window", "supported", "chunk_size"]


def check_aliases(node: dict, where: str) -> None:
    """Typed filter aliases (ppspp.opt.<HandshakeOptions name>, ppspp.ipv4/ipv6)
    repeat the scapy-named values they stand for."""
    for m in as_list(node.get("ppspp.messages")):
        for o in as_list(m.get("ppspp.options")):
            code = jint(o["ppspp.code"])
            if code < len(_OPT_ALIAS):
                assert o[f"ppspp.opt.{_OPT_ALIAS[code]}"] == o["ppspp.value"], where
        if "ppspp.ip" in m:
            tree = m["ppspp.ip_tree"]
            assert (tree.get("ppspp.ipv4") or tree.get("ppspp.ipv6")) == m["ppspp.ip"], where


def send_and_capture(tmp_path, convs: list, seed: int):
    """Send the conversations interleaved over real UDP; return (pcap, sent rows)."""
    # every other conversation over IPv6 (the conversation key is address-neutral)
    pairs = [UdpPair("::1" if i % 2 else "127.0.0.1") for i in range(len(convs))]
    rng = random.Random(seed)
    queues = [list(d) for _, d in convs]
    sent = []  # (conversation index, a_to_b, payload, messages)
    pcap = tmp_path / "ppspp.pcap"
    ports = [p for pr in pairs for p in (pr.port_a, pr.port_b)]
    bpf = ("udp and (host 127.0.0.1 or host ::1) and ("
           + " or ".join(f"port {p}" for p in ports) + ")")
    try:
        with capture(pcap, bpf):
            while any(queues):
                i = rng.choice([k for k, q in enumerate(queues) if q])
                a_to_b, chan, msgs = queues[i].pop(0)
                data = codec.encode_datagram(convs[i][0], chan, msgs)
                pairs[i].send(a_to_b, data)
                sent.append((i, a_to_b, data, msgs))
            wait_packets(pcap, len(sent))
    finally:
        for pr in pairs:
            pr.close()
    return pcap, sent, pairs


def captured_payloads(pcap) -> list[bytes]:
    """UDP payloads as captured (our streaming reader: scapy would re-dissect
    payloads on ports it knows and rebuild them)."""
    return [f.payload for f in Reader(pcap) if f.proto == 17]


# ---------------------------------------------------------------------------
# tests


@pytest.mark.root
@pytest.mark.tool("tshark", "tcpdump")
@pytest.mark.slow
@settings(max_examples=3, deadline=None, phases=NO_SHRINK, derandomize=False,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large, HealthCheck.too_slow])
@given(convs=st.tuples(*[conversation(cam) for cam in range(5)]), seed=st.integers(0, 2**16))
def test_every_field_matches_scapy_across_addressing_methods(convs, seed):
    with scratch() as tmp_path:
        _check_conversations(tmp_path, convs, seed)


def _check_conversations(tmp_path, convs, seed) -> None:
    pcap, sent, _ = send_and_capture(tmp_path, list(convs), seed)
    assert captured_payloads(pcap) == [s[2] for s in sent]
    # heuristic only (port preference off): every datagram belongs to a
    # conversation that began with a HANDSHAKE
    frames = tshark_json(pcap, LUA, "-o", "ppspp.udp_port:0", proto="ppspp")
    assert len(frames) == len(sent)
    seen_conv: set[int] = set()
    for k, (layers_, (i, _a2b, data, msgs)) in enumerate(zip(frames, sent)):
        ctx = convs[i][0]
        where = f"frame {k + 1} (conversation {i}, {ctx.addressing.name})"
        node = layers_.get("ppspp")
        assert isinstance(node, dict), f"{where}: not dissected as PPSPP"
        assert not malformed(node), f"{where}: {node}"
        with layers.use_context(ctx):  # conditional fields read the context too
            pkt = layers.PPSPP(data)
            assert Raw not in pkt, where
            assert len(pkt.messages) == len(msgs), where
            compare(pkt, node, where)
        check_bins(ctx, msgs, node, where)
        check_aliases(node, where)
        if i in seen_conv:  # after its handshake, the conversation's method is used
            assert jint(node["ppspp.addressing"]) == int(ctx.addressing), where
        seen_conv.add(i)


def _every_message(ctx: WireContext, opts: HandshakeOptions, k: int) -> list:
    """All 14 message types, valid in ``ctx`` (DATA last: its size may vary)."""
    if ctx.is_bin:
        s = e = [0, 1, 7, codec.none_value(ctx) >> 1, codec.none_value(ctx)][k % 5]
    else:
        s, e = k, k + 3
    if ctx.addressing == ChunkAddressing.BYTE64:
        payload = bytes(range(10))
        e = s + len(payload) - 1
    elif ctx.chunk_size == VARIABLE_CHUNK_SIZE:
        payload = b"variable"
    else:
        payload = bytes([k]) * ctx.chunk_size
    return [Handshake(0, HandshakeOptions(version=1)), Ack(s, e, 5), Have(s, e),
            Integrity(s, e, bytes([k]) * ctx.hash_size), PexResV4("10.1.2.3", 6778), PexReq(),
            SignedIntegrity(s, e, 99, bytes([k]) * ctx.sig_size), Request(s, e), Cancel(s, e),
            Choke(), Unchoke(), PexResV6("2001:db8::1", 1), PexResCert(b"cert"),
            Data(s, e, 12345, payload)]


@pytest.mark.root
@pytest.mark.tool("tshark", "tcpdump")
def test_every_method_hash_and_signature_deterministic():
    """5 addressing methods x 5 hash functions (x 4 signature algorithms and 4
    chunk sizes in turn): 25 interleaved conversations, every message type."""
    convs = []
    sizes = [1, 16, 1024, VARIABLE_CHUNK_SIZE]
    for k, (cam, hf) in enumerate((c, h) for c in range(5) for h in HashFunc):
        empty = k % 3 == 0  # zero-length swarm id and bitmap every third time
        opts = HandshakeOptions(version=1, min_version=1,
                                swarm_id=b"" if empty else b"swarm%d" % k, integrity=1,
                                hash_func=hf, sig_alg=list(SigAlg)[k % 4], addressing=cam,
                                discard_window=k,
                                supported=codec.supported_bitmap(
                                    set() if empty else set(range(14))),
                                chunk_size=sizes[k % 4])
        ctx = context_of(opts)
        dgrams = [(True, 0, [Handshake(k + 1, opts)]),
                  (False, k + 1, [Handshake(1000 + k, opts)]),
                  (True, 1000 + k, _every_message(ctx, opts, k)),
                  (False, k + 1, _every_message(ctx, opts, k + 1))]
        convs.append((ctx, dgrams))
    with scratch() as tmp_path:
        _check_conversations(tmp_path, convs, 1)
        # two passes (-2): the second pass is a redissection with pinfo.visited set,
        # as in Wireshark's GUI; the per-frame memory must give the same tree
        pcap = tmp_path / "ppspp.pcap"
        one = tshark_json(pcap, LUA, "-o", "ppspp.udp_port:0", proto="ppspp")
        two = tshark_json(pcap, LUA, "-o", "ppspp.udp_port:0", "-2", proto="ppspp")
    assert [f.get("ppspp") for f in one] == [f.get("ppspp") for f in two]


def _bad_datagrams() -> list[tuple[WireContext, bytes]]:
    """Hand-made out-of-spec datagrams, each in the context it is sent in."""
    c32 = WireContext()
    hs = codec.encode_message(c32, Handshake(5, HandshakeOptions(version=1, addressing=2)))
    swarm = bytes([0, 0, 0, 0, 0, 0, 0, 0, 9, 2, 0, 50]) + b"abc" + b"\xff"
    return [
        (c32, b"\x00\x00"),                                       # no channel id
        (c32, b"\x00\x00\x00\x01\x63"),                           # unknown type 99
        (c32, b"\x00\x00\x00\x01\xff"),                           # reserved type 255
        (c32, b"\x00\x00\x00\x01\x03\x00\x00\x00\x01\x00\x00"),   # truncated HAVE
        (c32, b"\x00\x00\x00\x01\x02" + bytes(8) + bytes(3)),     # truncated ACK delay
        (c32, b"\x00\x00\x00\x00" + hs[:-1]),                      # no end option
        (c32, swarm),                                             # swarm id length 50 > data
        (c32, bytes(4) + b"\x00" + bytes(4) + b"\x08\x21" + bytes(33) + b"\xff"),  # bitmap > 32
        (c32, bytes(4) + b"\x00" + bytes(4) + b"\x06\x02\x00\x01\xff"),  # options unsorted
        (c32, bytes(4) + b"\x00" + bytes(4) + b"\x0a\x01\xff"),   # unknown option 10
        (c32, b"\x00\x00\x00\x01\x0d\x00\x10abc"),                # cert length 16 > 3
        (WireContext(ChunkAddressing.BYTE64),
         b"\x00\x00\x00\x01\x01" + (10).to_bytes(8, "big") + (19).to_bytes(8, "big")
         + bytes(8) + b"short"),                                  # byte range 10 bytes, 5 sent
        (WireContext(ChunkAddressing.BIN64), b"\x00\x00\x00\x01\x08" + bytes(7)),  # short bin
        (c32, b"\x00\x00\x00\x01\x04" + bytes(8) + bytes(31)),    # hash 31 of 32 bytes
        (c32, b"\x00\x00\x00\x01\x07" + bytes(8) + bytes(8) + bytes(10)),  # short signature
        (c32, b"\x00\x00\x00\x01\x05\x01\x02\x03"),               # truncated PEX_RESv4
        (c32, b"\x00\x00\x00\x01\x0c" + bytes(17)),               # truncated PEX_RESv6
    ]


@pytest.mark.root
@pytest.mark.tool("tshark", "tcpdump")
@settings(max_examples=2, deadline=None, phases=NO_SHRINK,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(base=conversation(int(ChunkAddressing.CHUNK32)),
       cuts=st.lists(st.floats(0, 1, exclude_max=True), min_size=30, max_size=30),
       junk=st.lists(st.binary(min_size=4, max_size=40), min_size=30, max_size=30))
def test_malformed_gives_expert_info_exactly_when_the_codec_rejects(base, cuts, junk):
    """Truncations, random bytes and hand-made bad datagrams: a Malformed expert
    item iff swift.wire.codec rejects the datagram, and never a Lua error."""
    with scratch() as tmp_path:
        _check_malformed(tmp_path, base, cuts, junk)


def _check_malformed(tmp_path, base, cuts, junk) -> None:
    ctx, dgrams = base
    wire = [codec.encode_datagram(ctx, c, m) for _, c, m in dgrams]
    samples: list[tuple[WireContext, bytes]] = []
    for k, cut in enumerate(cuts):
        w = wire[k % len(wire)]
        samples.append((ctx, w[: max(1, int(cut * len(w)))]))
    samples += [(ctx, j) for j in junk]
    samples += _bad_datagrams()
    pcap = tmp_path / "bad.pcap"
    send_one_to_many(pcap, [d for _, d in samples])
    # Each sample goes to its own receiver port, so it is its own conversation
    # and the preferences (set to the sample's context) size its messages.
    by_ctx: dict[WireContext, list[int]] = {}
    for k, (c, _) in enumerate(samples):
        by_ctx.setdefault(c, []).append(k)
    for c, idx in by_ctx.items():
        frames = tshark_json(pcap, LUA, *prefs_for(c), proto="ppspp")
        assert len(frames) == len(samples)
        for k in idx:
            data = samples[k][1]
            node = frames[k].get("ppspp")
            assert isinstance(node, dict), f"sample {k} not dissected"
            try:
                want_bad = codec.decode_datagram(data, c).error is not None
            except codec.DecodeError:
                want_bad = True
            assert malformed(node) == want_bad, f"sample {k} {data.hex()}: {node}"


SENDER_PORT: list[int] = []


def send_one_to_many(pcap, payloads: list[bytes]) -> None:
    """One sender socket, one receiver per payload; sets SENDER_PORT[0]."""
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    SENDER_PORT[:] = [bind_free(tx, "127.0.0.1")]
    rxs = []
    try:
        with capture(pcap, f"udp and host 127.0.0.1 and src port {SENDER_PORT[0]}"):
            for data in payloads:
                rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                rxs.append(rx)
                bind_free(rx, "127.0.0.1")
                rx.settimeout(5)
                tx.sendto(data, rx.getsockname())
                assert rx.recv(70000) == data
            wait_packets(pcap, len(payloads))
    finally:
        tx.close()
        for rx in rxs:
            rx.close()
    assert captured_payloads(pcap) == payloads


def prefs_for(c: WireContext) -> list[str]:
    """tshark options: decode the sender's port with context ``c``, no heuristic."""
    hash_name = {v: k for k, v in HASH_SIZES.items()}[c.hash_size].name
    return ["-o", f"ppspp.udp_port:{SENDER_PORT[0]}",
            "-o", f"ppspp.addressing:{c.addressing.name}",
            "-o", f"ppspp.hash_func:{hash_name}",
            "-o", f"ppspp.sig_size:{c.sig_size}",
            "-o", f"ppspp.chunk_size:{c.chunk_size}",
            "--disable-heuristic", "ppspp_udp"]


@pytest.mark.root
@pytest.mark.tool("tshark", "tcpdump")
def test_port_preference_and_strict_heuristic():
    """Without a handshake only the port preference claims PPSPP; random UDP on
    another port is never claimed by the heuristic; a handshake marks the
    conversation so the heuristic takes its later datagrams."""
    ctx = WireContext()
    rng = random.Random(7)
    plain = UdpPair()   # PPSPP without handshake (needs the port preference)
    decoy = UdpPair()   # random bytes
    conv = UdpPair()    # handshake first, then data
    opts = HandshakeOptions(version=1, addressing=2, chunk_size=4)
    conv_msgs = [(True, 0, [Handshake(9, opts)]), (False, 9, [Handshake(7, opts)]),
                 (True, 7, [Request(0, 3)]), (False, 9, [Data(0, 0, 1, b"abcd")]),
                 (True, 7, [Ack(0, 0, 5)]), (True, 7, [])]
    ports = [p for pr in (plain, decoy, conv) for p in (pr.port_a, pr.port_b)]
    with scratch() as tmp:
        pcap = tmp / "heur.pcap"
        try:
            with capture(pcap, "udp and host 127.0.0.1 and ("
                         + " or ".join(f"port {p}" for p in ports) + ")"):
                for i in range(4):
                    plain.send(True, codec.encode_datagram(ctx, 3, [Have(i, i), Choke()]))
                for _ in range(40):
                    decoy.send(True, rng.randbytes(rng.randint(4, 60)))
                for a2b, ch, m in conv_msgs:
                    conv.send(a2b, codec.encode_datagram(WireContext(chunk_size=4), ch, m))
                wait_packets(pcap, 4 + 40 + len(conv_msgs))
        finally:
            for pr in (plain, decoy, conv):
                pr.close()
        heur = tshark_json(pcap, LUA, "-o", "ppspp.udp_port:0", proto="ppspp")
        by_port = tshark_json(pcap, LUA, "-o", f"ppspp.udp_port:{plain.port_b}",
                              "--disable-heuristic", "ppspp_udp", proto="ppspp")
    assert len(heur) == len(by_port) == 4 + 40 + len(conv_msgs)
    assert all("ppspp" not in f for f in heur[:44])
    assert all("ppspp" in f for f in heur[44:])
    assert all("ppspp" in f for f in by_port[:4])
    assert all("ppspp" not in f for f in by_port[4:])
    data = heur[44 + 3]["ppspp"]["ppspp.messages"]
    assert jbytes(data["ppspp.chunk"]) == b"abcd"
    assert "ppspp.keepalive" in str(heur[-1]["ppspp"])


@pytest.mark.tool("tshark")
def test_default_port_is_the_swift_package_port():
    """Port 6778 (swift.wire.layers.PPSPP_PORT) is decoded without options."""
    with scratch() as tmp_path:
        _check_default_port(tmp_path)


def _check_default_port(tmp_path) -> None:
    from scapy.layers.inet import IP

    pkt = (IP(src="127.0.0.1", dst="127.0.0.1") / UDP(sport=50000, dport=layers.PPSPP_PORT)
           / Raw(codec.encode_datagram(WireContext(), 1, [Have(0, 7), Unchoke()])))
    wrpcap(str(tmp_path / "p.pcap"), [pkt])
    frames = tshark_json(tmp_path / "p.pcap", LUA, "--disable-heuristic", "ppspp_udp",
                         proto="ppspp")
    msgs = frames[0]["ppspp"]["ppspp.messages"]
    assert [jint(m["ppspp.type"]) for m in msgs] == [3, 11]
    text = tshark_text(tmp_path / "p.pcap", LUA, "-V")
    assert "HAVE (8.5): chunks 0..7" in text


# ---------------------------------------------------------------------------
# a real run of our peer


async def _swarm_run(cfg, tmp, pcap) -> bool:
    """A seeder and a downloader of swift.aio.node exchange a 40 KiB file."""
    import os

    from swift.aio.node import downloader, seeder

    src = tmp / "f.bin"
    src.write_bytes(os.urandom(40 * 1024 + 333))
    async with seeder(str(src), cfg) as s:
        with capture(pcap, f"udp and host 127.0.0.1 and port {s.addr[1]}"):
            node = downloader(s.peer.swarm_id, str(tmp / "out.bin"), cfg)
            await node.start()
            node.connect(s.addr)
            try:
                ok = await node.wait_complete(15)
            finally:
                await node.aclose()
    return ok


@pytest.mark.root
@pytest.mark.tool("tshark", "tcpdump")
@pytest.mark.slow
@pytest.mark.parametrize("profile,cam", [("rfc", c) for c in ChunkAddressing]
                         + [("libswift", ChunkAddressing.CHUNK32)],
                         ids=lambda v: getattr(v, "name", v))
def test_real_swarm_run_matches_scapy(profile, cam):
    """swift.aio.node's peers on loopback, found by the heuristic alone (ephemeral
    ports): every datagram dissected, no error, every field equal to scapy's.
    The libswift profile (draft-10 subset, SHA-1) too."""
    import asyncio

    from swift.core.peer import PeerConfig

    cfg = PeerConfig(addressing=cam) if profile == "rfc" else PeerConfig.libswift()
    ctx = WireContext.make(cam, cfg.hash_func, SigAlg.ECDSAP256SHA256, cfg.chunk_size)
    with scratch() as tmp:
        pcap = tmp / "swarm.pcap"
        assert asyncio.run(_swarm_run(cfg, tmp, pcap))
        # the peers' ephemeral ports may be one Wireshark knows (e.g. 44818):
        # let our heuristic run before port-registered dissectors
        frames = tshark_json(pcap, LUA, "-o", "ppspp.udp_port:0",
                             "-o", "udp.try_heuristic_first:TRUE", proto="ppspp")
        caught = [f.payload for f in Reader(pcap)]
    assert len(frames) == len(caught) > 10
    kinds: set[int] = set()
    for k, (fr, data) in enumerate(zip(frames, caught)):
        where = f"frame {k + 1} ({cam.name})"
        node = fr.get("ppspp")
        assert isinstance(node, dict), f"{where}: not dissected as PPSPP"
        assert not malformed(node), f"{where}: {node}"
        dec = codec.decode_datagram(data, ctx)
        assert dec.error is None, where
        kinds |= {int(m.type) for m in dec.messages}
        with layers.use_context(ctx):
            pkt = layers.PPSPP(data)
            assert Raw not in pkt, where
            compare(pkt, node, where)
        check_bins(ctx, dec.messages, node, where)
    # handshake, data, ack, have, integrity and request at least
    assert {0, 1, 2, 3, 4, 8} <= kinds, kinds
