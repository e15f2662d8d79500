"""The console: a page in the browser on every node's metrics port (`/`), showing the whole cluster.

An operator opens `http://<node>:<metrics_port>/` on any node and sees the
cluster: pages/s over the last ten minutes, each node's progress, cache hit
rates and frontier, the busiest and the failing hosts, fetch failures by
reason, paused or not; and, with the control token pasted in, pauses,
resumes, adds seeds and blocks hosts for the whole cluster.

- `tally.py`: what no counter holds: pages per second over the last
  minutes and counts per host, fed once per page fetch (bounded memory);
- `view.py`: this node's view and the cluster's, merged from every node's
  (pure: dicts in, dicts out);
- `server.py`: the routes. The page asks only the node that served it;
  that node gathers from its peers' open endpoints (their /metrics, as
  `crawler status` reads them, and /console/node) and relays changes to
  every node's /control endpoint with the operator's token;
- `static/`: the page, plain HTML, one script and one style sheet shipped
  as package data: no build step, nothing loaded from elsewhere (the chart
  is inline SVG).
"""

from crawler.console.server import Console
from crawler.console.tally import HostTally

__all__ = ["Console", "HostTally"]
