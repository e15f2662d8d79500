"""Helpers the tests share, one room each, so that no test defines its own copy.

- `fixtures`: where the repository and the public test data are;
- `ports`: free ports, chosen as `crawler.ports` chooses them (below the ephemeral range);
- `processes`: child processes (crawler nodes, daemons): start, wait, stop by PID;
- `configs`: the config files and dicts of one-node crawls and of the three-node test cluster;
- `crawls`: reading what a crawl left (its JSON summary, crawl log) and in-process lingering nodes;
- `servers`: dnsmasq, nginx, tinyproxy and microsocks as children of a test;
- `strategies`: hypothesis strategies more than one property test draws from;
- `due`: fingerprints, URLs and batches of the DUE tests;
- `parse_reference`: reference parsers written from the standards' text;
- `replay`: reference cache simulations and stream logs of the replay tests;
- `metrics_docs`: what docs/metrics.md, the recording rules and the dashboard name.

Tests import from here, never from another test module.
"""
