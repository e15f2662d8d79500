"""Configuration: one YAML file describes the whole cluster.

`schema.py` declares every key with its type, default, unit and meaning;
`loader.py` validates a file against it and stops with a message naming the
file, the key path and what was expected. `docs.py` renders the reference in
`docs/configuration.md` from the same schema, so the two cannot drift.
"""

from crawler.config.loader import ConfigError, cluster_secret, from_dict, load, node_config
from crawler.config.schema import Config

__all__ = ["Config", "ConfigError", "cluster_secret", "from_dict", "load", "node_config"]
