"""Turn a YAML file into a validated `Config`, or stop with a message naming the key.

Validation walks the dataclass schema: every key must exist in the schema, every
value must have the declared type and respect the declared bounds. The message
names the file, the dotted key path, what was expected and what was found, so an
operator can fix a cluster file without reading code.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml

from crawler.config.schema import Config


class ConfigError(Exception):
    """A configuration problem the operator must fix; the message says where and what."""


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(tp))
    if origin is list:
        return f"a list of {_type_name(get_args(tp)[0])}"
    if origin is dict:
        k, v = get_args(tp)
        return f"a mapping of {_type_name(k)} to {_type_name(v)}"
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    if tp is type(None):
        return "null"
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(tp, str(tp))


class _Builder:
    def __init__(self, source: str) -> None:
        self.source = source
        self._hints: dict[type, dict[str, Any]] = {}

    def fail(self, path: str, expected: str, value: Any) -> typing.NoReturn:
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        raise ConfigError(f"{self.source}: {path or '(top level)'}: expected {expected}, got {shown}")

    def hints(self, cls: type) -> dict[str, Any]:
        if cls not in self._hints:
            self._hints[cls] = typing.get_type_hints(cls)
        return self._hints[cls]

    def build(self, cls: type, data: Any, path: str) -> Any:
        if data is None:
            data = {}
        if not isinstance(data, dict):
            self.fail(path, "a mapping", data)
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = [k for k in data if k not in fields]
        if unknown:
            known = ", ".join(sorted(fields))
            key = f"{path}.{unknown[0]}" if path else str(unknown[0])
            raise ConfigError(f"{self.source}: {key}: unknown key (known keys here: {known})")
        hints = self.hints(cls)
        kwargs = {}
        for name, value in data.items():
            sub = f"{path}.{name}" if path else name
            kwargs[name] = self.value(hints[name], value, sub, fields[name].metadata)
        return cls(**kwargs)

    def value(self, tp: Any, value: Any, path: str, meta: typing.Mapping[str, Any]) -> Any:
        origin = get_origin(tp)
        if origin in (typing.Union, types.UnionType):
            args = get_args(tp)
            if value is None and type(None) in args:
                return None
            inner = [a for a in args if a is not type(None)]
            if len(inner) == 1:
                return self.value(inner[0], value, path, meta)
            # A short form or a mapping (a seed: a URL, or {url, scope}): the mapping is the dataclass.
            sections = [a for a in inner if dataclasses.is_dataclass(a)]
            plain = [a for a in inner if not dataclasses.is_dataclass(a)]
            if len(sections) == 1 and len(plain) == 1:
                return self.value(sections[0] if isinstance(value, dict) else plain[0], value, path, meta)
            self.fail(path, _type_name(tp), value)
        if origin is Literal:
            if value not in get_args(tp):
                self.fail(path, _type_name(tp), value)
            return value
        if origin is list:
            if not isinstance(value, list):
                self.fail(path, _type_name(tp), value)
            (item,) = get_args(tp)
            return [self.value(item, v, f"{path}[{i}]", {}) for i, v in enumerate(value)]
        if origin is dict:
            if not isinstance(value, dict):
                self.fail(path, _type_name(tp), value)
            kt, vt = get_args(tp)
            return {self.value(kt, k, path, {}): self.value(vt, v, f"{path}.{k}", {}) for k, v in value.items()}
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            return self.build(tp, value, path)
        if tp is bool:
            if not isinstance(value, bool):
                self.fail(path, "true or false", value)
            return value
        if tp is int:
            if isinstance(value, bool) or not isinstance(value, int):
                self.fail(path, "an integer", value)
        elif tp is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                self.fail(path, "a number", value)
            value = float(value)
        elif tp is str:
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                self.fail(path, "a string", value)
            value = str(value)
        lo, hi = meta.get("min"), meta.get("max")
        if lo is not None and value < lo:
            self.fail(path, f"a value >= {lo}", value)
        if hi is not None and value > hi:
            self.fail(path, f"a value <= {hi}", value)
        return value


def from_dict(data: Any, source: str = "<config>") -> Config:
    """Validate a parsed YAML document; raises ConfigError naming the key."""
    config = _Builder(source).build(Config, data, "")
    check(config, source)
    return config


def load(path: str | os.PathLike) -> Config:
    """Read and validate a config file; relative paths in it are taken from its folder."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config file: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    config = from_dict(data, str(path))
    base = path.resolve().parent
    crawl = config.crawl
    if crawl.seeds_file and not os.path.isabs(crawl.seeds_file):
        crawl.seeds_file = str(base / crawl.seeds_file)
    if not os.path.isabs(crawl.data_dir):
        crawl.data_dir = str(base / crawl.data_dir)
    for cache in (config.splitter.cache, config.due.cache):
        if cache.preload_file and not os.path.isabs(cache.preload_file):
            cache.preload_file = str(base / cache.preload_file)
    if config.frontier.quality_file and not os.path.isabs(config.frontier.quality_file):
        config.frontier.quality_file = str(base / config.frontier.quality_file)
    if config.cluster.secret_file and not os.path.isabs(config.cluster.secret_file):
        config.cluster.secret_file = str(base / config.cluster.secret_file)
    tls = config.fetch.tls
    for key in ("ca_file", "ca_dir", "client_cert_file", "client_key_file"):
        value = getattr(tls, key)
        if value and not os.path.isabs(value):
            setattr(tls, key, str(base / value))
    return config


def check(config: Config, source: str) -> None:
    """Rules that span several keys."""
    nodes = config.cluster.nodes
    if not nodes:
        raise ConfigError(f"{source}: cluster.nodes: expected at least one node, got []")
    ids = sorted(n.id for n in nodes)
    if ids != list(range(len(nodes))):
        raise ConfigError(f"{source}: cluster.nodes: node ids must be 0..{len(nodes) - 1}, each once; got {ids}")
    seen: set[tuple[str, int]] = set()
    for n in nodes:
        for port_name in ("peer_port", "metrics_port"):
            port = getattr(n, port_name)
            if port and (n.host, port) in seen:
                raise ConfigError(f"{source}: cluster.nodes[{n.id}].{port_name}: port {port} on {n.host} is used twice")
            seen.add((n.host, port))
    from crawler.cache.base import ONLINE_POLICIES, POLICY_NAMES
    for key, cache in (("splitter.cache", config.splitter.cache), ("due.cache", config.due.cache)):
        if cache.policy not in ONLINE_POLICIES:
            what = "is offline only (replay)" if cache.policy in POLICY_NAMES else "is not a cache policy"
            raise ConfigError(f"{source}: {key}.policy: {cache.policy!r} {what}; "
                              f"expected one of {', '.join(ONLINE_POLICIES)}")
        if cache.policy == "static" and not cache.preload_file:
            raise ConfigError(f"{source}: {key}.preload_file: expected a .npy file of fingerprints for policy static, "
                              "got None")
    buckets = config.due.buckets
    if buckets & (buckets - 1):
        raise ConfigError(f"{source}: due.buckets: expected a power of two, got {buckets}")
    frontier = config.frontier
    from crawler.frontier.policy import HOST_POLICIES, URL_POLICIES
    for key, value, allowed in (("host_policy", frontier.host_policy, HOST_POLICIES),
                                ("url_policy", frontier.url_policy, URL_POLICIES),
                                ("quality", frontier.quality, ("inlinks", "oracle"))):
        if value not in allowed:
            raise ConfigError(f"{source}: frontier.{key}: expected one of {', '.join(allowed)}, got {value!r}")
    if frontier.quality == "oracle" and not frontier.quality_file:
        raise ConfigError(f"{source}: frontier.quality_file: expected a file of 'URL<TAB>quality' lines for "
                          "quality: oracle, got ''")
    for i, seed in enumerate(config.crawl.seeds):
        url = seed if isinstance(seed, str) else seed.url
        if not url.startswith(("http://", "https://")):
            where = f"crawl.seeds[{i}]" if isinstance(seed, str) else f"crawl.seeds[{i}].url"
            raise ConfigError(f"{source}: {where}: expected an http(s) URL, got {url!r}")
    from crawler.filter.scope import compile_patterns
    for key in ("include", "exclude"):
        try:
            compile_patterns(getattr(config.scope, key), f"scope.{key}")
        except ValueError as exc:   # the message names the key, the entry and the regex error
            raise ConfigError(f"{source}: {exc}") from None
    for name, addr in config.fetch.dns.overrides.items():
        import ipaddress
        try:
            ipaddress.ip_address(addr)
        except ValueError:
            raise ConfigError(f"{source}: fetch.dns.overrides.{name}: expected an IP address, got {addr!r}") from None
    from crawler.parse.sources import compile_sources
    try:
        compile_sources(config.parse.link_sources)
    except ValueError as exc:  # the message names parse.link_sources and the entry
        raise ConfigError(f"{source}: {exc}") from None
    if "{node}" not in config.crawl.data_dir and len(nodes) > 1:
        raise ConfigError(f"{source}: crawl.data_dir: expected a path containing {{node}} for a cluster of "
                          f"{len(nodes)} nodes (each needs its own), got {config.crawl.data_dir!r}")


def cluster_secret(config: Config, source: str = "<config>") -> bytes | None:
    """The cluster secret from secret_file or secret_env; required when there are peers."""
    c = config.cluster
    secret: str | None = None
    if c.secret_file:
        try:
            secret = Path(c.secret_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"{source}: cluster.secret_file: cannot read {c.secret_file}: {exc.strerror}") from None
    elif c.secret_env:
        secret = os.environ.get(c.secret_env)
    if not secret:
        if len(c.nodes) > 1:
            where = f"file {c.secret_file}" if c.secret_file else f"environment variable {c.secret_env}"
            raise ConfigError(f"{source}: cluster: a cluster of {len(c.nodes)} nodes needs a secret; set the {where}")
        return None
    return secret.encode("utf-8")


def node_config(config: Config, node_id: int, source: str = "<config>"):
    for n in config.cluster.nodes:
        if n.id == node_id:
            return n
    raise ConfigError(f"{source}: --node {node_id}: no such node in cluster.nodes "
                      f"(ids: {[n.id for n in config.cluster.nodes]})")
