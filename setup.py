"""Build hook for the compiled kernels (crawler/_native/); all metadata is in pyproject.toml.

setuptools merges this `ext_modules` with pyproject.toml. The extension is
optional: if it cannot be compiled the install still succeeds and the caches,
the DUE and the splitter run on their pure-Python twins (identical results,
slower). It needs only Python.h (no numpy headers: arrays cross by the buffer
protocol). -fvisibility=hidden keeps the symbols the sources share inside the
.so (only PyInit__compiled is exported); the sources build warning-free with
-Wall -Wextra; link-time optimization lets the compiler inline across the sources as it
did when they were one file.
"""

from glob import glob

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "crawler._native._compiled",
            sources=sorted(glob("crawler/_native/*.c")),
            depends=sorted(glob("crawler/_native/*.h")),
            extra_compile_args=["-O3", "-flto", "-std=gnu11", "-pthread", "-fvisibility=hidden", "-Wall", "-Wextra"],
            extra_link_args=["-O3", "-flto", "-pthread"],   # LTO: inlining across the sources, as in one file
            optional=True,
        )
    ]
)
