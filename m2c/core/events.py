"""Events and records returned by the M2C cores (frozen, slotted)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Tile:
    """One group during one sub_TSI interval of a buffer window (paper 5.2)."""

    channel: int
    """group g (0 = base)"""
    level: int
    """its level in the cumulative hierarchy during the interval"""
    start: float
    """interval start (sender time, s)"""
    end: float
    """interval end"""
    first: int
    """schedule index of its first packet on the channel"""
    count: int
    """S_{g,i}: packets the group sends in the interval"""
    min_cum: float
    """minimal cumulative rate over the tile (packets/s)"""
    max_cum: float
    """maximal cumulative rate over the tile"""


@dataclass(frozen=True, slots=True)
class Pdu:
    """A PDU {j, g, s} placed on the network schedule (paper 5.3)."""

    j: int
    """PDU number in the buffer (offset / PDU length)"""
    g: int
    """group (channel)"""
    s: int
    """sequence number relative to g within buffer_time"""
    index: int
    """schedule packet index on the channel"""
    due: float
    """send time (sender clock, s)"""
    slot: int
    """time slot index (paper TSI) at the send time"""
    buffer_id: int
    """sequencer header: buffer identifier"""
    offset: int
    """sequencer header: byte offset in the buffer"""
    data: bytes
    """the PDU bytes"""


@dataclass(frozen=True, slots=True)
class BufferReady:
    """Receiver side: a buffer is over (a newer buffer id arrived, or flush)."""

    buffer_id: int
    parts: tuple[tuple[int, bytes], ...]
    """every received part as (offset, bytes), sorted by offset"""
    prefix: bytes
    """the contiguous segment starting at offset 0"""


@dataclass(frozen=True, slots=True)
class Join:
    """Receiver congestion control: join this channel now."""

    channel: int


@dataclass(frozen=True, slots=True)
class Leave:
    """Receiver congestion control: leave this (quiescent) channel."""

    channel: int
