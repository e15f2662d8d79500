"""Without matplotlib (the optional extra `replay`), the figures fail with a clean error that says how to get it."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from tests.unit.test_replay_models import locality_trace

from crawler.replay.cli import EXIT_USAGE, main
from crawler.replay.plots import INSTALL_HINT, PlotsUnavailable, plot_all, require_matplotlib

MATPLOTLIB_MODULES = ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg", "matplotlib.ticker")


@pytest.fixture
def no_matplotlib(monkeypatch):
    """matplotlib as absent as an install without the extra: every import of it raises ImportError."""
    for name in MATPLOTLIB_MODULES:
        monkeypatch.setitem(sys.modules, name, None)


def test_the_hint_names_the_extra():
    assert INSTALL_HINT == "pip install 'crawler[replay]'"


def test_plots_without_matplotlib_say_how_to_install_it(no_matplotlib):
    with pytest.raises(PlotsUnavailable, match=r"pip install 'crawler\[replay\]'"):
        require_matplotlib()
    with pytest.raises(PlotsUnavailable, match="--no-plots"):
        plot_all(None, [], None)          # it fails before it looks at its arguments


def test_the_command_fails_cleanly_before_it_simulates(no_matplotlib, tmp_path, capsys):
    np.save(tmp_path / "t.npy", locality_trace(500, 30))
    out = tmp_path / "out"
    assert main([str(tmp_path / "t.npy"), "--out", str(out), "--sizes", "1,10", "--quiet"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("crawler replay: error: ") and "pip install 'crawler[replay]'" in err
    assert "Traceback" not in err
    assert not out.exists(), "nothing is simulated or written"


def test_no_plots_needs_no_matplotlib(no_matplotlib, tmp_path, capsys):
    np.save(tmp_path / "t.npy", locality_trace(500, 30))
    out = tmp_path / "out"
    assert main([str(tmp_path / "t.npy"), "--out", str(out), "--sizes", "1,10", "--quiet", "--no-plots"]) == 0
    assert (out / "results.csv").exists() and not list(out.glob("*.png"))
