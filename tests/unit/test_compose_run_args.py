"""The compose file's crawler services translate to `podman run` flags (the container image test's input).

tests/integration/test_container_image.py runs deploy/compose.yaml's nodes through
`compose_run_args`; a compose key it cannot translate must fail here, without podman, rather
than be silently dropped from what the image test runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from tests.support.containers import ServiceMounts, apt_mirror, compose_run_args, interpolate
from tests.support.fixtures import REPO

COMPOSE = REPO / "deploy" / "compose.yaml"


def crawler_services() -> dict[str, dict]:
    doc = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    return {name: s for name, s in doc["services"].items() if name.startswith("crawler-")}


def mounts() -> ServiceMounts:
    return ServiceMounts(networks={"crawl": "t-crawl"}, volumes={f"crawler-{i}-data": f"t-v{i}" for i in range(3)},
                         configs={"crawler-cluster": Path("/tmp/c.yaml")}, host_ports={9400: 19400})


def test_every_crawler_service_translates():
    services = crawler_services()
    assert len(services) == 3
    for name, service in services.items():
        args = compose_run_args(name, service, {"CRAWLER_CLUSTER_SECRET": "s" * 64}, mounts())
        joined = " ".join(args)
        assert "--read-only" in args and "--cap-drop ALL" in joined and "--tmpfs /tmp" in joined
        assert f"--network t-crawl --network-alias {name}" in joined
        assert f"--env CRAWLER_NODE={name.rsplit('-', 1)[1]}" in joined
        assert f"--env CRAWLER_CLUSTER_SECRET={'s' * 64}" in joined
        assert "--publish 127.0.0.1:19400:9400" in joined
        assert "--volume /tmp/c.yaml:/etc/crawler/cluster.yaml:ro" in joined


def test_an_unknown_compose_key_is_an_error():
    name, service = next(iter(crawler_services().items()))
    with pytest.raises(ValueError, match="user"):
        compose_run_args(name, {**service, "user": "0"}, {"CRAWLER_CLUSTER_SECRET": "x"}, mounts())


def test_interpolation_follows_compose():
    env = {"A": "1", "E": ""}
    assert interpolate("${A}-$A-$$A-${B:-d}-${E:-d}-${E-d}", env) == "1-1-$A-d-d-"
    with pytest.raises(ValueError, match="set it"):
        interpolate("${B:?set it}", env)
    with pytest.raises(ValueError, match="not set"):
        interpolate("${B}", env)


def test_apt_mirror_reads_both_source_formats(tmp_path):
    one_line = tmp_path / "sources.list"
    one_line.write_text("deb [arch=amd64] http://mirror.example/debian bookworm main\n")
    deb822 = tmp_path / "debian.sources"
    deb822.write_text("Types: deb\nURIs: http://sec.example/debian-security\nSuites: bookworm-security\n\n"
                      "Types: deb\nURIs: http://m2.example/debian\nSuites: bookworm bookworm-updates\n")
    assert apt_mirror([one_line]) == "http://mirror.example/debian"
    assert apt_mirror([deb822]) == "http://m2.example/debian"
    assert apt_mirror([tmp_path / "absent"]) == "http://deb.debian.org/debian"
