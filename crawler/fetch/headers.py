"""Small, forgiving parsers for the response headers the crawler acts on.

Servers send every imaginable spelling; none of these functions raises on
bad input, they return None instead.
"""

from __future__ import annotations

import math
from datetime import UTC
from email.utils import parsedate_to_datetime


def parse_content_type(value: str | None) -> tuple[str | None, str | None]:
    """(media type lower-case without parameters, charset parameter) of a Content-Type value."""
    if not value:
        return None, None
    media_text, _, params = value.partition(";")
    media = media_text.strip().lower() or None
    charset = None
    if params:
        for param in params.split(";"):
            name, _, val = param.partition("=")
            if name.strip().lower() == "charset":
                charset = val.strip().strip("\"'").strip() or None
                break
    return media, charset


def parse_retry_after(value: str | None, now_s: float) -> float | None:
    """Seconds to wait from a Retry-After value: delay-seconds or an HTTP-date (relative to now_s)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:                     # "-0000" or no zone: HTTP-dates are GMT
        when = when.replace(tzinfo=UTC)
    try:
        return max(0.0, when.timestamp() - now_s)
    except (OverflowError, OSError, ValueError):
        return None
