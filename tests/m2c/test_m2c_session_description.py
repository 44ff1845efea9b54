"""The session description is typed (issue 16 item 8): FEC parameters, rate ladder and
groups are frozen dataclasses parsed from the JSON form with one clear error per field,
and the JSON form on disk and on the wire is the one older senders wrote.

tests/m2c/data/session-ldpc-2026-11.json was written by ``describe_session`` before the
change (LDPC, today's keys); session-rs-older.json is a Reed-Solomon description as
older senders wrote it: no ``fec.instance_id``, no ``rates.unit``, no
``rates.per_slot_factor``, no ``source``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from m2c.core.description import (
    DescriptionError,
    FecParams,
    FecScheme,
    Group,
    RateLadder,
    SessionDescription,
)
from m2c.core.groups import make_schedule
from m2c.wire.constants import Codepoint

DATA = Path(__file__).parent / "data"


def test_a_description_written_before_the_change_round_trips_to_the_same_text():
    text = (DATA / "session-ldpc-2026-11.json").read_text()
    sd = SessionDescription.from_json(text)
    assert sd.to_json() == text.rstrip("\n")
    assert SessionDescription.from_json(sd.to_json()) == sd


def test_an_older_description_keeps_its_absent_keys_absent():
    text = (DATA / "session-rs-older.json").read_text()
    old = json.loads(text)
    sd = SessionDescription.from_json(text)
    again = json.loads(sd.to_json())
    assert again["fec"] == old["fec"] and again["rates"] == old["rates"]
    assert again["groups"] == old["groups"]
    # the top level has always been written whole: only the source ("" = no check) is added
    assert {k: v for k, v in again.items() if k != "source"} == old and again["source"] == ""
    assert sd.fec.instance_id is None and sd.rates.unit is None
    assert sd.rates.per_slot_factor is None
    assert sd.schedule().per_slot_factor == pytest.approx(4 / 3)


def test_the_parts_are_typed():
    sd = SessionDescription.from_json((DATA / "session-ldpc-2026-11.json").read_text())
    assert isinstance(sd.fec, FecParams) and sd.fec.scheme is FecScheme.LDPC
    assert sd.codepoint is Codepoint.LDPC_STAIRCASE
    assert sd.fec.symbol_size == 1400 and sd.fec.n1 == 5 and sd.fec.seed == 4242
    assert isinstance(sd.rates, RateLadder) and sd.rates.schedule == "wave"
    assert sd.rates.channels == sd.schedule().channels == len(sd.groups) - 1
    assert sd.groups[0] == Group("239.192.77.1", 47000) and sd.groups[1].port == 47001
    with pytest.raises(dataclasses.FrozenInstanceError):
        sd.fec.max_n = 1  # type: ignore[misc]  # the test: frozen parts cannot change
    rs = SessionDescription.from_json((DATA / "session-rs-older.json").read_text())
    assert rs.fec.scheme is FecScheme.RS and rs.codepoint is Codepoint.SMALL_BLOCK_SYSTEMATIC
    assert rs.rates == RateLadder.from_json_dict(json.loads(rs.to_json())["rates"])


def test_a_rate_ladder_describes_its_schedule():
    sched = make_schedule("step", min_rate=10.0, max_rate=1000.0, tsd=0.5, k=3, quiet=2)
    ladder = RateLadder.of(sched)
    assert ladder.unit == "packets/s" and ladder.channels == sched.channels
    got = ladder.rate_schedule()
    assert (got.name, got.levels, got.channels, got.q) == ("step", sched.levels,
                                                             sched.channels, sched.q)


def _mutated(path: str, value: object) -> str:
    d = json.loads((DATA / "session-ldpc-2026-11.json").read_text())
    *parents, key = path.split(".")
    node = d
    for p in parents:
        node = node[p]
    if value is KeyError:
        del node[key]
    else:
        node[key] = value
    return json.dumps(d)


@pytest.mark.parametrize("path, value, message", [
    ("fec", [1, 2], "fec must be an object"),
    ("fec.symbol_size", "1400", "fec symbol_size must be an integer"),
    ("fec.symbol_size", 70000, "fec symbol_size must be 1..65535"),
    ("fec.seed", True, "fec seed must be an integer"),
    ("fec.scheme", "raptor", "unknown FEC scheme 'raptor'"),
    ("fec.colour", "blue", "fec has unknown keys colour"),
    ("fec.n1", KeyError, "fec lacks 'n1'"),
    ("fec.instance_id", 0x7A, "instance_id is only for 'rs'"),
    ("rates", "fast", "rates must be an object"),
    ("rates.min_rate", "20", "rates min_rate must be a number"),
    ("rates.tsd", float("inf"), "rates tsd must be a number"),
    ("rates.k", 2.5, "rates k and quiet must be integers"),
    ("rates.schedule", "zigzag", "rates schedule 'zigzag' is unknown"),
    ("rates.unit", "kbit/s", "rates unit 'kbit/s'"),
    ("rates.channels", 3, "rates channels 3 is not what"),
    ("rates.max_rate", 10.0, "bad rate schedule"),
    ("rates.min_rate", 5e-324, "bad rate schedule"),  # max/min overflows: was OverflowError
    ("rates.speed", 1, "rates has unknown keys speed"),
    ("rates.unit", None, "rates unit is null"),
    ("rates.quiet", KeyError, "rates lack 'quiet'"),
    ("groups", {"a": 1}, "groups must be a list"),
    ("groups.0", ["10.0.0.1", 47000], "is not [IPv4 multicast address, port]"),
    ("sha256", "xyz", "sha256 must be 64 hex digits"),
])
def test_each_bad_field_is_named_in_one_line(path, value, message):
    if path.startswith("groups."):
        d = json.loads(_mutated("toi", 0))
        d["groups"][int(path.split(".")[1])] = value
        text = json.dumps(d)
    else:
        text = _mutated(path, value)
    with pytest.raises(DescriptionError, match="session description: ") as exc:
        SessionDescription.from_json(text)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_python_callers_get_the_same_checks():
    sd = SessionDescription.from_json((DATA / "session-ldpc-2026-11.json").read_text())
    with pytest.raises(ValueError, match="fec must be FecParams"):
        dataclasses.replace(sd, fec=sd.fec.to_json_dict())
    with pytest.raises(ValueError, match="fec needs 1 <= max_block_length <= max_n"):
        dataclasses.replace(sd.fec, max_n=10, max_block_length=20)
    with pytest.raises(ValueError, match="FEC parameters of a block"):
        dataclasses.replace(sd, fec=dataclasses.replace(sd.fec, n1=2000))
    assert dataclasses.replace(sd, groups=[list(g) for g in sd.groups]).groups == sd.groups


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c,
                                                                         max_size=3),
                    max_leaves=6)
PATHS = ["session", "toi", "size", "name", "interface", "source", "levels", "window_blocks",
         "first_level", "groups", "fec", "rates"] + [
    f"fec.{k}" for k in ("scheme", "symbol_size", "max_block_length", "max_n", "n1", "seed",
                         "instance_id")] + [
    f"rates.{k}" for k in ("schedule", "min_rate", "max_rate", "tsd", "k", "quiet", "w",
                           "per_slot_factor", "q", "levels", "channels", "unit")]


@settings(max_examples=400, deadline=None)
@given(path=st.sampled_from(PATHS), value=JSON | st.floats(1e-300, 1e300) | st.integers(-5, 300)
       | st.sampled_from([5e-324, 1.7e308, 2**63, -(2**63)]))
def test_any_json_in_any_field_gives_a_description_or_one_clear_error(path, value):
    """Fuzz: a description or DescriptionError, never another exception (a traceback in
    ``m2c receive``)."""
    text = _mutated(path, value)
    try:
        sd = SessionDescription.from_json(text)
    except DescriptionError as exc:
        assert str(exc).startswith(("session description", "not an M2C session"))
        assert "\n" not in str(exc)
        return
    assert SessionDescription.from_json(sd.to_json()) == sd
