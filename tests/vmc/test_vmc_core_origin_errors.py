"""An origin failure before any head, answered by the sans-IO core as the proxy answers it
(tests/vmc/test_vmc_proxy_safety.py on sockets): 502 (504 for a timeout) whose body names what
went wrong, counted under that name, for a shared first fetch and for a pass-through alike (a
pass-through used to be reset, a shared one to get an empty 502)."""

from __future__ import annotations

import pytest

from deliverykit.protocol import StreamClose, StreamWrite
from vmc.core.events import Fetch, OriginError
from vmc.core.http import HttpSharingCore
from vmc.core.machine import MachineConfig
from vmc.core.reasons import Refused, by_name


@pytest.mark.parametrize("method", [b"GET", b"POST"])
@pytest.mark.parametrize(("why", "status"), [(Refused.UPSTREAM_CLOSED, 502),
                                             (Refused.UPSTREAM_TIMEOUT, 504)])
def test_a_failed_fetch_is_answered_with_its_reason(method: bytes, why: Refused,
                                                    status: int) -> None:
    core = HttpSharingCore(MachineConfig())
    core.connection_made(1, 0.0)
    core.data_received(1, b"%s http://o/x HTTP/1.1\r\nhost: o\r\ncontent-length: 0\r\n\r\n"
                       % method, 0.0)
    (f,) = [o for o in core.to_send(0.0) if isinstance(o, Fetch)]
    core.origin_received(OriginError(f.fetch, "closed", refusal=why, status=status), 0.1)
    out = core.to_send(0.1)
    data = b"".join(o.data for o in out if isinstance(o, StreamWrite))
    assert data.startswith(b"HTTP/1.1 %d " % status), data[:60]
    assert data.endswith(b"\r\n\r\n%d %s\n" % (status, why.value.encode()))
    assert not [o for o in out if isinstance(o, StreamClose) and o.abort]
    assert by_name(core.stats.refused) == {why.value: 1}
