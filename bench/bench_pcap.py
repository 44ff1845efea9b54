"""Capture analysis speed: our streaming reader vs scapy's PcapReader and tshark.

Issue 7 asks for "a 1 GB pcap in minutes". A synthetic Ethernet/IPv4/UDP
capture of 1,200-byte payloads is written once, then read by: our Reader
(frames + the flows analyser), scapy's PcapReader (the per-layer object
decode our analysers avoid on the data path), and ``tshark -r -q -z io,stat,0``
when installed. Reported: MB/s and the projected seconds for 1 GB.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.harness import Figure, interleaved, measured
from deliverykit.analyse import FlowAnalyser, analyse
from deliverykit.pcap import Reader


def write_capture(path: Path, packets: int, payload: int = 1200) -> int:
    eth = bytes(6) + bytes(5) + b"\x01" + b"\x08\x00"
    with path.open("wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        body = bytes(payload)
        for i in range(packets):
            ip_len = 20 + 8 + payload
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, i & 0xFFFF, 0, 64, 17, 0,
                             bytes([10, 0, (i >> 8) & 7, i & 255]), b"\xef\x01\x02\x03")
            udp = struct.pack("!HHHH", 4000 + (i & 15), 4341, 8 + payload, 0)
            frame = eth + ip + udp + body
            fh.write(
                struct.pack(
                    "<IIII", 1_700_000_000 + i // 1000, (i % 1000) * 1000, len(frame), len(frame)
                )
            )
            fh.write(frame)
    return path.stat().st_size


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run(quick: bool) -> dict:
    packets = 5_000 if quick else 200_000
    repeats = 2 if quick else 3
    n_scapy = min(packets, 2_000 if quick else 20_000)
    import scapy.layers.inet  # noqa: F401 - so scapy decodes Ether/IP/UDP, as an analyser would need
    import scapy.layers.l2  # noqa: F401
    from scapy.utils import PcapReader

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "bench.pcap"
        size = write_capture(path, packets)
        mb = size / 1e6

        def scapy_read() -> None:
            with PcapReader(str(path)) as r:
                for i, _ in enumerate(r):
                    if i + 1 >= n_scapy:
                        break

        subjects: dict[str, Callable[[], float]] = {
            "deliverykit Reader (frames)": lambda: timed(lambda: sum(1 for _ in Reader(path))),
            "deliverykit analyse (flows)": lambda: timed(lambda: analyse(path, [FlowAnalyser()])),
            f"scapy PcapReader (first {n_scapy} pkts, scaled)": (
                lambda: timed(scapy_read) * packets / n_scapy),
        }
        if shutil.which("tshark"):
            subjects["tshark -r (io,stat)"] = lambda: timed(lambda: subprocess.run(
                ["tshark", "-r", str(path), "-q", "-z", "io,stat,0"], capture_output=True,
                check=True))
        secs = interleaved(subjects, repeats)
    speed = {k: [mb / t for t in v] for k, v in secs.items()}
    rows = [{"subject": k, "MB/s": Figure.of(v), "s per GB": Figure.of(1000 / x for x in v)}
            for k, v in speed.items()]
    ours = speed["deliverykit analyse (flows)"]
    comps = [measured(f"flows analyser / {k.split(' (')[0]}", ours, v, anchor=k, unit="MB/s",
                      target="> 1 (the reason the reader exists)" if k.startswith("scapy") else "")
             for k, v in speed.items() if k.startswith(("scapy", "tshark"))]
    return {
        "title": f"Capture analysis speed ({packets:,} packets, {mb:,.0f} MB)",
        "rows": rows,
        "comparisons": comps,
        "repeats": repeats,
        "notes": ["issue 7 target: a 1 GB capture in minutes (see 's per GB')",
                  "tshark includes its start-up; scapy reads a prefix, scaled to the capture"],
    }
