"""The report's files: each table as CSV (for a spreadsheet) and JSON (for a program), and the summary.

    hosts.csv / hosts.json              one row per host (build.HOST_COLUMNS)
    status_codes.csv / .json            one row per HTTP status code of page responses
    mime_types.csv / .json              one row per media type of page responses
    seeds.csv / seeds.json              one row per seed
    summary.json / summary.csv          the cluster's totals (CSV: key,value)

In CSV a mapping (failures_by_reason) is `reason=n` pairs joined by `;`, a
boolean is `yes`/`no`. Each file is written whole to a temporary name and
renamed, so a reader never sees half a report.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from crawler.fsutil import atomic_write
from crawler.reports.build import HOST_COLUMNS, MIME_COLUMNS, SEED_COLUMNS, STATUS_COLUMNS, ClusterReport


def _cell(value: Any) -> Any:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return ";".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, list):
        return ";".join(str(v) for v in value)
    return value


def csv_text(columns: list[str], rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_cell(row[c]) for c in columns])
    return out.getvalue()


def write_report(report: ClusterReport, out_dir: Path) -> dict[str, Path]:
    """Write every file under `out_dir` (made if missing); returns name -> path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tables = {"hosts": (HOST_COLUMNS, report.host_rows()), "status_codes": (STATUS_COLUMNS, report.status_rows()),
              "mime_types": (MIME_COLUMNS, report.mime_rows()), "seeds": (SEED_COLUMNS, report.seed_rows())}
    written = {}
    for name, (columns, rows) in tables.items():
        written[f"{name}.csv"] = _write(out_dir / f"{name}.csv", csv_text(columns, rows))
        written[f"{name}.json"] = _write(out_dir / f"{name}.json", json.dumps(rows, indent=1) + "\n")
    summary = report.summary()
    written["summary.json"] = _write(out_dir / "summary.json", json.dumps(summary, indent=1) + "\n")
    flat = [{"key": k, "value": json.dumps(v) if isinstance(v, (dict, list)) else v} for k, v in summary.items()]
    written["summary.csv"] = _write(out_dir / "summary.csv", csv_text(["key", "value"], flat))
    return written


def _write(path: Path, text: str) -> Path:
    atomic_write(path, text)
    return path
