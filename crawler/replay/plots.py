"""The paper's figure types as PNG files (matplotlib, Agg canvas, no pyplot state).

matplotlib is the optional extra `replay` (`pip install 'crawler[replay]'`):
only these figures need it, so it is imported here, lazily, and its absence
is the error `PlotsUnavailable`, which says how to install it; `crawler
replay` checks that before it simulates (the CSV files need no matplotlib:
`--no-plots`).

Per trace (`full`, `cross`):
    miss_rate_<trace>.png   miss rate against cache size, log2 axis (Figures 2-7)
    relative_<trace>.png    miss rate relative to MIN at the same size
    per_thread_<trace>.png  miss rate against entries per worker (Figures 8-9, --threads)
    over_time_<trace>.png   miss rate per window along the trace (Figures 10-11, --over-time)
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from crawler.replay.results import Row
from crawler.replay.simulate import ReplayResult

DPI = 100
FIGSIZE_IN = (7.5, 4.6)
OVER_TIME_PANELS = 4
STYLE = {
    "clock": ("tab:blue", "o"), "clock-sets": ("tab:cyan", "P"), "lru": ("tab:orange", "s"),
    "random": ("tab:green", "^"), "static": ("tab:red", "v"), "min": ("black", "D"), "infinite": ("tab:gray", "x"),
}
DEFAULT_STYLE = ("tab:purple", "*")
INSTALL_HINT = "pip install 'crawler[replay]'"


class PlotsUnavailable(RuntimeError):
    """matplotlib cannot be imported, so no figure can be drawn."""


def require_matplotlib() -> None:
    """Raises PlotsUnavailable, saying how to get matplotlib, when it cannot be imported."""
    try:
        import matplotlib  # noqa: F401  (imported here: plotting is optional work)
    except ImportError as exc:
        raise PlotsUnavailable(f"the figures need matplotlib, which is not installed ({exc}): "
                               f"{INSTALL_HINT}, or --no-plots to write the CSV files only") from None


def _figure(rows: int = 1, cols: int = 1, size: tuple[float, float] = FIGSIZE_IN):
    from matplotlib.figure import Figure  # imported here: plotting is optional work

    fig = Figure(figsize=size, dpi=DPI)
    axes = fig.subplots(rows, cols, squeeze=False)
    return fig, axes


def _save(fig, path: Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=DPI)
    return path


def _log2_axis(ax, low: float, high: float, label: str) -> None:
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ax.set_xscale("log", base=2)
    lo_e, hi_e = math.floor(math.log2(low)), math.ceil(math.log2(high))
    step = max(1, math.ceil((hi_e - lo_e + 1) / 13))
    ax.xaxis.set_major_locator(FixedLocator([2.0 ** e for e in range(lo_e, hi_e + 1, step)]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"$2^{{{round(math.log2(v))}}}$" if v > 0 else ""))
    ax.set_xlim(2.0 ** lo_e / 1.2, 2.0 ** hi_e * 1.2)
    ax.set_xlabel(label)


def _series(rows: list[Row], trace: str, value: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    out: dict[str, tuple[list, list]] = {}
    for row in rows:
        y = getattr(row, value)
        if row.trace == trace and y is not None:
            xs, ys = out.setdefault(row.policy, ([], []))
            xs.append(row.size)
            ys.append(y)
    return {p: (np.asarray(x, dtype=float), np.asarray(y, dtype=float)) for p, (x, y) in out.items()}


def _lines(ax, series: dict[str, tuple[np.ndarray, np.ndarray]], x_scale: float = 1.0) -> None:
    for policy, (x, y) in series.items():
        color, marker = STYLE.get(policy, DEFAULT_STYLE)
        ax.plot(x / x_scale, y, color=color, marker=marker, markersize=3.5, linewidth=1.2, label=policy.upper())
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="best")


def _subtitle(result: ReplayResult, trace: str) -> str:
    st = result.stats[trace]
    streams = len(st.streams)
    distinct = "distinct not counted" if st.distinct is None else f"{st.distinct:,} distinct"
    return f"{trace} trace: {st.requests:,} requests, {distinct}, {streams} stream(s)"


def plot_miss_rate(result: ReplayResult, rows: list[Row], trace: str, path: Path,
                   threads: int | None = None) -> Path | None:
    """Miss rate against cache size (or entries per worker when `threads` is given)."""
    series = _series(rows, trace, "miss_rate")
    if not series:
        return None
    scale = float(threads or 1)
    fig, axes = _figure()
    ax = axes[0][0]
    _lines(ax, series, scale)
    sizes = np.asarray(result.options.sizes, dtype=float) / scale
    label = "cache entries per worker thread" if threads else "cache size (entries)"
    _log2_axis(ax, sizes.min(), sizes.max(), label)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("miss rate")
    what = f"against entries per worker ({threads} workers share each cache)" if threads else "against cache size"
    ax.set_title(f"Miss rate {what}\n{_subtitle(result, trace)}", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def plot_relative(result: ReplayResult, rows: list[Row], trace: str, path: Path) -> Path | None:
    """Miss rate relative to MIN at the same size (1 = as good as clairvoyance)."""
    series = {p: s for p, s in _series(rows, trace, "relative_to_min").items() if p != "min"}
    if not series:
        return None
    fig, axes = _figure()
    ax = axes[0][0]
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    _lines(ax, series)
    sizes = np.asarray(result.options.sizes, dtype=float)
    _log2_axis(ax, sizes.min(), sizes.max(), "cache size (entries)")
    top = max(float(np.nanmax(y)) for _, y in series.values())
    ax.set_ylim(min(0.95, min(float(np.nanmin(y)) for _, y in series.values()) - 0.02), top * 1.05 + 0.01)
    ax.set_ylabel("miss rate / MIN's miss rate")
    ax.set_title(f"Miss rate relative to MIN\n{_subtitle(result, trace)}", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def over_time_sizes(result: ReplayResult, trace: str, chosen: tuple[int, ...] | None) -> list[int]:
    """The sizes drawn in the over-time figure: `chosen` (those simulated), else up to
    OVER_TIME_PANELS spread evenly (in log2) over the informative sizes: up to the
    first at which every evicting policy has only cold misses."""
    sizes = result.options.sizes
    if chosen:
        return [s for s in chosen if s in sizes][:OVER_TIME_PANELS * 2]
    distinct = result.stats[trace].distinct
    evicting = [p for p in ("clock", "clock-sets", "lru", "random", "min") if (trace, p) in result.tallies]
    last = len(sizes) - 1
    for i in range(len(sizes)):
        if evicting and distinct is not None and all(result.tallies[(trace, p)].misses[i] <= distinct
                                                     for p in evicting):
            last = i
            break
    picks = np.unique(np.round(np.linspace(0, last, min(OVER_TIME_PANELS, last + 1))).astype(int))
    return [sizes[i] for i in picks]


def plot_over_time(result: ReplayResult, trace: str, path: Path,
                   chosen: tuple[int, ...] | None = None) -> Path | None:
    """Miss rate per window along the trace, one panel per cache size, a line per policy."""
    options = result.options
    requests = result.stats[trace].window_requests
    if options.window is None or requests is None or len(requests) == 0:
        return None
    panels = over_time_sizes(result, trace, chosen)
    cols = 2 if len(panels) > 1 else 1
    rows_n = math.ceil(len(panels) / cols)
    fig, axes = _figure(rows_n, cols, (FIGSIZE_IN[0] * (1.4 if cols == 2 else 1), 2.6 * rows_n + 0.8))
    x = (np.arange(len(requests)) * options.window + requests / 2.0)
    unit, unit_name = (1e6, "millions of requests") if x[-1] >= 2e6 else ((1e3, "thousands of requests")
                                                                           if x[-1] >= 2e3 else (1.0, "requests"))
    for k, size in enumerate(panels):
        ax = axes[k // cols][k % cols]
        i = options.sizes.index(size)
        for policy in options.policies:
            windows = result.tallies[(trace, policy)].windows
            assert windows is not None, "every tally counts windows when options.window is set"
            misses = windows[i]
            rate = np.divide(misses, requests, out=np.full(len(requests), np.nan), where=requests > 0)
            color, _ = STYLE.get(policy, DEFAULT_STYLE)
            ax.plot(x / unit, rate, color=color, linewidth=1.1, label=policy.upper())
        ax.set_title(f"size {size:,} (2^{math.log2(size):.3g})", fontsize=9)
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
        ax.set_xlabel(f"position in each stream ({unit_name})", fontsize=8)
        ax.set_ylabel("miss rate", fontsize=8)
    for k in range(len(panels), rows_n * cols):
        axes[k // cols][k % cols].set_visible(False)
    axes[0][0].legend(fontsize=7, loc="best")
    fig.suptitle(f"Miss rate over time, windows of {options.window:,} requests\n{_subtitle(result, trace)}",
                 fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def plot_all(result: ReplayResult, rows: list[Row], out: Path, threads: int | None = None,
             over_time_chosen: tuple[int, ...] | None = None) -> list[Path]:
    """Every figure that applies; returns the files written. Raises PlotsUnavailable without matplotlib."""
    require_matplotlib()
    written = []
    for trace in result.options.traces:
        if result.stats[trace].requests == 0:
            continue
        made = [plot_miss_rate(result, rows, trace, out / f"miss_rate_{trace}.png"),
                plot_relative(result, rows, trace, out / f"relative_{trace}.png")]
        if threads:
            made.append(plot_miss_rate(result, rows, trace, out / f"per_thread_{trace}.png", threads))
        if result.options.window is not None:
            made.append(plot_over_time(result, trace, out / f"over_time_{trace}.png", over_time_chosen))
        written += [p for p in made if p is not None]
    return written
