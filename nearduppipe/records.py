"""Batch near-duplicate detection over exported records (a Scrapy feed in JSON lines or CSV).

Every record is fingerprinted (in a process pool), all pairs within ``k`` are found at once with
:func:`nearduppipe.batch.all_pairs`, and the near-duplicate graph's connected components are the
clusters; a cluster's kept record is its first in input order. Records without usable text are
kept and counted.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from .batch import all_pairs, components
from .dedup import Fingerprinted, FingerprintParams, fingerprint_html, fingerprint_text
from .report.model import Report, build_report

__all__ = ["DedupResult", "dedup_records", "read_records"]

TEXT_SAMPLE_CHARS = 5000


def read_records(path: Path) -> tuple[str, list[str] | None, Iterator[tuple[str, dict[str, Any]]]]:
    """``(format, csv header, records)``; each record comes with its raw line (JSON lines) so
    kept records are written back byte for byte."""
    if path.suffix.lower() == ".csv":
        csv.field_size_limit(sys.maxsize)
        handle = path.open(newline="", encoding="utf-8")
        reader = csv.DictReader(handle)

        def rows() -> Iterator[tuple[str, dict[str, Any]]]:
            with handle:
                for row in reader:
                    yield "", dict(row)

        return "csv", list(reader.fieldnames or []), rows()

    def lines() -> Iterator[tuple[str, dict[str, Any]]]:
        with path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{n}: not JSON: {e}") from e
                if not isinstance(record, dict):
                    raise ValueError(f"{path}:{n}: a record must be a JSON object")
                yield line, record

    return "jsonl", None, lines()


def _fingerprint(job: tuple[str | None, str | None, FingerprintParams]) -> Fingerprinted:
    text, html, params = job
    if text is not None:
        return fingerprint_text(text, params)
    if html is not None:
        return fingerprint_html(html, None, params)
    return Fingerprinted(None, "no_text", 0)


@dataclass
class DedupResult:
    report: Report
    kept: list[int]  # input positions of the kept records
    skipped: dict[str, int]
    total: int


def dedup_records(
    path: Path,
    text_field: str = "text",
    html_field: str = "html",
    key_field: str = "url",
    distance: int = 4,
    params: FingerprintParams | None = None,
    output: TextIO | None = None,
    workers: int | None = None,
    progress: bool = True,
) -> DedupResult:
    from tqdm import tqdm

    params = params or FingerprintParams()
    fmt, header, records = read_records(path)
    raws: list[str] = []
    rows: list[dict[str, Any]] = []
    jobs = []
    for raw, record in records:
        text = record.get(text_field)
        html = record.get(html_field) if text is None else None
        raws.append(raw)
        rows.append(record)
        jobs.append(
            (
                text if isinstance(text, str) else None,
                html if isinstance(html, str) else None,
                params,
            )
        )
    n = len(rows)
    fps = np.zeros(n, dtype=np.uint64)
    ok = np.zeros(n, dtype=bool)
    skipped: dict[str, int] = {}
    bar = tqdm(total=n, desc="fingerprinting", unit="rec", disable=not progress, file=sys.stderr)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for i, result in enumerate(pool.map(_fingerprint, jobs, chunksize=64)):
            if result.fingerprint is None:
                reason = result.skipped or "no_text"
                skipped[reason] = skipped.get(reason, 0) + 1
            else:
                fps[i] = result.fingerprint
                ok[i] = True
            bar.update(1)
    bar.close()
    index = np.flatnonzero(ok)
    tables = tqdm(desc="matching block tables", unit="table", disable=not progress, file=sys.stderr)
    pairs = all_pairs(fps[index], distance, progress=tables.update)
    tables.close()
    label = np.arange(n, dtype=np.int64)
    label[index] = index[components(len(index), pairs)]

    def key(i: int) -> str:
        value = rows[i].get(key_field)
        return value if isinstance(value, str) and value else f"#{i + 1}"

    kept = [i for i in range(n) if label[i] == i]
    decisions = [
        (key(i), key(int(label[i])), int(np.bitwise_count(fps[i] ^ fps[label[i]])))
        for i in range(n)
        if label[i] != i
    ]
    in_clusters = {int(label[i]) for i in range(n) if label[i] != i} | {
        i for i in range(n) if label[i] != i
    }
    texts = {}
    for i in in_clusters:
        body = jobs[i][0] if jobs[i][0] is not None else jobs[i][1]
        if body is not None:
            texts[key(i)] = body[:TEXT_SAMPLE_CHARS]
    report = build_report(str(path), [key(i) for i in kept], decisions, texts)
    if output is not None:
        if fmt == "jsonl":
            for i in kept:
                output.write(raws[i] if raws[i].endswith("\n") else raws[i] + "\n")
        else:
            writer = csv.DictWriter(output, fieldnames=header or [], lineterminator="\n")
            writer.writeheader()
            for i in kept:
                writer.writerow(rows[i])
    return DedupResult(report, kept, skipped, n)
