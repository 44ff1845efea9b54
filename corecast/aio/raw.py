"""Raw-socket drivers (root; for the namespace testbed), IPv4.

* :class:`RawInside`: the ITR's inside interface as an ``AF_PACKET`` socket.
  Every IPv4/IPv6 frame arriving on the interface that is not addressed to one
  of the ITR's own addresses is handed to the ITR core (paper section 3.3: the
  border router sees all packets; the reserved CoreCast range picks the
  CoreCast path).  The host must not forward them itself (forwarding off).
* :class:`RawSender`: ``IPPROTO_RAW`` (header included) socket for the
  source's inner packets, so CoreCast PDUs can ride IP protocol 253
  (RFC 3692) straight to the channel EID, routed to the ITR by the kernel.
* :class:`RawItrNode` / :class:`RawSourceNode`: the UDP nodes with those
  sockets swapped in.  LISP data/control stay on ordinary UDP sockets.
"""

from __future__ import annotations

import asyncio
import mmap
import socket
from collections.abc import Callable, Sequence
from typing import Any

from corecast.aio.nodes import Datagram, ItrNode, SourceNode

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23  # linux/if_packet.h, Linux >= 4.20
PACKET_RX_RING = 5
PACKET_VERSION = 10
TPACKET_V2 = 1


class RawInside:
    """AF_PACKET reader on one interface; calls ``cb(list_of_ip_packets)`` per wake-up.

    Frames are drained in batches with recvmmsg (deliverykit.fastpath.recv_batch);
    frames the host sends itself are excluded with PACKET_IGNORE_OUTGOING."""

    def __init__(self, ifname: str, cb: Callable[[list], None], ignore: set[bytes],
                 frames: bool = False, ring: bool = True) -> None:
        self.sock = self._open()
        self.cb = cb
        self.ignore = ignore
        self.counters = {"frames": 0, "ip": 0, "to_self": 0, "truncated": 0}
        # receive buffers of the interface's MTU (+ Ethernet and a VLAN tag), not 64 KiB:
        # recvmmsg's arena is batch x size, allocated per call
        try:
            import fcntl
            import struct

            req = struct.pack("16si12x", ifname.encode(), 0)
            mtu = struct.unpack("16si12x", fcntl.ioctl(self.sock, 0x8921, req))[1]  # SIOCGIFMTU
            self.frame_size = min(65535, mtu + 18)
        except (OSError, ValueError):
            self.frame_size = 65535
        #: hand whole recv_batch results (Ethernet frames) to ``cb`` unfiltered: the
        #: ITR's batch path (ItrTable.batch with l2=14) filters them itself
        self.frames = frames
        #: frames mode reads a TPACKET_V2 RX ring (packet(7)) when the kernel gives
        #: one: the kernel writes frames straight into shared memory, no recv copies
        self.ring: mmap.mmap | None = None
        if frames and ring:
            try:
                self._ring_setup()
            except OSError:
                # a socket that got PACKET_RX_RING delivers into the ring only: a
                # recvmmsg fallback needs a fresh socket
                self.ring = None
                self.sock.close()
                self.sock = self._open()
        try:
            self.sock.bind((ifname, 0))
            self.sock.setblocking(False)
        except OSError:
            self.sock.close()  # no leak when the interface is gone or not ours
            raise
        if self.ring is None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        asyncio.get_running_loop().add_reader(
            self.sock.fileno(), self._drain_ring if self.ring is not None else self._drain)

    @staticmethod
    def _open() -> socket.socket:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        try:
            sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        except OSError:
            sock.close()
            raise
        return sock

    def _ring_setup(self, total: int = 16 << 20) -> None:
        import struct

        fs = 2048
        while fs < self.frame_size + 128:  # tpacket2_hdr + sockaddr_ll + alignment
            fs *= 2
        bs = max(1 << 16, fs)
        bnr = max(1, total // bs)
        fnr = bnr * (bs // fs)
        self.sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V2)
        self.sock.setsockopt(SOL_PACKET, PACKET_RX_RING, struct.pack("IIII", bs, bnr, fs, fnr))
        self.ring = mmap.mmap(self.sock.fileno(), bs * bnr, mmap.MAP_SHARED,
                              mmap.PROT_READ | mmap.PROT_WRITE)
        self.ring_frame, self.ring_frames, self.ring_next = fs, fnr, 0

    def _drain_ring(self) -> None:
        from corecast._fast import cc_ring_read

        for _ in range(16):  # bounded work per wake-up
            got, self.ring_next, cut = cc_ring_read(self.ring, self.ring_frame, self.ring_frames,
                                                    self.ring_next, 256)
            self.counters["truncated"] += cut
            if got:
                self.counters["frames"] += len(got)
                self.cb(got)
            if len(got) + cut < 256:
                return

    def _drain(self) -> None:
        from corecast._fast import l2_inner
        from deliverykit.fastpath import recv_batch

        ignore = self.ignore
        for _ in range(16):  # bounded work per wake-up
            try:
                got = recv_batch(self.sock, 256, self.frame_size)
            except OSError:
                return
            if not got:
                return
            if self.frames:
                self.counters["frames"] += len(got)
                self.cb(got)
                if len(got) < 256:
                    return
                continue
            out = []
            for frame, _addr in got:
                etype = frame[12] << 8 | frame[13] if len(frame) >= 14 else 0
                if etype == 0x0800 and len(frame) >= 34:
                    dst = frame[30:34]
                    skip = dst in ignore or dst[0] >= 224
                elif etype == 0x86DD and len(frame) >= 54:
                    dst = frame[38:54]
                    skip = dst in ignore or dst[0] == 0xFF or (
                        dst[0] == 0xFE and dst[1] & 0xC0 == 0x80)
                else:
                    continue
                if skip:
                    self.counters["to_self"] += 1
                    continue
                out.append(l2_inner(frame))  # without Ethernet padding
            self.counters["frames"] += len(got)
            self.counters["ip"] += len(out)
            if out:
                self.cb(out)
            if len(got) < 256:
                return

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self.sock.fileno())
        if self.ring is not None:
            self.ring.close()
            self.ring = None
        self.sock.close()


IPV6_HDRINCL = 36  # linux/in6.h (not exported by the socket module)


class RawSender:
    """Send complete IPv4 or IPv6 packets (header included) to their own destination."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        self.sock.setblocking(False)
        self.sock6: socket.socket | None = None
        self.errors = 0

    def _v6(self) -> socket.socket:
        if self.sock6 is None:
            s6 = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
            s6.setsockopt(socket.IPPROTO_IPV6, IPV6_HDRINCL, 1)
            s6.setblocking(False)
            self.sock6 = s6
        return self.sock6

    def send(self, pkt: bytes) -> bool:
        try:
            if pkt[0] >> 4 == 6:
                self._v6().sendto(pkt, (socket.inet_ntop(socket.AF_INET6, pkt[24:40]), 0))
            else:
                self.sock.sendto(pkt, (socket.inet_ntoa(pkt[16:20]), 0))
            return True
        except (BlockingIOError, OSError):
            self.errors += 1
            return False

    def close(self) -> None:
        self.sock.close()
        if self.sock6 is not None:
            self.sock6.close()


class RawItrNode(ItrNode):
    """ITR whose inside interface is an AF_PACKET socket on ``ifname``."""

    def __init__(self, itr, ifname: str, own: list[str], tick: float = 0.25,
                 count_links: bool = True, gso: bool = True, direct: bool = True) -> None:
        super().__init__(itr, ("0.0.0.0", 0), tick)
        #: send LISP data with UDP GSO (BatchedUDPEndpoint.enable_gso): a batch's
        #: same-size datagrams to one RLOC cross the stack as one message; every
        #: datagram still leaves as its own (the kernel cuts them at the device)
        self.gso = gso
        #: the batch path appends LISP data to a TxBatch (deliverykit.fastpath.tx_batch:
        #: in C, references to each datagram's header and body, no Python object
        #: per datagram) sent from it in one sendmmsg; else through the core's
        #: queue as (bytes, address) pairs
        self.direct = direct
        self.tx: Any = None
        self.ifname = ifname
        self.own = {socket.inet_pton(socket.AF_INET6 if ":" in a else socket.AF_INET, a)
                    for a in own}
        itr.own = tuple(self.own)
        #: per-RLOC link counters (bytes on the wire); off in the throughput benchmark
        self.count_links = count_links
        self.raw: RawInside | None = None

    async def start(self) -> None:
        from corecast.aio.nodes import bind, open_endpoint

        self.driver = self.drive(self.itr, self._route)
        self.t_data = await bind(self.rloc, 0, lambda d, a: None)
        if self.gso:
            self.gso = self.t_data.ep.enable_gso()
        if self.direct:
            from deliverykit.fastpath import tx_batch

            self.tx = tx_batch()
        self.t_ctl = open_endpoint((self.rloc, self.itr.control_port), self.driver.on_batch)
        self.itr.control_port = self.t_ctl.get_extra_info("sockname")[1]
        self.transports += [self.t_data, self.t_ctl]
        self.raw = RawInside(self.ifname, self._on_frames, self.own, frames=True)
        self.started()

    def _on_frames(self, frames: list) -> None:
        """recvmmsg batch -> one ItrTable.batch call (C or twin) -> the core's driver,
        whose transport sends a batch all bound for LISP data in one sendmmsg (with
        GSO: grouped by RLOC, one message per run of same-size datagrams)."""
        tx = self.tx
        if tx is None:
            self.itr.receive_batch(frames, self.now(), l2=14)
        else:
            self.driver.kick()  # anything the core queued before goes first
            other = self.itr.handle_batch_into(frames, self.now(), tx, l2=14)
            if len(tx):
                self._send_tx(tx)
            if other:
                self._route(other)
        if self.raw is not None:
            fc = self.itr.frame_counters
            self.raw.counters["ip"] = fc["ip"]
            self.raw.counters["to_self"] = fc["to_self"]
        self.driver.kick()

    def _send_tx(self, tx: Any) -> None:
        """The batch's LISP data out of the data socket: sent straight from the
        TxBatch; what the kernel did not take (a full buffer, an error, a refusal
        of GSO) goes to the endpoint as pairs, whose rules queue, count or fall
        back, so nothing is lost unnoticed."""
        ep = self.t_data.ep
        if self.count_links:
            add = self.links.add_many
            for host, (packets, nbytes) in tx.counts().items():
                add(host, packets, nbytes)
        if not ep.backlogged:
            ep.stats["tx_packets"] += tx.send(ep.sock, ep.gso_segments or 1)
        rest = tx.take_rest()
        if rest:
            ep.send_many(rest)

    def _route(self, out: Sequence[Datagram]) -> None:
        dp = self.itr.data_port
        if all(d[1][1] == dp for d in out):
            self.t_data.ep.send_many(out)
            if self.count_links:
                add = self.links.add
                for payload, dst in out:
                    add(dst[0], len(payload))
        else:
            super()._route(out)

    async def close(self) -> None:
        if self.raw is not None:
            self.raw.close()
            self.raw = None
        await super().close()


class RawSourceNode(SourceNode):
    """Source that sends its inner packets with a raw socket (routed to the ITR)."""

    def __init__(self, source, addr: str, http_port: int = 0) -> None:
        super().__init__(source, addr, http_port)
        self.sender = RawSender()

    def _route(self, out) -> None:
        inside = self.source.itr_inside
        for data, dst in out:
            if dst == inside:
                if self.sender.send(data):
                    v6 = data[0] >> 4 == 6
                    host = socket.inet_ntop(socket.AF_INET6, data[24:40]) if v6 else \
                        socket.inet_ntoa(data[16:20])
                    self.links.add(host, len(data) - (48 if v6 else 28))
            else:
                self._sendto(self.t, data, dst, True)

    async def close(self) -> None:
        self.sender.close()
        await super().close()
