"""Pickers are one declared interface, registered by name (swift/core/picker.py).

The Peer learns a picker's VoD capability from ``Picker.windows`` (the
interface), never by probing for attributes: a picker registered under a new
name with windows gets the paper's deadlines and eq. 3 request sizes, one
without windows gets neither.
"""

from __future__ import annotations

import pytest
from swift_support import leecher, pump, seeder

from swift.core.binmap import Binmap
from swift.core.config import PeerConfig
from swift.core.picker import (
    PICKERS,
    LinearPicker,
    Picker,
    PickState,
    VodPicker,
    Windows,
    in_order,
    make_picker,
    register_picker,
)

SEED, LEECH = ("10.0.0.1", 6778), ("10.0.0.2", 6778)


class _Windowed(Picker):
    """In order from the playback position, with a 4-chunk high window."""

    name = "test-windowed"
    empty_means_none_wanted = True

    def __init__(self, high: int, mid: int) -> None:
        self.windows = Windows(4, mid, fast_only_high=True)

    def pick(self, st: PickState, peer: Binmap, want: int, fast: bool) -> list[int]:
        return in_order(st, peer, 0, st.n_chunks, want)


def test_the_cli_names_are_registered_and_built_with_the_config_windows() -> None:
    assert {"linear", "rarest", "std-vod", "vod"} <= set(PICKERS)
    vod = make_picker("vod", 16, 32)
    assert isinstance(vod, VodPicker) and vod.windows == Windows(16, 32, True)
    assert make_picker("std-vod", 8, 9).windows == Windows(8, 9, False)
    assert make_picker("linear", 16, 32).windows is None
    with pytest.raises(ValueError, match="unknown picker 'nope'"):
        make_picker("nope")


def test_the_interface_is_abstract() -> None:
    with pytest.raises(TypeError):
        Picker()  # type: ignore[abstract]  # pick() is not implemented


def _deadline_run(picker: str) -> dict[str, int]:
    data = bytes(range(256)) * 4 * 64  # 64 chunks of 1 KiB
    s = seeder(data, PeerConfig(seed=1))
    cfg = PeerConfig(seed=2, picker=picker, bitrate=1000.0, deadline_margin=100.0)
    lee = leecher(s.swarm_id, cfg)
    lee.set_playpos(0, buffering=False)
    lee.connect(SEED, 0.0)
    # until the size is known and requests for the window are out; then the
    # seeder is cut off: every high-window request misses its deadline
    # (paper III-C) if, and only if, the picker has a window
    now = pump({SEED: s, LEECH: lee}, timer_every=1000,
               until=lambda: lee.content.n_chunks is not None and any(
                   len(c.down.requests) > 1 for c in lee.channels.values()))
    assert lee.content.n_chunks == 64
    for _ in range(4):
        now += 0.1
        lee.handle_timer(now)
        lee.datagrams_to_send(now)  # to nobody
    return lee.stats


def test_a_registered_picker_with_windows_gets_deadlines() -> None:
    register_picker("test-windowed", _Windowed)
    register_picker("test-plain", lambda high, mid: LinearPicker())
    try:
        assert _deadline_run("test-windowed").get("deadline_missed", 0) > 0
        assert _deadline_run("test-plain").get("deadline_missed", 0) == 0
    finally:
        del PICKERS["test-windowed"], PICKERS["test-plain"]
