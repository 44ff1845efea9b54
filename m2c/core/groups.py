"""Dynamic multicast groups of the M2C source (paper section 3.1; RFC 3738 3.1).

Geometry (our reconstruction, exact and shared by sender and receivers)
-----------------------------------------------------------------------
Time is cut into time slots of TSD seconds, index ``T = floor(t / TSD)``
(the paper's TSI).  Each slot is cut into K sub-slots of TSD/K seconds
(``sub_TSI``).  Rates are in packets per second.

The session has one *base group* (channel 0, never quiescent) and
``C = N + K * quiet`` *dynamic channels* (1..C).  At any time N of them are
active, at levels 1..N (level 1 lowest).  At every slot change the K lowest
become quiescent and K channels start at the K highest levels; a channel
then stays quiet ``quiet`` slots before it is reused (time for leaves to
propagate), so one channel hosts one *wave* every ``C/K`` slots.

With ``s = K * (t/TSD - T)`` the sub-slot position in the slot (0 <= s < K),
the cumulative rate of the base plus levels 1..l is

    C_l(t) = R_min * Q^(K - s + l)            (WaveSchedule, WEBRC-like)
    C_l(t) = R_min * Q^(K - floor(s) + l)     (StepSchedule, FLID-DL-like)

so every group decays continuously (or by steps) by a factor Q per
sub-slot, a group's cumulative rate at the end of a sub-slot equals the next
lower group's at its start (paper Fig. 2(a): tile ordering), the base group
rate goes from R_min*Q^K down to R_min within a slot and jumps back when the
K lowest waves go quiescent, and the top cumulative rate is
``R_max = R_min * Q^(K+N)``.  Q is chosen from the requested per-slot factor
(WEBRC's 1/P, default 4/3) and rounded so that R_max is met exactly.

Packet clock: ``count(c, t)`` is the integral of channel c's rate over
[0, t); packet p of channel c is due when the integral reaches p + 1/2, so
``index(c, t)`` packets are due before t and ``time_of(c, p)`` inverts it.
The sequencer and the network scheduler both use these, so tile sizes and
send times agree exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from m2c.fec.errors import FECError

__all__ = ["RateSchedule", "WaveSchedule", "StepSchedule", "make_schedule", "SCHEDULES"]


@dataclass(frozen=True)
class _Params:
    min_rate: float
    max_rate: float
    tsd: float
    k: int
    quiet: int
    w: int
    """slots a wave lives"""
    q: float
    """per-level (per sub-slot) rate factor"""


class RateSchedule:
    """Common geometry; subclasses give the shape within a sub-slot."""

    name = "abstract"

    def __init__(self, min_rate: float, max_rate: float, tsd: float = 1.0, k: int = 2,
                 per_slot_factor: float = 4 / 3, quiet: int = 1) -> None:
        if not (0 < min_rate < max_rate and tsd > 0 and k >= 1 and quiet >= 1
                and per_slot_factor > 1):
            raise FECError("need 0 < min_rate < max_rate, TSD > 0, K >= 1, quiet >= 1")
        ratio = max_rate / min_rate
        w = max(1, round(math.log(ratio) / math.log(per_slot_factor)) - 1)
        q = ratio ** (1.0 / (k * (w + 1)))
        self.p = _Params(min_rate, max_rate, tsd, k, quiet, w, q)
        self.per_slot_factor = per_slot_factor
        self.min_rate, self.max_rate, self.tsd, self.k = min_rate, max_rate, tsd, k
        self.levels = k * w
        """N: active dynamic levels"""
        self.channels = k * (w + quiet)
        """C: dynamic channels (1..C); channel 0 is the base group"""
        self.q = q
        self.sub = tsd / k
        """sub_TSI duration, TSD/K"""
        self._lam = k * math.log(q) / tsd
        self._amp = min_rate * (1 - 1 / q)  # wave rate = _amp * Q^top

    # ---- time slots -------------------------------------------------------
    def slot(self, t: float) -> int:
        """Time slot index (paper TSI) at time t."""
        return math.floor(t / self.tsd)

    def sub_slot(self, t: float) -> int:
        """Global sub-slot index floor(t / (TSD/K))."""
        return math.floor(t / self.sub)

    def _s(self, t: float) -> float:
        """Sub-slot position in the slot, 0 <= s < K (shape-specific)."""
        raise NotImplementedError

    # ---- levels and channels ---------------------------------------------
    def channel_of_level(self, level: int, t: float) -> int:
        """Channel carrying ``level`` (0 = base, 1..N) at time t."""
        if level == 0:
            return 0
        if not 1 <= level <= self.levels:
            raise FECError(f"level {level} outside 0..{self.levels}")
        k, w = self.k, self.p.w
        j = (level - 1) % k
        ts = self.slot(t) - w + 1 + (level - 1) // k
        return 1 + k * (ts % (w + self.p.quiet)) + j

    def level_of_channel(self, ch: int, t: float) -> int | None:
        """Level of channel ``ch`` at time t, None while it is quiescent."""
        if ch == 0:
            return 0
        if not 1 <= ch <= self.channels:
            return None
        k, w = self.k, self.p.w
        m0, j = divmod(ch - 1, k)
        T = self.slot(t)
        age = (T - m0) % (w + self.p.quiet)
        if age >= w:
            return None
        return k * (w - age - 1) + j + 1

    def quiescent_at(self, ch: int, t: float) -> float:
        """End time of channel ch's current wave (inf for the base group)."""
        if ch == 0:
            return math.inf
        lvl = self.level_of_channel(ch, t)
        if lvl is None:
            return t
        k = self.k
        remaining = (lvl - 1) // k + 1  # slots including the current one
        return (self.slot(t) + remaining) * self.tsd

    def cum_rate(self, level: int, t: float) -> float:
        """C_level(t): base plus levels 1..level, packets per second."""
        return float(self.min_rate * self.q ** (self.k - self._s(t) + level))

    def cum_bounds(self, level: int, a: float, b: float) -> tuple[float, float]:
        """(min, max) of C_level over [a, b), an interval inside one sub-slot."""
        s_a, s_b = self._s_span(a, b)
        return (self.min_rate * self.q ** (self.k - s_b + level),
                self.min_rate * self.q ** (self.k - s_a + level))

    def _s_span(self, a: float, b: float) -> tuple[float, float]:
        """Sub-slot positions at a and b, relative to the slot of (a+b)/2."""
        raise NotImplementedError

    def rate(self, ch: int, t: float) -> float:
        """Current rate of channel ch (0 while quiescent)."""
        lvl = self.level_of_channel(ch, t)
        if lvl is None:
            return 0.0
        if lvl == 0:
            return self.cum_rate(0, t)
        return self.cum_rate(lvl, t) - self.cum_rate(lvl - 1, t)

    def max_level_within(self, target: float, t: float) -> int:
        """Highest level whose cumulative rate at t is <= target (0 at least)."""
        c0 = self.cum_rate(0, t)
        if target <= c0:
            return 0
        lvl = math.floor(math.log(target / c0) / math.log(self.q) + 1e-9)
        return max(0, min(self.levels, lvl))

    # ---- packet clock -----------------------------------------------------
    def _wave_integral(self, u: float, a: float) -> float:
        """Packets a wave of start rate ``a`` sends in its first u seconds."""
        raise NotImplementedError

    def _wave_inverse(self, v: float, a: float) -> float:
        """u such that _wave_integral(u, a) == v (v within the wave total)."""
        raise NotImplementedError

    def _start_rate(self, ch: int) -> float:
        """Rate at the start of a wave of channel ch (base: at a slot start)."""
        if ch == 0:
            return float(self.min_rate * self.q ** self.k)
        j = (ch - 1) % self.k
        return float(self._amp * self.q ** (self.levels + 1 + j))

    def _channel_waves(self, ch: int) -> tuple[int, int]:
        """(first wave start slot m0, cycle length in slots)."""
        return (ch - 1) // self.k, self.p.w + self.p.quiet

    def count(self, ch: int, t: float) -> float:
        """Packets due on channel ch in [0, t) (fractional)."""
        if t <= 0:
            return 0.0
        tsd = self.tsd
        a = self._start_rate(ch)
        if ch == 0:
            full = self._wave_integral(tsd, a)
            T = math.floor(t / tsd)
            return T * full + self._wave_integral(t - T * tsd, a)
        m0, cyc = self._channel_waves(ch)
        life = self.p.w * tsd
        F = self._wave_integral
        m_first = math.floor((-self.p.w - m0) / cyc) + 1  # first wave alive after 0
        m_last = math.ceil((t / tsd - m0) / cyc) - 1  # last wave started before t
        if m_last < m_first:
            return 0.0

        def part(m: int) -> float:
            ts = (m0 + cyc * m) * tsd
            lo, hi = max(0.0, -ts), min(life, t - ts)
            return F(hi, a) - F(lo, a) if hi > lo else 0.0

        if m_last == m_first:
            return part(m_first)
        return part(m_first) + (m_last - m_first - 1) * F(life, a) + part(m_last)

    def index(self, ch: int, t: float) -> int:
        """Number of packets of channel ch due before t."""
        return math.floor(self.count(ch, t) + 0.5)

    def time_of(self, ch: int, p: int) -> float:
        """Due time of packet p (0-based) of channel ch."""
        v = p + 0.5
        tsd = self.tsd
        a = self._start_rate(ch)
        if ch == 0:
            full = self._wave_integral(tsd, a)
            T = math.floor(v / full)
            return T * tsd + self._wave_inverse(v - T * full, a)
        m0, cyc = self._channel_waves(ch)
        life = self.p.w * tsd
        total = self._wave_integral(life, a)
        m = math.floor((-self.p.w - m0) / cyc) + 1
        ts = (m0 + cyc * m) * tsd
        done = self._wave_integral(max(0.0, -ts), a)
        first = total - done
        if v <= first:
            return ts + self._wave_inverse(done + v, a)
        v -= first
        n = math.floor(v / total)
        r = v - n * total
        if r <= 0 and n > 0:
            n -= 1
            r += total
        return (m0 + cyc * (m + 1 + n)) * tsd + self._wave_inverse(r, a)


class WaveSchedule(RateSchedule):
    """WEBRC-like: every rate decays continuously, by Q per sub-slot (default)."""

    name = "wave"

    def _s(self, t: float) -> float:
        return self.k * (t / self.tsd - self.slot(t))

    def _s_span(self, a: float, b: float) -> tuple[float, float]:
        T = self.slot((a + b) / 2)
        return (max(0.0, self.k * (a / self.tsd - T)),
                min(float(self.k), self.k * (b / self.tsd - T)))

    def _wave_integral(self, u: float, a: float) -> float:
        return a / self._lam * (1.0 - math.exp(-self._lam * u))

    def _wave_inverse(self, v: float, a: float) -> float:
        x = 1.0 - v * self._lam / a
        if x <= 0:
            raise FECError("packet index beyond the wave")
        return -math.log(x) / self._lam


class StepSchedule(RateSchedule):
    """FLID-DL-like: rates are constant within a sub-slot and drop by Q at each."""

    name = "step"

    def _s(self, t: float) -> float:
        return float(math.floor(self.k * (t / self.tsd - self.slot(t))))

    def _s_span(self, a: float, b: float) -> tuple[float, float]:
        s = self._s((a + b) / 2)
        return s, s

    def _wave_integral(self, u: float, a: float) -> float:
        d, q = self.sub, self.q
        m = math.floor(u / d)
        full = a * d * (1 - q ** -m) / (1 - 1 / q)
        return float(full + a * q ** -m * (u - m * d))

    def _wave_inverse(self, v: float, a: float) -> float:
        d, q = self.sub, self.q
        # whole sub-slots: a*d*(1-q^-m)/(1-1/q) <= v
        x = 1 - v * (1 - 1 / q) / (a * d)
        m = math.floor(-math.log(x) / math.log(q)) if x > 0 else 10**9
        m = max(0, m)
        while m > 0 and a * d * (1 - q ** -m) / (1 - 1 / q) > v:
            m -= 1
        while a * d * (1 - q ** -(m + 1)) / (1 - 1 / q) <= v:
            m += 1
        base = a * d * (1 - q ** -m) / (1 - 1 / q)
        return float(m * d + (v - base) / (a * q ** -m))


SCHEDULES: dict[str, type[RateSchedule]] = {"wave": WaveSchedule, "step": StepSchedule}


def make_schedule(name: str = "wave", **kw: float) -> RateSchedule:
    """Build a registered rate schedule by name ("wave" default, "step")."""
    try:
        cls = SCHEDULES[name]
    except KeyError:
        raise FECError(f"unknown rate schedule {name!r}; have {sorted(SCHEDULES)}") from None
    return cls(**kw)  # type: ignore[arg-type]  # each schedule takes its own floats
