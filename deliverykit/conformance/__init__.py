"""A pytest plugin that runs the toolkit's conformance cases against any implementation.

Installed as a ``pytest11`` entry point, so ``pip install`` is enough. The
implementation under test is a black box driven through its command line and
the network; it is named with ``--impl NAME`` (from the registry, kept as data
in ``implementations.json`` plus any ``--impl-registry FILE``) or given ad hoc
with ``--impl-cmd "..." --impl-protocol P``. Each case says which RFC section it
checks. An implementation that exits 127 for a case it does not support gives
a skip marked *unsupported*, not a failure.

Cases live in the protocol packages (``<pkg>/conformance/``) and are
registered under the entry-point group ``deliverykit.conformance``;
``--conformance`` (all protocols) or ``--conformance ppspp,fec`` collects them.
"""

from deliverykit.conformance.registry import Implementation, Unsupported, load_registry, vectors_dir

__all__ = ["Implementation", "Unsupported", "load_registry", "vectors_dir"]
