"""The image builds and the compose file's 3-node cluster crawls the test web in containers.

Nothing comes from a container registry: the base image is made with debootstrap from the
Debian mirror apt uses and passed to deploy/Dockerfile as its `PYTHON_IMAGE` build argument
(tests/support/containers.py). The image is built from the compose file's own `build` section,
and each `crawler-N` service of deploy/compose.yaml runs as a podman container with the
service's own settings (entrypoint, environment, hardening, published metrics port, volume,
cluster file), translated by `compose_run_args`. The cluster file is the compose file's, with
only what a test must change: the seeds (the test web instead of a real site), `fetch.dns.overrides`
pointing the test web's hosts at its container, and a short `metrics.linger_s`.

The test web (`crawler testweb`, from the same image) runs in a fourth container on the same
bridge network; a real Prometheus scrapes the nodes through their published ports with the
project's prometheus.yml and rules.yml.

The containers run inside a network namespace the test creates itself (the project's network
tests touch loopback or their own namespaces only): podman's bridge, its 10.89.x.x addresses,
ip_forward and netavark's iptables rules are made in it and vanish with it. Prometheus, the
published ports and the test's own queries are on that namespace's loopback. Only the image
build runs in the host's namespace, with `--network host` (pip needs the package index; such a
build makes no bridge).

Checked from outside the nodes: the web's access log has exactly the manifest's requests, each
host fetched only from its owner's container address, no host with two requests in flight;
Prometheus saw every node up and its page counters add up to the pages the web served; the
bridge was in the test's namespace and not the host's, and the host's ip_forward and
`iptables-save` are what they were before.

Everything the test makes (containers, volumes, network, images, the namespace) is removed before
the checks run. Skips, saying why, where podman or debootstrap is missing or containers cannot run.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import time
from pathlib import Path

import pytest
import yaml
from tests.support.containers import (
    HOST_CA_BUNDLE,
    Podman,
    ServiceMounts,
    base_image,
    compose_run_args,
    tmpfs,
    unavailable,
)
from tests.support.fixtures import REPO
from tests.support.netns import host_network_state, link_exists, own_netns
from tests.support.ports import free_port
from tests.support.prometheus import JOB, Prometheus, moment_of_final_values, prometheus_config

from crawler.splitter import Partitioner
from crawler.testweb.audit import ROBOTS_PATH, compare, overlaps, read_access_log
from crawler.testweb.manifest import WebManifest

pytestmark = [pytest.mark.slow, pytest.mark.beside]   # scripts/test.sh runs it beside the fast tests

DEPLOY = REPO / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
IMAGE_UID = 10001                  # the image's crawler user (deploy/Dockerfile)
WEB_PORT = 8080                    # inside the web's container: nothing else listens there
WEB_DOMAIN = "web.test"
WEB_ARGS = ["--hosts", "60", "--pages", "600", "--no-slow-host", "--no-bad-host", "--no-trap",
            "--crawl-delay-hosts", "0"]
LINGER_S = 6.0                     # final values stay scrapeable this long after the crawl
WEB_READY_TIMEOUT_S = 60.0
HEALTH_TIMEOUT_S = 30.0
CRAWL_TIMEOUT_S = 180.0
POLL_S = 0.2
ROOTFS_TMPFS_SIZE = "1g"           # debootstrap's tree: ~370 MB


def say(line: str) -> None:
    """Progress on stderr (pytest -s shows it): the test's steps take minutes."""
    print(f"test_container_image: {line}", file=sys.stderr, flush=True)


def skip(reason: str) -> None:
    print(reason)
    pytest.skip(reason)


def cluster_file(compose: dict, seeds: list[str], web_address: str) -> dict:
    """The compose file's cluster file with the test web as the web: seeds, DNS override, short linger."""
    (config_name,) = {c["source"] for name, s in compose["services"].items() if name.startswith("crawler-")
                      for c in s["configs"]}
    config = yaml.safe_load(compose["configs"][config_name]["content"])
    config["crawl"]["seeds"] = seeds
    config.setdefault("fetch", {}).setdefault("dns", {})["overrides"] = {f"*.{WEB_DOMAIN}": web_address}
    config["metrics"]["linger_s"] = LINGER_S
    return config


def wait_for_web(podman: Podman, name: str) -> dict:
    """The test web's ready line (its stdout), once it has printed it."""
    deadline = time.monotonic() + WEB_READY_TIMEOUT_S
    while time.monotonic() < deadline:
        out, err = podman.logs(name)
        for line in out.splitlines():
            if line.startswith("{"):
                return json.loads(line)
        if not podman.inspect(name)["State"]["Running"]:
            raise RuntimeError(f"the test web's container stopped: {err[-2000:]}")
        time.sleep(POLL_S)
    raise RuntimeError(f"the test web printed no ready line within {WEB_READY_TIMEOUT_S} s")


def wait_healthy(podman: Podman, name: str) -> None:
    """The image's own health check (`crawler-entrypoint health`) passes inside the node's container."""
    deadline = time.monotonic() + HEALTH_TIMEOUT_S
    result = None
    while time.monotonic() < deadline:
        result = podman("exec", name, "crawler-entrypoint", "health", check=False)
        if result.returncode == 0:
            return
        time.sleep(POLL_S)
    raise AssertionError(f"{name}: crawler-entrypoint health failed: {result.stderr if result else ''}")


@pytest.fixture(scope="session")
def rootfs_cache(tmp_path_factory):
    """Where debootstrap's tree is kept for this test run (~370 MB, a tmpfs): gone when the run ends."""
    reason = unavailable()
    if reason:
        skip(reason)
    with tmpfs(tmp_path_factory.mktemp("rootfs-cache"), ROOTFS_TMPFS_SIZE) as cache:
        yield cache


@pytest.fixture(scope="module")
def container_crawl(tmp_path_factory, rootfs_cache):
    """Build the image, run the compose cluster and the test web in containers under Prometheus, in a
    network namespace of the test's own; remove all of it, then yield what the checks need.

    Yields a dict: summaries (node id -> JSON summary), requests and manifest of the web, the
    node containers' addresses and `podman inspect` while they ran, their compose services, the
    partitioner of the cluster file, Prometheus's answers (up and pages per node) at a moment it
    held the final values, where the bridge was, the host's network state before and after, the
    measured seconds of each step.
    """
    if shutil.which("prometheus") is None:
        skip("prometheus not installed (Debian package prometheus; scripts/test.sh installs it)")
    tmp = tmp_path_factory.mktemp("container-image")
    prefix = f"crawlertest-{os.getpid()}"
    times: dict[str, float] = {}
    compose = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    services = {name: s for name, s in compose["services"].items() if name.startswith("crawler-")}
    host_before = host_network_state()
    with own_netns(f"{prefix}-net") as netns:
        podman = Podman(tmp, prefix, netns)
        prom = None
        try:
            base = f"localhost/{podman.prefix}-python:3.11-slim-bookworm"
            say("debootstrap (the base image, from the Debian mirror)")
            times.update(base_image(podman, rootfs_cache, base, tmp / "debootstrap.log"))
            probe = podman("run", "--rm", "--network", "none", base, "python3", "-c", "print('ok')", check=False)
            if probe.returncode != 0 or probe.stdout.strip() != "ok":
                skip(f"containers cannot run here: podman run failed ({probe.returncode}): "
                     f"{probe.stderr.strip()[-500:]}")

            say("podman build deploy/Dockerfile (in the host's namespace)")
            (build,) = {json.dumps(s["build"], sort_keys=True) for s in services.values()}
            build_spec = json.loads(build)
            context = (DEPLOY / build_spec["context"]).resolve()
            dockerfile = context / build_spec["dockerfile"]
            image = f"localhost/{podman.prefix}-crawler:0.1.0"
            t0 = time.monotonic()
            podman.build(image, context, dockerfile, tmp / "build.log",
                         "--format", "docker", "--network", "host",
                         "--volume", f"{HOST_CA_BUNDLE}:{HOST_CA_BUNDLE}:ro",
                         "--ignorefile", str(dockerfile.parent / (dockerfile.name + ".dockerignore")),
                         "--build-arg", f"PYTHON_IMAGE={base}")
            times["build_s"] = time.monotonic() - t0

            say(f"the crawl (in network namespace {netns})")
            t0 = time.monotonic()
            (network_name,) = compose["networks"]
            network = podman.network(network_name)
            web_dir = tmp / "web"
            web_dir.mkdir()
            os.chown(web_dir, IMAGE_UID, IMAGE_UID)
            web = podman.run("web", ["--network", network, "--read-only", "--read-only-tmpfs=false",
                                     "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
                                     "--volume", f"{web_dir}:/out"],
                             image, ["testweb", "--out", "/out", "--bind", "0.0.0.0", "--port", str(WEB_PORT),
                                     "--domain", WEB_DOMAIN, *WEB_ARGS])
            ready = wait_for_web(podman, web)
            bridge = podman.bridge(network)
            bridge_at = {"netns": link_exists(bridge, netns), "host": link_exists(bridge)}
            web_address = podman.address(web, network)
            seeds = (web_dir / Path(ready["seeds"]).name).read_text().split()
            config = cluster_file(compose, seeds, web_address)
            config_path = tmp / "cluster.yaml"
            config_path.write_text(yaml.safe_dump(config, sort_keys=False))
            config_path.chmod(0o644)

            env = {"CRAWLER_CLUSTER_SECRET": secrets.token_hex(32)}
            metrics_ports = {}
            names = {}
            prom_nodes = []
            for service_name, service in services.items():
                node_id = int(service["environment"]["CRAWLER_NODE"])
                (port_spec,) = service["ports"]
                container_port = int(port_spec.rsplit(":", 1)[1])
                metrics_ports[node_id] = free_port()
                mounts = ServiceMounts(
                    networks={network_name: network},
                    volumes={v.split(":")[0]: podman.volume(v.split(":")[0]) for v in service["volumes"]},
                    configs={c["source"]: config_path for c in service["configs"]},
                    host_ports={container_port: metrics_ports[node_id]})
                names[node_id] = compose_run_args(service_name, service, env, mounts), service_name
                prom_nodes.append({"id": node_id, "host": "127.0.0.1", "metrics_port": metrics_ports[node_id]})
            prom = Prometheus(tmp, prometheus_config(sorted(prom_nodes, key=lambda n: n["id"]),
                                                     config["cluster"]["name"]), netns).start()
            containers = {node_id: podman.run(service_name, args, image)
                          for node_id, (args, service_name) in names.items()}
            for name in containers.values():
                wait_healthy(podman, name)
            inspected = {node_id: podman.inspect(name) for node_id, name in containers.items()}
            addresses = {node_id: podman.address(name, network) for node_id, name in containers.items()}
            codes = {node_id: podman.wait(name, CRAWL_TIMEOUT_S) for node_id, name in containers.items()}
            ended = time.time()
            times["crawl_s"] = time.monotonic() - t0
            logs = {node_id: podman.logs(name) for node_id, name in containers.items()}
            assert codes == {i: 0 for i in containers}, {i: logs[i][1][-2000:] for i in containers}
            summaries = {i: json.loads(_lines(logs[i][0])[-1]) for i in containers}
            podman("stop", "-t", "10", web)             # the web closes its access log
            requests = read_access_log(web_dir / "access.log.jsonl")
            manifest = WebManifest.load(web_dir / "manifest.json")
            at = moment_of_final_values(prom, ended, LINGER_S, len(containers))
            seen = {"up": prom.values(f'up{{job="{JOB}"}}', at, "node"),
                    "pages": prom.values("crawler:pages:sum", at, "node")}
            say(f"times: {json.dumps({k: round(v, 1) for k, v in times.items()})}")
        finally:
            if prom is not None:
                prom.stop()
            left = podman.cleanup()
            if left:
                say(f"left behind: {left}")
    yield {"summaries": summaries, "requests": requests, "manifest": manifest, "addresses": addresses,
           "partitioner": Partitioner(len(containers), config["cluster"].get("partition", "modulo")),
           "prometheus": seen, "times": times, "inspected": inspected, "bridge_at": bridge_at,
           "host_before": host_before, "host_after": host_network_state(),
           "services": {int(svc["environment"]["CRAWLER_NODE"]): svc for svc in services.values()}}


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_the_web_served_exactly_the_manifest(container_crawl):
    requests, manifest = container_crawl["requests"], container_crawl["manifest"]
    result = compare(requests, manifest)
    assert result.ok, (sorted(result.missing)[:5], sorted(result.unexpected)[:5], list(result.duplicates)[:5])
    assert len(manifest.fetched) > 300
    assert all(s["stop"] == "done" for s in container_crawl["summaries"].values())


def test_every_host_was_fetched_from_its_owners_container(container_crawl):
    part, addresses = container_crawl["partitioner"], container_crawl["addresses"]
    assert len(set(addresses.values())) == len(addresses)
    wrong = [(r.host, r.peer) for r in container_crawl["requests"] if r.peer != addresses[part.owner(r.host)]]
    assert wrong == []
    summaries = container_crawl["summaries"].values()
    assert sum(s["urls_received"] for s in summaries) > 0          # the peers really talked


def test_no_host_had_two_requests_in_flight(container_crawl):
    assert overlaps(container_crawl["requests"]) == []


def test_prometheus_saw_every_node_and_all_pages(container_crawl):
    seen, summaries = container_crawl["prometheus"], container_crawl["summaries"]
    assert seen["up"] == {str(i): 1.0 for i in summaries}
    pages = seen["pages"]
    assert pages == {str(i): float(s["pages"]) for i, s in summaries.items()}
    served = sum(1 for r in container_crawl["requests"] if r.path != ROBOTS_PATH)
    assert sum(pages.values()) == served


def test_the_nodes_ran_with_the_compose_files_hardening(container_crawl):
    for node, info in container_crawl["inspected"].items():
        service, host = container_crawl["services"][node], info["HostConfig"]
        assert host["ReadonlyRootfs"] is bool(service["read_only"])
        assert set(host["Tmpfs"]) == set(service["tmpfs"])
        assert service["cap_drop"] == ["ALL"] and not info["EffectiveCaps"]
        assert [o.split(":")[0] for o in service["security_opt"]] == ["no-new-privileges"]
        assert any(o.startswith("no-new-privileges") for o in host["SecurityOpt"]), host["SecurityOpt"]
        assert info["Config"]["User"] == f"{IMAGE_UID}:{IMAGE_UID}"          # the image's USER
        assert info["Config"]["Hostname"] == service["hostname"]


def test_the_run_changed_nothing_in_the_hosts_network_namespace(container_crawl):
    assert container_crawl["bridge_at"] == {"netns": True, "host": False}
    before, after = container_crawl["host_before"], container_crawl["host_after"]
    assert after["ip_forward"] == before["ip_forward"]
    assert after["iptables"] == before["iptables"]
