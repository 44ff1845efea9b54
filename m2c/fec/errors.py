"""Exceptions of the FEC layer."""

from __future__ import annotations

from deliverykit import errors


class FECError(ValueError):
    """Invalid FEC parameters (k, n, N1, seed, symbol size...)."""


class DecodeError(errors.DecodeError):
    """Bytes from the network that do not parse as the expected FEC field."""
