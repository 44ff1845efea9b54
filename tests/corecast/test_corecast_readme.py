"""The README's hand-run CoreCast sequence works as written (issue 13 #19: it raced before)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def _block_after(marker: str) -> str:
    text = README.read_text()
    start = text.index(marker)
    m = re.compile(r"```\n(.*?)```", re.S).search(text, start)
    assert m, f"no code block after {marker!r}"
    return m.group(1)


def test_roles_by_hand_as_written(tmp_path):
    script = _block_after("The roles by hand")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    # The script's own background roles end by --duration; kill the group if it hangs anyway.
    proc = subprocess.Popen(["bash", "-c", script], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
        # what each role said: the backgrounded roles' stderr is in their log files
        logs = "\n".join(f"--- {p.name}\n{p.read_text()[-1500:]}"
                          for p in sorted(tmp_path.glob("*.log")))
        raise AssertionError(f"the sequence did not end in 150 s\nstdout: {out[-1500:]}\n"
                             f"client stderr: {err[-1500:]}\n{logs}") from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
    assert proc.returncode == 0, err[-2000:]
    # stdout holds each role's final counters (the backgrounded ones share it): find the client's
    decoder, pos, objects = json.JSONDecoder(), 0, []
    while (start := out.find("{", pos)) >= 0:
        obj, pos = decoder.raw_decode(out, start)
        objects.append(obj)
    (result,) = [o for o in objects if o.get("role") == "client"]
    assert result["received"] == 40 and result["lost"] == 0 and result["rejected"] == 0
    # the roles left in the background stop by --duration; make sure none outlives the test
    subprocess.run(["pkill", "-f", "corecast (mapserver|etr|itr|source) .*127.77"], check=False)
