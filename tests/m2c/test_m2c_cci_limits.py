"""The M2C CCI (WEBRC-like, docs/wire-m2c.md) never wraps a channel number (issue 5,
review finding 4).

Our 32-bit CCI mirrors EXT_M2C as slot mod 256 | group | PSN mod 2^16.  Its channel
field is 8 bits, so a session may have at most 256 groups (base 0 + dynamic 1..255),
as RFC 3738 5.1 allows at most T + 1 = 256 channels.  Session creation refuses
anything larger with one clear error (``m2c send --k 20`` with the default rates
asks for 300 dynamic channels), instead of sending packets whose CCI channel is
the group index modulo 256.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from m2c.aio.driver import make_session
from m2c.core.filetx import RateLadder, SessionDescription, default_fec
from m2c.core.groups import make_schedule
from m2c.wire import codec
from m2c.wire.constants import CCI_MAX_CHANNEL
from m2c.wire.layers import LCT, ExtM2C, ExtM2CCRC


def sd_with(sched, data: bytes = b"x" * 5000) -> SessionDescription:
    return SessionDescription(7, 1, "f", len(data), hashlib.sha256(data).hexdigest(),
                              default_fec(len(data), "ldpc", 100), RateLadder.of(sched),
                              [["239.1.1.1", 4000]] * (sched.channels + 1))


def cci_fields(wire: bytes) -> tuple[int, int, int]:
    """(CTSI byte, channel byte, 16-bit PSN) of an LCT header with C = 0."""
    return wire[4], wire[5], int.from_bytes(wire[6:8], "big")


def test_cci_channel_field_is_8_bits():
    assert CCI_MAX_CHANNEL == 255


def test_m2c_send_refuses_300_channels_instead_of_wrapping(tmp_path):
    f = tmp_path / "f.bin"
    f.write_bytes(bytes(range(256)) * 16)
    sdp = tmp_path / "s.json"
    r = subprocess.run([sys.executable, "-m", "m2c", "send", str(f), "--k", "20",
                        "--sdp", str(sdp), "--duration", "2"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode in (1, 2), r.stderr
    assert "Traceback" not in r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, r.stderr
    assert "300" in lines[0] and "255" in lines[0] and "CCI" in lines[0]
    assert not sdp.exists()  # refused before anything was announced or sent


def test_largest_session_that_fits_uses_every_channel_number(tmp_path):
    f = tmp_path / "f.bin"
    f.write_bytes(b"y" * 3000)
    # the CLI's default rates (256..20,000 kbit/s, 1,400-byte symbols) with K = 17:
    # 17 * 15 = 255 dynamic channels, the most that fit
    pps = [kb * 1000 / 8 / (1400 + 76) for kb in (256.0, 20000.0)]
    assert make_schedule("wave", min_rate=pps[0], max_rate=pps[1], k=17).channels == 255
    with pytest.raises(ValueError, match="CCI"):
        make_session(str(f), min_rate=pps[0], max_rate=pps[1], k=18)
    sd = make_session(str(f), min_rate=pps[0], max_rate=pps[1], k=17)
    assert len(sd.groups) == 256
    for g in (0, 1, 128, 255):
        wire = codec.encode(codec.AlcPacket(sd.session, 1, sd.codepoint, 1000 + g, g, 70000 + g,
                                            0, 0, 0, 0, data_less=True))
        assert cci_fields(wire) == ((1000 + g) % 256, g, (70000 + g) % 65536)
        assert codec.decode(wire, session=sd.session).group == g


def test_receiver_refuses_a_description_with_too_many_channels():
    small = make_schedule("wave", min_rate=20.0, max_rate=2000.0, k=2)
    text = sd_with(small).to_json()
    big = make_schedule("wave", min_rate=20.0, max_rate=2000.0, k=20)
    assert big.channels > CCI_MAX_CHANNEL
    d = json.loads(text)
    d["rates"] = RateLadder.of(big).to_json_dict()
    d["groups"] = [["239.1.1.1", 4000]] * (big.channels + 1)
    with pytest.raises(ValueError, match="CCI"):
        SessionDescription.from_json(json.dumps(d))


@settings(max_examples=60, deadline=None)
@given(k=st.integers(1, 40), ratio=st.floats(1.5, 500.0), quiet=st.integers(1, 4),
       schedule=st.sampled_from(["wave", "step"]))
def test_accepted_sessions_fit_the_cci_refused_ones_do_not(k, ratio, quiet, schedule):
    sched = make_schedule(schedule, min_rate=10.0, max_rate=10.0 * ratio, k=k, quiet=quiet)
    if sched.channels > CCI_MAX_CHANNEL:
        with pytest.raises(ValueError, match="CCI"):
            sd_with(sched)
        return
    sd = sd_with(sched)
    top = sd.schedule().channels
    # every channel of the session is its own CCI channel number, on the codec and
    # in the scapy layer alike
    wire = codec.encode(codec.AlcPacket(7, 1, sd.codepoint, 3, top, 9, 0, 0, 0, 0,
                                        data_less=True))
    assert cci_fields(wire)[1] == top
    pkt = LCT(tsi=7, toi=1, codepoint=sd.codepoint,
              ext=[ExtM2C(group=top, slot=3, psn=9), ExtM2CCRC()])
    assert bytes(pkt) == wire
