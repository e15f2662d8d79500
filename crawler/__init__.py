"""A distributed, Mercator-style web crawler.

The package layout is the pipeline of DESIGN.md: `frontier` -> `fetch` ->
`parse` -> `urls` -> `filter` -> `splitter` (-> `peers`) -> `due` -> back to
`frontier`, with `cache` (the pluggable URL caches), `store` (WARC and crawl
log), `metrics` and `config` beside them; `node` wires one crawling process.
"""

__version__ = "0.1.0"
