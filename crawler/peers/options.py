"""The peer transport's tunables: the `peers:` section of the configuration (`PeersConfig`), checked.

The keys, their defaults, units and bounds live in the schema only; this
module adds what the transport needs on top: a check that also covers
options built in code (tests, benches) rather than loaded from a file, and
the rules that span two keys.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from crawler.config.schema import PeersConfig


def peer_options(base: PeersConfig | None = None, **overrides: Any) -> PeersConfig:
    """`base` (the defaults when None) with `overrides` applied, checked; an unknown key is a TypeError."""
    options = dataclasses.replace(base if base is not None else PeersConfig(), **overrides)
    check(options)
    return options


def check(options: PeersConfig) -> None:
    """Raise ValueError naming the key when a value is outside the schema's bounds or breaks a two-key rule."""
    for f in dataclasses.fields(options):
        value = getattr(options, f.name)
        lo, hi = f.metadata.get("min"), f.metadata.get("max")
        if isinstance(value, (int, float)):
            if lo is not None and value < lo:
                raise ValueError(f"peers.{f.name} must be at least {lo}, got {value}")
            if hi is not None and value > hi:
                raise ValueError(f"peers.{f.name} must be at most {hi}, got {value}")
    if options.dead_after_s <= options.ping_interval_s:
        raise ValueError("peers.dead_after_s must exceed peers.ping_interval_s")
    if options.reconnect_max_s < options.reconnect_min_s:
        raise ValueError("peers.reconnect_max_s must be at least peers.reconnect_min_s")
