"""The compiled extension (crawler/_native/): built in this tree, it is the one every twin-picking module uses.

A stale or broken build would otherwise go unnoticed: every module falls back to
its pure-Python twin, the tests still pass (the twins give the same results) and
only the benches get 10-50x slower. The stub must list what the module exports.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from crawler import _native
from crawler._native import NATIVE, PURE_PYTHON_ENV

NATIVE_DIR = Path(_native.__file__).parent
BUILT = sorted(NATIVE_DIR.glob("_compiled*.so"))
forced_off = os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")
needs_build = pytest.mark.skipif(not BUILT or forced_off, reason="the extension is not built here (or forced off)")


def stub_names() -> set[str]:
    tree = ast.parse((NATIVE_DIR / "_compiled.pyi").read_text())
    return {node.name for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_")}


@needs_build
def test_a_built_extension_is_loaded() -> None:
    assert NATIVE is not None, f"{BUILT[0].name} is here but did not load: {_native.WHY_PYTHON}"
    assert Path(NATIVE.__file__).parent == NATIVE_DIR
    assert _native.KERNELS == _native.COMPILED


@needs_build
def test_every_module_picks_the_compiled_kernels() -> None:
    from crawler.cache import COMPILED
    from crawler.cache.clock import ClockCache
    from crawler.cache.clock_sets import ClockSetsCache
    from crawler.due import front, merge_pass, submit_pass
    from crawler.splitter import owner_pass

    assert COMPILED and submit_pass.COMPILED and front.COMPILED and merge_pass.COMPILED and owner_pass.COMPILED
    assert isinstance(ClockCache(64), NATIVE.ClockKernel)
    assert isinstance(ClockSetsCache(64), NATIVE.ClockSetsKernel)


@needs_build
def test_the_stub_describes_every_export() -> None:
    exported = {name for name in dir(NATIVE) if not name.startswith("_")}
    assert stub_names() == exported
