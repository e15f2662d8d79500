"""Hypothesis strategies that several property tests draw from."""

from __future__ import annotations

from hypothesis import strategies as st
from tests.support.due import MASK64

EDGE_FINGERPRINTS = [0, 1, MASK64, MASK64 - 1]    # both ends of the 64-bit range, where bugs hide
SMALL_FINGERPRINTS = 40                            # small values collide in sets and rings of tiny caches


@st.composite
def fingerprint_traces(draw: st.DrawFn, max_len: int, max_distinct: int) -> list[int]:
    """A request sequence of 64-bit fingerprints with repeats, as a cache sees it.

    A pool of up to `max_distinct` distinct fingerprints (small ones, the range's
    ends and arbitrary ones), then up to `max_len` requests drawn from it.
    """
    pool = draw(st.lists(st.one_of(st.integers(0, SMALL_FINGERPRINTS), st.sampled_from(EDGE_FINGERPRINTS),
                                   st.integers(0, MASK64)), min_size=1, max_size=max_distinct, unique=True))
    picks = draw(st.lists(st.integers(0, len(pool) - 1), max_size=max_len))
    return [pool[i] for i in picks]
