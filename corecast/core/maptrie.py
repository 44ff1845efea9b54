"""Longest-prefix match over IPv4 and IPv6: a binary trie per address family.

The paper (section 6.2) measured +52% CPU for CoreCast and traced it to a
*linear* EID-to-RLOC search, noting that routers use radix tries.  This is
such a trie: lookup cost is bounded by the address length (32 or 128 steps),
independent of the number of prefixes.  Keys are packed addresses (4 or 16
bytes); prefixes are ``(packed_network, prefix_len)``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator
from typing import Generic, TypeAlias, TypeVar

from corecast import _fast

V = TypeVar("V")

_CHILD0, _CHILD1, _VALUE, _HAS = 0, 1, 2, 3

#: one trie node: ``[child for bit 0, child for bit 1, value, has_value]``, a list
#: because the C walk (``cc_trie_lookup``) indexes it with no attribute lookup; read
#: its slots through :func:`_child` and :meth:`PrefixTrie._value`, which know the layout
TrieNode: TypeAlias = "list[TrieNode[V] | V | bool | None]"
#: the longest-prefix walk: ``walk(root, packed address) -> (prefix length, value)``
Walk: TypeAlias = "Callable[[TrieNode[V], bytes], tuple[int, V] | None]"


def _new() -> TrieNode[V]:
    return [None, None, None, False]


def _child(node: TrieNode[V], bit: int) -> TrieNode[V] | None:
    """The child of ``node`` for ``bit`` (slot 0 or 1), or None."""
    return node[bit]  # type: ignore[return-value]  # slots 0 and 1 hold children


class PrefixTrie(Generic[V]):
    """Binary trie mapping prefixes to values, with longest-prefix lookup."""

    __slots__ = ("_roots", "_count", "walk")

    def __init__(self, walk: Walk[V] | None = None) -> None:
        self._roots: dict[int, TrieNode[V]] = {4: _new(), 16: _new()}
        self._count = 0
        #: the longest-prefix walk: C fast path or its pure twin (corecast._fast)
        self.walk = walk or _fast.cc_trie_lookup

    def __len__(self) -> int:
        return self._count

    @staticmethod
    def _value(node: TrieNode[V]) -> V:
        """The value of a node whose has_value slot is set (a method: ``V`` is the
        trie's, which a free function could not infer from the recursive alias)."""
        return node[_VALUE]  # type: ignore[return-value]  # slot 2 holds the value

    @staticmethod
    def _check(addr: bytes, plen: int) -> None:
        if len(addr) not in (4, 16):
            raise ValueError("address must be 4 or 16 bytes")
        if not 0 <= plen <= len(addr) * 8:
            raise ValueError("bad prefix length")

    def insert(self, addr: bytes, plen: int, value: V) -> None:
        self._check(addr, plen)
        node = self._roots[len(addr)]
        key = int.from_bytes(addr, "big")
        top = len(addr) * 8 - 1
        for i in range(plen):
            b = (key >> (top - i)) & 1
            nxt = _child(node, b)
            if nxt is None:
                nxt = _new()
                node[b] = nxt
            node = nxt
        if not node[_HAS]:
            self._count += 1
        node[_VALUE] = value
        node[_HAS] = True

    def remove(self, addr: bytes, plen: int) -> bool:
        """Remove an exact prefix; True if it was present.  Prunes empty branches."""
        self._check(addr, plen)
        node = self._roots[len(addr)]
        key = int.from_bytes(addr, "big")
        top = len(addr) * 8 - 1
        path: list[tuple[TrieNode[V], int]] = []
        for i in range(plen):
            b = (key >> (top - i)) & 1
            nxt = _child(node, b)
            if nxt is None:
                return False
            path.append((node, b))
            node = nxt
        if not node[_HAS]:
            return False
        node[_VALUE] = None
        node[_HAS] = False
        self._count -= 1
        for parent, b in reversed(path):
            child = _child(parent, b)
            if child is None or child[_HAS] or child[0] is not None or child[1] is not None:
                break
            parent[b] = None
        return True

    def lookup(self, addr: bytes) -> tuple[int, V] | None:
        """(prefix length, value) of the longest prefix covering ``addr``."""
        root = self._roots.get(len(addr))
        if root is None:
            return None
        return self.walk(root, addr)

    def get(self, addr: bytes, plen: int) -> V | None:
        """Exact-match lookup."""
        self._check(addr, plen)
        node = self._roots[len(addr)]
        key = int.from_bytes(addr, "big")
        top = len(addr) * 8 - 1
        for i in range(plen):
            nxt = _child(node, (key >> (top - i)) & 1)
            if nxt is None:
                return None
            node = nxt
        return self._value(node) if node[_HAS] else None

    def items(self) -> Iterator[tuple[bytes, int, V]]:
        """(packed network, prefix length, value) for every stored prefix."""
        for n, root in self._roots.items():
            stack = [(root, 0, 0)]
            while stack:
                node, key, depth = stack.pop()
                if node[_HAS]:
                    yield (key << (n * 8 - depth)).to_bytes(n, "big"), depth, self._value(node)
                for b in (1, 0):
                    child = _child(node, b)
                    if child is not None:
                        stack.append((child, key << 1 | b, depth + 1))


def parse_prefix(text: str) -> tuple[bytes, int]:
    """'10.0.0.0/8' or '2001:db8::/32' (or a bare address) -> (packed, length)."""
    net = ipaddress.ip_network(text, strict=False)
    return net.network_address.packed, net.prefixlen
