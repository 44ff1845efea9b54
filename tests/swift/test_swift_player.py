"""Player emulation (paper IV-A) with a fake clock."""

from swift.core.binmap import Binmap
from swift.core.player import Player


def test_startup_stall_and_finish() -> None:
    cs, rate = 1000, 1000.0  # one chunk per second
    p = Player(rate, cs, 20 * cs, start=0.0, prebuffer=5.0)
    have = Binmap()
    have.set_range(0, 3)
    p.tick(1.0, have)
    assert p.state == "buffering" and p.startup is None
    have.set_range(0, 6)
    p.tick(2.0, have)
    assert p.state == "playing" and p.startup == 2.0
    p.tick(5.0, have)  # played 3 s
    assert p.chunk == 3
    p.tick(9.0, have)  # would be at 7 but only 6 chunks: stall
    assert p.state == "buffering" and p.stalls == 1 and p.chunk == 6
    have.set_range(0, 20)
    p.tick(10.0, have)
    assert p.state == "playing" and abs(p.stall_time - 1.0) < 1e-9
    p.tick(30.0, have)
    assert p.done and p.summary()["stalls"] == 1
