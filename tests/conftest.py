"""Shared fixtures: where the public test data lives, free ports."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TESTDATA = REPO.parent / "shared" / "testdata"


def testdata(*parts: str) -> Path:
    """A path under ../shared/testdata; skips the test (saying why) when the folder is absent."""
    path = TESTDATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"public test data not found at {path} (expected ../shared/testdata beside the repo)")
    return path


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]
