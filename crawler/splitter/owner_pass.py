"""The host splitter's per-page pass: each link's owner and where it goes.

`route()` runs once per fetched page of a multi-node crawl, over all of the
page's links (~45 on the test web). In Python the pass cost ~50 us a page,
most of it interpreter overhead per link (a `str.find`, a slice, a dict
lookup, two list appends), which made it the largest cost a cluster adds to
a page. `split_owners` does the same work in one compiled call (crawler/_native/splitter_owners.c)
and `py_split_owners` is its pure-Python twin; tests check they agree.

The owner of a URL is memoised by its `scheme://authority` prefix, which
`str.find("/", start)` finds in a canonical URL (`start` skips the scheme's
"//"): a page's links share a few prefixes. On a miss the caller's
`resolve(origin, url)` parses the host, asks the partitioner and fills the memo.
"""

from __future__ import annotations

from collections.abc import Callable

from crawler._native import native_or

Resolve = Callable[[str, str], int]


def py_split_owners(urls: list[str], memo: dict[str, int], resolve: Resolve, me: int, start: int,
                    counts: list[int]) -> tuple[list[int], list[int], list[int] | None, list[str] | None]:
    """(owners, cross, keep, keep_urls): the owner of each URL; the indexes of the URLs
    another node owns; and, only when there are such, the indexes and the URLs this node
    keeps (else None, None: it keeps them all). `counts[d]` grows by the URLs owned by d."""
    if not 0 <= me < len(counts) or start < 0:
        raise ValueError("split_owners: me must index counts, start must be >= 0")
    urls = list(urls)                   # resolve() is the caller's code: work on a snapshot, as the C twin does
    owners = []
    for url in urls:
        cut = url.find("/", start)
        origin = url[:cut] if cut >= 0 else url
        owner = memo.get(origin)
        if owner is None:
            owner = resolve(origin, url)
        if not 0 <= owner < len(counts):
            raise ValueError(f"split_owners: owner {owner} of a URL is not a node (0..{len(counts) - 1})")
        owners.append(owner)
    for owner in owners:
        counts[owner] += 1
    cross = [i for i, o in enumerate(owners) if o != me]
    if not cross:
        return owners, cross, None, None
    keep = [i for i, o in enumerate(owners) if o == me]
    return owners, cross, keep, [urls[i] for i in keep]


split_owners = native_or("split_owners", py_split_owners)
COMPILED: bool = split_owners is not py_split_owners
