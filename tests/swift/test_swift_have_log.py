"""HAVE announcements from the log of newly verified chunks (RFC 7574 3.2,
4.3.1): a relaying leecher announces every chunk exactly once, in runs,
whatever order the picker verified them in (when: on the channel's schedule,
tests/swift/test_swift_have_coalesce.py)."""

import os

from swift.core.content import Content, MemoryStorage
from swift.core.merkle import MerkleTree
from swift.core.peer import Peer, PeerConfig
from swift.wire import codec as C
from swift.wire.constants import MsgType

S, L1, L2 = ("10.0.0.1", 1), ("10.0.0.2", 2), ("10.0.0.3", 3)


def test_relay_announces_each_chunk_once_and_promptly() -> None:
    data = os.urandom(300 * 1024 + 17)
    cfg = PeerConfig(seed=1)
    t = MerkleTree.build([data[i:i + 1024] for i in range(0, len(data), 1024)], cfg.hash_func, 1024)
    s = Peer(Content.seeded(t, MemoryStorage(data)), cfg)

    def leech(seed: int) -> Peer:
        return Peer(Content(MerkleTree.for_root(t.root_hash, cfg.hash_func, 1024), MemoryStorage()),
                    PeerConfig(seed=seed, picker="rarest"))  # scattered order: many runs

    l1, l2 = leech(2), leech(3)
    l1.connect(S, 0.0)
    l2.connect(L1, 0.0)  # l2 only knows l1: it can only get what l1 announces
    nodes = {S: s, L1: l1, L2: l2}
    announced: list[int] = []
    now = 0.0
    for step in range(20000):
        now += 0.002
        for addr, p in nodes.items():
            for d, dst in p.datagrams_to_send(now):
                if addr == L1 and dst == L2 and int.from_bytes(d[:4], "big"):
                    for m in C.decode_datagram(d, l2.ctx).messages:
                        if m.type == MsgType.HAVE:
                            announced.extend(range(m.start, m.end + 1))
                nodes[dst].datagram_received(d, addr, now)
        if step % 10 == 0:
            for p in nodes.values():
                p.handle_timer(now)
        if l2.content.complete:
            break
    n = t.n_chunks
    assert l1.content.complete and l2.content.complete
    assert bytes(l2.content.storage.buf[:len(data)]) == data
    assert sorted(announced) == list(range(n))  # each chunk exactly once
    # everything l2 holds came through l1 (the HAVEs were complete and timely)
    assert l2.stats["verified"] == n and s.stats["sent_data"] >= n


def test_have_log_is_bounded_and_falls_back_to_a_scan() -> None:
    data = os.urandom(40 * 1024)
    cfg = PeerConfig(seed=1)
    t = MerkleTree.build([data[i:i + 1024] for i in range(0, len(data), 1024)], cfg.hash_func, 1024)
    s = Peer(Content.seeded(t, MemoryStorage(data)), cfg)
    l1 = Peer(Content(MerkleTree.for_root(t.root_hash, cfg.hash_func, 1024), MemoryStorage()),
              PeerConfig(seed=2))
    l1.connect(S, 0.0)
    now = 0.0
    while not l1.content.complete and now < 30:
        now += 0.002
        for addr, p in ((S, s), (L1, l1)):
            for d, dst in p.datagrams_to_send(now):
                (l1 if dst == L1 else s).datagram_received(d, addr, now)
        l1.handle_timer(now)
    assert l1.content.complete
    ch = next(iter(l1.channels.values()))
    l1._log_have(list(range(1 << 16)) + [0])  # overflow: the log restarts
    assert len(l1.have_log) == 0 and l1.have_log_base > 0
    ch.ann.announced.reset_range(0, 40)
    ch.ann.version = -1
    out = l1._have_msgs(ch, 60)  # behind the log: one scan of the whole binmap
    assert [(m.start, m.end) for m in out] == [(0, 39)]
    assert ch.ann.pos == l1.have_log_base
