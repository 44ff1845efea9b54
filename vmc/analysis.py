"""VMC (HTTP/1.1) analyser for ``deliverykit analyse CAPTURE`` (entry point ``vmc``).

Reassembles every TCP connection per direction from sequence numbers
(RFC 9293 section 3.4; bounded out-of-order buffer), and parses both
directions with h11 (RFC 9112 message framing; no hand-written HTTP parsing):
the client's bytes through an h11 server-role connection, the server's bytes
through an h11 client-role connection, each kept in step by mirroring the
other side's request/response head into it (so HEAD, 204/304, keep-alive and
pipelining follow the real framing rules).

Connections are classified by their server endpoint:

* ``client`` side: connections to the VMC proxy (``--opt proxy=HOST:PORT``,
  or ``PORT``; if not given: a server whose responses carry ``Via`` or
  ``VMC`` headers, or that receives absolute-form request targets);
* ``origin`` side: connections to an origin (``--opt origin=HOST:PORT``, or
  every other server when inferring).

Tables:

* ``vmc_summary``: origin bytes (response bodies read from origins), client
  bytes (response bodies written to clients), sharing ratio = client/origin
  and bandwidth saving = 1 - origin/client, as the proxy's own status
  endpoint defines them (``vmc/core/stats.py``), requests and 200/206
  responses per side, TCP reassembly counters;
* ``vmc_uris``: per URI (Host + target), requests and body bytes per side,
  joins (requests served from a live stream, as the proxy counts them: its
  ``VMC`` response header says ``joined`` for a VMC-aware joiner, ``patched``
  for an unmodified one, ``range`` for a Range request, ``first`` for the
  request that started the stream), 206 responses per side;
* ``vmc_requests``: every exchange: side, client, server, method, target,
  status, Content-Range, Content-Length, body bytes, complete, times;
* ``vmc_patches``: every 206: side, URI, Content-Range, bytes.

Requests to the proxy's status path (``status-path=/_vmc/status``) are
listed but not counted as content.

Partial data is never shown as complete: a segment the capture cut short (``Frame.truncated``: snap
length) or a hole in the sequence space that ``max-ooo`` gave up on stops the parsing of its
direction, and every figure that connection feeds carries a reason in the ``unreliable`` column: its
exchanges (requests, patches), their URIs, and the totals, rates and ratios of its side (client or
origin; ``sharing_ratio`` and ``bandwidth_saving`` if either side is).  The same holds for a
connection whose bytes h11 could not parse (a capture that starts inside it), one forgotten at
``max-connections``, and one whose pipelined backlog passed ``max-ooo``.  Bounded:
``max-connections`` open connections, ``max-requests`` stored rows, ``max-ooo`` bytes of
out-of-order data per direction (beyond that the direction is marked as having a gap and its HTTP
parsing stops); everything dropped is counted.
"""

from __future__ import annotations

import ipaddress
import struct
from collections import Counter
from enum import Enum
from pathlib import Path

import h11

from deliverykit.analyse import UNRELIABLE, time_slots

_TCP = struct.Struct("!HHIIBB")
FIN, SYN, RST = 0x01, 0x02, 0x04
_M32 = 0xFFFFFFFF


class Lost(Enum):
    """Why a direction of a connection stopped being parsed before its end."""

    TRUNCATED = "segments captured shorter than on the wire (snap length)"
    GAP = "segments missing from the capture (a hole max-ooo gave up on)"
    UNPARSEABLE = "bytes h11 could not parse (capture started inside a connection, or not HTTP)"
    BACKLOG = "pipelined requests beyond max-ooo not parsed"
    EVICTED = "connections forgotten at max-connections"


def _ep(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def _endpoint_opt(key: str, v: str | None) -> tuple[str | None, int] | None:
    """``HOST:PORT``, ``[V6]:PORT`` or ``PORT`` -> (normalised host or None, port)."""
    if not v:
        return None
    host, sep, port = str(v).rpartition(":")
    if not sep:
        host, port = "", str(v)
    if not (port.isdigit() and 1 <= int(port) <= 65535) or (sep and not host):
        raise ValueError(f"{key}={v!r}: needs HOST:PORT, [V6]:PORT or PORT (1-65535)")
    if not sep:
        return None, int(port)
    host = host.strip("[]")
    try:
        host = str(ipaddress.ip_address(host))
    except ValueError:
        pass  # a name: compared as given
    return host or None, int(port)


class _Exchange:
    __slots__ = ("side", "client", "server", "saddr", "method", "target", "host", "status",
                 "crange", "clen", "body", "complete", "t_req", "t_resp", "t_end", "vmc", "via",
                 "lost")

    def __init__(self, conn: _Conn, req: h11.Request, ts: float) -> None:
        self.side, self.client, self.server, self.saddr = "unknown", conn.cep, conn.sep, conn.server
        self.method = req.method.decode("latin-1")
        self.target = req.target.decode("latin-1")
        self.host = ""
        for k, v in req.headers:
            if k == b"host":
                self.host = v.decode("latin-1")
        self.status: int | None = None
        self.crange: str | None = None
        self.clen: int | None = None
        self.vmc: str | None = None
        self.via: str | None = None
        self.body = 0
        self.complete = False
        self.t_req = ts
        self.t_resp: float | None = None
        self.t_end: float | None = None
        self.lost: Lost | None = None  #: its connection lost bytes while it was in flight

    @property
    def uri(self) -> str:
        if self.target.startswith(("http://", "https://")):
            return self.target
        return f"http://{self.host}{self.target}"


class _Dir:
    """One direction's reassembly state."""

    __slots__ = ("started", "next", "ooo", "ooo_bytes", "gap", "fin")

    def __init__(self) -> None:
        self.started = False  #: ``next`` is known (a SYN or the first segment seen)
        self.next = 0
        self.ooo: dict[int, bytes] = {}
        self.ooo_bytes = 0
        self.gap = False
        self.fin = False


class _Conn:
    __slots__ = ("client", "server", "cep", "sep", "up", "down", "req_p", "resp_p",
                 "pending", "broken", "last", "lost")

    def __init__(self, client: tuple, server: tuple) -> None:
        self.client, self.server = client, server
        self.cep, self.sep = _ep(*client), _ep(*server)
        self.up, self.down = _Dir(), _Dir()
        self.req_p = h11.Connection(h11.SERVER, max_incomplete_event_size=65536)
        self.resp_p = h11.Connection(h11.CLIENT, max_incomplete_event_size=65536)
        self.pending: list[_Exchange] = []
        self.broken: str | None = None
        self.last = 0.0
        self.lost: Lost | None = None


class Analyser:
    """Shared vs origin bytes and 206 patches from a capture of a VMC proxy."""

    name = "vmc"
    handles_truncation = True

    def __init__(self, options: dict | None = None) -> None:
        o = options or {}
        self.proxy = _endpoint_opt("proxy", o.get("proxy"))
        self.origin = _endpoint_opt("origin", o.get("origin"))
        # with both given, other TCP traffic is not looked at; with one, the rest is the other side
        self.ports = {self.proxy[1], self.origin[1]} if self.proxy and self.origin else set()
        self.status_path = str(o.get("status-path", "/_vmc/status"))
        self.max_conns = int(o.get("max-connections", 20_000))
        self.max_requests = int(o.get("max-requests", 200_000))
        self.max_ooo = int(o.get("max-ooo", 4 << 20))
        self.conns: dict[tuple, _Conn] = {}
        self.sides: dict[str, dict] = {}
        self.interval = float(o.get("interval", 0.5))
        self.rates: dict[tuple, Counter[int]] = {}  # server -> slot -> body bytes
        self.t0: float | None = None
        self.uris: dict[str, dict] = {}
        self.rows: list[dict] = []
        self.patches: list[dict] = []
        self.proxies: set[tuple] = set()  # inferred proxy server endpoints
        #: server endpoint -> why bytes of its connections were lost (side known at the end)
        self.lost_servers: dict[tuple, Lost] = {}
        self.lost_uris: dict[str, Lost] = {}
        self.c = {"segments": 0, "payload_bytes": 0, "retransmitted_bytes": 0,
                  "out_of_order_segments": 0, "gaps": 0, "malformed_segments": 0,
                  "http_errors": 0, "connections": 0, "dropped_connections": 0,
                  "dropped_request_rows": 0, "unanswered_responses": 0,
                  "dropped_rate_servers": 0, "http_backlog_dropped": 0,
                  "data_after_fin_bytes": 0, "truncated_segments": 0, "unparsed_bytes": 0}

    # ------------------------------------------------------------------
    def accepts(self, f) -> bool:
        if f.proto != 6:
            return False
        p = f.payload
        if len(p) < 4:
            return True  # let feed count it
        if not self.ports:
            return True
        return ((p[0] << 8) | p[1]) in self.ports or ((p[2] << 8) | p[3]) in self.ports

    def _named(self, ep: tuple) -> bool:
        """The endpoint is the proxy or origin given in the options."""
        return any(opt and opt[1] == ep[1] and (opt[0] is None or opt[0] == ep[0])
                   for opt in (self.proxy, self.origin))

    def _classify(self, server: tuple) -> str:
        for opt, side in ((self.proxy, "client"), (self.origin, "origin")):
            if opt and opt[1] == server[1] and (opt[0] is None or opt[0] == server[0]):
                return side
        if self.proxy and self.origin:
            return "other"
        if self.proxy:
            return "origin"
        if self.origin:
            return "client"
        return "client" if server in self.proxies else "origin"

    def feed(self, f) -> None:
        try:
            self._feed(f)
        except (ValueError, IndexError, struct.error, h11.ProtocolError) as exc:
            self.c["malformed_segments" if not isinstance(exc, h11.ProtocolError)
                   else "http_errors"] += 1

    def _feed(self, f) -> None:
        t = f.payload
        if len(t) < 20:
            self.c["malformed_segments"] += 1
            return
        sport, dport, seq, _ack, off, flags = _TCP.unpack_from(t, 0)
        hl = (off >> 4) * 4
        if hl < 20 or hl > len(t):
            self.c["malformed_segments"] += 1
            return
        data = t[hl:]
        self.c["segments"] += 1
        a, b = (f.src, sport), (f.dst, dport)
        key = (a, b) if a <= b else (b, a)
        conn = self.conns.get(key)
        if conn is None:
            if flags & RST or (not data and not flags & SYN):
                return
            if flags & SYN:
                client, server = (b, a) if flags & 0x10 else (a, b)
            elif data[:5] == b"HTTP/" or self._named(a) and not self._named(b):
                client, server = b, a  # a response, or from the proxy/origin named
            else:
                client, server = a, b
            if len(self.conns) >= self.max_conns:
                self._evict()
            conn = self.conns[key] = _Conn(client, server)
            self.c["connections"] += 1
        conn.last = f.ts
        up = a == conn.client
        d = conn.up if up else conn.down
        if flags & SYN:
            if not d.started:  # a late or repeated SYN never rewinds the stream
                d.next, d.started = (seq + 1) & _M32, True
            return
        if not d.started:
            d.next, d.started = seq, True
        if data or f.truncated:
            self.c["payload_bytes"] += len(data)
            if f.truncated:  # bytes of this direction are missing: its parsing stops here
                self.c["truncated_segments"] += 1
                self._lose(conn, d, Lost.TRUNCATED)
            elif d.gap:  # parsing stopped: nothing more to reassemble
                pass
            else:
                self._segment(conn, d, up, seq, data, f.ts)
        if flags & (FIN | RST):
            # a direction that lost bytes cannot place its FIN: take it as it comes
            if not d.fin and (flags & RST or d.gap or ((seq + len(data)) & _M32) == d.next):
                d.fin = True
                if not d.gap and conn.broken is None:
                    self._deliver(conn, up, b"", f.ts)
            if flags & RST or (conn.up.fin and conn.down.fin):
                self._close(key)

    def _segment(self, conn: _Conn, d: _Dir, up: bool, seq: int, data: bytes, ts: float) -> None:
        diff = (seq - d.next) & _M32
        if diff >= 1 << 31:  # starts before what we have: retransmission, maybe with new tail
            behind = (1 << 32) - diff
            if behind >= len(data):
                self.c["retransmitted_bytes"] += len(data)
                return
            self.c["retransmitted_bytes"] += behind
            data, diff = data[behind:], 0
        if diff:
            self.c["out_of_order_segments"] += 1
            s = (seq) & _M32
            if s not in d.ooo:
                d.ooo[s] = data
                d.ooo_bytes += len(data)
            if d.ooo_bytes > self.max_ooo:  # give up on the hole: jump to the next held byte
                self.c["gaps"] += 1
                self._lose(conn, d, Lost.GAP)
                first = min(d.ooo, key=lambda k: (k - d.next) & _M32)
                d.next = first
            else:
                return
        else:
            self._advance(conn, d, up, data, ts)
        while d.ooo:
            nxt = d.ooo.pop(d.next, None)
            if nxt is None:
                # drop stored segments now entirely behind next
                stale = [k for k in d.ooo if ((k - d.next) & _M32) >= 1 << 31]
                progressed = False
                for k in stale:
                    seg = d.ooo.pop(k)
                    d.ooo_bytes -= len(seg)
                    behind = (d.next - k) & _M32
                    if behind < len(seg):
                        self._advance(conn, d, up, seg[behind:], ts)
                        progressed = True
                if not progressed:
                    break
                continue
            d.ooo_bytes -= len(nxt)
            self._advance(conn, d, up, nxt, ts)

    def _lose(self, conn: _Conn, d: _Dir, why: Lost) -> None:
        """Bytes of this direction are not in the capture: stop parsing it, and mark what
        the connection feeds (its exchanges in flight, and its server's side)."""
        d.gap = True
        d.ooo.clear()
        d.ooo_bytes = 0
        self._mark_lost(conn, why)

    def _mark_lost(self, conn: _Conn, why: Lost) -> None:
        """What this connection feeds from now on is incomplete: its exchanges in flight,
        and the totals of its server's side."""
        if conn.lost is None:
            conn.lost = why
        self.lost_servers.setdefault(conn.server, why)
        for ex in conn.pending:
            ex.lost = ex.lost or why

    def _advance(self, conn: _Conn, d: _Dir, up: bool, data: bytes, ts: float) -> None:
        d.next = (d.next + len(data)) & _M32
        if d.fin:  # bytes after the end of the stream: not delivered
            self.c["data_after_fin_bytes"] += len(data)
        elif not d.gap and conn.broken is None:
            self._deliver(conn, up, data, ts)

    # ------------------------------------------------------------------
    def _deliver(self, conn: _Conn, up: bool, data: bytes, ts: float) -> None:
        parser = conn.req_p if up else conn.resp_p
        try:
            parser.receive_data(data)
            self._pump(conn, ts)
        except (h11.ProtocolError, RuntimeError) as exc:  # RuntimeError: h11's misuse guard
            conn.broken = f"{type(exc).__name__}: {exc}"
            self.c["http_errors"] += 1
            self._mark_lost(conn, Lost.UNPARSEABLE)
            return
        if data and parser.their_state not in (h11.IDLE, h11.SEND_BODY, h11.SEND_RESPONSE):
            # paused (e.g. pipelined requests waiting for their answers): h11 holds the bytes
            if len(parser.trailing_data[0]) > self.max_ooo:
                conn.broken = "unparsed backlog over max-ooo"
                self.c["http_backlog_dropped"] += 1
                self._mark_lost(conn, Lost.BACKLOG)

    def _pump(self, conn: _Conn, ts: float) -> None:
        rq, rs = conn.req_p, conn.resp_p
        progressed = True
        while progressed:
            progressed = False
            if rq.their_state in (h11.IDLE, h11.SEND_BODY):
                ev = rq.next_event()
                if isinstance(ev, h11.Request):
                    progressed = True
                    self._request(conn, ev, ts)
                elif isinstance(ev, h11.Data):
                    progressed = True
                elif isinstance(ev, h11.EndOfMessage):
                    progressed = True
            if rs.their_state in (h11.SEND_RESPONSE, h11.SEND_BODY):
                ev = rs.next_event()
                ex = conn.pending[0] if conn.pending else None
                if isinstance(ev, h11.InformationalResponse):
                    progressed = True
                    if ev.status_code == 101:
                        conn.broken = "protocol switched"
                        return
                    rq.send(h11.InformationalResponse(status_code=ev.status_code, headers=[]))
                elif isinstance(ev, h11.Response):
                    progressed = True
                    self._response(conn, ex, ev, ts)
                elif isinstance(ev, h11.Data):
                    progressed = True
                    if ex is not None:
                        ex.body += len(ev.data)
                        if not ex.target.startswith(self.status_path):
                            self._rate(conn.server, ts, len(ev.data))
                elif isinstance(ev, h11.EndOfMessage):
                    progressed = True
                    if ex is not None:
                        ex.complete, ex.t_end = True, ts
                        self._finish(conn.pending.pop(0))
                    rq.send(h11.EndOfMessage())
            if (rq.our_state is h11.DONE and rq.their_state is h11.DONE
                    and rs.our_state is h11.DONE and rs.their_state is h11.DONE):
                rq.start_next_cycle()
                rs.start_next_cycle()
                progressed = True

    def _request(self, conn: _Conn, ev: h11.Request, ts: float) -> None:
        if ev.target.startswith((b"http://", b"https://")) and not self.proxy:
            self.proxies.add(conn.server)
        ex = _Exchange(conn, ev, ts)
        if ex.target.startswith(self.status_path):
            ex.side = "status"
        conn.pending.append(ex)
        host = [(b"host", v) for k, v in ev.headers if k == b"host"] or [(b"host", b"unknown")]
        keep = [(k, v) for k, v in ev.headers if k == b"connection"]
        conn.resp_p.send(h11.Request(method=ev.method, target=ev.target, headers=host + keep,
                                     http_version=ev.http_version))
        conn.resp_p.send(h11.EndOfMessage())

    def _response(self, conn: _Conn, ex: _Exchange | None, ev: h11.Response, ts: float) -> None:
        if ex is None:
            self.c["unanswered_responses"] += 1
        else:
            ex.status, ex.t_resp = ev.status_code, ts
            for k, v in ev.headers:
                if k == b"content-range":
                    ex.crange = v.decode("latin-1")
                elif k == b"content-length":
                    ex.clen = int(v)
                elif k == b"vmc":
                    ex.vmc = v.decode("latin-1")
                elif k == b"via":
                    ex.via = v.decode("latin-1")
            if (ex.via or ex.vmc) and not self.proxy:
                self.proxies.add(conn.server)
        hdrs = [(k, v) for k, v in ev.headers if k == b"connection"]
        if ev.status_code not in (204, 304) and (ex is None or ex.method != "HEAD"):
            hdrs.append((b"content-length", b"0"))
        conn.req_p.send(h11.Response(status_code=ev.status_code, headers=hdrs,
                                     http_version=ev.http_version))

    def _rate(self, server: tuple, ts: float, n: int) -> None:
        if self.t0 is None:
            self.t0 = ts
        per = self.rates.get(server)
        if per is None:
            if len(self.rates) >= 1024:
                self.c["dropped_rate_servers"] += 1
                return
            per = self.rates[server] = Counter()
        slot = int((ts - self.t0) / self.interval)
        if slot in per or len(per) < self.max_requests:
            per[slot] += n

    def _side_rates(self) -> dict[str, Counter[int]]:
        out: dict[str, Counter[int]] = {}
        for server, per in self.rates.items():
            out.setdefault(self._classify(server), Counter()).update(per)
        return out

    def _close(self, key: tuple) -> None:
        conn = self.conns.pop(key, None)
        if conn is not None:
            left = 0 if conn.broken else (len(conn.req_p.trailing_data[0])
                                          + len(conn.resp_p.trailing_data[0]))
            if left:  # bytes no message took (a response to a request not captured...)
                self.c["unparsed_bytes"] += left
                self._mark_lost(conn, Lost.UNPARSEABLE)
            for ex in conn.pending:
                self._finish(ex)
            conn.pending.clear()

    def _evict(self) -> None:
        """Make room: forget the connection idle the longest (counted)."""
        key = min(self.conns, key=lambda k: self.conns[k].last)
        self._mark_lost(self.conns[key], Lost.EVICTED)
        self._close(key)
        self.c["dropped_connections"] += 1

    # ------------------------------------------------------------------
    def _finish(self, ex: _Exchange) -> None:
        """Account one exchange (complete, or cut by the end of its connection)."""
        if ex.side == "unknown":
            ex.side = self._classify(ex.saddr)
        s = self.sides.setdefault(ex.side, {"requests": 0, "200": 0, "206": 0, "other_status": 0,
                                            "body_bytes": 0, "incomplete": 0})
        s["requests"] += 1
        s["body_bytes"] += ex.body
        if ex.status in (200, 206):
            s[str(ex.status)] += 1
        elif ex.status is not None:
            s["other_status"] += 1
        if not ex.complete:
            s["incomplete"] += 1
        if ex.lost is not None and ex.side != "status":
            self.lost_uris.setdefault(ex.uri, ex.lost)
        if ex.side in ("client", "origin"):
            u = self.uris.get(ex.uri)
            if u is None and len(self.uris) < self.max_requests:
                u = self.uris[ex.uri] = {"uri": ex.uri, "client_requests": 0, "client_bytes": 0,
                                         "origin_requests": 0, "origin_bytes": 0, "joins": 0,
                                         "client_206": 0, "origin_206": 0}
            if u is not None:
                u[ex.side + "_requests"] += 1
                u[ex.side + "_bytes"] += ex.body
                if ex.vmc and ex.side == "client" and not ex.vmc.startswith("first"):
                    u["joins"] += 1  # served from a live stream: joined | patched | range
                if ex.status == 206:
                    u[ex.side + "_206"] += 1
        if len(self.rows) >= self.max_requests:
            self.c["dropped_request_rows"] += 1
            return
        why = ex.lost.value if ex.lost else None
        if ex.status == 206:
            self.patches.append({"side": ex.side, "uri": ex.uri, "client": ex.client,
                                 "server": ex.server, "content_range": ex.crange,
                                 "bytes": ex.body, "vmc": ex.vmc, UNRELIABLE: why})
        self.rows.append({
            "side": ex.side, "client": ex.client, "server": ex.server, "method": ex.method,
            "target": ex.target, "status": ex.status, "content_range": ex.crange,
            "content_length": ex.clen, "body_bytes": ex.body, "complete": ex.complete,
            "vmc": ex.vmc, "t_request": ex.t_req,
            "ttfb_ms": round((ex.t_resp - ex.t_req) * 1e3, 3) if ex.t_resp else None,
            "duration_ms": round((ex.t_end - ex.t_req) * 1e3, 3) if ex.t_end else None,
            UNRELIABLE: why})

    def tables(self) -> dict[str, list[dict]]:
        broken = sum(1 for c in self.conns.values() if c.broken)
        still_open = len(self.conns)
        for key in list(self.conns):  # the capture ended: account what is in flight
            self._close(key)
        sides = self.sides
        lost = self._lost_sides()
        ob = sides.get("origin", {}).get("body_bytes", 0)
        cb = sides.get("client", {}).get("body_bytes", 0)
        both = lost.get("client") or lost.get("origin")
        summary = [{"what": "origin_bytes", "value": ob, UNRELIABLE: lost.get("origin")},
                   {"what": "client_bytes", "value": cb, UNRELIABLE: lost.get("client")},
                   {"what": "sharing_ratio", "value": round(cb / ob, 4) if ob else None,
                    UNRELIABLE: both},
                   {"what": "bandwidth_saving", "value": round(1 - ob / cb, 4) if cb else None,
                    UNRELIABLE: both}]
        for side, s in sorted(sides.items()):
            for k, v in s.items():
                summary.append({"what": f"{side}_{k}" if k[0].isalpha() else f"{side}_status_{k}",
                                "value": v, UNRELIABLE: lost.get(side)})
        summary.append({"what": "proxies", "value": " ".join(sorted(_ep(*p) for p in self.proxies))
                        or (_ep(self.proxy[0] or "*", self.proxy[1]) if self.proxy else "")})
        summary += [{"what": k, "value": v} for k, v in self.c.items()]
        summary.append({"what": "open_connections_at_end", "value": still_open})
        summary.append({"what": "open_connections_unparseable", "value": broken})
        rates = []
        for side, per in sorted(self._side_rates().items()):
            for slot in time_slots(per):
                by = per.get(slot, 0)
                rates.append({"side": side, "t": round(slot * self.interval, 3), "body_bytes": by,
                              "kbit/s": round(8 * by / self.interval / 1e3, 3),
                              UNRELIABLE: lost.get(side)})
        uris = [dict(u, **{UNRELIABLE: self.lost_uris[u["uri"]].value
                           if u["uri"] in self.lost_uris else None})
                for u in sorted(self.uris.values(), key=lambda u: u["uri"])]
        if not lost:  # a complete capture: no column of empty marks
            for table in (summary, rates, uris, self.rows, self.patches):
                for row in table:
                    if row.get(UNRELIABLE) is None:
                        row.pop(UNRELIABLE, None)
        return {"vmc_summary": summary,
                "vmc_uris": uris,
                "vmc_requests": self.rows, "vmc_patches": self.patches, "vmc_rates": rates}

    def _lost_sides(self) -> dict[str, str]:
        """Side -> why its figures are incomplete (bytes of its connections not captured)."""
        by_side: dict[str, list[Lost]] = {}
        for server, why in self.lost_servers.items():
            by_side.setdefault(self._classify(server), []).append(why)
        return {side: f"{whys[0].value} ({len(whys)} server(s) of this side)"
                for side, whys in by_side.items()}

    def plots(self, outdir: Path) -> list[Path]:
        sides = self._side_rates()
        lost = self._lost_sides()
        if not sides:
            return []
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 4))
        for side, per in sorted(sides.items()):
            xs = time_slots(per)
            total, ys = 0, []
            for x in xs:
                total += per.get(x, 0)
                ys.append(total / 1e6)
            ax.step([x * self.interval for x in xs], ys, where="post",
                    label=f"{side} side" + (" (UNRELIABLE: bytes not captured)" if side in lost
                                            else ""))
        ax.set_xlabel("time since the first response body byte (s)")
        ax.set_ylabel("response body bytes, cumulative (MB)")
        ax.set_title("VMC: bytes written to clients vs read from origins")
        ax.legend()
        p = Path(outdir) / "vmc-bytes.png"
        fig.savefig(p, dpi=100, bbox_inches="tight")
        plt.close(fig)
        return [p]
