"""Runnable reproductions on the deliverykit testbed (root); each has --quick."""

from __future__ import annotations

import os
import signal

_registered = False


def default_sigterm_in_forked_children() -> None:
    """Forked children start with SIGTERM at its default action.

    ``cliutil.cli_main`` makes SIGTERM raise an exception in the CLI's process (so
    a stopped experiment still tears its namespaces down); a forked child inherits
    that handler.  pyroute2 forks a helper for each namespace socket and stops it
    with SIGTERM, then waits: with the inherited handler the helper raised instead
    of exiting and ``m2c experiment fig5`` hung at its first bridge.  Registered
    once per process; the children the testbed spawns are stopped by SIGKILL anyway.
    """
    global _registered
    if not _registered:
        os.register_at_fork(
            after_in_child=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))
        _registered = True
