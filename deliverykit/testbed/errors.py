"""The testbed's exception classes (one family: catch ``TestbedError``)."""

from __future__ import annotations


class TestbedError(Exception):
    """Anything the testbed cannot do: no root, a bad name, a missing tool, a failed child."""

    __test__ = False  # not a pytest test class, despite the name


class TestbedNeedsRoot(TestbedError, PermissionError):
    """Not root: namespaces, veth links and tc need CAP_SYS_ADMIN/CAP_NET_ADMIN.  Also a
    PermissionError, so command lines report it as one line (deliverykit.cliutil)."""


class TestbedTimeout(TestbedError, TimeoutError):
    """A callable or process in a namespace did not finish in time (it was killed)."""


class RemoteError(TestbedError):
    """A child's exception that could not be pickled back: its repr and traceback text."""


class RemoteTraceback(Exception):
    """Carries a child's formatted traceback; set as ``__cause__`` of re-raised exceptions."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return "\n\n--- traceback in the namespace child ---\n" + self.text
