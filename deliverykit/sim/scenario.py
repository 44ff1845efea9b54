"""Scenarios as data: nodes, access links, inter-group delays, bottlenecks, multicast groups.

One description both backends read (the simulator here; the namespace testbed
later): frozen dataclasses, loadable from and written to JSON.  Rates are in
bits per second, times in seconds, queue limits in bytes or packets as the
testbed's tbf counts them.  ``role`` and ``params`` belong to the protocol
adapter that runs the scenario (e.g. :mod:`swift.sim`: roles ``seeder`` and
``leecher``).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:  # typing's own from Python 3.11 (the package supports 3.10)
    from typing_extensions import Unpack

__all__ = [
    "BottleneckSpec",
    "DistKind",
    "Distribution",
    "LinkClass",
    "LinkSpec",
    "LossKind",
    "LossSpec",
    "MulticastGroupSpec",
    "NodeSpec",
    "PairDelay",
    "QueueUnit",
    "Scenario",
    "assign_classes",
    "draw_stays",
]


class LossKind(enum.Enum):
    """Random loss model of a link."""

    NONE = "none"
    #: independent loss with probability ``p``
    BERNOULLI = "bernoulli"
    #: two-state Markov chain (good/bad) with a loss probability per state
    GILBERT_ELLIOTT = "gilbert-elliott"


class QueueUnit(enum.Enum):
    """What a drop-tail queue limit counts."""

    BYTES = "bytes"
    PACKETS = "packets"


@dataclass(frozen=True, slots=True)
class LossSpec:
    """Loss on a link (applied after the queue: a lost packet used the link)."""

    kind: LossKind = LossKind.NONE
    #: Bernoulli loss probability
    p: float = 0.0
    #: Gilbert-Elliott: per-packet probability good -> bad
    p_gb: float = 0.0
    #: Gilbert-Elliott: per-packet probability bad -> good
    p_bg: float = 1.0
    #: Gilbert-Elliott: loss probability in the good state
    loss_good: float = 0.0
    #: Gilbert-Elliott: loss probability in the bad state
    loss_bad: float = 1.0

    def __post_init__(self) -> None:
        for name in ("p", "p_gb", "p_bg", "loss_good", "loss_bad"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"loss {name}={v} is not a probability in [0, 1]")
        if self.kind is LossKind.GILBERT_ELLIOTT and self.p_gb + self.p_bg == 0:
            raise ValueError("Gilbert-Elliott needs p_gb + p_bg > 0")

    @property
    def mean(self) -> float:
        """Long-run loss rate."""
        if self.kind is LossKind.BERNOULLI:
            return self.p
        if self.kind is LossKind.GILBERT_ELLIOTT:
            bad = self.p_gb / (self.p_gb + self.p_bg)
            return (1 - bad) * self.loss_good + bad * self.loss_bad
        return 0.0


@dataclass(frozen=True, slots=True)
class LinkSpec:
    """One direction of a link: serialisation at ``rate`` (or a token bucket of
    ``burst`` bytes at that rate, as tc-tbf), a drop-tail queue, delay, loss."""

    #: bits per second; None = infinitely fast (no serialisation, no queue)
    rate: float | None = None
    #: one-way propagation delay in seconds
    delay: float = 0.0
    #: drop-tail limit (bytes or packets, the packet in service included); None = unbounded
    queue: int | None = None
    queue_unit: QueueUnit = QueueUnit.BYTES
    loss: LossSpec = LossSpec()
    #: token bucket depth in bytes (tc-tbf's ``burst``): a packet leaves as soon as
    #: the bucket, refilled at ``rate`` up to ``burst``, holds its size; None = a
    #: pure serialiser (each packet takes size / rate after the one before)
    burst: int | None = None

    def __post_init__(self) -> None:
        if self.rate is not None and self.rate <= 0:
            raise ValueError(f"link rate {self.rate} must be positive (or null: unlimited)")
        if self.burst is not None and (self.rate is None or self.burst <= 0):
            raise ValueError(f"link burst {self.burst} needs a rate and must be positive "
                             "(or null: a pure serialiser)")
        if self.delay < 0:
            raise ValueError(f"link delay {self.delay} is negative")
        if self.queue is not None and self.queue <= 0:
            raise ValueError(f"queue limit {self.queue} must be positive (or null: unbounded)")


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """A host with its access link (``up``: what it sends, ``down``: what it receives)."""

    name: str
    #: adapter-defined (swift.sim: "seeder" or "leecher")
    role: str = "leecher"
    #: group name for pair delays and bottlenecks ("" = none)
    group: str = ""
    up: LinkSpec = LinkSpec()
    down: LinkSpec = LinkSpec()
    #: virtual time the node joins
    arrive: float = 0.0
    #: virtual time it leaves (None = stays)
    depart: float | None = None
    #: seconds it stays once it has finished (a swift leecher: after completing;
    #: churn, :func:`draw_stays`); None = the adapter's default
    stay: float | None = None

    def __post_init__(self) -> None:
        if self.stay is not None and not self.stay >= 0:
            raise ValueError(f"node {self.name}: stay {self.stay} must be >= 0 (or null)")


@dataclass(frozen=True, slots=True)
class PairDelay:
    """Extra one-way delay between two groups or two nodes, both directions
    (the Libswift paper's Fig. 5 inter-group delays)."""

    a: str
    b: str
    delay: float


@dataclass(frozen=True, slots=True)
class BottleneckSpec:
    """A shared link crossed by traffic between any node of groups ``a`` and any of
    ``b`` (one queue per direction, each with ``link``)."""

    name: str
    link: LinkSpec
    a: tuple[str, ...]
    b: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MulticastGroupSpec:
    """An IP multicast group: a join takes effect ``join_latency`` s after it is asked
    (IGMP report and graft), a leave ``leave_latency`` s after (traffic still arrives)."""

    ip: str
    port: int
    join_latency: float = 0.0
    leave_latency: float = 0.0

    @property
    def addr(self) -> tuple[str, int]:
        return (self.ip, self.port)


class DistKind(enum.Enum):
    """A distribution of times (stays after completion, :func:`draw_stays`)."""

    #: always ``a``
    FIXED = "fixed"
    #: exponential with mean ``a``
    EXPONENTIAL = "exponential"
    #: uniform on [``a``, ``b``]
    UNIFORM = "uniform"
    #: Pareto with minimum ``a`` and shape ``b`` (heavy tail: a few stay very long)
    PARETO = "pareto"


@dataclass(frozen=True, slots=True)
class Distribution:
    """A stated, seeded distribution of non-negative times (seconds)."""

    kind: DistKind = DistKind.FIXED
    a: float = 0.0
    b: float = 0.0

    def __post_init__(self) -> None:
        if not (self.a >= 0 and self.b >= 0) or math.isinf(self.a) or math.isinf(self.b):
            raise ValueError(f"{self.kind.value} distribution: parameters must be finite, >= 0")
        if self.kind is DistKind.UNIFORM and self.b < self.a:
            raise ValueError(f"uniform distribution: high {self.b} < low {self.a}")
        if self.kind is DistKind.PARETO and (self.a <= 0 or self.b <= 0):
            raise ValueError("Pareto distribution: minimum and shape must be positive")

    def draw(self, rng: random.Random) -> float:
        if self.kind is DistKind.FIXED:
            return self.a
        if self.kind is DistKind.EXPONENTIAL:
            return rng.expovariate(1.0 / self.a) if self.a > 0 else 0.0
        if self.kind is DistKind.UNIFORM:
            return rng.uniform(self.a, self.b)
        return self.a * rng.paretovariate(self.b)

    @property
    def mean(self) -> float:
        if self.kind in (DistKind.FIXED, DistKind.EXPONENTIAL):
            return self.a
        if self.kind is DistKind.UNIFORM:
            return (self.a + self.b) / 2
        return self.a * self.b / (self.b - 1) if self.b > 1 else math.inf

    def __str__(self) -> str:
        if self.kind is DistKind.FIXED:
            return f"fixed {self.a:g} s"
        if self.kind is DistKind.EXPONENTIAL:
            return f"exponential, mean {self.a:g} s"
        if self.kind is DistKind.UNIFORM:
            return f"uniform {self.a:g}-{self.b:g} s"
        return f"Pareto, minimum {self.a:g} s, shape {self.b:g}"

    @classmethod
    def parse(cls, text: str) -> Distribution:
        """``exp:30``, ``uniform:10,60``, ``pareto:5,1.5``, ``fixed:20`` or ``20``."""
        kind, sep, args = text.partition(":")
        if not sep:
            kind, args = "fixed", text
        names = {"exp": DistKind.EXPONENTIAL, **{k.value: k for k in DistKind}}
        try:
            k = names[kind.strip().lower()]
            vals = [float(x) for x in args.split(",") if x.strip()]
        except (KeyError, ValueError):
            raise ValueError(f"not a distribution: {text!r} (fixed:S, exp:MEAN, "
                             f"uniform:LO,HI, pareto:MIN,SHAPE)") from None
        want = 2 if k in (DistKind.UNIFORM, DistKind.PARETO) else 1
        if len(vals) != want:
            raise ValueError(f"{k.value} takes {want} parameter(s), not {text!r}")
        return cls(k, *vals)


@dataclass(frozen=True, slots=True)
class LinkClass:
    """One class of access link in a heterogeneous population: ``share`` of the
    nodes get ``up`` and ``down`` (:func:`assign_classes`)."""

    name: str
    share: float
    up: LinkSpec
    down: LinkSpec

    def __post_init__(self) -> None:
        if not self.share > 0:
            raise ValueError(f"link class {self.name}: share {self.share} must be positive")


class ScenarioChanges(TypedDict, total=False):
    """The fields :meth:`Scenario.replace` may change, with :class:`Scenario`'s types."""

    name: str
    nodes: tuple[NodeSpec, ...]
    pair_delays: tuple[PairDelay, ...]
    bottlenecks: tuple[BottleneckSpec, ...]
    multicast: tuple[MulticastGroupSpec, ...]
    seed: int
    duration: float
    overhead: int
    port: int
    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Scenario:
    """Everything about a run except the protocol's own code."""

    name: str
    nodes: tuple[NodeSpec, ...]
    pair_delays: tuple[PairDelay, ...] = ()
    bottlenecks: tuple[BottleneckSpec, ...] = ()
    multicast: tuple[MulticastGroupSpec, ...] = ()
    seed: int = 0
    #: virtual seconds after which the run stops (a safety bound)
    duration: float = 600.0
    #: bytes added to every datagram on every link (IPv4 20 + UDP 8)
    overhead: int = 28
    #: UDP port every node binds (addresses are (10.x.y.z, port))
    port: int = 7000
    #: adapter parameters (e.g. content size)
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError("node names must be unique")
        groups = {n.group for n in self.nodes if n.group}
        for pd in self.pair_delays:
            for end in (pd.a, pd.b):
                if end not in groups and end not in names:
                    raise ValueError(f"pair delay {pd.a}-{pd.b}: {end!r} is no group or node")
        for b in self.bottlenecks:
            missing = sorted(set(b.a + b.b) - groups)
            if missing:
                raise ValueError(f"bottleneck {b.name}: no node is in group(s) {missing}")
        addrs = [g.addr for g in self.multicast]
        if len(set(addrs)) != len(addrs):
            raise ValueError("multicast group addresses must be unique")

    def replace(self, **changes: Unpack[ScenarioChanges]) -> Scenario:
        return dataclasses.replace(self, **changes)

    # -- JSON ----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Scenario:
        try:
            return _build(cls, d)
        except (TypeError, KeyError) as e:
            raise ValueError(f"bad scenario: {e}") from None

    @classmethod
    def from_json(cls, text: str) -> Scenario:
        try:
            return cls.from_dict(json.loads(text))
        except json.JSONDecodeError as e:
            raise ValueError(f"scenario is not JSON: {e}") from None

    @classmethod
    def load(cls, path: str | Path) -> Scenario:
        return cls.from_json(Path(path).read_text())


def draw_stays(scenario: Scenario, dist: Distribution, role: str) -> Scenario:
    """Churn as data: every node of ``role`` gets a ``stay`` drawn from ``dist``, each
    from its own stream (the scenario's seed and the node's name, so adding a node
    changes no other node's draw).  The drawn times are in the scenario (JSON)."""
    from deliverykit.sim.scheduler import derive_seed
    nodes = tuple(
        dataclasses.replace(n, stay=dist.draw(random.Random(
            derive_seed(scenario.seed, f"stay/{n.name}")))) if n.role == role else n
        for n in scenario.nodes)
    return scenario.replace(nodes=nodes)


def assign_classes(scenario: Scenario, classes: tuple[LinkClass, ...], role: str) -> Scenario:
    """Heterogeneous access links as data: the nodes of ``role``, in order, get the
    classes' links in proportion to their shares, interleaved (smooth weighted
    round robin: every prefix of the nodes is as near the mix as it can be), and
    the class name as their ``group``.  Deterministic: no draw."""
    if not classes:
        raise ValueError("assign_classes needs at least one link class")
    total = sum(c.share for c in classes)
    credit = [0.0] * len(classes)
    nodes = []
    for n in scenario.nodes:
        if n.role == role:
            credit = [x + c.share / total for x, c in zip(credit, classes)]
            k = max(range(len(classes)), key=lambda i: (credit[i], -i))
            credit[k] -= 1.0
            c = classes[k]
            n = dataclasses.replace(n, up=c.up, down=c.down, group=c.name)
        nodes.append(n)
    return scenario.replace(nodes=tuple(nodes))


def _plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (tuple, list)):
        return [_plain(x) for x in obj]
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


def _build(cls: type, d: Any) -> Any:
    if not isinstance(d, dict):
        raise TypeError(f"{cls.__name__} must be an object, not {type(d).__name__}")
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(d) - set(known)
    if unknown:
        raise TypeError(f"{cls.__name__}: unknown field(s) {sorted(unknown)}")
    kw: dict[str, Any] = {}
    for name, value in d.items():
        kind = _FIELD_TYPES.get((cls, name))
        if kind is None:
            kw[name] = value
        elif isinstance(kind, tuple):  # a tuple of dataclasses
            if not isinstance(value, list):
                raise TypeError(f"{cls.__name__}.{name} must be a list")
            kw[name] = tuple(_build(kind[0], v) for v in value)
        elif kind == "strings":
            if not isinstance(value, list):
                raise TypeError(f"{cls.__name__}.{name} must be a list of names")
            kw[name] = tuple(str(v) for v in value)
        elif isinstance(kind, type) and issubclass(kind, enum.Enum):
            kw[name] = kind(value)
        else:
            kw[name] = _build(kind, value)
    return cls(**kw)


_FIELD_TYPES: dict[tuple[type, str], Any] = {
    (LossSpec, "kind"): LossKind,
    (LinkSpec, "queue_unit"): QueueUnit,
    (LinkSpec, "loss"): LossSpec,
    (NodeSpec, "up"): LinkSpec,
    (NodeSpec, "down"): LinkSpec,
    (BottleneckSpec, "link"): LinkSpec,
    (BottleneckSpec, "a"): "strings",
    (BottleneckSpec, "b"): "strings",
    (Scenario, "nodes"): (NodeSpec,),
    (Scenario, "pair_delays"): (PairDelay,),
    (Scenario, "bottlenecks"): (BottleneckSpec,),
    (Scenario, "multicast"): (MulticastGroupSpec,),
}
