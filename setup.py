import sys

from setuptools import setup

sys.path.insert(0, "cffi_build")
from build_interposer import BuildWithInterposer  # noqa: E402

# Everything else lives in pyproject.toml; this file exists because cffi's
# build integration is configured through setup(), and because the
# interposer (a plain C libcuda.so.1) is linked after the native core.
setup(
    cffi_modules=["cffi_build/build_native.py:ffibuilder",
                  "cffi_build/build_delayline.py:ffibuilder"],
    cmdclass={"build_ext": BuildWithInterposer},
)
