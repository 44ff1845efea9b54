"""CoreCast: inter-domain live streaming on top of LISP (reference implementation).

Wire formats in :mod:`corecast.wire`, sans-IO roles in :mod:`corecast.core`,
asyncio drivers in :mod:`corecast.aio`, the analytical model in
:mod:`corecast.plan`.  Importing this package stays cheap: import submodules.
"""

__all__ = ["__version__"]
__version__ = "0.1.0"
