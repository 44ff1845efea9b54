"""PPSPP (RFC 7574) peer: the Libswift protocol, with the VoD download algorithm
of Petrocco, Pouwelse & Epema, "Performance Analysis of the Libswift P2P
Streaming Protocol".  Importing this package stays cheap; see swift.wire,
swift.core (sans-IO) and swift.aio (asyncio drivers)."""

__all__ = ["__version__"]
__version__ = "0.1.0"
