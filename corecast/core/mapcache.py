"""EID-to-RLOC map-cache of an ITR (RFC 9300 section 6, RFC 9301 sections 5.3-5.5).

* Entries live in a :class:`~corecast.core.maptrie.PrefixTrie` (longest-prefix
  match, IPv4 and IPv6) with an expiry time from the Map-Reply Record TTL.
* Negative entries (empty locator set) carry the RFC 9301 action.
* Packets for an unresolved EID wait in a bounded queue per EID; overflow,
  too many waiting EIDs, and give-ups are counted drops.
* Map-Requests are rate limited to 1 per second per EID and given up after
  10 retries (RFC 9301 section 5.3), then the EID is held down for 30 s.
* A static map-cache file (one ``prefix rloc[,rloc...] [ttl_seconds] [echo]``
  per line, ``#`` comments) is accepted as in the paper's section 6.1.
* Every usable locator is kept; :meth:`MapEntry.select` picks among the best
  priority still up, by weight (RFC 9301 section 5.4), so a locator marked down
  fails over to the next priority.
* Instance IDs (RFC 9300 section 8): a map-cache holds the mappings of one
  instance (``iid``; an xTR with several instances has one map-cache, and one
  ITR core, per instance, so equal EID prefixes of different instances never
  meet).  Map-Reply records of another instance are not installed (counted in
  ``other_instance``).
* The entries an ITR's batch data path reads are kept, as a compact copy, in
  each table :meth:`MapCache.attach` was given (``ItrTable`` in C or
  ``corecast._fast.PyItrTable``): every change goes through :meth:`MapCache.add`,
  :meth:`MapCache.update` and :meth:`MapCache.remove`, which keep them in step.
"""

from __future__ import annotations

import ipaddress
import socket
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypedDict

from corecast.core.driven import just_after
from corecast.core.events import MappingInstalled
from corecast.core.maptrie import PrefixTrie, parse_prefix
from corecast.wire.lispctl import EidRecord

if TYPE_CHECKING:  # typing's own from Python 3.11 (the package supports 3.10)
    from typing_extensions import Unpack

FOREVER = float("inf")


def ntop(addr: bytes) -> str:
    return socket.inet_ntop(socket.AF_INET if len(addr) == 4 else socket.AF_INET6, addr)


@dataclass(slots=True)
class MapEntry:
    """One cached mapping."""

    prefix: bytes
    plen: int
    rlocs: tuple[bytes, ...]  #: usable locators (priority < 255), best priority first
    rloc_strs: tuple[str, ...]
    weights: tuple[int, ...]
    expires: float
    action: int = 0
    #: every locator in Map-Reply order: ordinal i is Locator-Status-Bit i (RFC 9300 5.3)
    ordinals: tuple[bytes, ...] = ()
    #: locators a Locator-Status-Bit (or echo-nonce) said are down; avoided while
    #: another usable one is up (RFC 9300 section 10)
    down: frozenset[bytes] = frozenset()
    #: the mapping's Map-Version from its Map-Reply record (RFC 9302; 0 = null)
    map_version: int = 0
    #: a LISP data header for this entry's EIDs instead of the ITR's default
    #: (map-versioning: V-bit with the source and this destination version)
    lisp_header: bytes | None = None
    #: priority of each of ``rlocs`` (RFC 9301 section 5.4; lower is preferred)
    priorities: tuple[int, ...] = ()
    #: the Map-Reply had the E-bit: its ETRs do echo-noncing (RFC 9300 section 10.1)
    echo: bool = False

    @property
    def negative(self) -> bool:
        return not self.rlocs

    def select(self, eid: bytes) -> tuple[bytes, str]:
        """Pick a locator for ``eid`` (RFC 9301 section 5.4 Priority and Weight): among
        the best-priority locators not marked down, weighted; when every locator of
        a priority is down the next priority is used; all down: the best priority."""
        n = len(self.rlocs)
        if n == 1:
            return self.rlocs[0], self.rloc_strs[0]
        prios = self.priorities or (0,) * n
        cand = None
        if self.down:
            up = [i for i in range(n) if self.rlocs[i] not in self.down]
            if up:
                best = min(prios[i] for i in up)
                cand = [i for i in up if prios[i] == best]
        if cand is None:
            cand = [i for i in range(n) if prios[i] == prios[0]]
        h = int.from_bytes(eid[-4:], "big") * 2654435761
        if len(cand) == 1:
            i = cand[0]
            return self.rlocs[i], self.rloc_strs[i]
        total = sum(self.weights[i] for i in cand)
        if total == 0:
            i = cand[h % len(cand)]
            return self.rlocs[i], self.rloc_strs[i]
        h %= total
        acc = 0
        for i in cand:
            acc += self.weights[i]
            if h < acc:
                return self.rlocs[i], self.rloc_strs[i]
        return self.rlocs[cand[-1]], self.rloc_strs[cand[-1]]  # pragma: no cover


class EntryChanges(TypedDict, total=False):
    """The fields :meth:`MapCache.update` may change (every one but the key,
    ``prefix``/``plen``), with :class:`MapEntry`'s types."""

    rlocs: tuple[bytes, ...]
    rloc_strs: tuple[str, ...]
    weights: tuple[int, ...]
    expires: float
    action: int
    ordinals: tuple[bytes, ...]
    down: frozenset[bytes]
    map_version: int
    lisp_header: bytes | None
    priorities: tuple[int, ...]
    echo: bool


class EntryTable(Protocol):
    """What the map-cache keeps in step: an ITR's data-path table (C ``ItrTable`` or
    its twin ``corecast._fast.PyItrTable``)."""

    def set_entry(self, prefix: bytes, plen: int, rlocs: tuple[bytes, ...],
                  rloc_strs: tuple[str, ...], expires: float, header: bytes | None) -> None: ...

    def remove_entry(self, prefix: bytes, plen: int) -> bool: ...


@dataclass(slots=True)
class _Pending:
    packets: deque[bytes] = field(default_factory=deque)
    last_request: float = -FOREVER
    retries: int = 0
    holddown_until: float = -FOREVER


class MapCache:
    """Bounded map-cache with pending queues and Map-Request pacing."""

    def __init__(
        self,
        max_entries: int = 100_000,
        pending_per_eid: int = 64,
        max_pending_eids: int = 4096,
        request_interval: float = 1.0,
        max_retries: int = 10,
        holddown: float = 30.0,
        iid: int = 0,
    ) -> None:
        self.iid = iid
        self.trie: PrefixTrie[MapEntry] = PrefixTrie()
        self.max_entries = max_entries
        self.pending_per_eid = pending_per_eid
        self.max_pending_eids = max_pending_eids
        self.request_interval = request_interval
        self.max_retries = max_retries
        self.holddown = holddown
        self.pending: dict[bytes, _Pending] = {}
        #: the data-path tables kept in step with the entries (:meth:`attach`)
        self.tables: list[EntryTable] = []
        # next_request_at, kept up to date in O(1) for the common changes (a new
        # pending EID, a request sent) and recomputed after removals
        self._due: float | None = None
        self._due_valid = True
        #: locators of mappings whose Map-Reply had the E-bit (or static ``echo``):
        #: ETRs known to do echo-noncing (RFC 9300 section 10.1); bounded, LRU
        self.echo_rlocs: OrderedDict[bytes, None] = OrderedDict()
        self.counters: dict[str, int] = {
            "hits": 0, "misses": 0, "expired": 0, "installed": 0, "queued": 0,
            "drop_queue_full": 0, "drop_too_many_pending": 0, "drop_gave_up": 0,
            "drop_cache_full": 0, "map_requests": 0, "other_instance": 0,
        }

    # ---------------------------------------------------------------- the entries

    def attach(self, table: EntryTable) -> None:
        """Keep ``table`` in step with the entries from now on (it gets every entry
        there is)."""
        for _net, _plen, entry in self.trie.items():
            self._sync(table, entry)
        self.tables.append(table)

    @staticmethod
    def _sync(table: EntryTable, e: MapEntry) -> None:
        table.set_entry(e.prefix, e.plen, e.rlocs, e.rloc_strs, e.expires, e.lisp_header)

    def update(self, entry: MapEntry, **changes: Unpack[EntryChanges]) -> None:
        """Change fields of an installed entry (its ``lisp_header``, ``down``...):
        the one way to, so the data-path tables see the change."""
        for name, value in changes.items():
            setattr(entry, name, value)
        if self.trie.get(entry.prefix, entry.plen) is entry:
            for t in self.tables:
                self._sync(t, entry)

    def remove(self, prefix: bytes, plen: int) -> bool:
        """Remove the entry of exactly ``prefix/plen``; True if there was one."""
        for t in self.tables:
            t.remove_entry(prefix, plen)
        return self.trie.remove(prefix, plen)

    # ---------------------------------------------------------------- lookup

    def lookup(self, eid: bytes, now: float) -> MapEntry | None:
        hit = self.trie.lookup(eid)
        if hit is None:
            self.counters["misses"] += 1
            return None
        entry = hit[1]
        while entry.expires <= now:  # drop expired entries, fall back to shorter prefixes
            self.remove(entry.prefix, entry.plen)
            self.counters["expired"] += 1
            hit = self.trie.lookup(eid)
            if hit is None:
                self.counters["misses"] += 1
                return None
            entry = hit[1]
        self.counters["hits"] += 1
        return entry

    # ---------------------------------------------------------------- install

    #: called with every new entry, returns its ``lisp_header`` (or None): how an
    #: xTR doing map-versioning gives each mapping its header
    header_for: Callable[[MapEntry], bytes | None] | None = None

    def add(self, prefix: bytes, plen: int, rlocs: list[tuple[bytes, int, int]], expires: float,
            action: int = 0, map_version: int = 0, echo: bool = False) -> MapEntry | None:
        """``rlocs``: (packed locator, priority, weight); priority 255 is unusable.
        Every usable locator is kept (best priority first) so traffic fails over to
        the next priority when the best ones are down."""
        usable = [r for r in rlocs if r[1] < 255]
        usable.sort(key=lambda r: (r[1], r[0]))
        if len(self.trie) >= self.max_entries and self.trie.get(prefix, plen) is None:
            self.counters["drop_cache_full"] += 1
            return None
        entry = MapEntry(
            prefix, plen, tuple(r[0] for r in usable), tuple(ntop(r[0]) for r in usable),
            tuple(r[2] for r in usable), expires, action, tuple(r[0] for r in rlocs),
            map_version=map_version & 0xFFF, priorities=tuple(r[1] for r in usable), echo=echo,
        )
        if echo:
            for r in entry.rlocs:
                self.echo_rlocs[r] = None
                self.echo_rlocs.move_to_end(r)
            while len(self.echo_rlocs) > self.max_entries:
                self.echo_rlocs.popitem(last=False)
        if self.header_for is not None:
            entry.lisp_header = self.header_for(entry)
        self.trie.insert(prefix, plen, entry)
        for t in self.tables:
            self._sync(t, entry)
        self.counters["installed"] += 1
        return entry

    def install_records(self, records: tuple[EidRecord, ...] | list[EidRecord], now: float,
                        echo: bool = False
                        ) -> tuple[list[MappingInstalled], list[tuple[bytes, list[bytes]]]]:
        """Install Map-Reply records (``echo``: the Map-Reply's E-bit); returns events
        and released (eid, packets)."""
        events = []
        for rec in records:
            if rec.iid != self.iid:
                self.counters["other_instance"] += 1
                continue
            if rec.ttl == 0:
                self.remove(rec.prefix.network_address.packed, rec.prefix.prefixlen)
                continue
            ttl = FOREVER if rec.ttl == 0xFFFFFFFF else rec.ttl * 60.0
            locs = [(loc.locator.packed, loc.priority, loc.weight) for loc in rec.locators]
            e = self.add(rec.prefix.network_address.packed, rec.prefix.prefixlen, locs,
                         now + ttl, rec.action, rec.map_version, echo)
            if e is not None:
                events.append(MappingInstalled(str(rec.prefix), e.rloc_strs, ttl, rec.action))
        released = []
        for eid in list(self.pending):
            if self.trie.lookup(eid) is not None:
                p = self.pending.pop(eid)
                released.append((eid, list(p.packets)))
                self._due_valid = False
        return events, released

    def load_static(self, text: str, now: float = 0.0) -> int:
        """Static map-cache lines: ``prefix rloc[,rloc...] [ttl_seconds] [echo]``
        (``echo``: the ETRs do echo-noncing, as a Map-Reply E-bit would say)."""
        n = 0
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            echo = "echo" in parts[2:]
            parts = [p for p in parts[:2]] + [p for p in parts[2:] if p != "echo"]
            pfx, plen = parse_prefix(parts[0])
            rlocs = [] if parts[1] in ("-", "negative") else [
                (ipaddress.ip_address(r).packed, 1, 100) for r in parts[1].split(",")]
            ttl = float(parts[2]) if len(parts) > 2 else FOREVER
            self.add(pfx, plen, rlocs, now + ttl, 0 if rlocs else 1, echo=echo)
            n += 1
        return n

    # ---------------------------------------------------------------- pending

    def enqueue(self, eid: bytes, packet: bytes, now: float) -> bool:
        """Queue ``packet`` until ``eid`` resolves; False (and counted) when dropped."""
        p = self.pending.get(eid)
        if p is None:
            if len(self.pending) >= self.max_pending_eids:
                self.counters["drop_too_many_pending"] += 1
                return False
            p = self.pending[eid] = _Pending()
        if p.holddown_until > now:
            self.counters["drop_gave_up"] += 1
            return False
        if len(p.packets) >= self.pending_per_eid:
            self.counters["drop_queue_full"] += 1
            return False
        p.packets.append(packet)
        self.counters["queued"] += 1
        self._moved(None, self._request_at(p))  # a queue starting can only bring it forward
        return True

    def should_request(self, eid: bytes, now: float) -> bool:
        """True when a Map-Request for ``eid`` may be sent now (rate limit, retries)."""
        p = self.pending.get(eid)
        if p is None or p.holddown_until > now:
            return False
        if now - p.last_request < self.request_interval:
            return False
        before = self._request_at(p)
        if p.retries > self.max_retries:
            self.counters["drop_gave_up"] += len(p.packets)
            p.packets.clear()
            p.holddown_until = now + self.holddown
            p.retries = 0
            self._moved(before, self._request_at(p))
            return False
        p.last_request = now
        p.retries += 1
        self.counters["map_requests"] += 1
        self._moved(before, self._request_at(p))
        return True

    def due_requests(self, now: float) -> list[bytes]:
        """EIDs whose Map-Request should be (re)sent now; forgets idle held-down EIDs."""
        out = []
        self._due_valid = False
        for eid, p in list(self.pending.items()):
            if not p.packets and p.holddown_until <= now and p.retries == 0:
                del self.pending[eid]
                continue
            if p.packets and self.should_request(eid, now):
                out.append(eid)
        return out

    def next_request_at(self) -> float | None:
        """When :meth:`due_requests` next has work: a queued EID's Map-Request may be
        sent again (``request_interval`` after the last, after any hold-down), or an
        idle held-down EID can be forgotten."""
        if not self._due_valid:
            times = [t for p in self.pending.values() if (t := self._request_at(p)) is not None]
            self._due = min(times, default=None)
            self._due_valid = True
        return self._due

    def _request_at(self, p: _Pending) -> float | None:
        """When this pending EID next needs :meth:`due_requests` (None: never by itself)."""
        if p.packets:
            return max(just_after(p.last_request + self.request_interval), p.holddown_until)
        if p.retries == 0 and p.holddown_until > -FOREVER:
            return p.holddown_until
        return None

    def _moved(self, before: float | None, after: float | None) -> None:
        """One pending EID's time went from ``before`` to ``after``: keep the minimum."""
        if not self._due_valid:
            return
        if after is not None and (self._due is None or after < self._due):
            self._due = after
        elif before is not None and before == self._due and after != before:
            self._due_valid = False  # it may have been the earliest: recompute on demand

    def pending_packets(self) -> int:
        return sum(len(p.packets) for p in self.pending.values())
