"""The ITR benchmark's saturating load (issue 17): several C senders at once, each
CoreCast sender on its own channel so that interleaving them keeps Algorithm 1's
state intact; pktgen is used only where the kernel has it, else the reason is said."""

from __future__ import annotations

import socket

from bench import bench_corecast_itr as b


def _interleave(lists: list[list]) -> list[bytes]:
    out = []
    for k in range(max(map(len, lists))):
        out += [items[k][0] for items in lists if k < len(items)]
    return out


def test_interleaved_corecast_senders_each_keep_their_own_channel():
    cc, uc, pop = b._traffic(1, 2)
    items = [(p, (socket.inet_ntoa(p[16:20]), 0)) for p in cc]
    lists = b._per_sender(items, 3, True)
    assert [len(x) for x in lists] == [len(cc)] * 3
    assert {x[0][0][16:20] for x in lists} == {socket.inet_aton(f"10.255.0.{k}")
                                              for k in (1, 2, 3)}
    itr = b._itr(pop.map_cache_text(), True, False)
    itr.handle_batch(_interleave(lists), 0.0)
    assert itr.counters["drop_unknown_hash"] == 0 and itr.counters["header_copies"] > 0
    assert len(itr.buffers) == 3
    # the same stream from three senders on one channel breaks Algorithm 1's state
    same = b._itr(pop.map_cache_text(), True, False)
    same.handle_batch(_interleave([items[k * 500:] + items[:k * 500] for k in range(3)]), 0.0)
    assert same.counters["drop_unknown_hash"] > 0
    # unicast senders send the same packets from their own starting places
    plain = b._per_sender([(p, ("x", 0)) for p in uc], 2, False)
    assert sorted(plain[0]) == sorted(plain[1]) and plain[0][0] != plain[1][0]


def test_pktgen_is_used_only_where_the_kernel_has_it():
    why = b.pktgen_status()
    assert why is None or "pktgen" in why
    assert b._senders() >= 2
