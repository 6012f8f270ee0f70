"""Batch near-duplicate detection over exported records: one or several inputs, each a Scrapy
feed (JSON lines, JSON array, CSV or XML; plain, gzip or zstd: :mod:`nearduppipe.batch.feeds`)
or a WARC file (its HTML responses: :mod:`nearduppipe.batch.warc`), in the order given.

Every record is fingerprinted (in a process pool), every near-duplicate pair under the crawl's
rule is found at once with :func:`nearduppipe.batch.near_pairs` (the same two stages as a store:
64-bit candidates, wide verdict), and the near-duplicate graph's connected components are the
clusters; a cluster's kept record is its first in input order (the inputs' order, then each
input's record order). Records without usable text are kept and counted.

Two streaming passes over the inputs keep memory independent of the texts' size: the first sends
texts to the workers as it reads and keeps 77 bytes per record (both fingerprints, host number,
a flag); the second re-reads every input in order, writes the kept records and collects the
keys of cluster members, and the texts of the few pairs an HTML report shows.

Written kept records keep their input's form: a feed record as it was read (its raw JSON text
when both sides are JSON), a WARC record as a JSON line naming it (:func:`.warc.locator`): so
an output with a WARC input is JSON lines.
"""

from __future__ import annotations

from array import array
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from ..fingerprint.page import Fingerprinted, FingerprintParams, fingerprint_html, fingerprint_text
from ..fingerprint.rule import Rule
from ..index.words import wide_words, words_to_int
from ..stores.report import Report, build_report, host_of
from ..stores.scope import mask_of, scope_of
from .compression import FeedError
from .feeds import FeedWriter
from .inputs import Input, check_extras, expand_inputs, open_input
from .pairs import components, near_pairs
from .warc import locator

__all__ = ["DedupResult", "MissingFieldError", "dedup_records"]

TEXT_SAMPLE_CHARS = 5000
PAIRS_WITH_TEXTS = 100  # the HTML report shows at most this many pairs side by side
Job = tuple[str | None, str | bytes | None, FingerprintParams]


class MissingFieldError(ValueError):
    """No record has the text field (nor the HTML field): almost surely a wrong field name."""


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
    kept: int  # records written (or that would be written) to the output
    skipped: dict[str, int]
    total: int
    fields: list[str] = field(default_factory=list)
    # WARC records that are not pages (not a response, or not HTML), by kind: not in ``total``
    ignored: dict[str, int] = field(default_factory=dict)
    inputs: list[Input] = field(default_factory=list)
    pairs: np.ndarray = field(default_factory=lambda: np.zeros((0, 4), dtype=np.int64))
    keys: dict[int, str] = field(default_factory=dict)  # (of every record in a pair)


def _as_text(value: Any) -> str | None:
    """A text field's value: a string, or a list of strings (paragraphs) joined by newlines."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    return None


@dataclass(frozen=True)
class _Fields:
    text: str
    html: str
    key: str

    def job(self, record: dict[str, Any], params: FingerprintParams) -> Job:
        text = record.get(self.text)
        html = record.get(self.html) if text is None else None
        return _as_text(text), html if isinstance(html, bytes) else _as_text(html), params

    def key_of(self, record: dict[str, Any], i: int) -> str:
        value = record.get(self.key)
        return value if isinstance(value, str) and value else f"#{i + 1}"


Progress = Callable[..., Any]  # tqdm-like: Progress(total=, desc=, unit=, ...) -> bar


def _no_bar(**_: Any) -> Any:
    class Bar:
        n = 0

        def update(self, k: int = 1) -> None:
            self.n += k

        def close(self) -> None:
            pass

    return Bar()


def _text_clusters(label: np.ndarray) -> set[int]:
    """Roots of the largest clusters holding the first PAIRS_WITH_TEXTS pairs: only their
    members' texts are kept (an HTML report shows no more pairs)."""
    n = len(label)
    sizes = np.bincount(label, minlength=n)
    roots = np.flatnonzero(sizes > 1)
    order = roots[np.lexsort((roots, -sizes[roots]))]
    chosen, pairs = set(), 0
    for root in order.tolist():
        if pairs >= PAIRS_WITH_TEXTS:
            break
        chosen.add(root)
        pairs += int(sizes[root]) - 1
    return chosen


def _sources(
    path: str | Path | Input | Sequence[str | Path | Input], input_format: str | None
) -> list[Input]:
    given = [path] if isinstance(path, (str, Path, Input)) else list(path)
    out: list[Input] = []
    seen: set[Path] = {p.path.resolve() for p in given if isinstance(p, Input)}
    for p in given:
        if isinstance(p, Input):
            out.append(p)
            continue
        for found in expand_inputs([p], input_format)[0]:
            if found.path.resolve() not in seen:  # (a file named twice is read once)
                seen.add(found.path.resolve())
                out.append(found)
    if not out:
        raise FeedError("no input given")
    return out


def _output_format(sources: list[Input], given: str | None) -> str:
    warc = any(s.is_warc for s in sources)
    formats = {s.format for s in sources}
    fmt = given or (formats.pop() if len(formats) == 1 and not warc else "jsonl")
    if warc and fmt != "jsonl":
        raise FeedError(f"with a WARC input the kept records are written as JSON lines, not {fmt}")
    return fmt


def dedup_records(
    path: str | Path | Input | Sequence[str | Path | Input],
    text_field: str = "text",
    html_field: str = "html",
    key_field: str = "url",
    rule: Rule | None = None,
    params: FingerprintParams | None = None,
    output: TextIO | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
    input_format: str | None = None,
    output_format: str | None = None,
    keep_texts: bool = True,
) -> DedupResult:
    """Deduplicate the inputs at ``path`` (a file, glob or :class:`Input`, or a sequence of
    them: the order decides which copy is kept); write kept records to ``output`` (in
    ``output_format``, default the inputs' if they share one, else JSON lines). ``progress``
    makes progress bars (e.g. tqdm). Raises :class:`MissingFieldError` when no record has the
    text or HTML field, :class:`~.feeds.FeedError` for an input that cannot be read."""
    bar_of = progress or _no_bar
    params = params or FingerprintParams()
    fields = _Fields(text_field, html_field, key_field)
    sources = _sources(path, input_format)
    check_extras(sources)
    out_fmt = _output_format(sources, output_format) if output is not None else None
    hosts: dict[str, int] = {}
    host_ids = array("i")
    rule = rule or Rule()
    scopes: dict[str, int] = {}  # (under a scope narrower than global: stores/scope.py)
    scope_ids = array("i")
    fps = array("Q")
    wides = bytearray()
    ok = bytearray()
    skipped: Counter[str] = Counter()
    ignored: Counter[str] = Counter()
    names: dict[str, None] = {}  # every field seen, in order (the CSV header of an output)
    csv_header: dict[str, None] = {}
    with_text = 0
    total_size = sum(s.path.stat().st_size for s in sources)
    bar = bar_of(total=total_size, desc="fingerprinting", unit="B", unit_scale=True)
    reading: list[Any] = [None, 0]  # the reader being read, bytes of the inputs read before it

    def jobs() -> Iterator[Job]:  # pass 1: stream every input to the workers, in order
        nonlocal with_text
        i = 0
        for source in sources:
            with open_input(source, key_field, html_field) as reader:
                reading[0] = reader
                for _, record in reader:
                    if not source.is_warc and len(names) < 10_000:
                        names.update(dict.fromkeys(record))
                    if text_field in record or html_field in record:
                        with_text += 1
                    key = fields.key_of(record, i)
                    host_ids.append(hosts.setdefault(host_of(key), len(hosts)))
                    if rule.scope != "global":
                        name = scope_of(key, rule.scope)
                        scope_ids.append(scopes.setdefault(name, len(scopes)))
                    i += 1
                    yield fields.job(record, params)
                csv_header.update(dict.fromkeys(reader.fields))
                ignored.update(getattr(reader, "skipped", {}))
            reading[1] += reader.size
            reading[0] = None

    def read() -> int:
        return int(reading[1]) + (reading[0].position() if reading[0] is not None else 0)

    with ProcessPoolExecutor(max_workers=workers) as pool:
        for result in _bounded_map(pool, jobs(), chunk=64, window=4 * (workers or 2) + 2):
            fps.append(result.fingerprint or 0)
            wide = result.fingerprints.wide if result.fingerprints else None
            wides += wide_words(wide).tobytes()
            ok.append(result.fingerprint is not None)
            if result.fingerprint is None:
                skipped[result.skipped or "no_text"] += 1
            bar.update(read() - bar.n)
    bar.update(total_size - bar.n)
    bar.close()
    feeds = [s for s in sources if not s.is_warc]
    all_csv = bool(feeds) and all(s.format == "csv" for s in feeds)
    header = list(csv_header) if all_csv else list(names)
    n = len(fps)
    if n and not with_text:
        found = ", ".join(list(names)[:20]) or "none"
        raise MissingFieldError(
            f"no record has the field --text-field {text_field!r} nor --html-field "
            f"{html_field!r} (fields found: {found})"
        )
    fp = np.frombuffer(fps, dtype=np.uint64) if n else np.zeros(0, dtype=np.uint64)
    index = np.flatnonzero(np.frombuffer(bytes(ok), dtype=np.uint8))
    wide_fps = np.frombuffer(bytes(wides), dtype="<u8").reshape(n, 8).astype(np.uint64)
    query, query_wide = fp[index], wide_fps[index]
    if scopes:  # each record's fingerprints XORed with its scope's masks: distances kept
        masks = [mask_of(name) for name in scopes]
        sid = np.frombuffer(scope_ids, dtype=np.int32)[index]
        query = query ^ np.array([m.fp for m in masks], dtype=np.uint64)[sid]
        query_wide = query_wide ^ np.stack([wide_words(m.wide) for m in masks])[sid]
    matching = bar_of(total=len(index), desc="matching", unit="rec")
    pairs = near_pairs(
        query,
        query_wide,
        np.ones(len(index), dtype=bool),
        rule,
        progress=matching.update,
    )
    matching.close()
    label = np.arange(n, dtype=np.int64)
    label[index] = index[components(len(index), pairs)]
    in_cluster = label != np.arange(n)
    in_cluster[label[in_cluster]] = True  # originals of clusters too
    text_roots = _text_clusters(label) if keep_texts else set()

    # pass 2: every input again, in order: the kept records written; keys of cluster members,
    # texts of the shown pairs
    keys: dict[int, str] = {}
    texts: dict[str, str] = {}
    kept = 0
    writer = None
    if output is not None:
        assert out_fmt is not None
        writer = FeedWriter(output, out_fmt, header, sources[0].format)
    bar = bar_of(total=n, desc="writing" if writer else "reading keys", unit="rec")
    i = 0
    for source in sources:
        if i >= n:
            break
        if writer is not None:
            writer.source_format = source.format  # (raw JSON lines are written as read)
        with open_input(source, key_field, html_field, payload=keep_texts) as reader:
            for raw, record in reader:
                if i >= n:  # (an input that grew between the passes)
                    break
                if label[i] == i:
                    kept += 1
                    if writer is not None and source.is_warc:
                        wide = words_to_int(wide_fps[i]) if ok[i] else None
                        fp_i = int(fp[i]) if ok[i] else None
                        output.write(locator(str(source), record, key_field, fp_i, wide))  # type: ignore[union-attr]
                    elif writer is not None:
                        writer.write(raw, record)
                if in_cluster[i]:
                    keys[i] = fields.key_of(record, i)
                    if int(label[i]) in text_roots:
                        text, html, _ = fields.job(record, params)
                        body = text if text is not None else html
                        if isinstance(body, bytes):
                            body = body.decode("utf-8", "replace")
                        if body is not None:
                            texts[keys[i]] = body[:TEXT_SAMPLE_CHARS]
                i += 1
                bar.update(1)
    bar.close()
    if writer is not None:
        writer.close()
    host_names = list(hosts)
    ids = np.frombuffer(host_ids, dtype=np.int32) if n else np.zeros(0, dtype=np.int32)
    per_host = np.bincount(ids[label == np.arange(n)], minlength=len(host_names))
    unique_by_host = Counter({host_names[h]: int(c) for h, c in enumerate(per_host) if c})
    decisions = [
        (keys[i], keys[int(label[i])], int(np.bitwise_count(fp[i] ^ fp[label[i]])))
        for i in np.flatnonzero(label != np.arange(n)).tolist()
    ]
    name = str(sources[0]) if len(sources) == 1 else f"{len(sources)} inputs"
    report = build_report(name, unique_by_host, decisions, texts)
    near = np.zeros((0, 4), dtype=np.int64)  # (rows over record numbers, for --pairs)
    if len(pairs):
        near = np.column_stack([index[pairs[:, 0]], index[pairs[:, 1]], pairs[:, 2], pairs[:, 3]])
    return DedupResult(report, kept, dict(skipped), n, header, dict(ignored), sources, near, keys)
