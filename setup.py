from setuptools import setup

# Everything else lives in pyproject.toml; this file only exists because
# cffi's build integration is configured through setup().
setup(cffi_modules=["cffi_build/build_native.py:ffibuilder"])
