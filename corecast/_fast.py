"""Pure-Python twins of the C fast paths in deliverykit/csrc/corecast.c.

``cc_parse(pkt, ranges)`` classifies one inner IP packet at the ITR (paper
section 3.3: only the reserved CoreCast range leaves the fast path) and
validates the CoreCast PDU lengths (docs/wire-corecast.md):

* ``(0, dst)``                                     not in the reserved range: plain LISP
* ``(1, chan, hash_id, hash, payload_off, seq)``   payload PDU
* ``(2, chan, hash, eid)``                         header PDU
* ``(-1, 1)`` malformed, ``(-1, 2)`` in the range but not a CoreCast PDU

``ranges`` is a tuple of ``(network_bytes, mask_bytes)``.

``cc_trie_lookup(root, addr)`` walks a :class:`corecast.core.maptrie.PrefixTrie`
root (nodes are lists ``[child0, child1, value, has_value]``) and returns
``(prefix_len, value)`` of the longest match, or None.

Selected with ``deliverykit.fastpath.load`` (``DELIVERYKIT_PURE=1`` forces these).
"""

from __future__ import annotations

from deliverykit.fastpath import load

_HASH_LEN = {1: 20, 2: 32}
_CC_PORT = 54341
_PROTO = 253


_RANGES: dict[tuple, tuple] = {}


def _int_ranges(ranges: tuple) -> tuple:
    """(length, mask, net) integers for a ranges tuple, memoised."""
    r = _RANGES.get(ranges)
    if r is None:
        r = tuple((len(n), int.from_bytes(m, "big"), int.from_bytes(n, "big")) for n, m in ranges)
        if len(_RANGES) < 64:
            _RANGES[ranges] = r
    return r


def py_cc_parse(pkt: bytes, ranges: tuple) -> tuple:
    n = len(pkt)
    if n < 20:
        return (-1, 1)
    v = pkt[0] >> 4
    if v == 4:
        ihl = (pkt[0] & 0x0F) * 4
        if ihl < 20 or ihl > n:
            return (-1, 1)
        dst = pkt[16:20]
        proto = pkt[9]
    elif v == 6 and n >= 40:
        ihl = 40
        dst = pkt[24:40]
        proto = pkt[6]
    else:
        return (-1, 1)
    ld = len(dst)
    d = int.from_bytes(dst, "big")
    for ln, mask, net in _int_ranges(ranges):
        if ln == ld and d & mask == net:
            break
    else:
        return (0, dst)
    if proto == _PROTO:
        off = ihl
    elif proto == 17 and n >= ihl + 8 and (pkt[ihl + 2] << 8 | pkt[ihl + 3]) == _CC_PORT:
        off = ihl + 8
    else:
        return (-1, 2)
    if n < off + 12:
        return (-1, 1)
    vt = pkt[off]
    hid = pkt[off + 1]
    hlen = pkt[off + 2]
    if vt >> 4 != 1 or _HASH_LEN.get(hid) != hlen:
        return (-1, 1)
    typ = vt & 0x0F
    h0 = off + 12
    if typ == 1:
        plen = pkt[off + 8] << 8 | pkt[off + 9]
        if h0 + hlen + plen != n:
            return (-1, 1)
        seq = int.from_bytes(pkt[off + 4 : off + 8], "big")
        return (1, dst, hid, pkt[h0 : h0 + hlen], h0 + hlen, seq)
    if typ == 2:
        afi = pkt[off + 10] << 8 | pkt[off + 11]
        elen = 4 if afi == 1 else 16 if afi == 2 else 0
        if not elen or h0 + hlen + elen != n:
            return (-1, 1)
        return (2, dst, pkt[h0 : h0 + hlen], pkt[h0 + hlen :])
    return (-1, 1)


def py_cc_trie_lookup(root: list, addr: bytes) -> tuple | None:
    node = root
    best = (0, node[2]) if node[3] else None
    key = int.from_bytes(addr, "big")
    shift = len(addr) * 8 - 1
    depth = 0
    while shift >= 0:
        node = node[(key >> shift) & 1]
        if node is None:
            break
        depth += 1
        if node[3]:
            best = (depth, node[2])
        shift -= 1
    return best


cc_parse = load("cc_parse", py_cc_parse)
cc_trie_lookup = load("cc_trie_lookup", py_cc_trie_lookup)
