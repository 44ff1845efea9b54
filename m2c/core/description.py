"""The session description: what a receiver needs to join an M2C session.

Its JSON form (``m2c send --sdp``, served over HTTP by ``--serve-sdp``) is
unchanged since session 2; here it is typed: the FEC parameters are a
:class:`FecParams` (scheme as :class:`FecScheme`), the rate schedule a
:class:`RateLadder`, each group a :class:`Group`.  Each part checks its own
fields when it is made, from JSON or from Python, and says which field is wrong
in one line (:class:`DescriptionError`, a ValueError); :class:`SessionDescription`
then checks what needs several parts together (the FEC code of every block of
the file, the CCI's 8-bit channel number, a group per channel).

Optional keys absent from a description stay absent when it is written again
(``fec.instance_id``, ``rates.unit``, ``rates.per_slot_factor``, the derived
``rates.w``/``q``/``levels``/``channels``: None here), so a description read
and written round-trips to the same JSON.
"""

from __future__ import annotations

import enum
import ipaddress
import json
import math
from dataclasses import MISSING, dataclass, fields
from typing import Any, NamedTuple, NoReturn

from m2c.core.groups import SCHEDULES, RateSchedule, make_schedule
from m2c.fec import ldpc, rs
from m2c.fec.errors import FECError
from m2c.fec.partition import Partition, n_for_block, partition
from m2c.fec.payload_id import LDPC_MAX_N, SBS_MAX_FIELD, ZFEC_INSTANCE_ID
from m2c.wire.constants import CCI_MAX_CHANNEL, Codepoint

__all__ = ["DescriptionError", "FecScheme", "FecParams", "RateLadder", "Group",
           "SessionDescription", "default_fec", "RATE_UNIT", "FIRST_LEVEL",
           "LDPC_MAX_BLOCKS", "LDPC_MAX1_B", "DEFAULT_PER_SLOT_FACTOR"]

LDPC_MAX_BLOCKS = 1 << 12
"""RFC 5170 4.1: the LDPC FEC Payload ID's Source Block Number is 12 bits"""
LDPC_MAX1_B = 1 << 19
"""RFC 5170 5.2: max1_B = 2^(20 - ceil(log2(1/CR))) for 1/2 <= CR < 1 (our n = 2k)"""
RATE_UNIT = "packets/s"
"""the unit of the session description's rates (``rates.unit``)"""
DEFAULT_PER_SLOT_FACTOR = 4 / 3
"""WEBRC's 1/P: the rate factor per time slot of descriptions without ``per_slot_factor``"""
FIRST_LEVEL = 4
"""Default symbols per first level (see :class:`m2c.core.filetx.FileSender`).  With 1, a
receiver's share of a 1/min_rate buffer swings between ~0.2x and 2x its mean from buffer to
buffer, and the Birk-Crupnicoff offsets of the deeper levels it holds now and then repeat
symbols before it has k + eps of them; 4 makes each buffer's prefix longer and steadier,
which cuts those repeats (``python -m m2c.experiments.dupsim``; docs/m2c-results.md)."""


class DescriptionError(ValueError):
    """A session description that cannot be used; the message names the field."""


def _fail(what: str) -> NoReturn:
    raise DescriptionError(f"session description: {what}")


def _need(cond: bool, what: str) -> None:
    if not cond:
        _fail(what)


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_num(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _is_ipv4(text: object, multicast: bool = False) -> bool:
    if not isinstance(text, str):
        return False
    try:
        a = ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return a.is_multicast or not multicast


def _members(value: object, where: str, cls: type, lacks: str = "lacks") -> dict[str, Any]:
    """``value`` as keyword arguments of the dataclass ``cls``: a JSON object with every
    field that has no default and no other key (the error names the first wrong key)."""
    if not isinstance(value, dict):
        _fail(f"{where} must be an object")
    missing = [f.name for f in fields(cls) if f.name not in value
               and f.default is MISSING and f.default_factory is MISSING]
    if missing:
        _fail(f"{where} {lacks} {missing[0]!r}")
    unknown = sorted(set(value) - {f.name for f in fields(cls)})
    if unknown:
        _fail(f"{where} has unknown keys {', '.join(map(str, unknown))}")
    nulls = [k for k, v in value.items() if v is None]
    if nulls:  # None stands for "absent" here; a written null is no older description
        _fail(f"{where} {nulls[0]} is null")
    return dict(value)


def _without_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


# --- FEC ---------------------------------------------------------------------------

class FecScheme(enum.Enum):
    """The FEC code of a session (its JSON name is the value)."""

    LDPC = "ldpc"
    """LDPC-Staircase, RFC 5170 (FEC Encoding ID 3)"""
    RS = "rs"
    """Reed-Solomon by zfec under the Under-Specified FEC Encoding ID 129 (RFC 5445)"""

    @property
    def codepoint(self) -> Codepoint:
        """The LCT codepoint (FEC Encoding ID) its packets carry."""
        return Codepoint.LDPC_STAIRCASE if self is FecScheme.LDPC else \
            Codepoint.SMALL_BLOCK_SYSTEMATIC

    @classmethod
    def parse(cls, value: object) -> FecScheme:
        """The scheme named ``value`` ('ldpc' or 'rs'); DescriptionError if none."""
        if isinstance(value, FecScheme):
            return value
        for s in cls:
            if s.value == value:
                return s
        _fail(f"unknown FEC scheme {value!r}: {' or '.join(repr(s.value) for s in cls)}")


@dataclass(frozen=True, slots=True)
class FecParams:
    """The FEC Object Transmission Information of the file (JSON ``fec``)."""

    scheme: FecScheme
    symbol_size: int
    """E, bytes per symbol"""
    max_block_length: int
    """B, source symbols per block at most"""
    max_n: int
    """encoding symbols per block at most (RFC 5170 5.5 / RFC 5510)"""
    n1: int
    """LDPC-Staircase's N1 (0 for RS)"""
    seed: int
    """LDPC-Staircase's PRNG seed (0 for RS)"""
    instance_id: int | None = None
    """RS only: the FEC Instance ID of our zfec code under FEC Encoding ID 129 (RFC 5445
    5.2.2.2, part of the FEC OTI); None where older descriptions omit it"""

    def __post_init__(self) -> None:
        _need(isinstance(self.scheme, FecScheme), f"unknown FEC scheme {self.scheme!r}")
        for key, v in (("symbol_size", self.symbol_size), ("max_n", self.max_n),
                       ("max_block_length", self.max_block_length), ("n1", self.n1),
                       ("seed", self.seed)):
            _need(_is_int(v), f"fec {key} must be an integer")
        _need(1 <= self.symbol_size <= 0xFFFF, "fec symbol_size must be 1..65535")
        _need(1 <= self.max_block_length <= self.max_n,
              "fec needs 1 <= max_block_length <= max_n")
        if self.scheme is FecScheme.RS:
            # RFC 5445 5.2.2.2: the FEC Instance ID names the code under ID 129
            _need(self.instance_id is None or (_is_int(self.instance_id)
                                               and self.instance_id == ZFEC_INSTANCE_ID),
                  f"fec instance_id {self.instance_id!r} is not our zfec Reed-Solomon "
                  f"({ZFEC_INSTANCE_ID})")
            _need(self.max_n <= SBS_MAX_FIELD,
                  f"fec max_block_length {self.max_block_length} and max_n {self.max_n} must "
                  f"fit the 16-bit fields of FEC Encoding ID 129's FEC OTI: at most "
                  f"{SBS_MAX_FIELD} (RFC 5445 5.2.2.2)")
        else:
            _need(self.instance_id is None, "fec instance_id is only for 'rs' (FEC Encoding "
                  "ID 129); LDPC-Staircase (ID 3) is fully specified")
            _need(self.max_n <= LDPC_MAX_N,
                  f"fec max_n {self.max_n} does not fit EXT_FTI's 20-bit max_n field: at most "
                  f"2^20 - 1 = {LDPC_MAX_N} (RFC 5170 Figure 2)")

    @classmethod
    def from_json_dict(cls, value: object) -> FecParams:
        d = _members(value, "fec", cls)
        return cls(**{**d, "scheme": FecScheme.parse(d["scheme"])})

    def to_json_dict(self) -> dict[str, Any]:
        return _without_none({"scheme": self.scheme.value, "symbol_size": self.symbol_size,
                              "max_block_length": self.max_block_length, "max_n": self.max_n,
                              "n1": self.n1, "seed": self.seed,
                              "instance_id": self.instance_id})

    def block_n(self, k: int) -> int:
        """Encoding symbols of a block of ``k`` source symbols."""
        if self.scheme is FecScheme.RS:
            return min(256, int(k * self.max_n // self.max_block_length))
        # RFC 5170 5.5, exactly: n = floor(k * max_n / B); default_fec chooses max_n so
        # that n - k >= N1 for every block of the file (SessionDescription checks it)
        return n_for_block(k, self.max_n, self.max_block_length)

    def check_block(self, k: int) -> None:
        """FECError unless a block of ``k`` source symbols is a valid code (the FEC layer
        checks k < n <= 2^20, n - k >= N1, the seed...)."""
        n = self.block_n(k)
        if self.scheme is FecScheme.RS:
            rs.RSParams(k, n, self.symbol_size)
        else:
            ldpc.LDPCParams(k, n, self.symbol_size, self.n1, self.seed)


def default_fec(size: int, scheme: FecScheme | str = FecScheme.LDPC, symbol_size: int = 1400,
                max_block_length: int | None = None, seed: int = 1, n1: int = 5) -> FecParams:
    """FEC parameters for a file: code rate 1/2 (the paper's n = 2k).

    LDPC: N1 = 5 (N1m3 = 2) because our receivers finish with Gaussian
    elimination (RFC 5170 4.2.3 suggests N1m3 > 0 then): ~1.01 k symbols instead
    of ~1.07 k with N1 = 3 (bench m2c_fec).  Blocks of at most 3,000 source
    symbols: fewer, larger blocks waste fewer symbols of already decoded blocks
    while the last one finishes (``dupsim``: 0.2-1.3 % fewer symbols with one
    block of 2,946 than with two of 1,473).  Session 2 went back to 2,000
    because the last block's final elimination, on the critical path, took
    0.25-0.3 s in Python at k = 2,946; in C it takes 6-8 ms
    (``python -m m2c.fec.elimbench --k 2946 --size 1424``), docs/m2c-results.md.
    """
    if FecScheme.parse(scheme) is FecScheme.RS:
        B = max_block_length or 128
        return FecParams(FecScheme.RS, symbol_size, B, 2 * B, 0, 0, ZFEC_INSTANCE_ID)
    B = max_block_length or 3000
    T = -(-size // symbol_size) if symbol_size > 0 else 0
    if T > LDPC_MAX_BLOCKS * B:
        # RFC 5170 4.1/4.2.2: at most 2^12 source blocks; grow B (up to 5.2's max1_B)
        need = -(-T // LDPC_MAX_BLOCKS)
        if max_block_length is not None or need > LDPC_MAX1_B:
            raise FECError(
                f"{size} bytes need {-(-T // B)} source blocks of at most {B} symbols of "
                f"{symbol_size} bytes; LDPC-Staircase allows 2^12 blocks (RFC 5170 4.2.2: "
                f"at most 2^12*B*E = "
                f"{LDPC_MAX_BLOCKS * min(max(B, need), LDPC_MAX1_B) * symbol_size}"
                f" bytes{'' if need > LDPC_MAX1_B else ' with this B'}): use a larger "
                f"{'symbol size' if need > LDPC_MAX1_B else 'block length or none'}")
        B = need
    # RFC 5170 5.4: max_n = ceil(B / CR) = 2B, but EXT_FTI's max_n field has 20 bits:
    # with B = max1_B = 2^19 (5.2), 2^20 - 1 (n = 2k - 1 for a full block)
    max_n = min(2 * B, LDPC_MAX_N)
    # RFC 5170 5.5 n = floor(k*max_n/B) must leave n - k >= N1 rows for the N1 ones of
    # every column (6.2): only a block shorter than N1 (a file of < N1 symbols) needs
    # a max_n above 2B, i.e. a code rate below 1/2 for that tiny file
    if T:
        k_min = partition(size, B, symbol_size).a_small or 1
        if n_for_block(k_min, max_n, B) - k_min < n1:
            max_n = -(-(k_min + n1) * B // k_min)
            if max_n > LDPC_MAX_N:
                raise FECError(
                    f"a block of {k_min} symbols needs max_n = {max_n} with B = {B} for "
                    f"n - k >= N1 = {n1}, beyond EXT_FTI's 20-bit max_n field "
                    f"({LDPC_MAX_N}): use a smaller block length or none")
    return FecParams(FecScheme.LDPC, symbol_size, B, max_n, n1, seed)


# --- rates -------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RateLadder:
    """The layered rate schedule (JSON ``rates``): rates in packets per second, all
    groups together for ``max_rate``, ``tsd`` in seconds.  ``m2c send`` converts its
    kbit/s options with the symbol size and header bytes.  ``w``, ``q``, ``levels``
    and ``channels`` are what the sender's schedule derived (checked against ours)."""

    schedule: str
    """the schedule's name in :data:`m2c.core.groups.SCHEDULES` ('wave', 'step')"""
    min_rate: float
    max_rate: float
    tsd: float
    k: int
    quiet: int
    w: int | None = None
    per_slot_factor: float | None = None
    """None: absent, :data:`DEFAULT_PER_SLOT_FACTOR`"""
    q: float | None = None
    levels: int | None = None
    channels: int | None = None
    unit: str | None = None
    """always :data:`RATE_UNIT`; None where session-2 descriptions omit it"""

    def __post_init__(self) -> None:
        _need(isinstance(self.schedule, str) and self.schedule in SCHEDULES,
              f"rates schedule {self.schedule!r} is unknown; have {sorted(SCHEDULES)}")
        for key, x in (("min_rate", self.min_rate), ("max_rate", self.max_rate),
                       ("tsd", self.tsd)):
            _need(_is_num(x), f"rates {key} must be a number")
        _need(_is_int(self.k) and _is_int(self.quiet), "rates k and quiet must be integers")
        _need(self.per_slot_factor is None or _is_num(self.per_slot_factor),
              "rates per_slot_factor must be a number")
        _need(self.q is None or _is_num(self.q), "rates q must be a number")
        derived = (("w", self.w), ("levels", self.levels), ("channels", self.channels))
        for key, v in derived:
            _need(v is None or _is_int(v), f"rates {key} must be an integer")
        _need(self.unit is None or self.unit == RATE_UNIT,
              f"rates unit {self.unit!r}: only {RATE_UNIT!r} (packets per second) is known")
        try:
            sched = self.rate_schedule()
        except (TypeError, ValueError, ArithmeticError) as exc:  # 5e-324 packets/s: overflow
            _fail(f"bad rate schedule: {exc}")
        for (key, theirs), ours in zip(derived, (sched.p.w, sched.levels, sched.channels),
                                        strict=True):
            _need(theirs is None or theirs == ours,
                  f"rates {key} {theirs} is not what its min_rate, max_rate, k, quiet and "
                  f"per_slot_factor make ({ours})")

    @classmethod
    def of(cls, sched: RateSchedule) -> RateLadder:
        """The description of ``sched`` (with its derived values and unit)."""
        return cls(sched.name, sched.min_rate, sched.max_rate, sched.tsd, sched.k,
                   sched.p.quiet, sched.p.w, sched.per_slot_factor, sched.q, sched.levels,
                   sched.channels, RATE_UNIT)

    @classmethod
    def from_json_dict(cls, value: object) -> RateLadder:
        return cls(**_members(value, "rates", cls, lacks="lack"))

    def to_json_dict(self) -> dict[str, Any]:
        return _without_none({
            "schedule": self.schedule, "min_rate": self.min_rate, "max_rate": self.max_rate,
            "tsd": self.tsd, "k": self.k, "quiet": self.quiet, "w": self.w,
            "per_slot_factor": self.per_slot_factor, "q": self.q, "levels": self.levels,
            "channels": self.channels, "unit": self.unit})

    def rate_schedule(self) -> RateSchedule:
        """The schedule the sender and every receiver follow."""
        return make_schedule(self.schedule, min_rate=self.min_rate, max_rate=self.max_rate,
                             tsd=self.tsd, k=self.k, quiet=self.quiet,
                             per_slot_factor=(DEFAULT_PER_SLOT_FACTOR if self.per_slot_factor
                                              is None else self.per_slot_factor))


class Group(NamedTuple):
    """One channel's multicast group (JSON ``[address, port]``)."""

    address: str
    port: int

    @classmethod
    def parse(cls, value: object) -> Group:
        if not (isinstance(value, (list, tuple)) and len(value) == 2
                and _is_ipv4(value[0], multicast=True) and _is_int(value[1])
                and 0 < value[1] < 65536):
            _fail(f"group {value!r} is not [IPv4 multicast address, port]")
        return cls(str(value[0]), int(value[1]))


# --- the whole description ---------------------------------------------------------

@dataclass
class SessionDescription:
    """What a receiver needs to join: read from a JSON file or an HTTP URL."""

    session: int
    """LCT TSI"""
    toi: int
    name: str
    size: int
    sha256: str
    fec: FecParams
    rates: RateLadder
    groups: list[Group]
    """one per channel, index = channel (0 = base group); [address, port] lists are
    taken and turned into :class:`Group`"""
    interface: str = "127.0.0.1"
    """the sender's interface address (IP_MULTICAST_IF); never a receiver's join interface"""
    levels: int = 0
    """application scheduler levels N"""
    window_blocks: int = 0
    """source blocks carouselled together (0: all); bounds sender and receiver memory"""
    first_level: int = FIRST_LEVEL
    """symbols of the hierarchy's first level: buffer_time = first_level / min_rate
    (paper 5.1); the sender's application scheduler has one level per symbol"""
    source: str = ""
    """the sender's IP address (RFC 5775 4.4: receivers accept only datagrams from
    (source, TSI)); "" in descriptions written before it existed: no source check"""

    def to_json(self) -> str:
        d: dict[str, Any] = {
            "session": self.session, "toi": self.toi, "name": self.name, "size": self.size,
            "sha256": self.sha256, "fec": self.fec.to_json_dict(),
            "rates": self.rates.to_json_dict(), "groups": [list(g) for g in self.groups],
            "interface": self.interface, "levels": self.levels,
            "window_blocks": self.window_blocks, "first_level": self.first_level,
            "source": self.source}
        return json.dumps(d, indent=1)

    @classmethod
    def from_json(cls, text: str | bytes) -> SessionDescription:
        """Parse and validate; anything malformed raises DescriptionError (a ValueError)
        naming the field."""
        d = json.loads(text)
        if not isinstance(d, dict) or d.get("session") is None:
            raise DescriptionError("not an M2C session description")
        missing = [f.name for f in fields(cls) if f.name not in d
                   and f.default is MISSING and f.default_factory is MISSING]
        if missing:
            raise DescriptionError(f"session description lacks {', '.join(missing)}")
        unknown = sorted(set(d) - {f.name for f in fields(cls)})
        if unknown:
            raise DescriptionError(f"session description has unknown keys {', '.join(unknown)}")
        groups = d["groups"]
        _need(isinstance(groups, list), "groups must be a list of [address, port]")
        return cls(**{**d, "fec": FecParams.from_json_dict(d["fec"]),
                      "rates": RateLadder.from_json_dict(d["rates"]),
                      "groups": [Group.parse(g) for g in groups]})

    def __post_init__(self) -> None:
        _need(isinstance(self.fec, FecParams),
              "fec must be FecParams (FecParams.from_json_dict reads the JSON form)")
        _need(isinstance(self.rates, RateLadder),
              "rates must be a RateLadder (RateLadder.from_json_dict reads the JSON form)")
        _need(isinstance(self.groups, list), "groups must be a list of [address, port]")
        self.groups = [Group.parse(g) for g in self.groups]
        self.validate()

    def validate(self) -> None:
        """Check the fields and what needs several of them together (ValueError if not)."""
        _need(_is_int(self.session) and 0 <= self.session < 1 << 32,
              "session (TSI) must be 0..2^32-1")
        _need(_is_int(self.toi) and 0 <= self.toi < 1 << 32, "toi must be 0..2^32-1")
        _need(isinstance(self.name, str), "name must be a string")
        _need(_is_int(self.size) and self.size >= 0, "size must be a non-negative integer")
        _need(isinstance(self.sha256, str) and len(self.sha256) == 64
              and all(c in "0123456789abcdefABCDEF" for c in self.sha256),
              "sha256 must be 64 hex digits")
        _need(_is_ipv4(self.interface), "interface must be an IPv4 address")
        _need(self.source == "" or (_is_ipv4(self.source)
                                    and not _is_ipv4(self.source, multicast=True)
                                    and self.source != "0.0.0.0"),
              "source must be the sender's unicast IPv4 address, not 0.0.0.0 (or empty)")
        _need(_is_int(self.levels) and self.levels >= 0, "levels must be >= 0")
        _need(_is_int(self.window_blocks) and self.window_blocks >= 0,
              "window_blocks must be >= 0")
        _need(_is_int(self.first_level) and self.first_level >= 1, "first_level must be >= 1")
        _need(self.size < 1 << 48, "size does not fit the FEC OTI's 48-bit Transfer-Length")
        self._check_channels()
        self._check_blocks()

    def _check_channels(self) -> None:
        sched, r = self.schedule(), self.rates
        # the M2C CCI's channel number is 8 bits (docs/wire-m2c.md): refuse, never wrap
        _need(sched.channels <= CCI_MAX_CHANNEL,
              f"{sched.channels} dynamic channels (rates k = {r.k}, min_rate..max_rate "
              f"{r.min_rate:g}..{r.max_rate:g} packets/s): the M2C CCI's 8-bit channel "
              f"number holds the base group 0 and channels 1..{CCI_MAX_CHANNEL} at most; "
              f"use a smaller k (m2c send --k) or a narrower rate range")
        _need(len(self.groups) >= sched.channels + 1,
              f"{sched.channels + 1} groups needed (base + {sched.channels} channels), "
              f"got {len(self.groups)}")

    def _check_blocks(self) -> None:
        pt = self.partition()
        if self.fec.scheme is FecScheme.LDPC:
            # RFC 5170 4.1: the SBN is 12 bits, so at most 2^12 blocks (4.2.2)
            _need(pt.blocks <= LDPC_MAX_BLOCKS,
                  f"{pt.blocks} source blocks; LDPC-Staircase's 12-bit SBN allows "
                  f"{LDPC_MAX_BLOCKS} (RFC 5170 4.2.2: transfer length <= 2^12*B*E)")
        else:
            _need(pt.blocks <= 1 << 32, f"{pt.blocks} source blocks; the 32-bit SBN of FEC "
                  f"Encoding ID 129 allows 2^32 (RFC 5445 5.2.1)")
        for k in {pt.a_large, pt.a_small} - {0}:
            try:
                self.fec.check_block(k)
            except FECError as exc:  # a ValueError
                _fail(f"FEC parameters of a block with k = {k}, n = {self.block_n(k)}: {exc}")

    def schedule(self) -> RateSchedule:
        return self.rates.rate_schedule()

    def partition(self) -> Partition:
        return partition(self.size, self.fec.max_block_length, self.fec.symbol_size)

    def block_n(self, k: int) -> int:
        return self.fec.block_n(k)

    @property
    def codepoint(self) -> Codepoint:
        return self.fec.scheme.codepoint
