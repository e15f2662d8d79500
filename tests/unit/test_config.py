import textwrap

import pytest
import yaml
from tests.support.fixtures import REPO

from crawler.config import Config, ConfigError, cluster_secret, from_dict, load
from crawler.config.docs import render_example, render_markdown


def write(tmp_path, text):
    path = tmp_path / "crawl.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_empty_file_gives_defaults(tmp_path):
    config = load(write(tmp_path, ""))
    assert config.workers == 256
    assert config.splitter.cache.size == 65536
    assert config.due.cache.size == 262144
    assert config.politeness.delay_factor == 10


def test_design_example_keys_load(tmp_path):
    path = write(tmp_path, """
        cluster:
          name: demo
          secret_env: CRAWLER_CLUSTER_SECRET
          partition: modulo
          nodes:
            - {id: 0, host: 127.0.0.1, peer_port: 7400, metrics_port: 9400, source_address: 127.0.0.1}
            - {id: 1, host: 127.0.0.1, peer_port: 7401, metrics_port: 9401, source_address: 127.0.0.2}
        crawl:
          seeds_file: seeds.txt
          data_dir: data/node-{node}
          max_pages: 0
          max_duration_s: 0
          user_agent: "ExampleCrawler/1.0 (+https://example.org/crawler)"
        workers: 256
        fetch:
          allow_private_networks: false
          max_body_bytes: 16777216
          connect_timeout_s: 10
          read_timeout_s: 30
          dns: {nameservers: ["127.0.0.1:5353"], overrides: {"*.web.test": 127.0.0.1}}
        politeness: {delay_factor: 10, min_delay_s: 0, respect_crawl_delay: true}
        filter: {allow_domains: [], max_url_bytes: 2048}
        splitter:
          cache: {policy: clock, size: 65536}
          cache_scope: cross
          batch_size: 1000
          batch_ms: 200
          log: {enabled: false}
        due: {cache: {policy: clock, size: 262144}, buffer_size: 1000000}
        store: {warc: {enabled: true}}
        metrics: {bind: 127.0.0.1}
        """)
    config = load(path)
    assert [n.source_address for n in config.cluster.nodes] == ["127.0.0.1", "127.0.0.2"]
    assert config.crawl.seeds_file == str(tmp_path / "seeds.txt")
    assert config.crawl.data_dir == str(tmp_path / "data/node-{node}")
    assert config.fetch.dns.overrides == {"*.web.test": "127.0.0.1"}


@pytest.mark.parametrize("text, where, expected", [
    ("workers: many", "workers", "an integer"),
    ("fetch: {read_timeout_s: fast}", "fetch.read_timeout_s", "a number"),
    ("splitter: {cach: {}}", "splitter.cach", "unknown key"),
    ("politeness: {delay_factor: -1}", "politeness.delay_factor", ">= 0"),
    ("cluster: {partition: ring}", "cluster.partition", "'modulo', 'rendezvous'"),
    ("fetch: {allow_private_networks: yes please}", "fetch.allow_private_networks", "true or false"),
    ("due: {cache: {policy: min}}", "due.cache.policy", "offline only"),
    ("splitter: {cache: {policy: lfu}}", "splitter.cache.policy", "expected one of clock, clock-sets, lru"),
    ("crawl: {seeds: [ftp://x]}", "crawl.seeds[0]", "http(s) URL"),
    ("fetch: {dns: {overrides: {a.test: nowhere}}}", "fetch.dns.overrides.a.test", "an IP address"),
    ("cluster: {nodes: [{id: 0}, {id: 2}]}", "cluster.nodes", "0..1"),
    ("- just\n- a list", "(top level)", "a mapping"),
])
def test_bad_config_names_file_and_key(tmp_path, text, where, expected):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load(path)
    message = str(info.value)
    assert str(path) in message and where in message and expected in message, message


def test_invalid_yaml_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not valid YAML"):
        load(write(tmp_path, "workers: [1, 2"))
    with pytest.raises(ConfigError, match="cannot read"):
        load(tmp_path / "absent.yaml")


def test_cluster_secret_required_for_several_nodes(tmp_path, monkeypatch):
    config = from_dict({"cluster": {"secret_env": "TEST_CRAWLER_SECRET",
                                    "nodes": [{"id": 0, "peer_port": 1},
                                              {"id": 1, "peer_port": 2, "metrics_port": 9}]}})
    monkeypatch.delenv("TEST_CRAWLER_SECRET", raising=False)
    with pytest.raises(ConfigError, match="TEST_CRAWLER_SECRET"):
        cluster_secret(config)
    monkeypatch.setenv("TEST_CRAWLER_SECRET", "s3cret")
    assert cluster_secret(config) == b"s3cret"
    secret_file = tmp_path / "secret"
    secret_file.write_text("from-file\n")
    config.cluster.secret_file = str(secret_file)
    assert cluster_secret(config) == b"from-file"


def test_reference_docs_and_example_are_generated_from_schema():
    """docs/configuration.md and config/example.yaml must match the schema (run python -m crawler.config.docs)."""
    assert (REPO / "docs" / "configuration.md").read_text() == render_markdown()
    assert (REPO / "config" / "example.yaml").read_text() == render_example()
    assert from_dict(yaml.safe_load(render_example())) == Config()


def test_both_clocks_are_known_to_registry_config_and_replay(tmp_path):
    """`clock` (the paper's exact ring) and `clock-sets` (the set-associative default) by name, everywhere."""
    from crawler.cache import DEFAULT_POLICY, ONLINE_POLICIES, PAPER_POLICIES, POLICIES, cache_from_config
    from crawler.replay.simulate import ReplayOptions

    assert {"clock", "clock-sets"} <= set(POLICIES) & set(ONLINE_POLICIES) & set(PAPER_POLICIES)
    assert {"clock", "clock-sets"} <= set(ReplayOptions().policies)
    assert Config().splitter.cache.policy == Config().due.cache.policy == DEFAULT_POLICY == "clock-sets"
    for name in ("clock", "clock-sets"):
        config = load(write(tmp_path, f"splitter: {{cache: {{policy: {name}, size: 64}}}}"))
        cache = cache_from_config(config.splitter.cache)
        assert cache.name == name and type(cache) is POLICIES[name]
