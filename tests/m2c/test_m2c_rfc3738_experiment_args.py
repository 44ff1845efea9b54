"""Experiment front ends (review 2, finding 7; fig5 help): the heterogeneous run
sizes its symbol for the FEC scheme it uses, prints null for metrics a failed
receiver did not produce (JSON rows: the README promises null), and both experiments
offer every rate controller of ``CONTROLLERS`` (``webrc-rfc`` included) with help
texts that carry units."""

from __future__ import annotations

import subprocess
import sys

import pytest

from m2c.core.receiver_cc import CONTROLLERS
from m2c.experiments import hetero
from m2c.wire import codec
from m2c.wire.constants import Codepoint


@pytest.mark.parametrize("fec, cp", [("ldpc", Codepoint.LDPC_STAIRCASE),
                                     ("rs", Codepoint.SMALL_BLOCK_SYSTEMATIC)])
def test_hetero_symbol_fills_1500_byte_packets_for_each_fec(fec, cp):
    symbol = hetero.symbol_for(fec)
    wire = codec.encode(codec.AlcPacket(1, 0, cp, 0, 0, 0, 0, 0, 0, 0, bytes(symbol)))
    assert 28 + len(wire) == 1500  # with --fec rs it was 1504 (an LDPC-sized symbol)


def test_hetero_prints_null_for_missing_metrics():
    assert hetero._r(None) is None and hetero._r(None, 2) is None
    assert hetero._r(12.345, 2) == 12.35 and hetero._r(7.6) == 8


@pytest.mark.parametrize("mod", ["hetero", "fig5"])
def test_experiment_help_is_whole_and_offers_every_controller(mod):
    r = subprocess.run([sys.executable, "-m", f"m2c.experiments.{mod}", "--help"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = " ".join(r.stdout.split())
    for name in CONTROLLERS:
        assert name in out
    assert "webrc-rfc" in out
    if mod == "fig5":
        # the description is the whole first sentence, not cut at "through a"
        assert "1 or more receivers." in out
        assert "bit/s" in out and "BYTES" in out and "default: 1)" in out
        assert "default: m2c" in out
    else:
        assert "behind 4 and 1 Mb/s links." in out
