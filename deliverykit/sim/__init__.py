"""A deterministic packet-level simulator in virtual time (docs/sim.md).

:mod:`~deliverykit.sim.scheduler` (event heap, seeded sub-streams),
:mod:`~deliverykit.sim.scenario` (the scenario as data, JSON),
:mod:`~deliverykit.sim.network` (links, queues, loss, pair delays, bottlenecks,
multicast) and :mod:`~deliverykit.sim.pump` (drives any
:class:`deliverykit.protocol.DatagramCore`, the same object that runs on sockets).
"""

from deliverykit.sim.network import Fate, Link, Network, node_address
from deliverykit.sim.pump import Application, Host, RunStats, Simulation, StuckCore
from deliverykit.sim.scenario import (
    BottleneckSpec,
    DistKind,
    Distribution,
    LinkClass,
    LinkSpec,
    LossKind,
    LossSpec,
    MulticastGroupSpec,
    NodeSpec,
    PairDelay,
    QueueUnit,
    Scenario,
    assign_classes,
    draw_stays,
)
from deliverykit.sim.scheduler import Scheduler, derive_seed

__all__ = ["Application", "BottleneckSpec", "DistKind", "Distribution", "Fate", "Host", "Link",
           "LinkClass", "LinkSpec", "LossKind",
           "LossSpec", "MulticastGroupSpec", "Network", "NodeSpec", "PairDelay", "QueueUnit",
           "RunStats", "Scenario", "Scheduler", "Simulation", "StuckCore", "assign_classes",
           "derive_seed", "draw_stays", "node_address"]
