"""StreamSender refuses schedules the M2C CCI cannot carry, as file sessions do (wire-m2c.md)."""

from __future__ import annotations

import pytest

from m2c.aio.stream import StreamSender
from m2c.core.groups import WaveSchedule
from m2c.wire.constants import CCI_MAX_CHANNEL


def _groups(n: int) -> list[tuple[str, int]]:
    return [(f"239.192.{i >> 8}.{i & 255}", 47000) for i in range(n)]


def test_a_schedule_over_255_channels_is_refused_not_wrapped():
    s = WaveSchedule(30.0, 1500.0, tsd=0.5, k=20)  # 300 dynamic channels with these rates
    assert s.channels > CCI_MAX_CHANNEL
    with pytest.raises(ValueError, match="8-bit channel number"):
        StreamSender(s, _groups(s.channels + 1), 1)


def test_the_largest_schedule_that_fits_is_accepted():
    k = max(k for k in range(1, 40) if WaveSchedule(30.0, 1500.0, tsd=0.5, k=k).channels
            <= CCI_MAX_CHANNEL)
    s = WaveSchedule(30.0, 1500.0, tsd=0.5, k=k)
    tx = StreamSender(s, _groups(s.channels + 1), 1)
    assert tx.schedule.channels <= CCI_MAX_CHANNEL


def test_groups_must_match_the_channels():
    s = WaveSchedule(30.0, 1500.0, tsd=0.5, k=2)
    with pytest.raises(ValueError, match="one base group plus one per channel"):
        StreamSender(s, _groups(s.channels), 1)
