"""The frontier's counters: what it did since it started (and, for the resume counts, at its start)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class FrontierStats:
    added: int = 0
    dispatched: int = 0
    requeued: int = 0
    spilled_urls: int = 0
    rewritten_urls: int = 0          # spilled again when small chunks are merged
    compactions: int = 0
    loaded_urls: int = 0
    chunk_errors: int = 0
    lost_urls: int = 0
    done_skipped: int = 0
    checkpoints: int = 0
    checkpoint_seconds: float = 0.0
    recovered_urls: int = 0
    resumed_inflight: int = 0
    resumed_unconfirmed: int = 0
    blocked_by_ip: int = 0
