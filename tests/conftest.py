"""Which tests scripts/test.sh may run side by side.

A test marked `slow` under tests/integration or tests/faults starts crawls
and servers and checks timing from the servers' logs (politeness gaps,
"no request for 10 s"); it gets the marker `serial`, and scripts/test.sh
runs those one at a time on a quiet machine. Everything else (the unit and
property tests, slow ones included: CPU-bound, one process, nothing timed
from outside) may run in parallel, and the tests marked `beside` run beside
them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_SERIAL_DIRS = ("integration", "faults")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow") is None or item.get_closest_marker("beside") is not None:
            continue
        if Path(str(item.path)).parent.name in _SERIAL_DIRS:
            item.add_marker(pytest.mark.serial)
