"""Build the optional C fast paths; fall back to the pure-Python twins without a compiler."""

import glob
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# The stable ABI covers the buffer protocol from 3.11 on: use it there.
LIMITED = sys.version_info >= (3, 11) and not sysconfig.get_config_var("Py_GIL_DISABLED")


class OptionalBuildExt(build_ext):
    """A failed compile is a warning, not a failed install: the twins take over."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any toolchain failure
            self._warn(exc)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            self._warn(exc)

    @staticmethod
    def _warn(exc):
        sys.stderr.write(
            f"\nWARNING: deliverykit._speedups was not built ({exc}).\n"
            "The pure-Python twins will be used; everything works, only slower.\n\n"
        )


ext = Extension(
    "deliverykit._speedups",
    sources=sorted(glob.glob("deliverykit/csrc/*.c")),
    depends=glob.glob("deliverykit/csrc/*.h"),
    extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wno-unused-parameter"],
    define_macros=[("Py_LIMITED_API", "0x030B0000")] if LIMITED else [],
    py_limited_api=LIMITED,
)

setup(
    ext_modules=[ext],
    cmdclass={"build_ext": OptionalBuildExt},
    options={"bdist_wheel": {"py_limited_api": "cp311"}} if LIMITED else {},
)
