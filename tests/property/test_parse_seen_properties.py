"""The content-seen set against a plain Python set (hypothesis).

What matters for not losing pages: a "seen" answer is only ever given for a
fingerprint added before (a false "seen" would skip a page's links). The set
may forget, and only once it holds as many entries as it may: until then
(its size equal to the distinct fingerprints given) it is the plain set
exactly, and a capacity of one CLOCK set (32) or less that is at least the
distinct count never forgets at all.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.strategies import fingerprint_traces

from crawler.cache.clock_sets import WAYS
from crawler.parse import ContentSeen

MASK64 = (1 << 64) - 1
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def streams(max_len: int = 300) -> st.SearchStrategy[list[int]]:
    """Fingerprints of fetched bodies: a pool with edge values, repeats drawn from it."""
    return fingerprint_traces(max_len, max_distinct=150)


@SETTINGS
@given(stream=streams(), capacity=st.integers(1, 4 * WAYS + 5))
def test_seen_only_for_what_was_added_and_exact_until_it_forgets(stream, capacity):
    seen, model = ContentSeen(capacity), set()
    for fp in stream:
        answer = seen.check_and_add(fp)
        if answer:
            assert fp in model, "a false 'seen' would skip a page's links"
        if seen.size == len(model | {fp}):                # nothing forgotten yet
            assert answer == (fp in model)
        model.add(fp)
        assert seen.size <= capacity


@SETTINGS
@given(stream=streams(max_len=120), data=st.data())
def test_with_room_for_every_fingerprint_it_is_the_set(stream, data):
    kept = set(list(dict.fromkeys(stream))[:WAYS])       # at most one set's worth of distinct fingerprints
    stream = [fp for fp in stream if fp in kept]
    capacity = data.draw(st.integers(max(len(kept), 1), WAYS))
    seen, model = ContentSeen(capacity), set()
    for fp in stream:
        assert seen.check_and_add(fp) == (fp in model)
        model.add(fp)
    assert seen.size == len(model)


@SETTINGS
@given(stream=streams(max_len=60))
def test_off_never_says_seen(stream):
    seen = ContentSeen(0)
    assert not any(seen.check_and_add(fp) for fp in stream)
