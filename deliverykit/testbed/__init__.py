"""Network-namespace testbed: see docs/testbed.md.

    from deliverykit.testbed import Testbed, Netem, Tbf
    with Testbed() as tb:
        a, b = tb.host("a"), tb.host("b")
        link = tb.link(a, b, "10.0.1.1/24", "10.0.1.2/24")
        tb.shape(link.a, netem=Netem(delay_ms=20))
        print(tb.exec(a, ["ip", "route"]).stdout)
"""

from .capture import Capture, read_pcap
from .core import Testbed
from .errors import RemoteError, RemoteTraceback, TestbedError, TestbedNeedsRoot, TestbedTimeout
from .isolated import (
    IsolatedNamespace,
    NotIsolatedError,
    spawn_forwarding_role,
    start_forwarding_role,
)
from .lifecycle import cleanup_stale, have_root
from .nsexec import Event, Task
from .objects import Bridge, End, Host, Link
from .shaping import Netem, Tbf

__all__ = [
    "Bridge",
    "Capture",
    "Event",
    "End",
    "Host",
    "Link",
    "Netem",
    "RemoteError",
    "RemoteTraceback",
    "Task",
    "Tbf",
    "Testbed",
    "TestbedError",
    "TestbedNeedsRoot",
    "TestbedTimeout",
    "cleanup_stale",
    "have_root",
    "read_pcap",
    "IsolatedNamespace",
    "NotIsolatedError",
    "spawn_forwarding_role",
    "start_forwarding_role",
]
