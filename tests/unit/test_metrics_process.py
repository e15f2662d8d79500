"""register_process_metrics: the standard process and Python series plus crawler_node_info, on a given registry."""

from __future__ import annotations

import sys

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import crawler
from crawler._native import KERNELS, NATIVE
from crawler.metrics import register_process_metrics

PROCESS_FAMILIES = {"process_cpu_seconds", "process_resident_memory_bytes", "process_virtual_memory_bytes",
                    "process_start_time_seconds", "process_open_fds", "process_max_fds"}


def scrape(registry: CollectorRegistry) -> dict:
    return {fam.name: fam for fam in text_string_to_metric_families(generate_latest(registry).decode())}


def test_node_info_names_node_cluster_version_and_kernels():
    registry = CollectorRegistry()
    register_process_metrics(registry, node_id=2, cluster="east")
    info = scrape(registry)["crawler_node_info"]
    assert info.type == "gauge"
    assert [(s.labels, s.value) for s in info.samples] == [
        ({"node": "2", "cluster": "east", "version": crawler.__version__, "kernels": KERNELS}, 1.0)]
    assert KERNELS == ("compiled" if NATIVE is not None else "python")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ProcessCollector reads /proc (Linux only)")
def test_process_and_platform_series_are_exposed():
    registry = CollectorRegistry()
    register_process_metrics(registry, node_id=0, cluster="local", version="9.9")
    families = scrape(registry)
    assert PROCESS_FAMILIES <= set(families)
    assert families["process_cpu_seconds"].type == "counter"
    assert families["process_resident_memory_bytes"].samples[0].value > 0
    assert families["python_info"].samples[0].labels["version"] == ".".join(map(str, sys.version_info[:3]))
    assert families["crawler_node_info"].samples[0].labels["version"] == "9.9"


def test_registries_are_independent_and_one_registration_per_registry():
    first, second = CollectorRegistry(), CollectorRegistry()
    register_process_metrics(first, node_id=0, cluster="a")
    register_process_metrics(second, node_id=1, cluster="a")          # two in-process nodes: no clash
    assert scrape(second)["crawler_node_info"].samples[0].labels["node"] == "1"
    with pytest.raises(ValueError):
        register_process_metrics(first, node_id=0, cluster="a")       # the same series twice is refused
