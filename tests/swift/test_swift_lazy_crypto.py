"""Issue 17 (peak RSS): a static-file peer does not load ``cryptography`` (~10 MB RSS);
live signing (swift.core.livesig) and PEX certificates (swift.core.pexcert) import it
when first used."""

from __future__ import annotations

import subprocess
import sys


def _loaded_after(code: str) -> str:
    cp = subprocess.run([sys.executable, "-c", code + "; import sys; "
                         "print('cryptography' in sys.modules)"],
                        capture_output=True, text=True, timeout=120, check=True)
    return cp.stdout.strip()


def test_importing_the_node_does_not_load_cryptography() -> None:
    assert _loaded_after("import swift.aio.node") == "False"
    assert _loaded_after("import swift.core.peer, swift.core.live") == "False"


def test_live_signing_still_loads_it_when_used() -> None:
    assert _loaded_after("from swift.core.live import LiveTree; LiveTree.source()") == "True"
