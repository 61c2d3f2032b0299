"""Build gleam's interposer: a plain C ``libcuda.so.1`` (no Python inside).

setup.py runs this after the native core (``build_ext``); it compiles the
generated stubs, the hand-written client core (``cffi_build/interposer``), the
record encoder and the code it shares with the native core (``cffi_build/common``)
into ``gleam/peer/cuda/lib/libcuda.so.1`` of the build (or of the source tree for
editable installs). ``gleam-peer lib`` prints that
directory. Beside it goes ``libgleam_nvrtc.so`` (``cffi_build/interposer/nvrtc``), which
``gleam-peer run`` preloads so that NVRTC makes PTX where a program asks for a cubin.
"""

from __future__ import annotations

import pathlib
import sys

from setuptools.command.build_ext import build_ext

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from gen_cuda import generate  # noqa: E402

LIB_NAME = "libcuda.so.1"
NVRTC_LIB_NAME = "libgleam_nvrtc.so"
# Files of the native core that the interposer links too (plain C, no Python);
# everything in cffi_build/common is linked into both as well.
SHARED_CORE = ("wire/records.c", "mem/ranges.c")


def shared_sources() -> list[pathlib.Path]:
    """The C the interposer shares with the native core."""
    return [*(HERE / "src" / name for name in SHARED_CORE),
            *sorted((HERE / "common").glob("*.c"))]


def sources() -> list[str]:
    generated = HERE / "generated"
    generate(generated)
    files = [*sorted((HERE / "interposer").glob("*.c")), generated / "gl_stubs.c",
             *shared_sources()]
    return [str(p) for p in files]


C_FLAGS = ["-O2", "-std=gnu11", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra",
           "-Werror=implicit-function-declaration"]


class BuildWithInterposer(build_ext):
    """build_ext that also links the interposer shared library."""

    def run(self) -> None:
        super().run()
        self.build_interposer()

    def build_interposer(self) -> None:
        if self.inplace:
            target_dir = pathlib.Path(self.get_finalized_command("build_py").get_package_dir(
                "gleam.peer")) / "cuda" / "lib"
        else:
            target_dir = pathlib.Path(self.build_lib) / "gleam" / "peer" / "cuda" / "lib"
        target_dir.mkdir(parents=True, exist_ok=True)
        self.build_nvrtc_preload(target_dir)
        compiler = self.compiler
        include = [str(HERE / "include"), str(HERE / "interposer"), str(HERE / "generated"),
                   str(HERE / "src")]
        objects = compiler.compile(
            sources(), output_dir=str(pathlib.Path(self.build_temp) / "interposer"),
            include_dirs=include, extra_postargs=C_FLAGS,
        )
        compiler.link_shared_object(
            objects, LIB_NAME, output_dir=str(target_dir), libraries=["pthread", "dl"],
            extra_postargs=[f"-Wl,-soname,{LIB_NAME}", "-Wl,--no-undefined"],
        )

    def build_nvrtc_preload(self, target_dir: pathlib.Path) -> None:
        """libgleam_nvrtc.so: plain C on its own (it must not carry the driver API)."""
        folder = HERE / "interposer" / "nvrtc"
        objects = self.compiler.compile(
            [str(p) for p in sorted(folder.glob("*.c"))],
            output_dir=str(pathlib.Path(self.build_temp) / "nvrtc"), include_dirs=[str(folder)],
            extra_postargs=C_FLAGS,
        )
        self.compiler.link_shared_object(
            objects, NVRTC_LIB_NAME, output_dir=str(target_dir), libraries=["pthread", "dl"],
            extra_postargs=[f"-Wl,-soname,{NVRTC_LIB_NAME}", "-Wl,--no-undefined"],
        )
