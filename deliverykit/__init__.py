"""deliverykit: what the four protocol packages share.

The network-namespace testbed (``deliverykit.testbed``), the C fast paths and
their pure-Python twins (``deliverykit.fastpath``), batched asyncio UDP
endpoints (``deliverykit.aio``), capture helpers and common CLI plumbing.
It never imports a protocol package.
"""

__version__ = "0.1.0"
