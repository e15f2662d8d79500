"""The state a web is built into: hosts, URLs and explicit links, appended step by step.

`build.py` runs the steps (`build_hosts.py`, then `build_links.py`) over one
`WebBuilder`; each step appends to it or reads what earlier steps appended.
Every random draw comes from the one generator `rng`, in a fixed order, so
the same params give the same web.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model import Base, Case, Kind, Redirect, Role, Tls, WebHost, WebParams
from .robots import RobotsPolicy


@dataclass
class Blocks:
    """Per ordinary host: where each category of its URLs starts and how many there are."""

    reg_start: np.ndarray
    reg_n: np.ndarray
    priv_start: np.ndarray
    priv_n: np.ndarray
    img_start: np.ndarray
    img_n: np.ndarray
    css_start: np.ndarray
    redir_start: np.ndarray
    redir_n: np.ndarray
    miss_start: np.ndarray
    miss_n: np.ndarray
    nf_start: np.ndarray
    nf_n: np.ndarray
    mnf_start: np.ndarray
    mnf_n: np.ndarray
    moved_start: np.ndarray
    moved_n: np.ndarray


class WebBuilder:
    """One-shot builder: appends hosts and URLs, then the link table."""

    def __init__(self, params: WebParams) -> None:
        self.p = params
        self.rng = np.random.default_rng(params.seed)
        self.hosts: list[WebHost] = []
        self.url_host: list[int] = []
        self.url_kind: list[int] = []
        self.url_path: list[str] = []
        # Links given one by one: (src, tgt, flags, elem or -1, form or -1).
        self.explicit: list[tuple[int, int, int, int, int]] = []
        self.redirects: dict[int, Redirect] = {}
        self.cases: dict[int, Case] = {}
        self.bases: dict[int, Base] = {}
        self.frameset: set[int] = set()
        self.special_roots: list[int] = []

    # --- small helpers -----------------------------------------------------------

    def add_host(self, name: str, role: Role, robots: RobotsPolicy, with_port: bool = True,
                 tls: Tls = Tls.NONE) -> int:
        self.hosts.append(WebHost(len(self.hosts), name, role, robots, with_port, tls))
        return len(self.hosts) - 1

    def add_url(self, host: int, kind: Kind, path: str) -> int:
        self.url_host.append(host)
        self.url_kind.append(int(kind))
        self.url_path.append(path)
        return len(self.url_path) - 1

    def link(self, src: int, tgt: int, flags: int = 0, elem: int = -1, form: int = -1) -> None:
        self.explicit.append((src, tgt, flags, elem, form))
