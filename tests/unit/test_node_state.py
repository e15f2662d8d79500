"""A node refuses to reuse an earlier crawl's state by accident; --fresh starts over."""

import pytest
from tests.support.configs import one_node_config

from crawler.config import ConfigError, from_dict
from crawler.node import Node


def config(tmp_path):
    return from_dict(one_node_config(tmp_path / "node-{node}"))


def test_used_data_dir_is_refused_then_fresh_starts_over(tmp_path):
    first = Node(config(tmp_path), 0)
    first.due.submit(*_one())
    first.due.flush()
    first.due.close()
    warc = tmp_path / "node-0" / "warc"
    warc.mkdir()
    (warc / "keep.warc.gz").write_bytes(b"x")
    with pytest.raises(ConfigError, match="--fresh") as info:
        Node(config(tmp_path), 0)
    assert "node-0" in str(info.value) and "due" in str(info.value)
    again = Node(config(tmp_path), 0, fresh=True)
    assert again.due.stats()["disk_fingerprints"] == 0          # the old seen-set is gone
    assert (warc / "keep.warc.gz").exists()                      # archives are kept
    again.due.close()


def _one():
    from crawler.urls import fingerprints
    urls = ["http://a.test/"]
    return fingerprints(urls), urls


def _state(tmp_path, **fields):
    import json
    d = tmp_path / "node-0"
    (d / "due").mkdir(parents=True, exist_ok=True)
    (d / "due" / "x").write_bytes(b"")
    state = {"cluster": "crawl", "node": 0, "nodes": 1, "partition": "modulo"}
    state.update(fields)
    (d / "state.json").write_text(json.dumps(state))


def test_unfinished_crawl_of_the_same_node_is_resumed(tmp_path):
    c = config(tmp_path)
    _state(tmp_path, cluster=c.cluster.name, partition=c.cluster.partition, finished=False)
    node = Node(c, 0)
    assert node.resuming
    node.due.close()


def test_another_crawl_is_refused(tmp_path):
    c = config(tmp_path)
    _state(tmp_path, cluster="someone-else", partition=c.cluster.partition)
    with pytest.raises(ConfigError, match="another crawl: cluster 'someone-else'"):
        Node(c, 0)


def test_finished_crawl_is_refused_and_fresh_starts_over(tmp_path):
    c = config(tmp_path)
    _state(tmp_path, cluster=c.cluster.name, partition=c.cluster.partition, finished=True, finished_at="then")
    with pytest.raises(ConfigError, match="finished at then.*--fresh"):
        Node(c, 0)
    node = Node(c, 0, fresh=True)
    assert not node.resuming and not (tmp_path / "node-0" / "state.json").exists()
    node.due.close()


def test_a_changed_node_count_is_refused_with_the_way_to_resize(tmp_path):
    c = config(tmp_path)
    _state(tmp_path, cluster=c.cluster.name, partition=c.cluster.partition, nodes=2)
    with pytest.raises(ConfigError, match=r"nodes 2 \(now 1\).*crawler resize"):
        Node(c, 0)


def test_state_json_keeps_the_last_resize_across_restarts(tmp_path):
    import json
    c = config(tmp_path)
    _state(tmp_path, cluster=c.cluster.name, partition=c.cluster.partition, resized={"run": "r", "from_nodes": 2})
    node = Node(c, 0)
    node.dir.write_state(finished=False)
    node.due.close()
    state = json.loads((tmp_path / "node-0" / "state.json").read_text())
    assert state["resized"] == {"run": "r", "from_nodes": 2} and state["finished"] is False
