"""M2C: dynamic-layer multicast congestion control, the sequencer, FEC and
carousel file transfer over IP multicast (Lucas, Pansiot, Grad, Hilt 2010).

Importing stays cheap: the subpackages are loaded on demand.

- ``m2c.fec``: LDPC-Staircase (RFC 5170, bit-exact), Reed-Solomon (zfec),
  FEC Payload IDs and block partitioning (RFC 5052).
"""

__all__ = ["fec"]
