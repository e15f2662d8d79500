"""The config files of the tests' crawls, built in one place.

Most crawls are one node at the crawler's defaults but for what a test sets;
`one_node_config` writes that stanza once. `cluster_config` is the three-node
cluster on loopback that the cluster, Prometheus, replay and kill tests share.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from tests.support.ports import free_port

NODES = 3                                                   # nodes of the test cluster
SECRET = {"TEST_CLUSTER_SECRET": "a-test-secret-of-some-length"}   # its secret, as the environment of its nodes


def write_config(path: Path, config: dict) -> Path:
    """Write a config file (the crawls of these tests run at the crawler's defaults but for what they set)."""
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def one_node_config(data_dir: Path | str, *, seeds_file: Path | str | None = None, seeds: list[str] | None = None,
                    metrics_port: int = 0, crawl: dict | None = None, **sections: Any) -> dict:
    """A one-node cluster writing under `data_dir`, seeded from `seeds_file` or `seeds`.

    Its peer port is 0 (the node binds whatever the kernel gives: nobody connects to it), and so is its
    /metrics port unless the test reads it. `crawl` adds keys to the crawl section; `sections` are the
    other top-level keys (`workers=8`, `fetch={...}`), in the order given.
    """
    crawl_section: dict[str, Any] = {}
    if seeds_file is not None:
        crawl_section["seeds_file"] = str(seeds_file)
    if seeds is not None:
        crawl_section["seeds"] = seeds
    crawl_section["data_dir"] = str(data_dir)
    crawl_section.update(crawl or {})
    return {"cluster": {"nodes": [{"id": 0, "peer_port": 0, "metrics_port": metrics_port}]},
            "crawl": crawl_section, **sections}


def cluster_config(tmp: Path, seeds: str, ca_file: str | None = None, **extra: Any) -> dict:
    """The test cluster: NODES nodes on 127.0.0.1, node i fetching from 127.0.0.{i+1}; `extra` replaces sections."""
    config = {
        "cluster": {"name": "test", "secret_env": "TEST_CLUSTER_SECRET", "nodes": [
            {"id": i, "host": "127.0.0.1", "peer_port": free_port(), "metrics_port": free_port(),
             "source_address": f"127.0.0.{i + 1}"} for i in range(NODES)]},
        "crawl": {"seeds_file": seeds, "data_dir": str(tmp / "data" / "node-{node}")},
        "workers": 32,
        "fetch": {"dns": {"overrides": {"*.web.test": "127.0.0.1"}}, "read_timeout_s": 2, "total_timeout_s": 15,
                  "max_body_bytes": 2 << 20, "max_decoded_bytes": 8 << 20,
                  **({"tls": {"ca_file": ca_file}} if ca_file else {})},
        "splitter": {"batch_size": 50, "batch_ms": 50, "log": {"enabled": True}},
        "metrics": {"progress_interval_s": 0},
    }
    config.update(extra)
    return config
