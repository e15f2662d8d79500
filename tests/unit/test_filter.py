import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.config.schema import FilterConfig
from crawler.filter import HostBudget, URLFilter


@pytest.mark.parametrize("url, reason", [
    ("http://a.test/", None),
    ("http://a.test/" + "x" * 3000, "too_long"),
    ("http://a.test/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16", None),           # 16 slashes
    ("http://a.test/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/", "depth"),       # 17
    ("http://a.test/a/b/a/b/a/x.html", None),                                 # a three times
    ("http://a.test/a/b/a/b/a/b/a/x.html", "repeated_segment"),               # a four times
    ("http://a.test/a/b/a/b/a/?q=/a/a/a/a/a", None),                          # query not counted
    ("http://a.test:8080/x", None),
])
def test_rules(url, reason):
    assert URLFilter(FilterConfig()).check(url) == reason


def test_domains_match_on_label_boundaries():
    f = URLFilter(FilterConfig(allow_domains=["example.org"], deny_domains=["bad.example.org"]))
    assert f.check("http://example.org/") is None
    assert f.check("http://www.example.org:81/") is None
    assert f.check("http://notexample.org/") == "domain"
    assert f.check("http://x.bad.example.org/") == "domain"
    assert f.check("http://[::1]:80/") == "domain"


_labels = st.sampled_from(["a", "b", "example", "org", "x-y", "1"])
_domains = st.lists(_labels, min_size=1, max_size=4).map(".".join)


@settings(max_examples=300, deadline=None)
@given(host=_domains, listed=st.lists(_domains, max_size=6))
def test_domain_lookup_agrees_with_the_suffix_rule(host, listed):
    """The per-label set lookup is the documented rule: the host is a listed domain or ends in
    "." + one of them."""
    expected = any(host == d or host.endswith("." + d) for d in listed)
    f = URLFilter(FilterConfig(allow_domains=listed))
    assert (f.check(f"http://{host}/") is None) == (expected or not listed)


def test_filter_counts_by_reason_and_keeps_order():
    f = URLFilter(FilterConfig(deny_extensions=[".zip"], max_url_bytes=40))
    urls = ["http://a.test/1", "http://a.test/f.ZIP", "http://a.test/" + "y" * 40, "http://a.test/2"]
    assert f.filter(urls) == ["http://a.test/1", "http://a.test/2"]
    assert f.rejected == {"extension": 1, "too_long": 1}


def test_host_budget():
    b = HostBudget(2)
    assert [b.admit("a"), b.admit("a"), b.admit("a"), b.admit("b")] == [True, True, False, True]
    assert b.refused == 1
    assert all(HostBudget(0).admit("a") for _ in range(10))


def test_repeats_on_a_page_are_kept_and_each_counted():
    f = URLFilter(FilterConfig(max_path_depth=2))
    urls = ["http://a.test/x", "http://a.test/1/2/3", "http://a.test/x", "http://a.test/1/2/3"]
    assert f.filter(urls) == ["http://a.test/x", "http://a.test/x"]
    assert f.rejected == {"depth": 2}


def test_repeated_segment_prefilter_agrees_with_plain_count():
    import random
    from collections import Counter
    rng = random.Random(3)
    f = URLFilter(FilterConfig(max_path_depth=64, max_repeated_segments=3))
    for _ in range(3000):
        segs = [rng.choice("abcde") for _ in range(rng.randint(0, 12))]
        path = "/" + "/".join(segs) + rng.choice(["", "/"])
        counts = Counter(s for s in path.split("/") if s)
        expected = "repeated_segment" if counts and max(counts.values()) > 3 else None
        assert f.check("http://a.test" + path) == expected, path
