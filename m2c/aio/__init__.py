"""asyncio drivers for M2C over real UDP/IP multicast: the only place that
reads a clock or touches a socket."""

from m2c.aio.driver import MulticastReceiver, MulticastSender, make_session

__all__ = ["MulticastReceiver", "MulticastSender", "make_session"]
