"""README.md and docs/*.md name only config keys and `crawler` commands that exist.

A renamed key or command leaves the prose behind without anyone noticing; this
test reads every page and checks each name against the code: dotted keys in
backticks (`crawl.max_pages`, `cluster.nodes[].source_address`) against the
config schema's dataclasses, and `crawler <command>` (inline or in a code
block) against the sub-commands of the crawler's argument parser.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import typing
from pathlib import Path

from tests.support.fixtures import REPO

from crawler.cli import build_parser
from crawler.config.schema import Config

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCED = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"`([^`]+)`")                 # inline code may wrap onto the next line
# A config key as prose writes it: lower-case names joined by dots, `[]` after a list of sections.
DOTTED = re.compile(r"[a-z_][a-z0-9_]*(?:\[\])?(?:\.[a-z_][a-z0-9_]*(?:\[\])?)+")
# Dotted names that are files, not keys (`frontier.py`, `metrics.md`, `due.journal`-like files are not keys).
FILE_SUFFIXES = (".py", ".md", ".c", ".h", ".pyi", ".so", ".yaml", ".yml", ".json", ".jsonl", ".txt", ".log",
                 ".npy", ".gz", ".html", ".css", ".sh", ".toml", ".png", ".pem", ".conf", ".cfg")
# A command line as a page shows it: at the start of inline code or of a code block's line (after a `$ ` prompt).
COMMAND = re.compile(r"^\s*(?:\$ )?(?:python3? -m )?crawler ([a-z][a-z0-9-]*)", re.MULTILINE)


def config_keys(cls: type = Config, prefix: str = "") -> set[str]:
    """Every key path of the schema: sections, their keys, `name[].key` inside a list of sections."""
    keys = set()
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        path = prefix + f.name
        keys.add(path)
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            keys |= config_keys(tp, path + ".")
        elif typing.get_origin(tp) is list and dataclasses.is_dataclass(arg := typing.get_args(tp)[0]):
            keys.add(path + "[]")
            keys |= config_keys(arg, path + "[].")
    return keys


def subcommands() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


def named_keys(text: str, sections: set[str]) -> set[str]:
    """Dotted names in inline code whose first part is a config section: what the page claims are keys."""
    prose = FENCED.sub("", text)
    found = set()
    for span in INLINE.findall(prose):
        span = " ".join(span.split())
        for m in DOTTED.finditer(span):
            name = m.group()
            before, after = span[:m.start()], span[m.end():]
            if (before and before[-1] in "./_-") or (after and after[0] in "(/") or name.endswith(FILE_SUFFIXES):
                continue                     # part of a path, a module, a call, or a file name
            if name.split(".")[0].removesuffix("[]") in sections:
                found.add(name)
    return found


def named_commands(text: str) -> set[str]:
    """`crawler X` opening inline code or a line of a code block."""
    spans = [" ".join(s.split()) for s in INLINE.findall(FENCED.sub("", text))] + FENCED.findall(text)
    return {m.group(1) for span in spans for m in COMMAND.finditer(span)}


def test_the_scanner_finds_keys_and_commands_and_skips_files_and_code():
    text = ("Set `crawl.max_pages` and `cluster.nodes[].source_address: 10.0.0.1`; see `frontier.py`,\n"
            "`crawler.config.schema`, `node.due.submit()` and `docs/due.md`. Run `crawler run -c x.yaml` or\n"
            "```sh\n$ python -m crawler status -c x.yaml\ncrawler --help\n```\n")
    assert named_keys(text, {"crawl", "cluster", "frontier", "due"}) == {"crawl.max_pages",
                                                                        "cluster.nodes[].source_address"}
    assert named_commands(text) == {"run", "status"}
    assert {"crawl.max_pages", "cluster.nodes[].source_address", "due.cache.policy"} <= config_keys()
    assert {"run", "cluster", "demo", "status"} <= subcommands()


def test_docs_name_only_real_config_keys():
    keys = config_keys()
    sections = {f.name for f in dataclasses.fields(Config)}
    unknown = sorted(f"{page.relative_to(REPO)}: {name}" for page in PAGES
                     for name in named_keys(page.read_text(encoding="utf-8"), sections) if name not in keys)
    assert not unknown, "config keys the schema does not have:\n" + "\n".join(unknown)


def test_docs_name_only_real_crawler_commands():
    commands = subcommands()
    unknown = sorted(f"{page.relative_to(REPO)}: crawler {name}" for page in PAGES
                     for name in named_commands(page.read_text(encoding="utf-8")) if name not in commands)
    assert not unknown, "crawler sub-commands the CLI does not have:\n" + "\n".join(unknown)


def test_every_page_is_read():
    assert REPO / "README.md" in PAGES and len(PAGES) > 5
    assert all(isinstance(p, Path) and p.is_file() for p in PAGES)
