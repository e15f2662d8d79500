"""Podman for the image test: its own configuration, a base image made without any registry, cleanup.

Why each piece (tests/integration/test_container_image.py uses them):

- `Podman` runs `podman` with `CONTAINERS_CONF` pointing at a file of the test's own, so nothing
  under /etc changes, and inside the test's own network namespace (`netns`), so the bridge
  network's bridge, addresses, ip_forward and netavark's iptables rules are made there and go
  with it; only `build` runs in the host's namespace (its `--network host` needs the package
  index and makes no bridge). The settings are what small VMs need: runc (crun cannot set rlimits where
  root lacks CAP_SYS_RESOURCE), cgroupfs (cgroups v1 hybrid, no systemd as PID 1), explicit
  ulimits no higher than the hard limits here, netavark (its aardvark-dns resolves container
  names on a network). Every container, volume, network and image it makes is recorded and
  `cleanup` removes them, each by its own name or ID.
- `base_image` builds a Debian image with debootstrap from the mirror apt already uses, so the
  Dockerfile's `PYTHON_IMAGE` needs no container registry. It stands in for
  `python:3.11-slim-bookworm`: Python 3.11 with pip and its headers (the C kernels need Python.h),
  a `python` command, pip allowed to install into the system (no EXTERNALLY-MANAGED), and the
  dpkg and apt settings of Debian's slim images.
- `compose_run_args` turns a compose service into `podman run` flags, so the test runs the
  compose file's settings rather than a copy of them; a key it does not know is an error.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import shutil
import subprocess
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.netns import command_in
from tests.support.processes import find_binary

SUITE = "bookworm"
FALLBACK_MIRROR = "http://deb.debian.org/debian"
# Python 3.11 as python:3.11-slim-bookworm has it, plus Python.h for the C kernels.
BASE_PACKAGES = ("python3", "python3-pip", "python3.11-dev", "ca-certificates")
# What Debian's slim images (debian:bookworm-slim, under python:3.11-slim-bookworm) configure, written
# before debootstrap runs so its own dpkg calls use them too: dpkg without a sync per unpacked file
# (a throwaway tree that only feeds `tar` needs none), no documentation or translations installed,
# apt without translated package lists. They stay in the image, as in the slim images, so the
# Dockerfile's own apt-get runs with them as well.
SLIM_CONFIG = {
    "etc/dpkg/dpkg.cfg.d/slim-apt-speedup": "force-unsafe-io\n",
    "etc/dpkg/dpkg.cfg.d/slim-excludes": "".join(
        f"path-exclude /usr/share/{d}/*\n" for d in ("doc", "info", "locale", "man", "groff", "lintian", "linda"))
        + "path-include /usr/share/doc/*/copyright\npath-include /usr/share/locale/locale.alias\n",
    "etc/apt/apt.conf.d/slim-no-languages": 'Acquire::Languages "none";\n',
}
HOST_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
NETAVARK_DIRS = ("/usr/lib/podman", "/usr/libexec/podman")
# Debian package of each program the test needs (scripts/test.sh installs them; podman builds
# with the buildah library it links, not the buildah command).
REQUIRED = {"podman": "podman", "runc": "runc", "debootstrap": "debootstrap", "iptables": "iptables",
            "nsenter": "util-linux"}
HELPERS = {"netavark": "netavark", "aardvark-dns": "aardvark-dns"}
MAX_NPROC = 32768                 # higher fails to apply here (setrlimit: Operation not permitted)
COMMAND_TIMEOUT_S = 120.0
DEBOOTSTRAP_TIMEOUT_S = 600.0
BUILD_TIMEOUT_S = 900.0
RM_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20


def unavailable() -> str | None:
    """Why containers cannot be built and run here, or None."""
    if os.geteuid() != 0:
        return "needs root (debootstrap and rootful podman with a bridge network)"
    for name, package in REQUIRED.items():
        if find_binary(name) is None:
            return f"{name} not installed (Debian package {package}; scripts/test.sh installs it)"
    for name, package in HELPERS.items():
        if not any(Path(d, name).exists() for d in NETAVARK_DIRS):
            return f"podman's {name} not installed (Debian package {package}; scripts/test.sh installs it)"
    return None


def apt_mirror(sources: Iterable[Path] | None = None) -> str:
    """The Debian mirror apt uses for SUITE (one-line or deb822 sources), else deb.debian.org."""
    if sources is None:
        etc = Path("/etc/apt")
        sources = [etc / "sources.list", *sorted((etc / "sources.list.d").glob("*"))]
    for path in sources:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for stanza in re.split(r"\n\s*\n", text):
            one_line = re.search(rf"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+{SUITE}\s", stanza, re.M)
            if one_line:
                return one_line.group(1)
            uris = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
            suites = re.search(r"^Suites:\s*(.+)$", stanza, re.M)
            if uris and suites and SUITE in suites.group(1).split():
                return uris.group(1)
    return FALLBACK_MIRROR


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@dataclass
class Podman:
    """`podman` with the test's own containers.conf in network namespace `netns`; remembers what it made,
    `cleanup` removes it."""

    tmp: Path
    prefix: str
    netns: str | None = None
    containers: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[1], MAX_NPROC)
        if nofile == resource.RLIM_INFINITY:
            nofile = 1 << 20
        if nproc == resource.RLIM_INFINITY:
            nproc = MAX_NPROC
        self.conf = self.tmp / "containers.conf"
        self.conf.write_text(
            "[containers]\n"
            f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n'
            "[engine]\n"
            'runtime = "runc"\n'
            'cgroup_manager = "cgroupfs"\n'
            'events_logger = "file"\n'
            "[network]\n"
            'network_backend = "netavark"\n', encoding="utf-8")
        self.env = dict(os.environ, CONTAINERS_CONF=str(self.conf))
        self.binary = find_binary("podman") or "podman"

    def __call__(self, *args: str, timeout_s: float = COMMAND_TIMEOUT_S, check: bool = True,
                 stdin: int | None = None, log: Path | None = None, host: bool = False) -> subprocess.CompletedProcess:
        """Run `podman ARGS` in `netns` (in the host's namespace when `host`); output captured (or appended
        to `log`); raises with its stderr when `check`."""
        argv = [*command_in(None if host else self.netns), self.binary, *args]
        if log is not None:
            with log.open("ab") as out:
                result = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, stdin=stdin,
                                        timeout=timeout_s, env=self.env)
            if check and result.returncode != 0:
                tail = log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"podman {' '.join(args[:3])} ... failed ({result.returncode}):\n{tail}")
            return result
        result = subprocess.run(argv, capture_output=True, text=True, stdin=stdin,
                                timeout=timeout_s, env=self.env)
        if check and result.returncode != 0:
            raise RuntimeError(f"podman {' '.join(args)} failed ({result.returncode}): {result.stderr[-3000:]}")
        return result

    def name(self, what: str) -> str:
        return f"{self.prefix}-{what}"

    # --- things it makes -------------------------------------------------------------------------

    def network(self, what: str) -> str:
        name = self.name(what)
        self("network", "create", name)
        self.networks.append(name)
        return name

    def volume(self, what: str) -> str:
        name = self.name(what)
        self("volume", "create", name)
        self.volumes.append(name)
        return name

    def run(self, what: str, args: list[str], image: str, command: list[str] = ()) -> str:
        """`podman run -d --name PREFIX-WHAT ARGS IMAGE COMMAND`; the container's name."""
        name = self.name(what)
        self.containers.append(name)
        self("run", "-d", "--name", name, *args, image, *command)
        return name

    def build(self, tag: str, context: Path, dockerfile: Path, log: Path, *args: str) -> str:
        """`podman build` without intermediate images (--layers=false) tagged `tag`; the image ID.

        In the host's network namespace: with `--network host` its RUN steps reach the package index.
        """
        iid = self.tmp / f"{re.sub(r'[^a-z0-9]+', '-', tag)}.iid"
        self.images.append(tag)
        self("build", "--layers=false", "--pull=never", "--iidfile", str(iid), "-t", tag, "-f", str(dockerfile),
             *args, str(context), timeout_s=BUILD_TIMEOUT_S, log=log, host=True)
        return iid.read_text().strip()

    def import_rootfs(self, rootfs: Path, tag: str) -> None:
        """`tar -C ROOTFS . | podman import - TAG` (numeric owners, so uids stay what dpkg made)."""
        self.images.append(tag)
        tar = subprocess.Popen(["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        try:
            self("import", "-", tag, stdin=tar.stdout.fileno() if tar.stdout else None)
        finally:
            if tar.stdout:
                tar.stdout.close()
            tar.wait(COMMAND_TIMEOUT_S)

    # --- reading them ----------------------------------------------------------------------------

    def inspect(self, name: str) -> dict:
        return json.loads(self("inspect", "--type", "container", name).stdout)[0]

    def address(self, name: str, network: str) -> str:
        return self.inspect(name)["NetworkSettings"]["Networks"][network]["IPAddress"]

    def bridge(self, network: str) -> str:
        """The interface name of a bridge network (podman0, podman1, ...)."""
        return json.loads(self("network", "inspect", network).stdout)[0]["network_interface"]

    def wait(self, name: str, timeout_s: float) -> int:
        """Exit code of the container once it has stopped."""
        return int(self("wait", name, timeout_s=timeout_s).stdout.split()[0])

    def logs(self, name: str) -> tuple[str, str]:
        result = self("logs", name, check=False)
        return result.stdout, result.stderr

    # --- removing them ---------------------------------------------------------------------------

    def cleanup(self) -> list[str]:
        """Remove what was made, newest kind first; what could not be removed, as messages."""
        left = []
        for kind, names, args in (("container", self.containers, ("rm", "-f", "-v", "-t", str(STOP_TIMEOUT_S))),
                                  ("volume", self.volumes, ("volume", "rm", "-f")),
                                  ("network", self.networks, ("network", "rm", "-f")),
                                  ("image", self.images, ("rmi", "-f"))):
            for name in reversed(names):
                result = self(*args, name, check=False, timeout_s=RM_TIMEOUT_S)
                if result.returncode != 0 and "no such" not in result.stderr.lower() \
                        and "not known" not in result.stderr.lower():
                    left.append(f"{kind} {name}: {result.stderr.strip()[-300:]}")
            names.clear()
        return left


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs at `path` for the block, unmounted after it (lazily if something still holds it).

    Why memory: the disk here is ext4 mounted with `discard`, where deleting debootstrap's tree
    (~25,000 files) took ~35 s and dpkg unpacks slower; in a tmpfs debootstrap took 63 s instead
    of 80 and removing the tree is an unmount. (Podman's own storage stays on disk: with it in a
    tmpfs, every `podman wait` or `stop` of an exited container took 20 s here.)
    """
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "crawler-test", str(path)],
                   check=True, capture_output=True, timeout=COMMAND_TIMEOUT_S)
    try:
        yield path
    finally:
        if subprocess.run(["umount", "--recursive", str(path)], capture_output=True,
                          timeout=COMMAND_TIMEOUT_S).returncode != 0:
            subprocess.run(["umount", "--lazy", str(path)], capture_output=True, timeout=COMMAND_TIMEOUT_S)


def base_image(podman: Podman, cache: Path, tag: str, log: Path) -> dict[str, float]:
    """A stand-in for python:3.11-slim-bookworm as `tag`, from debootstrap; seconds of each step.

    The root file system is kept under `cache` (the test's own temporary directory): a second
    build in the same run imports it again without downloading.
    """
    rootfs = cache / "rootfs"
    done = cache / "rootfs.complete"
    times = {}
    if not done.exists():
        shutil.rmtree(rootfs, ignore_errors=True)
        for name, text in SLIM_CONFIG.items():
            path = rootfs / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        t0 = time.monotonic()
        with log.open("ab") as out:
            result = subprocess.run(
                [find_binary("debootstrap") or "debootstrap", "--variant=minbase",
                 f"--include={','.join(BASE_PACKAGES)}", SUITE, str(rootfs), apt_mirror()],
                stdout=out, stderr=subprocess.STDOUT, timeout=DEBOOTSTRAP_TIMEOUT_S)
        if result.returncode != 0:
            raise RuntimeError(f"debootstrap failed ({result.returncode}): {log.read_text(errors='replace')[-3000:]}")
        _make_python_image(rootfs)
        done.touch()
        times["debootstrap_s"] = time.monotonic() - t0
    t0 = time.monotonic()
    podman.import_rootfs(rootfs, tag)
    times["import_s"] = time.monotonic() - t0
    return times


def _make_python_image(rootfs: Path) -> None:
    """What python:3.11-slim-bookworm has that Debian's python3 lacks: `python`, pip into the system."""
    for marker in rootfs.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
        marker.unlink()
    python = rootfs / "usr/local/bin/python"
    if not python.exists():
        python.symlink_to("/usr/bin/python3")
    for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for path in (rootfs / leftover).glob("*"):
            if path.is_file():
                path.unlink()


# --- compose ----------------------------------------------------------------------------------

_VARIABLE = re.compile(r"\$\$|\$\{(\w+)(?:(:?[-?])([^}]*))?\}|\$(\w+)")


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's variable substitution: $VAR, ${VAR}, ${VAR:-default}, ${VAR:?error}, $$."""
    def one(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        op, arg = m.group(2), m.group(3) or ""
        have = env.get(name)
        if op in (":-", "-"):
            return have if have or (op == "-" and have is not None) else arg
        if op in (":?", "?") and not have:
            raise ValueError(f"compose needs {name}: {arg}")
        if have is None:
            raise ValueError(f"compose variable {name} is not set")
        return have
    return _VARIABLE.sub(one, value)


def compose_duration_s(value: str) -> int:
    """Compose durations as the test's files write them: '150s', '2m'."""
    m = re.fullmatch(r"(\d+)(s|m)", value)
    if not m:
        raise ValueError(f"unsupported compose duration {value!r}")
    return int(m.group(1)) * (60 if m.group(2) == "m" else 1)


@dataclass
class ServiceMounts:
    """Where a compose service's named things are on this host: networks, volumes, config files, ports."""

    networks: dict[str, str]         # compose network -> podman network
    volumes: dict[str, str]          # compose volume -> podman volume
    configs: dict[str, Path]         # compose config -> file
    host_ports: dict[int, int]       # container port -> host port (the compose file's are fixed and shared)


# Keys of a compose service the image test honours; `image` and `build` are the test's own build.
SERVICE_KEYS = {"image", "build", "restart", "stop_grace_period", "read_only", "tmpfs", "cap_drop",
                "security_opt", "configs", "networks", "hostname", "environment", "ports", "volumes"}


def compose_run_args(service_name: str, service: dict, env: dict[str, str], mounts: ServiceMounts) -> list[str]:
    """`podman run` flags for one compose service (no healthcheck: podman runs it from systemd timers)."""
    unknown = set(service) - SERVICE_KEYS
    if unknown:
        raise ValueError(f"service {service_name}: compose keys the image test does not translate: {sorted(unknown)}")
    args = ["--no-healthcheck"]
    if "restart" in service:
        args += ["--restart", service["restart"]]
    if "stop_grace_period" in service:
        args += ["--stop-timeout", str(compose_duration_s(service["stop_grace_period"]))]
    if service.get("read_only"):
        # Docker's read_only mounts no tmpfs of its own; podman's adds /run, /tmp and /var/tmp unless told not to.
        args += ["--read-only", "--read-only-tmpfs=false"]
    for path in service.get("tmpfs", []):
        args += ["--tmpfs", path]
    for cap in service.get("cap_drop", []):
        args += ["--cap-drop", cap]
    for opt in service.get("security_opt", []):
        args += ["--security-opt", opt]
    if "hostname" in service:
        args += ["--hostname", service["hostname"]]
    for key, value in (service.get("environment") or {}).items():
        args += ["--env", f"{key}={interpolate(str(value), env)}"]
    for network in service.get("networks", []):
        args += ["--network", mounts.networks[network], "--network-alias", service_name]
    for spec in service.get("ports", []):
        host_ip, _, container_port = spec.split(":")
        args += ["--publish", f"{host_ip}:{mounts.host_ports[int(container_port)]}:{container_port}"]
    for spec in service.get("volumes", []):
        volume, target = spec.split(":", 1)
        args += ["--volume", f"{mounts.volumes[volume]}:{target}"]
    for config in service.get("configs", []):
        args += ["--volume", f"{mounts.configs[config['source']]}:{config['target']}:ro"]
    return args
