"""Rate controllers of the receiver's congestion control, one interface, registered by name.

:class:`m2c.core.receiver_cc.ReceiverCC` asks its controller for a target rate and
tells it what it saw (packets, loss events, the joined rate, epochs, start-up exits);
it learns what the controller needs from the class, never by probing attributes:
``strict`` (RFC 3738 3.2.3.6's join rules) and ``short_startup`` (half-length start-up
epochs).  A new controller subclasses :class:`RateController` and is made known with
``register_controller(name, factory)`` (as aioquic's congestion/base.py); the CLI's
``--controller`` choices are the registry's names.  The three built in are described
in :mod:`m2c.core.receiver_cc`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from enum import Enum
from typing import ClassVar

from m2c.core.groups import RateSchedule

__all__ = ["RateController", "ControllerFactory", "CONTROLLERS", "register_controller",
           "make_controller", "WebrcController", "WebrcRfcController", "M2CWindowController",
           "WindowPhase", "reqn"]


class RateController(ABC):
    """What :class:`~m2c.core.receiver_cc.ReceiverCC` needs of a rate controller.

    Rates are packets per second, times seconds, ``artt`` the receiver's RTT estimate."""

    name: ClassVar[str]
    """the name it is registered and chosen by (``--controller``)"""
    strict: ClassVar[bool] = False
    """join by RFC 3738 3.2.3.6's rules only (one join at a time, start-up exits)"""
    short_startup: ClassVar[bool] = False
    """start-up epochs are ``ReceiverCC.STARTUP_EPOCH`` of an epoch (else whole epochs)"""
    random_loss: ClassVar[bool] = False
    """losses seen with no queue at the bottleneck are loss on the link, not congestion:
    they are not passed on (``ReceiverCC.RANDOM_LOSS_PKTS``); WEBRC's equation takes
    every loss, as RFC 3738 defines it"""
    pair_probe: ClassVar[bool] = False
    """start-up joins at once up to the packet-pair bottleneck estimate and stay below
    it until the first loss or lag (:meth:`on_capacity`)"""
    mrr: float
    """the maximum reception rate (MRR_P)"""

    @property
    @abstractmethod
    def in_startup(self) -> bool:
        """Still in start-up (no loss, lag or other exit yet)."""

    @abstractmethod
    def on_packet_events(self, received: int, lost: int = 0) -> None:
        """Packets received and lost since the last call."""

    @abstractmethod
    def on_loss_event(self, now: float, artt: float) -> None:
        """A loss event began."""

    @abstractmethod
    def on_joined_rate(self, rate: float) -> None:
        """The cumulative rate of the levels now joined."""

    @abstractmethod
    def on_lag(self, now: float, rr: float, artt: float) -> None:
        """The received rate ``rr`` lags the joined rate (the path is full)."""

    @abstractmethod
    def on_epoch(self, now: float, rr: float, irr: float, artt: float) -> None:
        """An epoch ended with received rate ``rr`` (``irr``: instantaneous)."""

    @abstractmethod
    def target(self, artt: float) -> float:
        """The target reception rate now."""

    def on_mrtt_increase(self, now: float, artt: float) -> None:
        """RFC 3738 3.2.2.6: the multicast RTT grew sharply (strict controllers)."""
        return None

    def on_max_rate(self, now: float, artt: float) -> None:
        """RFC 3738 3.2.2.6: the next join would pass the maximum rate (strict controllers)."""
        return None

    def on_capacity(self, now: float, rate: float, artt: float) -> None:
        """The packet-pair estimate of the bottleneck (``pair_probe`` controllers)."""
        return None


ControllerFactory = Callable[[RateSchedule, float, float], RateController]
"""(schedule, epoch in seconds, maximum reception rate) -> a new controller"""

_REGISTRY: dict[str, ControllerFactory] = {}
CONTROLLERS: dict[str, ControllerFactory] = _REGISTRY
"""the registered controllers by name (read it; add with :func:`register_controller`)"""


def register_controller(name: str, factory: ControllerFactory) -> None:
    """Make ``factory`` choosable as ``name`` (a name is registered once)."""
    if name in _REGISTRY:
        raise ValueError(f"controller {name!r} is already registered")
    _REGISTRY[name] = factory


def make_controller(name: str, schedule: RateSchedule, epoch: float,
                    max_rate: float = math.inf) -> RateController:
    """A new controller of the registered ``name``; ValueError names the choices."""
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown controller {name!r}; have {sorted(_REGISTRY)}") from None
    return factory(schedule, epoch, max_rate)


def reqn(artt: float, lossp: float) -> float:
    """RFC 3738 3.2.2.3 (TFRC's equation), packets per second."""
    return 1.0 / (artt * math.sqrt(lossp) * (0.816 + 7.35 * lossp * (1 + 32 * lossp ** 2)))


class WebrcController(RateController):
    """RFC 3738 equation-based target rate."""

    name = "webrc"
    NU = DELTA = 0.3

    def __init__(self, schedule: RateSchedule, epoch: float, max_rate: float = math.inf,
                 p: float = 0.75) -> None:
        self.p = p
        self.el, self.tsd = epoch, schedule.tsd
        self.g = self.NU * epoch / schedule.tsd
        self.w = self.x = self.y = 0.0
        self.z = 0.0
        self.lossp: float | None = None
        self.ssr = math.inf
        self.trr: float | None = None
        self.mrr = max_rate
        self.ssminr = schedule.min_rate * (1 + 1 / p + 1 / p ** 2)

    @property
    def in_startup(self) -> bool:
        return self.ssr == math.inf

    def _reset_loss_to(self, rate: float, artt: float) -> None:
        # choose LOSSP so that REQN(artt, LOSSP) == rate (bisection), RFC 3738 3.2.2.6
        lo, hi = 1e-9, 1.0
        for _ in range(60):
            mid = math.sqrt(lo * hi)
            if reqn(artt, mid) > rate:
                lo = mid
            else:
                hi = mid
        self.lossp = hi
        self.w = self.x = self.y = 0.0
        self.z = 1 / hi

    def on_packet_events(self, received: int, lost: int = 0) -> None:
        """RFC 3738 3.2.2.1: W counts every packet event, received or lost."""
        self.w += received + lost

    def on_loss_event(self, now: float, artt: float) -> None:
        if self.ssr == math.inf:
            self.ssr = max(self.ssminr, self.p * (self.trr or 0.0))
            self._reset_loss_to(max(self.trr or self.ssminr, 1e-3), artt)
        else:
            self.ssr = max(self.ssminr, self.p * (self.trr or 0.0))
        self.x += self.w
        self.w = 0.0
        self.y += 1

    def on_joined_rate(self, rate: float) -> None:
        """Cumulative rate of the joined levels (unused: the equation needs only loss and RTT)."""

    def on_lag(self, now: float, rr: float, artt: float) -> None:
        """The received rate lags the joined rate: leave start-up (RFC 3738 3.2.2.6)."""
        if self.ssr == math.inf:
            self.ssr = max(self.ssminr, self.trr or rr)
            self._reset_loss_to(max(self.trr or rr, 1e-3), artt)

    def on_epoch(self, now: float, rr: float, irr: float, artt: float) -> None:
        zeta = (math.sqrt(self.p) / (1 + math.sqrt(self.p)) if self.ssr == math.inf
                else 2 * self.el / (4 + self.tsd))
        self.trr = rr if self.trr is None else (1 - zeta) * self.trr + zeta * rr
        if self.lossp is not None:
            d, g = self.DELTA, self.g
            self.z = self.z * (1 - d) ** (g * self.y) + g * self.x / (g * self.y + 1) * (
                1 - (1 - d) ** (g * self.y + 1))
            self.x *= 1 - g
            self.y *= 1 - g
            z1 = self.z * (1 - d) ** self.y + self.x / (self.y + 1) * (1 - (1 - d) ** (self.y + 1))
            z2 = self.z * (1 - d) ** (self.y + 1) + (self.x + self.w + 1) / (self.y + 2) * (
                1 - (1 - d) ** (self.y + 2))
            self.lossp = 1 / max(z1, z2, 1.0)

    def target(self, artt: float) -> float:
        if self.ssr == math.inf:
            return min(4 * (self.trr or self.ssminr), self.mrr)
        eq = reqn(artt, self.lossp) if self.lossp else math.inf
        return min(max(self.ssr, eq), self.mrr)


class WebrcRfcController(WebrcController):
    """RFC 3738's controller with RFC 3738's join rules, every MUST of 3.2.2.6 and
    3.2.3.6 (``strict``: :class:`ReceiverCC` then joins as 3.2.3.6 says, see
    :meth:`ReceiverCC._rfc_join`), none of our start-up shortcuts.

    The four start-up exits of 3.2.2.6, each resetting LOSSP so that REQN(ARTT)
    equals TRR_P: a loss (SSR_P = max{SSMINR_P, P*TRR_P}, :meth:`on_loss_event`),
    a sharp MRTT increase (the same, :meth:`on_mrtt_increase`), the maximum
    reception rate reached (SSR_P = max{SSMINR_P, TRR_P}, :meth:`on_max_rate`),
    and the OPTIONAL TRR_P lag (SSR_P = max{SSMINR_P, TRR_P}, :meth:`on_lag`).
    """

    name = "webrc-rfc"
    strict = True

    def __init__(self, schedule: RateSchedule, epoch: float, max_rate: float = math.inf,
                 p: float = 0.75) -> None:
        super().__init__(schedule, epoch, max_rate, p)
        self.exits: list[str] = []
        """why start-up ended (at most one entry): loss, mrtt, max-rate, lag"""

    def _exit(self, why: str, ssr: float, artt: float) -> None:
        self.exits.append(why)
        self.ssr = max(self.ssminr, ssr)
        self._reset_loss_to(max(self.trr or self.ssminr, 1e-3), artt)

    def on_loss_event(self, now: float, artt: float) -> None:
        if self.ssr == math.inf:
            self.exits.append("loss")
        super().on_loss_event(now, artt)

    def on_mrtt_increase(self, now: float, artt: float) -> None:
        """3.2.2.6: a large increase of FirstTime-JoinTime between successive waves."""
        if self.ssr == math.inf:
            self._exit("mrtt", self.p * (self.trr or 0.0), artt)

    def on_max_rate(self, now: float, artt: float) -> None:
        """3.2.2.6: the next join would exceed MRR_P or SR_P (MUST)."""
        if self.ssr == math.inf:
            self._exit("max-rate", self.trr or 0.0, artt)

    def on_lag(self, now: float, rr: float, artt: float) -> None:
        """3.2.2.6's OPTIONAL rule: TRR_P greatly below ARR_P (SHOULD)."""
        if self.ssr == math.inf:
            self._exit("lag", self.trr or rr, artt)


class WindowPhase(Enum):
    """Where the M2C window is: growing from the received rate, or in AIMD."""

    FAST_START = "fast-start"
    CONGESTION_AVOIDANCE = "congestion-avoidance"


class M2CWindowController(RateController):
    """M2C-style TCP-like window turned into a target rate (see :mod:`m2c.core.receiver_cc`)."""

    name = "m2c"
    short_startup = True
    random_loss = True
    pair_probe = True

    def __init__(self, schedule: RateSchedule, epoch: float, max_rate: float = math.inf,
                 p: float = 0.75) -> None:
        self.cwnd: float | None = None
        self.ssthresh = math.inf
        self.mrr = max_rate
        self.min_rate = schedule.min_rate
        self.last_rr = 0.0
        self.phase = WindowPhase.FAST_START
        self.joined_rate = 0.0
        self.episode = schedule.tsd / schedule.k
        """longest congestion episode answered by one reduction: one sub_TSI, the
        period at which every group's rate has decayed by the level factor Q"""
        self.last_reduction = -math.inf
        self.reductions = 0
        self.ignored_events = 0
        """loss events while the joined rate was still above the target (not reductions)"""

    @property
    def in_startup(self) -> bool:
        return self.cwnd is None or self.cwnd < self.ssthresh

    def on_joined_rate(self, rate: float) -> None:
        """Cumulative rate of the joined levels (see :meth:`on_loss_event`)."""
        self.joined_rate = rate

    def on_packet_events(self, received: int, lost: int = 0) -> None:
        """Window growth per received packet (TCP-like)."""
        if self.cwnd is None:
            return
        if self.cwnd < self.ssthresh:
            self.cwnd += received
        else:
            self.phase = WindowPhase.CONGESTION_AVOIDANCE
            self.cwnd += received / self.cwnd

    def on_loss_event(self, now: float, artt: float) -> None:
        """Halve the window, once per congestion episode.

        A TCP sender reduces once per window of data (RFC 5681 3.2, RFC 6582):
        losses of packets sent before the reduction took effect are not new
        congestion.  Our reduction takes effect only as the joined groups decay
        (leave by waiting, seconds), so a loss event while the joined rate is
        still above the target belongs to the episode already answered, for at
        most one sub_TSI (losses that outlast it halve again: the overshoot left
        by waiting would otherwise take the share of competing TCP flows).
        Without this, a smooth multicast flow sharing a drop-tail queue with TCP
        halves several times per TCP cycle and gets far less than its share
        (docs/m2c-results.md).
        """
        if (self.cwnd is not None and self.joined_rate > self.target(artt)
                and now - self.last_reduction < self.episode):
            self.ignored_events += 1
            return
        if self.cwnd is None:
            self.cwnd = max(2.0, self.last_rr * artt)
        self.ssthresh = max(2.0, self.cwnd / 2)
        self.cwnd = self.ssthresh
        self.phase = WindowPhase.CONGESTION_AVOIDANCE
        self.reductions += 1
        self.last_reduction = now

    def on_lag(self, now: float, rr: float, artt: float) -> None:
        """The path is full before any loss: end slow start at what is received."""
        if self.cwnd is None or self.cwnd < self.ssthresh:
            self.cwnd = max(2.0, rr * artt)
            self.ssthresh = self.cwnd
            self.phase = WindowPhase.CONGESTION_AVOIDANCE

    def on_capacity(self, now: float, rate: float, artt: float) -> None:
        """Start-up ends at the bottleneck estimate: the window is what it carries in one
        RTT, and grows in congestion avoidance from there (a loss still halves it)."""
        if self.cwnd is None or self.cwnd < self.ssthresh:
            self.cwnd = max(2.0, self.cwnd or 0.0, rate * artt)
            self.ssthresh = self.cwnd
            self.phase = WindowPhase.CONGESTION_AVOIDANCE

    def on_epoch(self, now: float, rr: float, irr: float, artt: float) -> None:
        self.last_rr = rr
        if self.cwnd is None and rr > 0:
            self.cwnd = max(2.0, rr * artt)  # fast start from the received rate

    def target(self, artt: float) -> float:
        if self.cwnd is None:
            return self.min_rate
        return min(self.cwnd / artt, self.mrr)


for _cls in (WebrcController, WebrcRfcController, M2CWindowController):
    register_controller(_cls.name, _cls)
