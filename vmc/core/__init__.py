"""Sans-IO pieces of the VMC proxy: no sockets, no clocks (``now`` is passed in)."""
