"""Build hook for the compiled URL-cache kernel; all metadata is in pyproject.toml.

setuptools merges this `ext_modules` with pyproject.toml. The extension is
optional: if it cannot be compiled the install still succeeds and
`crawler.cache` runs on its pure-Python kernels (identical results, slower).
It needs only Python.h (no numpy headers: arrays cross by the buffer protocol).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "crawler.cache._ckernel",
            sources=["crawler/cache/_ckernel.c"],
            extra_compile_args=["-O3", "-std=gnu11", "-pthread"],
            extra_link_args=["-pthread"],      # the DUE's parallel fsync (libc has it from glibc 2.34)
            optional=True,
        )
    ]
)
