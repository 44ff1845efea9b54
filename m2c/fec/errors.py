"""Exceptions of the FEC layer."""


class FECError(ValueError):
    """Invalid FEC parameters (k, n, N1, seed, symbol size...)."""


class DecodeError(ValueError):
    """Bytes from the network that do not parse as the expected FEC field."""
