"""deploy/: the image, compose file and Kubernetes manifests, checked offline.

Docker is not needed: the Dockerfile is read statically, the Kubernetes
manifests are validated against the Kubernetes JSON schemas bundled by
`kubernetes-validate`, and each deployment's cluster file goes through the
project's own config validator. The image's entrypoint script, run for real,
is tests/integration/test_deploy_entrypoint.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from tests.support.fixtures import REPO

from crawler.config import cluster_secret, from_dict

DEPLOY = REPO / "deploy"
K8S = DEPLOY / "k8s"
ENTRYPOINT = DEPLOY / "entrypoint.sh"
# The oldest Kubernetes the manifests target (persistentVolumeClaimRetentionPolicy is beta in 1.27)
# and the newest whose schemas the validator bundles.
MIN_K8S_VERSION = "1.27"
# Kinds that are not core Kubernetes API objects; checked structurally below.
NON_CORE_KINDS = {"Kustomization", "ServiceMonitor"}
PROCESS_TIMEOUT_S = 60


# --- helpers -------------------------------------------------------------------------

def k8s_objects() -> dict[str, dict]:
    """kind -> the one object of that kind under deploy/k8s."""
    objects: dict[str, dict] = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc:
                assert doc["kind"] not in objects, f"two {doc['kind']} objects in deploy/k8s"
                objects[doc["kind"]] = doc
    return objects


def k8s_manifest_files() -> list[Path]:
    return sorted(K8S.glob("*.yaml"))


def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))


def crawler_services(doc: dict) -> dict[str, dict]:
    return {name: svc for name, svc in doc["services"].items() if re.fullmatch(r"crawler-\d+", name)}


def container(sts: dict) -> dict:
    (c,) = sts["spec"]["template"]["spec"]["containers"]
    return c


def env_of(c: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in c.get("env", []) if "value" in e}


def mount_path(c: dict, volume: str) -> str:
    (path,) = [m["mountPath"] for m in c["volumeMounts"] if m["name"] == volume]
    return path


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    out, buf = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        op, _, rest = (buf + line).partition(" ")
        out.append((op.upper(), rest.strip()))
        buf = ""
    assert not buf, "Dockerfile ends inside a line continuation"
    return out


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for op, args in dockerfile_instructions((DEPLOY / "Dockerfile").read_text(encoding="utf-8")):
        if op == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((op, args))
    return stages


# --- Kubernetes ----------------------------------------------------------------------

def kubernetes_validate():
    return pytest.importorskip("kubernetes_validate", reason="pip install kubernetes-validate (the test extra)")


def k8s_versions(kv) -> list[str]:
    """The oldest bundled schema version not older than MIN_K8S_VERSION, and the newest."""
    from packaging.version import Version

    bundled = sorted(set(kv.utils.all_versions()), key=Version)
    oldest = next((v for v in bundled if Version(v) >= Version(MIN_K8S_VERSION)), bundled[-1])
    return sorted({oldest, bundled[-1]}, key=Version)


@pytest.mark.parametrize("path", k8s_manifest_files(), ids=lambda p: p.name)
def test_k8s_manifest_validates_against_kubernetes_schemas(path):
    kv = kubernetes_validate()
    for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
        if not doc or doc["kind"] in NON_CORE_KINDS:
            continue
        assert "namespace" not in doc["metadata"], f"{path.name}: manifests are namespace-free"
        for version in k8s_versions(kv):
            try:
                kv.validate(doc, version, strict=True)
            except kv.ValidationError as exc:
                where = ".".join(str(p) for p in exc.path)
                pytest.fail(f"{path.name}: {doc['kind']} invalid for Kubernetes {version} at {where}: {exc.message}")


def test_k8s_schema_validation_catches_a_typo():
    """The validator is strict: a misspelt field fails (so the test above means something)."""
    kv = kubernetes_validate()
    sts = k8s_objects()["StatefulSet"]
    container(sts)["livenesProbe"] = container(sts).pop("livenessProbe")
    with pytest.raises(kv.ValidationError):
        kv.validate(sts, k8s_versions(kv)[0], strict=True)


def test_servicemonitor_selects_the_service_metrics_port():
    """A CRD of the Prometheus Operator: no bundled schema, so its wiring is checked here."""
    objs = k8s_objects()
    sm, svc = objs["ServiceMonitor"], objs["Service"]
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert "namespace" not in sm["metadata"]
    selector = sm["spec"]["selector"]["matchLabels"]
    assert selector.items() <= svc["metadata"]["labels"].items()
    port_names = {p["name"] for p in svc["spec"]["ports"]}
    for endpoint in sm["spec"]["endpoints"]:
        assert endpoint["port"] in port_names
        assert endpoint["path"] == "/metrics"
        targets = {r["targetLabel"] for r in endpoint.get("relabelings", [])}
        assert {"node", "cluster"} <= targets, "rules.yml aggregates by node and cluster"


def test_kustomization_applies_the_core_manifests_only():
    kust = yaml.safe_load((K8S / "kustomization.yaml").read_text(encoding="utf-8"))
    resources = kust["resources"]
    for name in resources:
        assert (K8S / name).is_file(), name
    assert "secret.yaml" not in resources, "the Secret is a template; the real one is created by hand"
    assert "servicemonitor.yaml" not in resources, "needs the Prometheus Operator CRD"
    for kind_file in ("service.yaml", "statefulset.yaml", "configmap.yaml"):
        assert kind_file in resources
    image_names = {i["name"] for i in kust.get("images", [])}
    assert container(k8s_objects()["StatefulSet"])["image"].split(":")[0] in image_names


def test_statefulset_service_and_budget_fit_together():
    objs = k8s_objects()
    sts, svc, pdb, netpol = objs["StatefulSet"], objs["Service"], objs["PodDisruptionBudget"], objs["NetworkPolicy"]
    spec, pod = sts["spec"], sts["spec"]["template"]
    labels = pod["metadata"]["labels"]
    # Headless Service named as the StatefulSet's serviceName: stable per-pod DNS names.
    assert spec["serviceName"] == svc["metadata"]["name"]
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True
    for selector in (spec["selector"]["matchLabels"], svc["spec"]["selector"],
                     pdb["spec"]["selector"]["matchLabels"], netpol["spec"]["podSelector"]["matchLabels"]):
        assert selector.items() <= labels.items()
    assert spec["podManagementPolicy"] == "Parallel"
    c = container(sts)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    svc_ports = {p["name"]: p["port"] for p in svc["spec"]["ports"]}
    assert ports == svc_ports == {"peer": 7400, "metrics": 9400}
    annotations = pod["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == ports["metrics"]
    # Probes use the entrypoint's health check, which knows about finished nodes.
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert c[probe]["exec"]["command"] == ["crawler-entrypoint", "health"]
    assert env_of(c)["CRAWLER_ON_FINISH"] == "idle"
    assert int(env_of(c)["CRAWLER_METRICS_PORT"]) == ports["metrics"]
    # Non-root, matching the image's user; state on the claim template's volume.
    security = pod["spec"]["securityContext"]
    uid, gid = dockerfile_user()
    assert security["runAsNonRoot"] is True
    assert (security["runAsUser"], security["runAsGroup"], security["fsGroup"]) == (uid, gid, gid)
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    (claim,) = spec["volumeClaimTemplates"]
    assert mount_path(c, claim["metadata"]["name"]) == "/data"
    # Grace covers a fetch in hand (fetch.total_timeout_s) before the node exits.
    assert pod["spec"]["terminationGracePeriodSeconds"] > from_dict({}).fetch.total_timeout_s
    # Config and secret volumes name the ConfigMap and Secret of this directory.
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == objs["ConfigMap"]["metadata"]["name"]
    assert volumes["secret"]["secret"]["secretName"] == objs["Secret"]["metadata"]["name"]


def k8s_cluster_file() -> tuple[dict, dict]:
    """(the parsed cluster.yaml of the ConfigMap, the ConfigMap)."""
    cm = k8s_objects()["ConfigMap"]
    return yaml.safe_load(cm["data"]["cluster.yaml"]), cm


def test_k8s_cluster_file_is_valid_and_lists_every_pod():
    data, cm = k8s_cluster_file()
    config = from_dict(data, "deploy/k8s/configmap.yaml:cluster.yaml")
    objs = k8s_objects()
    sts, svc = objs["StatefulSet"], objs["Service"]
    c = container(sts)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    nodes = config.cluster.nodes
    assert len(nodes) == sts["spec"]["replicas"], "replicas and cluster.nodes must agree"
    for i, node in enumerate(sorted(nodes, key=lambda n: n.id)):
        assert node.id == i
        # Pod crawler-i is node i, reached through the headless Service.
        assert node.host == f"{sts['metadata']['name']}-{i}.{svc['metadata']['name']}"
        assert (node.peer_port, node.metrics_port) == (ports["peer"], ports["metrics"])
    assert config.peers.listen_host == "0.0.0.0"
    assert config.metrics.bind == "0.0.0.0" and config.metrics.enabled
    assert config.cluster.partition == "rendezvous"
    assert config.cluster.name == sts["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/instance"]
    assert config.fetch.allow_private_networks is False
    # Paths land on the pod's mounts.
    config_dir = mount_path(c, "config")
    assert env_of(c)["CRAWLER_CONFIG"] == f"{config_dir}/cluster.yaml"
    assert config.crawl.data_dir.startswith(mount_path(c, "data") + "/") and "{node}" in config.crawl.data_dir
    assert env_of(c)["CRAWLER_STATE_DIR"] == mount_path(c, "data")
    assert config.crawl.seeds_file in cm["data"], "seeds_file is relative to cluster.yaml, in the same ConfigMap"
    secret_dir, _, secret_key = config.cluster.secret_file.rpartition("/")
    assert secret_dir == mount_path(c, "secret")
    assert secret_key in objs["Secret"]["stringData"]


def test_k8s_cluster_file_reads_the_mounted_secret(tmp_path):
    """What a pod does at start: the secret file the Secret volume provides is the cluster secret."""
    data, _ = k8s_cluster_file()
    secret_file = tmp_path / "cluster-secret"
    secret_file.write_text("a-long-random-string\n", encoding="utf-8")
    data["cluster"]["secret_file"] = str(secret_file)
    assert cluster_secret(from_dict(data)) == b"a-long-random-string"


def test_k8s_seeds_are_crawlable_urls():
    _, cm = k8s_cluster_file()
    seeds = [line.strip() for line in cm["data"]["seeds.txt"].splitlines()
             if line.strip() and not line.strip().startswith("#")]
    assert seeds
    from_dict({"crawl": {"seeds": seeds}})


def test_secret_is_a_template_with_a_placeholder():
    secret = k8s_objects()["Secret"]
    assert "data" not in secret, "no base64 secret material in the repository"
    for value in secret["stringData"].values():
        assert "REPLACE" in value


# --- compose -------------------------------------------------------------------------

def compose_cluster_file(doc: dict) -> dict:
    return yaml.safe_load(doc["configs"]["crawler-cluster"]["content"])


def test_compose_runs_three_distinct_nodes_of_one_valid_cluster_file():
    doc = compose()
    services = crawler_services(doc)
    assert len(services) == 3
    content = doc["configs"]["crawler-cluster"]["content"]
    assert "$" not in content, "compose would interpolate a $ in the cluster file"
    config = from_dict(compose_cluster_file(doc), "deploy/compose.yaml:configs.crawler-cluster")
    nodes = {n.id: n for n in config.cluster.nodes}
    assert len(nodes) == len(services), "one crawler-N service per cluster.nodes entry"
    ids, published, volumes = set(), set(), set()
    for name, svc in services.items():
        node_id = int(svc["environment"]["CRAWLER_NODE"])
        ids.add(node_id)
        assert name == f"crawler-{node_id}" == svc["hostname"] == nodes[node_id].host
        (port,) = svc["ports"]
        host_ip, host_port, container_port = port.split(":")
        assert host_ip == "127.0.0.1", "metrics are published on loopback only"
        assert int(container_port) == nodes[node_id].metrics_port
        published.add(int(host_port))
        (volume,) = svc["volumes"]
        source, target = volume.split(":")
        assert target == "/data" and source in doc["volumes"]
        volumes.add(source)
        assert {"source": "crawler-cluster", "target": svc["environment"]["CRAWLER_CONFIG"]} in svc["configs"]
        assert svc["build"]["dockerfile"] == "deploy/Dockerfile"
        assert (DEPLOY / svc["build"]["context"] / svc["build"]["dockerfile"]).resolve() == DEPLOY / "Dockerfile"
        assert svc["restart"] == "on-failure" and svc["environment"]["CRAWLER_ON_FINISH"] == "exit"
    assert ids == set(nodes) and len(published) == 3 and len(volumes) == 3
    assert config.crawl.data_dir.startswith("/data/") and "{node}" in config.crawl.data_dir
    assert config.peers.listen_host == "0.0.0.0" and config.metrics.bind == "0.0.0.0"
    assert config.cluster.partition == "rendezvous"
    assert config.fetch.allow_private_networks is False


def test_compose_secret_comes_from_the_environment():
    doc = compose()
    config = from_dict(compose_cluster_file(doc))
    assert config.cluster.secret_file is None
    for svc in crawler_services(doc).values():
        value = svc["environment"][config.cluster.secret_env]
        assert value.startswith("${" + config.cluster.secret_env + ":?"), "required, never a literal"


def test_compose_prometheus_and_grafana_mount_the_deploy_files():
    doc = compose()
    prom, graf = doc["services"]["prometheus"], doc["services"]["grafana"]
    prom_mount = [v for v in prom["volumes"] if v.split(":")[1] == "/etc/prometheus"]
    assert prom_mount and (DEPLOY / prom_mount[0].split(":")[0]).resolve() == DEPLOY / "prometheus"
    assert "--config.file=/etc/prometheus/prometheus.yml" in prom["command"]
    graf_mount = [v for v in graf["volumes"] if v.split(":")[0] == "./grafana"]
    assert graf_mount
    dashboards_dir = graf_mount[0].split(":")[1]
    provider = yaml.safe_load(doc["configs"]["grafana-dashboards"]["content"])
    assert dashboards_dir.startswith(provider["providers"][0]["options"]["path"])
    datasource = yaml.safe_load(doc["configs"]["grafana-datasource"]["content"])["datasources"][0]
    assert datasource["type"] == "prometheus" and datasource["isDefault"] is True
    listen = [a for a in prom["command"] if a.startswith("--web.listen-address=")]
    assert listen and datasource["url"].endswith(listen[0].split("=", 1)[1])


def test_compose_published_metrics_ports_are_prometheus_targets():
    """Prometheus (host network) scrapes the nodes where compose publishes them."""
    path = DEPLOY / "prometheus" / "prometheus.yml"
    if not path.exists():
        pytest.skip("deploy/prometheus/prometheus.yml is not there yet")
    prom = yaml.safe_load(path.read_text(encoding="utf-8"))
    targets = {t for job in prom["scrape_configs"] for sc in job.get("static_configs", []) for t in sc["targets"]}
    for svc in crawler_services(compose()).values():
        host_ip, host_port, _ = svc["ports"][0].split(":")
        assert f"{host_ip}:{host_port}" in targets


# --- the image -----------------------------------------------------------------------

def dockerfile_user() -> tuple[int, int]:
    final = dockerfile_stages()[-1]
    (user,) = [args for op, args in final if op == "USER"]
    uid, _, gid = user.partition(":")
    return int(uid), int(gid or uid)


def test_dockerfile_builds_in_two_stages_and_runs_unprivileged():
    stages = dockerfile_stages()
    assert len(stages) == 2
    build, final = stages
    build_runs = " ".join(args for op, args in build if op == "RUN")
    assert "gcc" in build_runs and "pip wheel" in build_runs and "_compiled" in build_runs
    final_ops = {op for op, _ in final}
    assert {"USER", "HEALTHCHECK", "VOLUME", "ENTRYPOINT"} <= final_ops
    assert not any("gcc" in args for op, args in final if op == "RUN"), "no compiler in the runtime image"
    uid, gid = dockerfile_user()
    assert uid != 0 and gid != 0
    (volume,) = [args for op, args in final if op == "VOLUME"]
    assert json.loads(volume) == ["/data"]
    (health,) = [args for op, args in final if op == "HEALTHCHECK"]
    assert health.split("CMD", 1)[1].strip() == '["crawler-entrypoint", "health"]'
    (entry,) = [args for op, args in final if op == "ENTRYPOINT"]
    assert json.loads(entry) == ["crawler-entrypoint"]
    env = " ".join(args for op, args in final if op == "ENV")
    assert "CRAWLER_CONFIG=/etc/crawler/cluster.yaml" in env and "CRAWLER_STATE_DIR=/data" in env


def test_dockerfile_holds_no_secrets():
    for op, args in dockerfile_instructions((DEPLOY / "Dockerfile").read_text(encoding="utf-8")):
        if op in ("ENV", "ARG", "LABEL"):
            assert not re.search(r"(SECRET|PASSWORD|TOKEN|API_KEY)\w*=", args, re.IGNORECASE), args


def test_dockerfile_copies_only_what_the_ignore_file_lets_in():
    text = (DEPLOY / "Dockerfile.dockerignore").read_text(encoding="utf-8")
    patterns = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert patterns[0] == "*", "an allow-list: everything is out unless let in"
    allowed = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    assert "**/*.so" in patterns, "a host-built C kernel must not enter the image"
    instructions = dockerfile_instructions((DEPLOY / "Dockerfile").read_text(encoding="utf-8"))
    assert any("python:3.11" in args for op, args in instructions if op == "ARG"), "requires-python >= 3.11"
    for op, args in instructions:
        if op != "COPY" or "--from=" in args:
            continue
        *sources, _dest = [a for a in args.split() if not a.startswith("--")]
        for source in sources:
            assert (REPO / source).exists(), source
            assert source.rstrip("/") in allowed, f"{source} is excluded from the build context"


def test_entrypoint_passes_shellcheck_when_available():
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed")
    result = subprocess.run([shellcheck, "-s", "sh", str(ENTRYPOINT)], capture_output=True, text=True,
                            timeout=PROCESS_TIMEOUT_S)
    assert result.returncode == 0, result.stdout


# --- docs/operations.md ------------------------------------------------------------------

def test_operations_guide_has_its_sections_and_states_the_limits():
    text = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    headings = re.findall(r"^##+ (.+)$", text, re.MULTILINE)
    for heading in ("Deploy", "Compose (one machine)", "Kubernetes", "Scale", "Monitor",
                    "Stop and resume", "Losing a node"):
        assert heading in headings, heading
    flat = " ".join(text.split()).lower()
    assert "docs/metrics.md" in flat
    assert "a restart after a clean stop fetches no page twice" in flat
    assert "upgrade" in [h.lower() for h in headings]
    assert "a lost node's hosts are not crawled until it returns" in flat
    assert "rendezvous partitioning moves ~1/n of the hosts" in flat
    assert "replicas` and the node list must agree" in flat
