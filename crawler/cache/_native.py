"""Finds the compiled kernel, or says there is none.

`NATIVE` is the `crawler.cache._ckernel` module, or None when it was not
built (the policies then run on their pure-Python kernels, which give the
same results, only slower). Setting the environment variable
CRAWLER_CACHE_PURE_PYTHON=1 before the first import forces the pure-Python
kernels, which is how tests run the fallback path end to end.
"""

from __future__ import annotations

import os
from types import ModuleType

PURE_PYTHON_ENV = "CRAWLER_CACHE_PURE_PYTHON"


def _load() -> ModuleType | None:
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None
    try:
        from crawler.cache import _ckernel
    except ImportError:
        return None
    return _ckernel


NATIVE: ModuleType | None = _load()


def native_or(name: str, twin):
    """The compiled kernel's function `name`, or its pure-Python `twin` when the kernel was not
    built or lacks it (a stale build): each module picks its kernels with this once, at import."""
    return getattr(NATIVE, name) if NATIVE is not None and hasattr(NATIVE, name) else twin
