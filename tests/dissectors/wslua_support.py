"""Shared helpers for the Lua dissector tests: loopback capture and tshark JSON.

Imported by the test modules of tests/dissectors/ (pytest puts this folder on
sys.path because it has no ``__init__.py``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DISSECTORS = REPO / "dissectors"
#: expert group number of PI_MALFORMED (epan/proto.h) as tshark writes it in JSON
PI_MALFORMED = 0x07000000


@contextmanager
def capture(path: Path, bpf: str, iface: str = "lo") -> Iterator[None]:
    """Capture with tcpdump while the block runs (needs root); waits until it listens."""
    # -s 0: loopback frames reach 65,549 bytes, so -s 65535 would cut them. A ring slot
    # per snaplen: 256 KiB slots in the default 2 MB buffer leave ~8 and drop bursts, so
    # the buffer is 64 MiB (-B is in KiB).
    argv = ["tcpdump", "-U", "--immediate-mode", "-n", "-s", "0", "-B", "65536",
            "-i", iface, "-w", str(path), bpf]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + 15
        line = ""
        while "listening on" not in line:
            line = proc.stderr.readline()  # type: ignore[union-attr]  # stderr=PIPE
            if (not line and proc.poll() is not None) or time.monotonic() > deadline:
                raise RuntimeError(f"tcpdump did not start: rc={proc.poll()} {line!r}")
        yield
        time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()


@contextmanager
def scratch() -> Iterator[Path]:
    """A private temporary folder (pytest's shared basetemp is pruned by other
    concurrent pytest runs of the same user, which deleted live captures)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="wslua-") as d:
        yield Path(d)


def wait_packets(path: Path, count: int, timeout: float = 10.0) -> int:
    """Poll the capture file (written with -U) until it holds ``count`` packets."""
    from deliverykit.pcap import Reader

    deadline = time.monotonic() + timeout
    n = 0
    while time.monotonic() < deadline:
        try:
            n = sum(1 for _ in Reader(path))
        except Exception:  # a half-written header right after start
            n = 0
        if n >= count:
            return n
        time.sleep(0.1)
    return n


_TAKEN: set[int] = set()


def wireshark_udp_ports() -> set[int]:
    """UDP ports Wireshark already gives to a dissector (ours included): an
    ephemeral port among them (e.g. 44818, EtherNet/IP) is claimed by that
    dissector before any heuristic runs, which made tests flaky."""
    if not _TAKEN:
        out = subprocess.run(["tshark", "-G", "decodes"], capture_output=True, text=True,
                             timeout=120)
        for line in out.stdout.splitlines():
            parts = line.split("\t")
            if len(parts) >= 2 and parts[0] == "udp.port" and parts[1].isdigit():
                _TAKEN.add(int(parts[1]))
        _TAKEN.update({6778, 54341, 4341, 4342, *range(47000, 47016)})
    return _TAKEN


def bind_free(sock: socket.socket, host: str) -> int:
    """Bind ``sock`` to an ephemeral port no Wireshark dissector is registered on."""
    taken = wireshark_udp_ports()
    for _ in range(100):
        probe = socket.socket(sock.family, sock.type)
        probe.bind((host, 0))
        port = probe.getsockname()[1]
        probe.close()
        if port in taken:
            continue
        try:
            sock.bind((host, port))
            return port
        except OSError:
            continue
    raise RuntimeError("no free UDP port outside Wireshark's registered ones")


class UdpPair:
    """Two UDP sockets on 127.0.0.1 (ephemeral ports) that exchange datagrams."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.a = socket.socket(fam, socket.SOCK_DGRAM)
        self.b = socket.socket(fam, socket.SOCK_DGRAM)
        for s in (self.a, self.b):
            bind_free(s, host)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            s.settimeout(5)
        self.host = host
        self.port_a = self.a.getsockname()[1]
        self.port_b = self.b.getsockname()[1]

    def send(self, a_to_b: bool, data: bytes) -> None:
        """Send one datagram and receive it on the other socket (bounded by the timeout)."""
        src, dst, dport = (self.a, self.b, self.port_b) if a_to_b else (self.b, self.a, self.port_a)
        src.sendto(data, (self.host, dport))
        got = dst.recv(70000)
        assert got == data

    def close(self) -> None:
        self.a.close()
        self.b.close()


def tshark_json(pcap: Path, scripts: list[str], *extra: str, proto: str) -> list[dict]:
    """Frames of ``pcap`` decoded with our Lua scripts: one ``layers`` dict per frame.

    Fails on any Lua error (stderr or tree text), since malformed input must
    give expert info instead.
    """
    argv = ["tshark", "-n", "-r", str(pcap)]
    for s in scripts:
        argv += ["-X", f"lua_script:{DISSECTORS / s}"]
    argv += [*extra, "-T", "json", "--no-duplicate-keys", "-J", proto]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "LC_ALL": "C"})
    assert out.returncode == 0, out.stderr
    assert "Lua Error" not in out.stderr and "Lua Error" not in out.stdout, out.stderr
    assert "lua.error" not in out.stdout
    return [f["_source"]["layers"] for f in json.loads(out.stdout)]


def tshark_text(pcap: Path, scripts: list[str], *extra: str) -> str:
    """``tshark -V`` text output (for checks on labels), failing on Lua errors."""
    argv = ["tshark", "-n", "-r", str(pcap)]
    for s in scripts:
        argv += ["-X", f"lua_script:{DISSECTORS / s}"]
    out = subprocess.run([*argv, *extra], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Lua Error" not in out.stderr and "Lua Error" not in out.stdout, out.stderr
    return out.stdout


def as_list(v) -> list:
    """JSON with --no-duplicate-keys: one occurrence is a value, several a list."""
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


def experts(node) -> list[dict]:
    """Every ``_ws.expert`` object anywhere below ``node``."""
    found: list[dict] = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "_ws.expert":
                found += [x for x in as_list(v) if isinstance(x, dict)]
            else:
                found += experts(v)
    elif isinstance(node, list):
        for v in node:
            found += experts(v)
    return found


def malformed(node) -> bool:
    """True when some expert item below ``node`` is in the Malformed group."""
    return any(int(x.get("_ws.expert.group", "0")) == PI_MALFORMED for x in experts(node))


def jbytes(v: str) -> bytes:
    """tshark's colon-hex bytes (empty string for zero-length) -> bytes."""
    return bytes.fromhex(v.replace(":", ""))


def jint(v: str) -> int:
    """tshark's decimal or 0x-hex integer string -> int."""
    return int(v, 0)


def compare_scapy(pkt, node: dict, prefix: str, where: str) -> None:
    """Every field of the scapy packet ``pkt`` equals ``node['<prefix>.<name>']``.

    Conditional fields count only when present; packet lists map to repeated
    subtrees of the same name.  Call inside any context the layer's conditions
    read (e.g. swift.wire.layers.use_context).
    """
    import ipaddress

    from scapy.fields import ConditionalField, PacketListField

    for fld in pkt.fields_desc:
        if isinstance(fld, ConditionalField):
            if not fld._evalcond(pkt):
                continue
            fld = fld.fld
        key = f"{prefix}.{fld.name}"
        val = pkt.getfieldval(fld.name)
        if isinstance(fld, PacketListField):
            items = as_list(node.get(key))
            assert len(items) == len(val), f"{where}: {key} {len(items)} != {len(val)}"
            for i, (sub, j) in enumerate(zip(val, items)):
                compare_scapy(sub, j, prefix, f"{where}/{key}[{i}]")
            continue
        assert key in node, f"{where}: {key} missing in {sorted(node)}"
        got = node[key]
        assert not isinstance(got, list), f"{where}: {key} repeated: {got}"
        if isinstance(val, bytes):
            assert jbytes(got) == val, f"{where}: {key}"
        elif isinstance(val, str):
            assert ipaddress.ip_address(got) == ipaddress.ip_address(val), f"{where}: {key}"
        else:
            assert jint(got) == int(val), f"{where}: {key} {got} != {val}"
