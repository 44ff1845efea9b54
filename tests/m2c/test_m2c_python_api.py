"""The Python API a user finds.

- docs/m2c.md's Python example runs as it is (a real sender and receiver).
- ``m2c.make_schedule`` and the drivers are importable from ``m2c``; importing
  ``m2c`` alone stays cheap.
- The session description names its rate unit; older ones without it still load.
- A window with more slots than symbols carries symbols, not data-less padding.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from m2c.aio.driver import make_session
from m2c.core.filetx import RATE_UNIT, FileSender, SessionDescription

DOC = Path(__file__).resolve().parents[2] / "docs" / "m2c.md"


def test_docs_python_example_runs(tmp_path):
    text = DOC.read_text()
    m = re.search(r"<!-- m2c-api-example -->\n```python\n(.*?)```", text, re.S)
    assert m, "docs/m2c.md lost its Python API example"
    script = tmp_path / "example.py"
    script.write_text(m.group(1))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "dynamic channels" in r.stdout and "verified" in r.stdout


def test_public_names_and_cheap_import():
    code = ("import sys, m2c; assert 'm2c.aio.driver' not in sys.modules; "
            "from m2c import make_schedule, make_session, MulticastSender, MulticastReceiver, "
            "Sequencer, SessionDescription; "
            "s = make_schedule('step', min_rate=10.0, max_rate=100.0); print(s.channels)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) > 0
    with pytest.raises(AttributeError):
        import m2c

        m2c.no_such_name  # noqa: B018


def test_rates_name_their_unit_and_old_descriptions_load(tmp_path):
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(10_000))
    sd = make_session(str(src), min_rate=20.0, max_rate=2000.0)
    d = json.loads(sd.to_json())
    assert d["rates"]["unit"] == RATE_UNIT == "packets/s"
    assert d["rates"]["max_rate"] == pytest.approx(2000.0)
    del d["rates"]["unit"]  # a session-2 description
    old = SessionDescription.from_json(json.dumps(d))
    assert old.schedule().max_rate == sd.schedule().max_rate
    d["rates"]["unit"] = "kbit/s"
    with pytest.raises(ValueError, match="rates unit"):
        SessionDescription.from_json(json.dumps(d))


def test_a_window_larger_than_the_file_carries_symbols_not_padding(tmp_path):
    src = tmp_path / "f.bin"
    data = os.urandom(30_000)  # 22 source symbols, 44 encoding symbols
    src.write_bytes(data)
    sd = make_session(str(src), min_rate=20.0, max_rate=2000.0)
    snd = FileSender(sd, lambda off, n: data[off:off + n])
    pkts = [pkt for _ in range(3) for _pdu, pkt in snd.next_pdus()]
    assert len(pkts) > 2 * 44  # more slots than symbols
    assert not any(p.data_less for p in pkts)
    assert all(len(p.payload) == sd.fec.symbol_size for p in pkts)
    # every encoding symbol of the file goes out, the surplus slots repeat them
    ids = {(p.sbn, p.esi) for p in pkts}
    assert len(ids) == 44
