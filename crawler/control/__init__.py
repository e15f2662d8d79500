"""Live control of a running crawl: pause, resume, seeds, blocked hosts, per-host delays, stop.

An operator steers the whole cluster with `crawler ctl -c FILE COMMAND`
(client.py). The client sends the command to every node of the cluster file,
over HTTP to the node's metrics server under `/control/...` (server.py): one
port per node already open to operators, no second listener to configure.
Reading `/control/status` is open like `/metrics`; every change carries a
bearer token derived from the cluster secret (token.py), which the peers
already share, so there is no new secret to distribute.

On the node, `Control` (controller.py) applies a command to the node's own
parts: the frontier stops handing out URLs (pause), the node's seed path
takes new URLs (splitter partition, then the DUE, so a URL seen before is
not fetched again), the frontier drops a blocked host's queue and the node
rejects its new URLs (hosts.py matches `HOST` and `.DOMAIN` patterns), the
frontier's politeness honours an operator's least delay per host. The
settings outlive the process (settings.py: `state/control.json`, replaced
atomically at each change); the counts of URLs dropped and rejected are
crawl totals saved with the node's other state at each checkpoint.
"""

from crawler.control.hosts import HostPatterns, PatternError, parse_pattern
from crawler.control.settings import ControlSettings
from crawler.control.token import control_token, token_status

# `Control` (controller.py) is imported from its module: `crawler ctl` needs none of the node's parts.
__all__ = ["ControlSettings", "HostPatterns", "PatternError", "control_token", "parse_pattern",
           "token_status"]
