"""Reports of a crawl for its operator: `crawler report -c FILE --out DIR` (hosts, status codes, MIME types,
seeds, summary; CSV and JSON).

The numbers come from one place, a `Tally` (tally.py) fed with what the crawl
log records, fetch by fetch:

- live, the node keeps its tally as it records each fetch (crawler/node/records.py),
  saves it at every checkpoint with the crawl log's offset (state.py) and
  serves it at `GET /control/report` (endpoint.py); after a SIGKILL it counts the
  crawl-log lines written after that checkpoint again, and its totals (`/metrics`,
  the summary) are set from the tally, so nothing a killed node fetched is lost
  from them;
- for a stopped crawl the report reads the same lines from each node's data_dir
  (collect.py), the frontier's files for what is still queued (queued.py) and
  the control settings for blocks.

build.py turns the nodes' shares into the cluster's tables, seeds.py says which
hosts a seed's scope covers, write.py writes the files, cli.py is the command.
"""
