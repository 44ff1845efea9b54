"""Media player emulation for the VoD experiments (paper section IV-A).

"A video player that starts consuming the content ... as soon as the initial
5-second buffer has been filled ... After the buffer has been filled, the
player requests the content at its average bitrate ... it will pause and
resume once the buffer has been filled again."  Sans-IO: :meth:`Player.tick`
takes ``now`` and the binmap of verified chunks.
"""

from __future__ import annotations

from enum import Enum

from swift.core.binmap import Binmap


class PlayerState(str, Enum):
    """Where playback is; the values are the strings callers compared with.

    buffering --buffer filled--> playing --end of content--> done
    playing --buffer ran dry (a stall)--> buffering
    """

    BUFFERING = "buffering"
    PLAYING = "playing"
    DONE = "done"

    def __str__(self) -> str:
        return self.value


class Player:
    """Playback state: start-up time, number and duration of stalls."""

    def __init__(self, bitrate: float, chunk_size: int, size: int, start: float,
                 prebuffer: float = 5.0) -> None:
        self.bitrate = bitrate  # bytes/s
        self.cs = chunk_size
        self.size = size
        self.start = start
        self.prebuffer = prebuffer
        self.pos = 0.0  # bytes played
        self.state = PlayerState.BUFFERING
        self.startup: float | None = None
        self.stalls = 0
        self.stall_time = 0.0
        self._since = start
        self._last = start

    @property
    def chunk(self) -> int:
        """Chunk under the playback position (the VoD pickers' playpos)."""
        return int(self.pos) // self.cs

    @property
    def done(self) -> bool:
        return self.state is PlayerState.DONE

    def _contiguous_end(self, have: Binmap) -> int:
        e = have.find_empty(self.chunk)
        end = self.size if e is None else min(self.size, e * self.cs)
        return end

    def tick(self, now: float, have: Binmap) -> int:
        """Advance to ``now``; returns the playback chunk."""
        if self.state is PlayerState.DONE:
            return self.chunk
        avail = self._contiguous_end(have)
        if self.state is PlayerState.BUFFERING:
            need = min(self.size - self.pos, self.prebuffer * self.bitrate)
            if avail - self.pos >= need:
                if self.startup is None:
                    self.startup = now - self.start
                else:
                    self.stall_time += now - self._since
                self.state = PlayerState.PLAYING
                self._last = now
        elif self.state is PlayerState.PLAYING:
            new = self.pos + self.bitrate * (now - self._last)
            self._last = now
            if new >= self.size and avail >= self.size:
                self.pos = float(self.size)
                self.state = PlayerState.DONE
            elif new > avail:
                self.pos = float(avail)
                self.state = PlayerState.BUFFERING
                self.stalls += 1
                self._since = now
            else:
                self.pos = new
        return self.chunk

    def summary(self) -> dict[str, float | int | bool | None]:
        return {"startup_s": self.startup, "stalls": self.stalls,
                "stall_s": round(self.stall_time, 3), "finished": self.done}
