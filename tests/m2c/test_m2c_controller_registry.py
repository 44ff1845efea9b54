"""Rate controllers are one declared interface (m2c.core.controllers.RateController),
registered by name: ReceiverCC learns 'strict' and 'short start-up' from the class,
never by probing attributes, and the CLI's --controller choices are the registry."""

from __future__ import annotations

import math

import pytest

from m2c.core.controllers import (
    CONTROLLERS,
    M2CWindowController,
    RateController,
    WebrcRfcController,
    WindowPhase,
    make_controller,
    register_controller,
)
from m2c.core.groups import RateSchedule, make_schedule
from m2c.core.receiver_cc import ReceiverCC


class FixedRate(RateController):
    """A controller of a test: always the same target, RFC 3738's join rules."""

    name = "test-fixed"
    strict = True

    def __init__(self, schedule: RateSchedule, epoch: float, max_rate: float = math.inf) -> None:
        self.mrr = max_rate
        self.rate = schedule.min_rate * 4
        self.losses = 0

    @property
    def in_startup(self) -> bool:
        return False

    def on_packet_events(self, received: int, lost: int = 0) -> None:
        pass

    def on_loss_event(self, now: float, artt: float) -> None:
        self.losses += 1

    def on_joined_rate(self, rate: float) -> None:
        pass

    def on_lag(self, now: float, rr: float, artt: float) -> None:
        pass

    def on_epoch(self, now: float, rr: float, irr: float, artt: float) -> None:
        pass

    def target(self, artt: float) -> float:
        return self.rate


@pytest.fixture
def fixed_rate() -> object:
    """FixedRate registered for one test only: the registry is process-wide, and a name left
    in it shows up in every later test that lists the controllers (the experiments' --help)."""
    register_controller(FixedRate.name, FixedRate)
    try:
        yield FixedRate
    finally:
        CONTROLLERS.pop(FixedRate.name, None)


def test_the_built_in_controllers_are_registered_by_name() -> None:
    assert {"webrc", "webrc-rfc", "m2c"} <= set(CONTROLLERS)
    sched = make_schedule("wave", min_rate=10.0, max_rate=1000.0)
    for name in ("webrc", "webrc-rfc", "m2c"):
        ctl = make_controller(name, sched, 0.1)
        assert isinstance(ctl, RateController) and ctl.name == name


def test_a_registered_controller_drives_a_receiver_and_its_class_says_strict(fixed_rate) -> None:
    sched = make_schedule("wave", min_rate=10.0, max_rate=1000.0)
    rx = ReceiverCC(sched, controller="test-fixed")
    assert isinstance(rx.ctl, FixedRate)
    assert rx.strict and rx.startup_epoch == 1.0  # from the class, not getattr probing
    assert rx.target_rate() == pytest.approx(sched.min_rate * 4)


def test_strict_and_short_start_up_come_from_the_controller_classes() -> None:
    sched = make_schedule("wave", min_rate=10.0, max_rate=1000.0)
    assert ReceiverCC(sched, controller="webrc-rfc").strict is WebrcRfcController.strict is True
    m2c = ReceiverCC(sched, controller="m2c")
    assert not m2c.strict and m2c.startup_epoch == ReceiverCC.STARTUP_EPOCH
    assert ReceiverCC(sched, controller="webrc").startup_epoch == 1.0


def test_unknown_and_twice_registered_names_are_refused() -> None:
    sched = make_schedule("wave", min_rate=10.0, max_rate=1000.0)
    with pytest.raises(ValueError, match="unknown controller 'nope'; have"):
        make_controller("nope", sched, 0.1)
    with pytest.raises(ValueError, match="already registered"):
        register_controller("m2c", M2CWindowController)


def test_the_m2c_window_phase_is_an_enum() -> None:
    sched = make_schedule("wave", min_rate=10.0, max_rate=1000.0)
    ctl = M2CWindowController(sched, 0.1)
    assert ctl.phase is WindowPhase.FAST_START and ctl.in_startup
    ctl.on_epoch(0.0, 100.0, 100.0, 0.05)
    ctl.on_loss_event(0.1, 0.05)
    assert ctl.phase is WindowPhase.CONGESTION_AVOIDANCE and not ctl.in_startup
