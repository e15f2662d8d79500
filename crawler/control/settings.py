"""The operator's standing orders to one node, kept across restarts: `<data_dir>/state/control.json`.

    {"version": 1, "paused": false, "blocked": [".example.org", "a.test"], "delays": {"b.test": 5.0}}

Written whole at every change, before the command's answer (tmp, fsync,
rename, fsync dir: crawler/fsutil.py), so a command that returned is durable
even if the node is killed the next moment. It lives under `state/` with the
rest of the crawl's state: `crawler run --fresh` starts a crawl unpaused,
with no blocks and no delays. A file that cannot be read stops the node with
an error naming it, rather than starting without the blocks an operator
promised a site owner.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from crawler.control.hosts import PatternError, parse_pattern
from crawler.fsutil import atomic_write

FILE = "control.json"
VERSION = 1


class SettingsError(ValueError):
    """control.json exists but is not one this code can use; the message names the file."""


@dataclass
class ControlSettings:
    """What an operator set on this node with `crawler ctl`."""
    paused: bool = False
    """No request is started while set (the frontier hands out nothing); the crawl does not end either."""
    blocked: list[str] = field(default_factory=list)
    """Host patterns (`HOST`, `.DOMAIN`) whose URLs are dropped and refused."""
    delays: dict[str, float] = field(default_factory=dict)
    """Host pattern -> least seconds between two requests to a matching host."""

    def to_json(self) -> dict:
        return {"version": VERSION, "paused": self.paused, "blocked": sorted(self.blocked),
                "delays": dict(sorted(self.delays.items()))}

    @classmethod
    def from_json(cls, data: object) -> ControlSettings:
        """Checked: every pattern parses, every delay is a finite number >= 0 (raises ValueError)."""
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise ValueError(f"not a version {VERSION} control file")
        paused, blocked, delays = data.get("paused", False), data.get("blocked", []), data.get("delays", {})
        if not isinstance(paused, bool) or not isinstance(blocked, list) or not isinstance(delays, dict):
            raise ValueError("paused must be true or false, blocked a list, delays a mapping")
        try:
            patterns = [parse_pattern(str(p)) for p in blocked]
            waits = {parse_pattern(str(p)): _seconds(s) for p, s in delays.items()}
        except PatternError as exc:
            raise ValueError(str(exc)) from None
        return cls(paused, patterns, waits)

    def save(self, state_dir: Path) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(state_dir / FILE, json.dumps(self.to_json(), sort_keys=True) + "\n")

    @classmethod
    def load(cls, state_dir: Path) -> ControlSettings:
        """The saved settings, or the defaults when there is no file; raises SettingsError."""
        path = state_dir / FILE
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls()
        except OSError as exc:
            raise SettingsError(f"{path}: cannot read it: {exc.strerror or exc}") from None
        try:
            return cls.from_json(json.loads(text))
        except ValueError as exc:
            raise SettingsError(f"{path}: {exc}; repair it or remove it (removing it lifts every pause, block "
                                f"and delay set with crawler ctl)") from None


def _seconds(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"a delay must be a number of seconds >= 0, not {value!r}")
    return float(value)
