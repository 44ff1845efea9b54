"""The carousel of a file near or above the receivers' memory bound (issue 18, 99 MB).

Fig. 5 at 99 MB: 24 LDPC blocks of 3,000 symbols, a 256 MiB receiver memory bound.
The bound used to count 3*k*E bytes for every partial block, so the session
carouselled a window of 20 blocks and then one of 4, restarting each window's
application scheduler on every visit: a 4 Mb/s receiver of the 8 Mb/s wave took
573 s with dup 171 % where 48 MB took 104 s.  These runs keep the shape (24 or 48
blocks, the memory bound in the same ratio to a block, 256 MiB / (3,000 * 1,428
bytes)) with blocks of 300 symbols, so they take seconds in the simulator.
"""

from __future__ import annotations

import pytest

from m2c import sim
from m2c.core.session import describe_session
from m2c.wire import codec

E = sim.PACKET - codec.packet_overhead()
B = 300
MEMORY = int((256 << 20) / (3000 * 1428) * B * E)
"""the 256 MiB bound scaled to blocks of B symbols"""


def _size(blocks: int) -> int:
    return blocks * B * E - E // 2


def _run(blocks: int, memory: int) -> dict:
    res = sim.run(sim.file_transfer(1, _size(blocks), down_bps=4e6, memory=memory,
                                    block_length=B, seed=0))
    r = res.receivers[0]
    assert r.verified, r.end
    return r.metrics


def test_99mb_shape_is_one_window_within_the_memory_bound():
    """A partial block costs 2*k*E (k source values, n - k partial sums; 1.95 k*E
    measured), plus one block's transient: 24 blocks fit the bound that 3*k*E each
    cut to 20."""
    sd = describe_session("f", _size(24), "0" * 64, session=1, fec_seed=1,
                          symbol_size=E, max_block_length=B, memory=MEMORY)
    assert sd.partition().blocks == 24
    assert sd.window_blocks == 0  # the whole object in one carousel
    assert 2 * B * E * 24 + 3 * B * E <= MEMORY


def test_99mb_shape_duplicates_as_an_unbounded_receiver():
    bounded = _run(24, MEMORY)
    free = _run(24, 1 << 40)
    # before: dup 170 %, time 2.5x the unbounded receiver's
    assert bounded["dup"] < 2 * free["dup"] + 2
    assert bounded["time"] < 1.1 * free["time"]


@pytest.mark.parametrize("blocks", [48])
def test_object_beyond_the_bound_is_carouselled_evenly(blocks):
    """Twice the 99 MB shape: windows are needed; they are even and each resumes its
    application scheduler where its last visit stopped, so a receiver at half the top
    rate gets new symbols on every visit (before: windows of 20, 20 and 8 blocks,
    each visit from the scheduler's first buffer: 9 % of the symbols were repeats,
    dup 265 %).  Beyond the bound a receiver still waits through the rest of a visit
    of a window it has decoded (dup 139 % here: it needs a little more than one visit
    of each window at half the top rate); the sender has no feedback to shorten it."""
    sd = describe_session("f", _size(blocks), "0" * 64, session=1, fec_seed=1,
                          symbol_size=E, max_block_length=B, memory=MEMORY)
    assert 0 < sd.window_blocks < blocks
    m = _run(blocks, MEMORY)
    assert m["raw"]["repeats"] < 0.02 * m["raw"]["symbols"]
    assert m["dup"] < 160
