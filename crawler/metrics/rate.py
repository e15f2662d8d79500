"""The pages-per-second figure of a progress line: over the last interval, next to the average.

An average since the start decays slowly: while the last URLs of a crawl
waited on one slow host, a progress line fell from 722/s to 153/s with
nothing fetched at all. The rate over the interval since the last line is 0
the moment nothing is fetched, and says what the crawl does now; the average
stays beside it for the whole run.
"""

from __future__ import annotations


class Rate:
    """Counts per second between two calls, and since the start."""

    def __init__(self, started: float) -> None:
        self._started = self._last_t = started
        self._last_n = 0

    def text(self, count: int, now: float) -> str:
        """'R/s now, A/s average' for `count` so far at time `now`; the next call measures from here."""
        interval = now - self._last_t
        recent = (count - self._last_n) / interval if interval > 0 else 0.0
        average = count / (now - self._started) if now > self._started else 0.0
        self._last_t, self._last_n = now, count
        return f"{recent:.1f}/s now, {average:.1f}/s average"
