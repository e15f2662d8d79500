"""Where the tests find the repository and the public test data."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TESTDATA = REPO.parent / "shared" / "testdata"


def testdata(*parts: str) -> Path:
    """A path under ../shared/testdata; skips the test (saying why) when the folder is absent."""
    path = TESTDATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"public test data not found at {path} (expected ../shared/testdata beside the repo)")
    return path
