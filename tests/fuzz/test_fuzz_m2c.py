"""A live ``m2c receive`` on loopback multicast, fed mutated and random datagrams on its
session's base group and port while a real ``m2c send`` transfer runs beside it
(issue 13, "Done when": fuzz).  The receiver must stay up, count what it drops, and
write the file with a verified SHA-256.

From the session's source address (127.0.0.1, the sender's own) the fuzzer sends
what the receiver can tell from the real thing: genuine datagrams through the
shared byte mutators of tests/fuzz/conftest.py (bits flipped, cut, extended,
overwritten, spliced, random bytes: the EXT_M2C_CRC fails, ``rejected``),
well-formed packets of another session (``rejected``), of another object, block,
ESI range or symbol length (``ignored``) and of another group (``wrong_group``).
From other addresses (127.0.0.2, 127.9.9.9) it sends anything, including
well-formed packets that would be harmful if believed: scapy field mutations of
genuine packets with the checksum recomputed (the A flag, TSI, TOI, SBN, ESI...),
close-session packets and garbage symbols of the file's real blocks; the source
address check drops them before decoding (``foreign_source``).  What this test does not
send, because no receiver without RFC 6584 authentication can tell it from the
sender: well-formed garbage symbols or close-session packets *from the source
address* (docs/security/m2c.md).  The sans-IO cores under crafted packets:
tests/m2c/test_m2c_fuzz_receivers.py.

Bounded: at most MAX_DATAGRAMS datagrams and max(FUZZ_SECONDS, 3) * 4 s of
fuzzing (it ends when the receiver exits); the processes are reaped and the files
are in pytest's tmp_path.  ``FUZZ_SEED=N`` replays a run (the seed is printed).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import secrets
import socket
import subprocess
import sys
import time

import pytest

from m2c.core.filetx import FileSender, SessionDescription
from m2c.wire import codec
from m2c.wire.codec import AlcPacket
from m2c.wire.layers import LCT, ExtM2CCRC

from .conftest import Mutator, bounded

MAX_DATAGRAMS = 60_000
"""safety bound of the fuzz loop (with its time bound); it ends when the receiver exits"""
FOREIGN = ("127.0.0.2", "127.9.9.9")


def _m2c(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "m2c", *args], **kw)


def _reap(*procs: subprocess.Popen | None) -> None:
    for p in procs:
        if p is not None and p.poll() is None:
            p.kill()
        if p is not None:
            p.wait(10)


def _wait_for(path, limit: float = 15.0) -> None:
    t = time.monotonic() + limit
    while time.monotonic() < t:
        if path.exists() and path.stat().st_size:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def _sender_socket(src: str) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((src, 0))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(src))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
    return s


def _rebuildable(wire: bytes) -> LCT:
    """``wire`` dissected, with the header length, CCI and checksum left for scapy to
    recompute: a field mutation of it is a well-formed packet."""
    p = LCT(wire)
    p.hdr_len = p.cci = None
    for ext in p.ext:
        if isinstance(ext, ExtM2CCRC):
            ext.crc = None
    return p


class Datagrams:
    """What the fuzz loop sends, from genuine packets of the session (seeded)."""

    def __init__(self, sd: SessionDescription, data: bytes, rnd: random.Random) -> None:
        self.sd = sd
        self.rnd = rnd
        fs = FileSender(sd, lambda off, n: data[off:off + n])
        self.genuine: list[AlcPacket] = []
        while len(self.genuine) < 300:
            self.genuine += [pkt for _pdu, pkt in fs.next_pdus() if not pkt.data_less]
        wires = [codec.encode(p) for p in self.genuine]
        # byte mutations of genuine datagrams (conftest): never well-formed, except a
        # mutation that gives a genuine datagram back, which is harmless
        self.bytes_mutator = Mutator(wires, random.Random(rnd.getrandbits(32)))
        scapy_seeds = [_rebuildable(w) for w in wires[:40]]
        assert bytes(scapy_seeds[0]) == wires[0]  # the layers rebuild the codec's bytes
        self.fields_mutator = Mutator(scapy_seeds, random.Random(rnd.getrandbits(32)),
                                      weights={"fields": 1})
        self.blocks = sd.partition().blocks

    def _pick(self) -> AlcPacket:
        return self.rnd.choice(self.genuine)

    # --- from the source address: each is dropped and counted --------------
    def mutated(self) -> bytes:
        return self.bytes_mutator.one()

    def other_session(self) -> bytes:
        return codec.encode(dataclasses.replace(self._pick(),
                                                session=(self.sd.session + 1) & 0xFFFFFFFF))

    def not_of_this_file(self) -> bytes:
        p = dataclasses.replace(self._pick(), group=0)  # past the group check
        k = self.rnd.randrange(4)
        if k == 0:
            p = dataclasses.replace(p, toi=self.sd.toi + 1 + self.rnd.randrange(100))
        elif k == 1:
            p = dataclasses.replace(p, sbn=self.blocks + self.rnd.randrange(4000))
        elif k == 2:
            p = dataclasses.replace(p, esi=self.sd.fec.max_n + self.rnd.randrange(1000))
        else:
            p = dataclasses.replace(p, payload=p.payload[:self.rnd.randrange(len(p.payload))])
        return codec.encode(p)

    def wrong_group(self) -> bytes:
        """Well formed, but names group 1 while it arrives on the base group's socket."""
        return codec.encode(dataclasses.replace(self._pick(), group=1))

    def from_source(self) -> bytes:
        r = self.rnd.random()
        if r < 0.55:
            return self.mutated()
        if r < 0.7:
            return self.other_session()
        if r < 0.85:
            return self.not_of_this_file()
        return self.wrong_group()

    # --- from other addresses: harmful if believed ---------------------------
    def forged(self) -> bytes:
        r = self.rnd.random()
        if r < 0.4:  # any header field, checksum recomputed
            return self.fields_mutator.one()
        p = self._pick()
        if r < 0.6:  # "the session is over"
            return codec.encode(dataclasses.replace(p, close_session=True, data_less=True,
                                                    payload=b"", sbn=0, esi=0))
        return codec.encode(dataclasses.replace(p, payload=self.rnd.randbytes(len(p.payload))))


@pytest.mark.slow
def test_live_receiver_survives_fuzz_and_verifies_the_file(tmp_path, fuzz_seconds, fuzz_rng):
    rnd = fuzz_rng
    data = rnd.randbytes(1_000_000)
    src = tmp_path / "f.bin"
    src.write_bytes(data)
    sdp = tmp_path / "s.json"
    out = tmp_path / "out.bin"
    result = tmp_path / "r.json"
    group = f"239.184.{1 + secrets.randbelow(250)}.1"
    port = str(20000 + 100 * secrets.randbelow(400))
    snd = rx = None
    socks = {a: _sender_socket(a) for a in ("127.0.0.1", *FOREIGN)}
    sent = {"source": 0, "foreign": 0}
    try:
        snd = _m2c("send", str(src), "--sdp", str(sdp), "--group", group, "--port", port,
                   "--max-rate", "4000", "--duration", "90",
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_for(sdp)
        sd = SessionDescription.from_json(sdp.read_text())
        base = (sd.groups[0][0], int(sd.groups[0][1]))
        mut = Datagrams(sd, data, rnd)
        rx = _m2c("receive", str(sdp), "-o", str(out), "--json", str(result), "-q",
                  "--timeout", "80", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for n in bounded(range(MAX_DATAGRAMS), max(fuzz_seconds, 3.0) * 4, MAX_DATAGRAMS):
            if rnd.random() < 0.7:
                socks["127.0.0.1"].sendto(mut.from_source(), base)
                sent["source"] += 1
            else:
                socks[rnd.choice(FOREIGN)].sendto(mut.forged(), base)
                sent["foreign"] += 1
            if n % 40 == 39:  # ~4,000 datagrams/s beside the ~350/s of the transfer
                if rx.poll() is not None:
                    break
                time.sleep(0.01)
        _out, err = rx.communicate(timeout=90)
    finally:
        for s in socks.values():
            s.close()
        _reap(snd, rx)
    assert rx.returncode == 0, err
    assert "Traceback" not in err
    res = json.loads(result.read_text())
    assert res["ok"] is True and res["stopped"] is False
    assert hashlib.sha256(out.read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest()
    # every kind of drop was counted, and no more than was sent
    assert 0 < res["foreign_source"] <= sent["foreign"], (res, sent)
    assert res["rejected"] > 0 and res["ignored"] > 0 and res["wrong_group"] > 0, res
    assert res["rejected"] + res["ignored"] + res["wrong_group"] <= sent["source"], (res, sent)
    assert res["handler_errors"] == 0  # every datagram became a counted drop, no exception
    assert res["closed"] is False  # the forged close-session packets were not believed
