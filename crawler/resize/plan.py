"""Who takes part in a change of node count, in which role, and who owns a host before and after.

Node ids are positions: a resize from N to M nodes keeps ids 0..min(N, M)-1
(same data_dir), adds ids N..M-1 (new, empty data_dirs) or drops ids
M..N-1 (they hand everything over and are done). Every old node is a
*sender* (its hosts that change owner go to their new owner), every new node
a *receiver*; a kept node is both. During the resize the participants talk
over the peer protocol as one cluster of max(N, M) nodes: the new config's
nodes, then the dropped nodes at their old addresses.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from crawler.config import Config, ConfigError, cluster_secret
from crawler.config.schema import NodeConfig
from crawler.splitter import Partitioner


def data_dir_of(config: Config, node_id: int) -> Path:
    return Path(config.crawl.data_dir.replace("{node}", str(node_id)))


@dataclass
class ResizePlan:
    """Both configs, checked against each other, and what follows from them."""
    old: Config
    new: Config
    old_source: str
    new_source: str
    secret: bytes

    @classmethod
    def load(cls, old: Config, new: Config, old_source: str, new_source: str) -> ResizePlan:
        """The plan, or a ConfigError naming the file and key that does not fit."""
        if old.cluster.name != new.cluster.name:
            raise ConfigError(f"{new_source}: cluster.name {new.cluster.name!r} is not the crawl's "
                              f"({old.cluster.name!r} in {old_source}): a resize keeps the cluster")
        for source, config in ((old_source, old), (new_source, new)):
            ids = sorted(n.id for n in config.cluster.nodes)
            if ids != list(range(len(ids))):
                raise ConfigError(f"{source}: cluster.nodes: a resize needs node ids 0..N-1, found {ids}")
        n, m = len(old.cluster.nodes), len(new.cluster.nodes)
        if n == m and old.cluster.partition == new.cluster.partition:
            raise ConfigError(f"{new_source}: same node count ({n}) and partition as {old_source}: "
                              "nothing to resize; resume with `crawler run` or `crawler cluster`")
        if not old.store.crawl_log:
            raise ConfigError(f"{old_source}: store.crawl_log is false: a resize finds the seen URLs of a host "
                              "in the crawl log, so it cannot move hosts of a crawl that kept none")
        for i in range(min(n, m)):
            if data_dir_of(old, i) != data_dir_of(new, i):
                raise ConfigError(f"{new_source}: crawl.data_dir of node {i} is {data_dir_of(new, i)}, was "
                                  f"{data_dir_of(old, i)} in {old_source}: a kept node keeps its data_dir")
        old_secret = cluster_secret(old, old_source)
        new_secret = cluster_secret(new, new_source) if max(n, m) > 1 else old_secret
        secret = new_secret or old_secret
        if not secret:
            raise ConfigError(f"{new_source}: a resize talks over the peer protocol and needs the cluster "
                              "secret (cluster.secret_env or cluster.secret_file)")
        if old_secret and new_secret and old_secret != new_secret:
            raise ConfigError(f"{new_source}: the cluster secret differs from {old_source}'s")
        return cls(old, new, old_source, new_source, secret)

    @property
    def old_nodes(self) -> int:
        return len(self.old.cluster.nodes)

    @property
    def new_nodes(self) -> int:
        return len(self.new.cluster.nodes)

    @property
    def participants(self) -> int:
        return max(self.old_nodes, self.new_nodes)

    def is_sender(self, node_id: int) -> bool:
        return node_id < self.old_nodes

    def is_receiver(self, node_id: int) -> bool:
        return node_id < self.new_nodes

    def senders(self) -> list[int]:
        return list(range(self.old_nodes))

    def receivers(self) -> list[int]:
        return list(range(self.new_nodes))

    def nodes(self) -> list[NodeConfig]:
        """The resize's own cluster: the new config's nodes, then the dropped ones at their old addresses."""
        by_id = {n.id: n for n in self.old.cluster.nodes}
        by_id.update({n.id: n for n in self.new.cluster.nodes})
        return [by_id[i] for i in range(self.participants)]

    def data_dir(self, node_id: int) -> Path:
        return data_dir_of(self.new if self.is_receiver(node_id) else self.old, node_id)

    def old_owner(self) -> Partitioner:
        return Partitioner(self.old_nodes, self.old.cluster.partition)

    def new_owner(self) -> Partitioner:
        return Partitioner(self.new_nodes, self.new.cluster.partition)

    @property
    def run_id(self) -> str:
        """The same for every participant and every rerun of this resize: staged records carry it, so a
        rerun's records and a finished participant's answers are recognised."""
        key = "\n".join([self.old.cluster.name, str(self.old_nodes), self.old.cluster.partition,
                         str(self.new_nodes), self.new.cluster.partition])
        return hashlib.sha256(key.encode()).hexdigest()[:16]
