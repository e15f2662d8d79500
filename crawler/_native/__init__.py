"""The compiled kernels of the crawler: finds the extension, or says there is none.

The C sources here build one extension, `crawler._native._compiled` (native.h
lists its sources, _compiled.pyi its API): the URL cache policies' kernels,
Belady's MIN, the DUE's submit, front and merge passes, and the host
splitter's owner pass. Each has a pure-Python twin in the module that uses it.

`NATIVE` is the `crawler._native._compiled` module, or None when it was not
built (the caches, the DUE and the splitter then run on their pure-Python
twins, which give the same results, only slower). Setting the environment variable
CRAWLER_CACHE_PURE_PYTHON=1 before the first import forces the pure-Python
kernels, which is how tests run the fallback path end to end.
"""

from __future__ import annotations

import os
from types import ModuleType

PURE_PYTHON_ENV = "CRAWLER_CACHE_PURE_PYTHON"
COMPILED, PYTHON = "compiled", "python"
BUILD_HINT = ("pip install . from the source tree (it compiles the extension: needs a C compiler and "
              "Python's headers, e.g. Debian's gcc and python3-dev), or python setup.py build_ext --inplace "
              "in a checkout run from source")


def _load() -> tuple[ModuleType | None, str]:
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None, f"{PURE_PYTHON_ENV} is set"
    try:
        from crawler._native import _compiled
    except ImportError as exc:
        return None, f"the compiled extension crawler._native._compiled was not built ({exc})"
    return _compiled, ""


NATIVE, WHY_PYTHON = _load()
KERNELS = COMPILED if NATIVE is not None else PYTHON
"""Which kernels the caches, the DUE and the splitter run: the compiled extension, or the pure-Python
twins (the same results, 10-50x slower: docs/caches.md, docs/due.md). A node logs it at start and puts
it in its summary (`kernels`) and in `crawler_node_info{kernels=...}`; the benches refuse to report on
the twins unless asked."""


def kernels_line() -> str:
    """One line saying which kernels run, and for the twins why and how to get the compiled ones."""
    if NATIVE is not None:
        return f"kernels: compiled ({NATIVE.__file__})"
    return f"kernels: the pure-Python twins, 10-50x slower ({WHY_PYTHON}); for the compiled ones: {BUILD_HINT}"


def native_or(name: str, twin):
    """The compiled kernel's function `name`, or its pure-Python `twin` when the kernel was not
    built or lacks it (a stale build): each module picks its kernels with this once, at import."""
    return getattr(NATIVE, name) if NATIVE is not None and hasattr(NATIVE, name) else twin
