"""A progress bar on standard error for long replays (tqdm).

Work is measured in estimated seconds (each simulation's cost is guessed
from its policy and the stream's length), so the bar and the time left move
evenly even though an LRU pass and a CLOCK run of the same stream differ in
cost tenfold; the estimate is corrected as tasks finish (`add_total`). tqdm
draws the bar (a terminal redraws in place); in a log (no terminal) it
writes a line at most every `LOG_EVERY_S` and only once the run has lasted
that long, so short runs stay silent in logs and tests.
"""

from __future__ import annotations

import sys
from typing import TextIO

from tqdm import tqdm

REDRAW_EVERY_S = 0.2           # a terminal's redraws
LOG_EVERY_S = 10.0             # a log's lines (a short run writes none)
BAR_FORMAT = "replay {l_bar}{bar:30}| {elapsed}, ~{remaining} left  {postfix}"
LABEL_CHARS = 60


class ReplayProgress:
    """Done/total work in estimated seconds; `enabled=False` makes every call a no-op."""

    def __init__(self, total: float, enabled: bool = True, stream: TextIO | None = None) -> None:
        stream = stream if stream is not None else sys.stderr
        tty = bool(getattr(stream, "isatty", lambda: False)())
        self.enabled = enabled
        self._bar = tqdm(total=max(total, 1e-9), file=stream, disable=not enabled, leave=True,
                         mininterval=REDRAW_EVERY_S if tty else LOG_EVERY_S,
                         delay=0 if tty else LOG_EVERY_S, bar_format=BAR_FORMAT, dynamic_ncols=tty)
        self.total = max(total, 1e-9)
        self.done = 0.0

    def add_total(self, extra: float) -> None:
        """The work estimate changed by `extra` (negative once it is known more precisely)."""
        self.total = max(self.total + extra, self.done, 1e-9)
        self._bar.total = self.total

    def advance(self, work: float, label: str = "") -> None:
        """`work` more is done; `label` says what finished."""
        step = min(self.total, self.done + work) - self.done
        self.done += step
        if self.enabled:
            self._bar.set_postfix_str(label[:LABEL_CHARS], refresh=False)
            self._bar.update(step)

    def close(self) -> None:
        """Ends the bar (its line on a terminal)."""
        self._bar.close()
