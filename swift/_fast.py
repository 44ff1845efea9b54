"""Pure-Python twins of the swift C fast paths (deliverykit/csrc/swift.c).

``deliverykit.fastpath.load`` picks the C version unless DELIVERYKIT_PURE=1;
tests/swift/test_swift_fast.py proves both agree.
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Callable
from typing import Any

from deliverykit.fastpath import load

_PACK_II = struct.Struct(">II").pack


def py_binmap_find(halves, deep, root: int, root_layer: int, lo: int, hi: int, val: bool) -> int:
    """First chunk in ``[lo, hi)`` whose bit equals ``val``, or -1 (see binmap.py)."""
    raw = memoryview(halves).cast("B")
    if len(raw) % 4:
        raise ValueError("binmap_find: bad binmap buffers")
    h = raw.cast("I")
    nh = len(h)
    if root_layer < 0 or root_layer > 57 or root < 0 or 2 * root + 1 >= nh or len(deep) < nh:
        raise ValueError("binmap_find: bad binmap buffers")
    # iterative DFS in order (left half before right half)
    work = [(root, root_layer, 0, 0)]
    while work:
        c, lay, start, side = work.pop()
        if side > 1:
            continue
        work.append((c, lay, start, side + 1))
        hw = 16 << lay
        hs = start + side * hw
        he = hs + hw
        a = lo if lo > hs else hs
        b = hi if hi < he else he
        if a >= b:
            continue
        k = 2 * c + side
        if deep[k]:
            if lay == 0 or 2 * h[k] + 1 >= nh or len(work) >= 128:
                raise ValueError("binmap_find: corrupt tree")
            work.append((h[k], lay - 1, hs, 0))
            continue
        x = h[k] if val else (~h[k] & 0xFFFF)
        i = (a - hs) >> lay
        j = (b - 1 - hs) >> lay
        x &= ((1 << (j + 1)) - 1) ^ ((1 << i) - 1)
        if x:
            pos = hs + (((x & -x).bit_length() - 1) << lay)
            return pos if pos > a else a
    return -1


_EXPAND = [0] * 256
for _v in range(256):
    _x = 0
    for _i in range(8):
        if _v >> _i & 1:
            _x |= 3 << (2 * _i)
    _EXPAND[_v] = _x
_SQUEEZE = {x: v for v, x in enumerate(_EXPAND)}


def py_binmap_set1(halves, deep, free, st, root: int, root_layer: int, i: int, val: bool) -> int:
    """Set (val) or clear chunk ``i``; returns 1 if changed, 0 if it already was.

    Splits leaf halves on the way down with cells popped from the ``free``
    stack (depth ``st[0]``), flips the bit, then folds uniform cells back up,
    pushing freed cells.  Layout as in :func:`py_binmap_find`.
    """
    h = halves
    nh = len(h)
    if root < 0 or 2 * root + 1 >= nh or root_layer < 0 or root_layer > 57 or i < 0 \
            or i >= (32 << root_layer) or len(deep) < nh or len(st) < 1 \
            or not 0 <= st[0] <= len(free):
        raise ValueError("binmap_set1: bad binmap buffers")
    c, lay = root, root_layer
    path: list[int] = []
    while True:
        side = (i >> (lay + 4)) & 1
        k = 2 * c + side
        if deep[k]:
            if lay == 0 or 2 * h[k] + 1 >= nh or len(path) >= 64:
                raise ValueError("binmap_set1: corrupt tree")
            path.append(k)
            c = h[k]
            lay -= 1
            continue
        bit = 1 << ((i >> lay) & 15)
        if bool(h[k] & bit) == bool(val):
            return 0
        if lay == 0:
            h[k] ^= bit
            break
        if st[0] <= 0:
            raise ValueError("binmap_set1: no free cell")
        st[0] -= 1
        ch = free[st[0]]
        if 2 * ch + 1 >= nh:
            raise ValueError("binmap_set1: corrupt free list")
        bm = h[k]
        h[2 * ch] = _EXPAND[bm & 0xFF]
        h[2 * ch + 1] = _EXPAND[(bm >> 8) & 0xFF]
        deep[2 * ch] = deep[2 * ch + 1] = 0
        h[k] = ch
        deep[k] = 1
    while path:
        k = path.pop()
        ch = h[k]
        if deep[2 * ch] or deep[2 * ch + 1]:
            break
        x = (h[2 * ch] & 0xFFFF) | ((h[2 * ch + 1] << 16) & 0xFFFFFFFF)
        if (x ^ (x >> 1)) & 0x55555555:
            break
        if st[0] >= len(free):
            raise ValueError("binmap_set1: free stack full")
        free[st[0]] = ch
        st[0] += 1
        deep[k] = 0
        h[k] = _SQUEEZE[x & 0xFFFF] | (_SQUEEZE[(x >> 16) & 0xFFFF] << 8)
    return 1


def py_decode_msgs(data: bytes, pos: int, addressing: int, hash_size: int, sig_size: int,
                   chunk_size: int) -> tuple[list, int, str | None]:
    """PPSPP messages of one datagram from ``pos`` as decode_raw 5-tuples
    (RFC 7574 section 8), up to the first HANDSHAKE, PEX_RES* or unknown
    type (left to the caller: ``pos`` at its type octet) or the first
    truncated message (``error`` says why, ``pos`` at that message).
    Addressing (7.8): 0 bin32, 1 byte64, 2 chunk32, 3 bin64, 4 chunk64."""
    buf = bytes(data)
    n = len(buf)
    if not 0 <= chunk_size < 1 << 64:
        raise OverflowError("chunk size out of range")
    if not 0 <= addressing <= 4 or hash_size < 0 or sig_size < 0 or not 0 <= pos <= n:
        raise ValueError("decode_msgs: bad arguments")
    isbin = addressing in (0, 3)
    isbyte = addressing == 1
    w = 4 if addressing in (0, 2) else 8
    ss = w if isbin else 2 * w
    out: list = []
    error = None
    while pos < n:
        t = buf[pos]
        p = pos + 1
        if 1 <= t <= 4 or 7 <= t <= 9:
            if p + ss > n:
                error = "truncated chunk spec"
                break
            start = int.from_bytes(buf[p:p + w], "big")
            end = start if isbin else int.from_bytes(buf[p + w:p + 2 * w], "big")
            p += ss
            x: int | bytes | None = None
            y: int | bytes | None = None
            if t == 1:  # DATA
                if p + 8 > n:
                    error = "truncated DATA timestamp"
                    break
                x = int.from_bytes(buf[p:p + 8], "big")
                p += 8
                rem = n - p
                if isbyte:
                    if end < start or end - start >= rem:
                        error = "DATA byte range does not match payload"
                        break
                    ln = end - start + 1
                elif chunk_size == 0xFFFFFFFF or rem < chunk_size:
                    ln = rem
                else:
                    ln = chunk_size
                y = buf[p:p + ln]
                p += ln
            elif t == 2:  # ACK
                if p + 8 > n:
                    error = "truncated ACK delay"
                    break
                x = int.from_bytes(buf[p:p + 8], "big")
                p += 8
            elif t == 4:  # INTEGRITY
                if hash_size > n - p:
                    error = "truncated INTEGRITY hash"
                    break
                x = buf[p:p + hash_size]
                p += hash_size
            elif t == 7:  # SIGNED_INTEGRITY
                if n - p < 8 or sig_size > n - p - 8:
                    error = "truncated SIGNED_INTEGRITY"
                    break
                x = int.from_bytes(buf[p:p + 8], "big")
                y = buf[p + 8:p + 8 + sig_size]
                p += 8 + sig_size
            out.append((t, start, end, x, y))
        elif t in (6, 10, 11):  # PEX_REQ, CHOKE, UNCHOKE
            out.append((t, 0, 0, None, None))
        else:
            break
        pos = p
    return out, pos, error


def py_uncle_stop(chunk: int, top: int, halves_a, deep_a, root_a: int, layer_a: int,
                  halves_b, deep_b, root_b: int, layer_b: int) -> int:
    """The lowest layer m in ``[1, top]`` whose aligned block of ``2**m``
    chunks around ``chunk`` holds a filled chunk of binmap a or b (each given
    as :func:`py_binmap_find` takes it), or ``top`` if none: where
    ``MerkleTree.uncles`` stops (5.3).  Monotone in m: gallop, then bisect."""
    for h, d, r, lay in ((halves_a, deep_a, root_a, layer_a), (halves_b, deep_b, root_b, layer_b)):
        nb = len(memoryview(h).cast("B"))
        nh = nb // 4
        if nb % 4 or lay < 0 or lay > 57 or r < 0 or 2 * r + 1 >= nh or len(d) < nh:
            raise ValueError("uncle_stop: bad arguments")
    if chunk < 0 or not 0 <= top <= 62 or (top and chunk >> 62):
        raise ValueError("uncle_stop: bad arguments")

    def any_in(m: int) -> bool:
        a = (chunk >> m) << m
        e = a + (1 << m)
        for h, d, r, lay in ((halves_a, deep_a, root_a, layer_a),
                             (halves_b, deep_b, root_b, layer_b)):
            span = 32 << lay
            if a < span and py_binmap_find(h, d, r, lay, a, min(e, span), True) >= 0:
                return True
        return False

    return lowest_hit(top, any_in)


def lowest_hit(top: int, hit: Callable[[int], bool]) -> int:
    """The lowest m in ``[1, top]`` with ``hit(m)``, or ``top`` if none, for a ``hit``
    monotone in m: gallop up from 1 (a sequential download stops within a layer or
    two of the leaf), then bisect the last step.  ``uncle_stop``'s search, and
    ``MerkleTree.uncles``' for a ``peer_has`` that is no pair of binmaps."""
    stop = top
    if top:
        prev, mid = 0, 1
        while True:
            if hit(mid):
                lo_m, hi_m = prev + 1, mid - 1
                stop = mid
                while lo_m <= hi_m:
                    m = (lo_m + hi_m) >> 1
                    if hit(m):
                        stop, hi_m = m, m - 1
                    else:
                        lo_m = m + 1
                break
            if mid == top:
                break
            prev, mid = mid, min(top, 2 * mid)
    return stop


def py_merkle_walk(hashes, known, hash_size: int, n: int, root: int, chunk: int, leaf,
                   offered: dict, hasher, zero) -> int:
    """The walk of ``MerkleTree.verify`` (5.2) from ``chunk``'s leaf digest up
    to the first trusted node: 1 when the path checks out (its hashes are
    then written into ``hashes`` and marked in ``known``), 0 when it does not,
    -1 when a sibling is neither trusted nor ``offered`` (lost with an
    earlier datagram, 5.3).  Nothing changes unless 1."""
    hs = hash_size
    hb, kn = hashes, known
    nk = len(kn)
    if not 1 <= hs <= 64 or len(hb) != nk * hs or len(leaf) != hs \
            or len(zero) != hs or n < 1 or not 0 <= chunk < n or chunk >= 1 << 61 \
            or not 0 <= root < nk or not isinstance(offered, dict):
        raise ValueError("merkle_walk: bad arguments")
    d = bytes(leaf)
    path: list[tuple[int, bytes]] = []
    lay = 0
    o = chunk
    b = chunk << 1
    while not (b < nk and kn[b] == 1):
        s = b ^ (1 << (lay + 1))
        if ((o ^ 1) << lay) >= n:
            sd = bytes(zero)
        elif s < nk and kn[s] == 1:
            sd = bytes(hb[s * hs:(s + 1) * hs])
        else:
            got = offered.get(s)
            if got is None:
                return -1
            if type(got) is not bytes or len(got) != hs or s >= nk or len(path) >= 126:
                return 0
            sd = got
            path.append((s, sd))
        if len(path) >= 127:
            return 0
        path.append((b, d))
        d = hasher(sd + d).digest() if o & 1 else hasher(d + sd).digest()
        if type(d) is not bytes or len(d) != hs:
            raise ValueError("merkle_walk: hasher gives another digest size")
        b = (b & ~(1 << (lay + 1))) | (1 << lay)
        lay += 1
        o >>= 1
        if lay > 62 or (b == root and not (b < nk and kn[b] == 1)):
            return 0
    if bytes(hb[b * hs:(b + 1) * hs]) != d:
        return 0
    for pb, pd in path:
        hb[pb * hs:(pb + 1) * hs] = pd
        kn[pb] = 1
    return 1


def py_merkle_uncles(hashes, known, hash_size: int, n: int, chunk: int, stop: int,
                     zero) -> list[tuple[int, bytes]]:
    """The uncle hashes of ``chunk`` below layer ``stop`` (see
    :func:`py_uncle_stop`), tree height descending (5.4): the sibling at each
    layer, the zero hash past the content; KeyError for an unknown one."""
    hs = hash_size
    hb, kn = hashes, known
    nk = len(kn)
    if not 1 <= hs <= 64 or len(hb) != nk * hs or len(zero) != hs or n < 0 \
            or not 0 <= chunk < 1 << 61 or not 0 <= stop <= 62:
        raise ValueError("merkle_uncles: bad arguments")
    out = []
    for lay in range(stop - 1, -1, -1):  # top down: the sibling at each layer
        sib = (chunk >> lay) ^ 1
        s = (sib << (lay + 1)) | ((1 << lay) - 1)
        if (sib << lay) >= n:
            out.append((s, bytes(zero)))
        elif s < nk and kn[s] == 1:
            out.append((s, bytes(hb[s * hs:(s + 1) * hs])))
        else:
            raise KeyError(f"hash of bin {s} is not known")
    return out


def py_data_datagram(channel: int, hashes, known, hash_size: int, n: int, chunk: int, stop: int,
                     zero, ts, src, offset: int, length: int) -> bytes:
    """One whole DATA datagram in chunk32 addressing (8.3, 8.4, 8.6, 8.8): the
    channel ID, INTEGRITY (04 start end hash) for each uncle of ``chunk`` below
    layer ``stop`` as :func:`py_merkle_uncles` finds them, then DATA (01 chunk
    chunk, the timestamp ``ts``, the payload).  The payload is ``length`` bytes
    at ``offset`` of ``src``: a file descriptor (pread until that many or end
    of file) or a buffer (sliced)."""
    hs = hash_size
    kn = known
    nk = len(kn)
    if not 0 <= channel <= 0xFFFFFFFF or not 1 <= hs <= 64 or len(hashes) != nk * hs \
            or len(zero) != hs or len(ts) != 8 or n < 0 or not 0 <= chunk <= 0xFFFFFFFF \
            or not 0 <= stop <= 32 or offset < 0 or not 0 <= length <= 1 << 24:
        raise ValueError("data_datagram: bad arguments")
    parts = [channel.to_bytes(4, "big")]
    for lay in range(stop - 1, -1, -1):  # top down: the sibling at each layer
        sib = (chunk >> lay) ^ 1
        s = (sib << (lay + 1)) | ((1 << lay) - 1)
        lo = sib << lay
        hi = lo + (1 << lay)
        if lo >= n:
            d = bytes(zero)
        elif s < nk and kn[s] == 1:
            d = bytes(hashes[s * hs:(s + 1) * hs])
        else:
            raise KeyError(f"hash of bin {s} is not known")
        parts.append(b"\x04" + _PACK_II(lo, hi - 1) + d)
    if isinstance(src, int):
        if not -(1 << 63) <= src < 1 << 63:
            raise OverflowError("data_datagram: file descriptor out of range")
        if not 0 <= src <= 0x7FFFFFFF:
            raise ValueError("data_datagram: bad file descriptor")
        got = bytearray()
        while len(got) < length:
            r = os.pread(src, length - len(got), offset + len(got))
            if not r:
                break  # end of file: a short payload
            got += r
        payload = bytes(got)
    else:
        payload = bytes(memoryview(src).cast("B")[offset:offset + length])
    parts.append(b"\x01" + _PACK_II(chunk, chunk) + bytes(ts) + payload)
    return b"".join(parts)


def py_seed_datagram(channel: int, tree: Any, chunk: int, binmap_a: Any, binmap_b: Any, ts,
                     src, offset: int, length: int) -> bytes:
    """``MerkleTree.data_datagram(channel, chunk, view, ...)`` for a view of two
    :class:`~swift.core.binmap.Binmap` (the peer's acknowledged chunks and ours
    sent; the same one twice when only it counts), the upload path's DATA in
    one call: the chunk's peak layer (the highest bit where ``chunk`` and the
    tree's ``n_chunks`` differ; IndexError past the end), :func:`py_uncle_stop`
    over both binmaps, then :func:`py_data_datagram`."""
    n = tree.n_chunks or 0
    if not 0 <= chunk < n:
        raise IndexError("chunk past the end of the content")
    a, b = binmap_a, binmap_b
    stop = py_uncle_stop(chunk, (chunk ^ n).bit_length() - 1, a._h, a._deep, a.root,
                         a.root_layer, b._h, b._deep, b.root, b.root_layer)
    return py_data_datagram(channel, tree._hashes, tree._known, tree.hash_size, n, chunk, stop,
                            tree.zero, ts, src, offset, length)

def py_ledbat_on_ack(led: Any, delay: float, bytes_acked: int, now: float,
                     rtt: float | None) -> None:
    """Ledbat.on_ack (RFC 6817 section 2.4.2 "on acknowledgement", one delay sample).

    ``led`` is the :class:`~swift.core.ledbat.Ledbat`; MIN(base_delays) is
    kept in ``led._base`` and the path's GAIN by ``led.young_gain``.  The C
    version reads and writes the same attributes with the same arithmetic in
    the same order (tests/swift/test_swift_ledbat_fast.py)."""
    led.acks += 1
    # base delay per minute (2.4.2 update_base_delay) and queuing_delay
    bd = led.base_delays
    lr = led.last_rollover
    if lr == -math.inf or int(now // 60) != int(lr // 60):
        if lr == -math.inf:  # the first sample: the base delay's age starts (YOUNG_BASE)
            led.history_start = now
        led.last_rollover = now
        bd.append(delay)
        base = led._base = min(bd)
        if led.acks <= led.CURRENT_FILTER:  # YOUNG_BASE's reference: the base after
            led.first_delay = base          # the first CURRENT_FILTER samples
    else:
        base = led._base
        if delay < bd[-1]:
            bd[-1] = delay
            if delay < base:
                base = led._base = delay
                if led.acks <= led.CURRENT_FILTER:
                    led.first_delay = base
    cur = led.current_delays
    cur.append(delay)
    target = led.TARGET
    qd = min(cur) - base
    off_target = (target - qd) / target
    flight = led.flightsize
    srtt = led.srtt
    hold = srtt or 1.0
    if hold < led.PEAK_HOLD:  # (Ledbat.PEAK_HOLD: the sender's own flush cycle)
        hold = led.PEAK_HOLD
    if now - led.peak_time > hold:
        led.peak_flight = flight
        led.peak_time = now
    peak = led.peak_flight
    cap_flight = flight if flight > peak else peak
    mss = led.mss
    cwnd = led.cwnd
    if rtt is not None and rtt < led.min_rtt:
        led.min_rtt = rtt
    # round-trip queue: growth (slow start, then any) stops while it passes
    # TARGET/2, TARGET (the RFC's one-way rule stays the one that shrinks
    # cwnd: a slow ACK path alone never does).  A seeder short of CPU
    # otherwise grew its window for ever, its ACKs queued for up to 1 s in
    # its own socket, and the backlog's drops looked like losses.
    rq = srtt - led.min_rtt if srtt is not None and rtt is not None else 0.0
    calm = qd < target / 2 and rq < target / 2
    slow = led.slow_start
    recovering = not slow and cwnd < led.ssthresh and calm
    if recovering:
        cwnd = min(led.ssthresh, cwnd + bytes_acked)
    elif slow and calm:
        cwnd += bytes_acked
    else:
        if slow:  # leaving slow start: undo its last doubling
            cwnd = max(cwnd / 2, float(led.MIN_CWND * mss))
        led.slow_start = slow = False
        if off_target < 0 or rq <= target:
            gain = led.young_gain(now)  # the path's GAIN, less while a fallen base is young
            if off_target < 0:
                # above TARGET: draft-irtf-iccrg-ledbat-plus-plus 4.3's multiplicative
                # decrease, W += max(GAIN - C * W * (delay/TARGET - 1), -W/2) per RTT
                # (spread over the ACKs of a window), instead of the RFC's linear
                # GAIN * off_target MSS: that took 7-15 s to leave a queue cubic TCP
                # kept at 2.5 x TARGET (docs/ledbat.md)
                w = cwnd / mss
                per_rtt = max(gain + led.DECREASE * w * off_target, -w / 2)
                cwnd += per_rtt * bytes_acked * mss / cwnd
            else:  # below: RFC 6817's increase, LEDBAT++'s GAIN
                cwnd += gain * off_target * bytes_acked * mss / cwnd
    if slow or recovering:  # slow start may double the window per RTT
        cwnd = min(cwnd, 2 * cap_flight + led.ALLOWED_INCREASE * mss)
    else:
        cwnd = min(cwnd, cap_flight + led.ALLOWED_INCREASE * mss)
    led.cwnd = max(min(cwnd, float(led.MAX_CWND)), float(led.MIN_CWND * mss))
    led.flightsize = max(0, flight - bytes_acked)
    if rtt is not None:
        if srtt is None:
            led._update_cto(rtt)
        else:  # RFC 6298 section 2, as _update_cto
            var = led.rttvar = 0.75 * led.rttvar + 0.25 * abs(srtt - rtt)
            srtt = led.srtt = 0.875 * srtt + 0.125 * rtt
            led.cto = max(0.2, srtt + 4 * var)
    elif srtt is not None:  # an ACK ends a timeout backoff (RFC 6298 5.7)
        led.cto = max(0.2, srtt + 4 * led.rttvar)
    led.last_ack = now


def py_sendside_recv(send: Any, lo: int, hi: int, delay_us: int | None, now: float,
                     arrived: float | None) -> int:
    """The send side of one ACK or HAVE of chunks ``[lo, hi)``: with ``delay_us``
    (the ACK's one-way delay sample, an int) :meth:`SendSide.on_ack
    <swift.core.sendside.SendSide.on_ack>`, with None :meth:`SendSide.delivered_by_have
    <swift.core.sendside.SendSide.delivered_by_have>`.  Returns 0, or -1 with
    nothing done while loss repair has chunks in flight (``send.retried``: the
    methods' :meth:`~swift.core.sendside.SendSide.spurious`), for chunks not
    within ``0 <= lo <= hi < 2**63`` (a bin64 or byte64 spec may name more) or
    a delay that is not an int in ``[0, 2**64)``; the caller then runs the
    method.  The C version
    (deliverykit/csrc/swift.c) does the methods' work in one call, Ledbat.on_ack
    included (tests/swift/test_swift_seedcpu3_recv.py runs both side by side)."""
    if send.retried or not (isinstance(lo, int) and isinstance(hi, int)
                            and 0 <= lo <= hi < 1 << 63) or (
            delay_us is not None and not (isinstance(delay_us, int) and 0 <= delay_us < 1 << 64)):
        return -1
    if delay_us is None:
        send.delivered_by_have(lo, hi, now)
    else:
        send.on_ack(lo, hi, delay_us, now, arrived)
    return 0


def py_next_wanted(have: Any, inflight: Any, peer: Any, pos: int, hi: int) -> int:
    """The first chunk in ``[pos, hi)`` that the Binmaps ``have`` and ``inflight``
    lack and ``peer`` holds, or -1 (``swift.core.picker.next_wanted``; the C
    ``picker_next_wanted`` checks the three binmaps first and takes int64 only)."""
    if not (-1 << 63 <= pos < 1 << 63 and -1 << 63 <= hi < 1 << 63):
        raise OverflowError("picker_next_wanted: pos and hi must fit in 64 bits")
    while pos < hi:
        c = have.find_empty(pos, hi)
        if c is None:
            return -1
        d = inflight.find_empty(c, hi)
        if d is None:
            return -1
        if d != c:
            pos = d
            continue
        e = peer.find_filled(c, hi)
        if e is None:
            return -1
        if e != c:
            pos = e
            continue
        return c
    return -1


decode_msgs = load("decode_msgs", py_decode_msgs)
merkle_uncles = load("merkle_uncles", py_merkle_uncles)
merkle_walk = load("merkle_walk", py_merkle_walk)
uncle_stop = load("uncle_stop", py_uncle_stop)
binmap_find = load("binmap_find", py_binmap_find)
binmap_set1 = load("binmap_set1", py_binmap_set1)
data_datagram = load("data_datagram", py_data_datagram)
ledbat_on_ack = load("ledbat_on_ack", py_ledbat_on_ack)
seed_datagram = load("seed_datagram", py_seed_datagram)
sendside_recv = load("sendside_recv", py_sendside_recv)
next_wanted = load("picker_next_wanted", py_next_wanted)


#: SO_TIMESTAMPNS / SCM_TIMESTAMPNS on Linux (the socket module has no name for it)
SO_TIMESTAMPNS = 35


def py_recv_batch_ts(sock, max_count: int, size: int) -> list:
    """Up to ``max_count`` datagrams without blocking, each as ``(data, addr,
    t)`` with ``t`` its kernel arrival time (SO_TIMESTAMPNS), -1.0 if none."""
    import socket
    import struct
    if not 1 <= max_count <= 256 or not 1 <= size <= 65536:
        raise ValueError("recv_batch_ts: 1 <= max_count <= 256, 1 <= size <= 65536")
    out: list[tuple[bytes, object, float]] = []
    flags = socket.MSG_DONTWAIT
    while len(out) < max_count:
        try:
            data, anc, _, addr = sock.recvmsg(
                size, socket.CMSG_SPACE(16) + socket.CMSG_SPACE(64), flags)
        except (BlockingIOError, InterruptedError):
            break
        t = -1.0
        for level, typ, raw in anc:
            if level == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS and len(raw) >= 16:
                sec, nsec = struct.unpack("qq", raw[:16])
                t = sec + nsec * 1e-9
        out.append((data, addr, t))
    return out


recv_batch_ts = load("recv_batch_ts", py_recv_batch_ts)
