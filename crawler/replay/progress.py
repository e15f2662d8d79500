"""A progress bar on standard error for long replays.

Work is measured in estimated seconds (each simulation's cost is guessed
from its policy and the stream's length), so the bar and the time left move
evenly even though an LRU pass and a CLOCK run of the same stream differ in
cost tenfold. On a terminal the bar redraws in place; otherwise a plain line
is printed every `LINE_EVERY_FRACTION` of the work, and only once the run
has lasted `QUIET_FOR_S`, so short runs stay silent in logs and tests.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

BAR_WIDTH = 30
REDRAW_EVERY_S = 0.2
QUIET_FOR_S = 2.0
LINE_EVERY_FRACTION = 0.1


class Progress:
    """Tracks done/total work and draws it; `enabled=False` makes every call a no-op."""

    def __init__(self, total: float, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.total = max(total, 1e-9)
        self.done = 0.0
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.monotonic()
        self._drawn_at = 0.0
        self._next_line = LINE_EVERY_FRACTION
        self._drew = False

    def add_total(self, extra: float) -> None:
        """The work estimate changed by `extra` (negative once it is known more precisely)."""
        self.total = max(self.total + extra, self.done, 1e-9)

    def advance(self, work: float, label: str = "") -> None:
        """`work` more is done; `label` says what finished."""
        self.done = min(self.total, self.done + work)
        if not self.enabled:
            return
        now = time.monotonic()
        elapsed = now - self.started
        fraction = self.done / self.total
        if self.tty:
            if now - self._drawn_at >= REDRAW_EVERY_S or fraction >= 1.0:
                self._draw(fraction, elapsed, label)
                self._drawn_at = now
        elif elapsed >= QUIET_FOR_S and fraction >= self._next_line:
            while self._next_line <= fraction:
                self._next_line += LINE_EVERY_FRACTION
            print(f"replay: {fraction:4.0%} done, {elapsed:.0f} s elapsed, about {self._left(fraction, elapsed)} "
                  f"left ({label})", file=self.stream, flush=True)

    @staticmethod
    def _left(fraction: float, elapsed: float) -> str:
        if fraction <= 0:
            return "?"
        seconds = int(elapsed * (1 - fraction) / fraction)
        return f"{seconds // 60}:{seconds % 60:02d}"

    def _draw(self, fraction: float, elapsed: float, label: str) -> None:
        filled = int(BAR_WIDTH * fraction)
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        text = f"\rreplay [{bar}] {fraction:4.0%} {int(elapsed)}s, ~{self._left(fraction, elapsed)} left  {label}"
        self.stream.write(text[:120].ljust(120))
        self.stream.flush()
        self._drew = True

    def close(self) -> None:
        """Ends the bar's line (terminal only)."""
        if self.enabled and self.tty and self._drew:
            self.stream.write("\n")
            self.stream.flush()
