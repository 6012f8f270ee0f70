"""Batch near-duplicate detection over exported records (a Scrapy feed in JSON lines or CSV).

Every record is fingerprinted (in a process pool), all pairs within ``k`` are found at once with
:func:`nearduppipe.batch.all_pairs`, and the near-duplicate graph's connected components are the
clusters; a cluster's kept record is its first in input order. Records without usable text are
kept and counted.

Two streaming passes over the file keep memory small for exports of millions of records: the
first sends texts to the workers as it reads and keeps only a fingerprint and a host number per
record; the second writes the kept records and collects keys and texts of cluster members only.
"""

from __future__ import annotations

import csv
import json
import sys
from collections import Counter, deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from .batch import all_pairs, components
from .dedup import Fingerprinted, FingerprintParams, fingerprint_html, fingerprint_text
from .report.model import Report, build_report, host_of

__all__ = ["DedupResult", "dedup_records", "read_records"]

TEXT_SAMPLE_CHARS = 5000
Job = tuple[str | None, str | None, FingerprintParams]


def read_records(path: Path) -> tuple[str, list[str] | None, Iterator[tuple[str, dict[str, Any]]]]:
    """``(format, csv header, records)``; each record comes with its raw line (JSON lines) so
    kept records are written back byte for byte."""
    if path.suffix.lower() == ".csv":
        csv.field_size_limit(sys.maxsize)
        handle = path.open(newline="", encoding="utf-8")
        reader = csv.DictReader(handle)
        header = list(reader.fieldnames or [])

        def rows() -> Iterator[tuple[str, dict[str, Any]]]:
            with handle:
                for row in reader:
                    yield "", dict(row)

        return "csv", header, rows()

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


def _fingerprint(job: Job) -> Fingerprinted:
    text, html, params = job
    if text is not None:
        return fingerprint_text(text, params)
    if html is not None:
        return fingerprint_html(html, None, params)
    return Fingerprinted(None, "no_text", 0)


def _fingerprint_chunk(jobs: list[Job]) -> list[Fingerprinted]:
    return [_fingerprint(job) for job in jobs]


def _bounded_map(
    pool: ProcessPoolExecutor, jobs: Iterator[Job], chunk: int, window: int
) -> Iterator[Fingerprinted]:
    """Results in input order with at most ``window`` chunks in flight. (Executor.map submits
    every item at once, which would hold every text of the export in memory.)"""
    pending: deque[Future[list[Fingerprinted]]] = deque()
    while True:
        batch = list(islice(jobs, chunk))
        if batch:
            pending.append(pool.submit(_fingerprint_chunk, batch))
        if pending and (len(pending) >= window or not batch):
            yield from pending.popleft().result()
        if not batch and not pending:
            return


@dataclass
class DedupResult:
    report: Report
    kept: list[int]  # input positions of the kept records
    skipped: dict[str, int]
    total: int


@dataclass(frozen=True)
class _Fields:
    text: str
    html: str
    key: str

    def job(self, record: dict[str, Any], params: FingerprintParams) -> Job:
        text = record.get(self.text)
        html = record.get(self.html) if text is None else None
        return (
            text if isinstance(text, str) else None,
            html if isinstance(html, str) else None,
            params,
        )

    def key_of(self, record: dict[str, Any], i: int) -> str:
        value = record.get(self.key)
        return value if isinstance(value, str) and value else f"#{i + 1}"


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
    fields = _Fields(text_field, html_field, key_field)
    hosts: dict[str, int] = {}
    host_ids: list[int] = []
    fps: list[int] = []
    ok: list[bool] = []
    skipped: Counter[str] = Counter()

    def jobs() -> Iterator[Job]:  # pass 1: stream to the workers
        for i, (_, record) in enumerate(read_records(path)[2]):
            host_ids.append(hosts.setdefault(host_of(fields.key_of(record, i)), len(hosts)))
            yield fields.job(record, params)

    bar = tqdm(desc="fingerprinting", unit="rec", disable=not progress, file=sys.stderr)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for result in _bounded_map(pool, jobs(), chunk=64, window=4 * (workers or 2) + 2):
            fps.append(result.fingerprint or 0)
            ok.append(result.fingerprint is not None)
            if result.fingerprint is None:
                skipped[result.skipped or "no_text"] += 1
            bar.update(1)
    bar.close()
    n = len(fps)
    fp = np.array(fps, dtype=np.uint64)
    index = np.flatnonzero(np.array(ok, dtype=bool))
    tables = tqdm(desc="matching block tables", unit="table", disable=not progress, file=sys.stderr)
    pairs = all_pairs(fp[index], distance, progress=tables.update)
    tables.close()
    label = np.arange(n, dtype=np.int64)
    label[index] = index[components(len(index), pairs)]
    in_cluster = label != np.arange(n)
    in_cluster[label[in_cluster]] = True  # originals of clusters too

    # pass 2: write the kept records; keys and texts of cluster members only
    fmt, header, records = read_records(path)
    writer = None
    if output is not None and fmt == "csv":
        writer = csv.DictWriter(output, fieldnames=header or [], lineterminator="\n")
        writer.writeheader()
    keys: dict[int, str] = {}
    texts: dict[str, str] = {}
    for i, (raw, record) in enumerate(records):
        if label[i] == i and output is not None:
            if writer is not None:
                writer.writerow(record)
            else:
                output.write(raw if raw.endswith("\n") else raw + "\n")
        if in_cluster[i]:
            keys[i] = fields.key_of(record, i)
            text, html, _ = fields.job(record, params)
            body = text if text is not None else html
            if body is not None:
                texts[keys[i]] = body[:TEXT_SAMPLE_CHARS]
    names = list(hosts)
    kept = [i for i in range(n) if label[i] == i]
    unique_by_host = Counter(names[host_ids[i]] for i in kept)
    decisions = [
        (keys[i], keys[int(label[i])], int(np.bitwise_count(fp[i] ^ fp[label[i]])))
        for i in np.flatnonzero(label != np.arange(n)).tolist()
    ]
    report = build_report(str(path), unique_by_host, decisions, texts)
    return DedupResult(report, kept, dict(skipped), n)
